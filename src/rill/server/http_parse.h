// Parsing a complete HTTP/1.1 request from bytes with the server's limits, the
// same way a connection does (Beast's parser, then target and header
// normalization). Used by the fuzz target and by tests; the sessions parse
// incrementally from the socket with the same configuration.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "rill/server/http_types.h"

namespace rill::server {

struct ParsedRequest {
  /// 0 when `request` is complete and valid; else the HTTP status the server
  /// answers with (400, 413, 431) and `error` says why. -1: incomplete input
  /// (the server would wait for more bytes, then time out or see EOF).
  int error_status = 0;
  std::string error;
  HttpRequest request;
  bool websocket_upgrade = false;
  /// Bytes of `bytes` the request used (pipelined requests may follow).
  size_t consumed = 0;
};

/// Parse the first request in `bytes` under the header and body limits.
ParsedRequest ParseHttpRequest(std::string_view bytes, int64_t max_header_bytes,
                               int64_t max_body_bytes);

}  // namespace rill::server
