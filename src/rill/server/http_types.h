// Plain request/response values passed between the HTTP sessions (io threads)
// and the API handlers (worker threads). No Beast types here, so handlers and
// their tests (and the fuzz target) need nothing but this header.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rill/common/status.h"

namespace rill::server {

/// One parsed HTTP request.
struct HttpRequest {
  std::string method;  ///< "GET", "POST", ...
  std::string path;    ///< percent-decoded path without the query string
  std::map<std::string, std::string> query;  ///< decoded ?k=v parameters
  std::map<std::string, std::string> headers;  ///< lower-case names
  std::string body;
  std::string remote;  ///< peer "HOST:PORT"

  /// Return the header (lower-case name) or "".
  std::string_view header(const std::string& name) const;
  /// Return the query parameter or nullopt.
  std::optional<std::string> param(const std::string& name) const;
};

/// An HTTP response. Either `body` is sent with a Content-Length, or, when
/// `next_chunk` is set, the body is streamed with chunked transfer encoding:
/// each call (on a worker thread) returns the next piece, nullopt at the end;
/// an error closes the connection (the status line is already sent).
struct HttpReply {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  std::function<Result<std::optional<std::string>>()> next_chunk;
  /// Close the connection after this reply.
  bool close = false;
};

/// Return `{"code": code_name, "message": message}` with the given HTTP status.
HttpReply ErrorReply(int status, std::string_view message);
/// Map a Status to an HTTP status (Invalid 400, KeyError 404, Cancelled 504,
/// CapacityError 413, AlreadyExists 409, NotImplemented 501, others 500) and
/// an error reply with the status message.
HttpReply StatusReply(const Status& status);
/// A 200 reply with a JSON body.
HttpReply JsonReply(std::string json, int status = 200);

/// Return the reason phrase of an HTTP status code ("Not Found").
std::string_view ReasonPhrase(int status);
/// Decode %XX and (when `plus_is_space`) '+'. nullopt for a malformed escape.
std::optional<std::string> PercentDecode(std::string_view text, bool plus_is_space);
/// Split "/path?a=1&b=2" into a decoded path and parameters. Invalid for a
/// malformed escape or a target not starting with '/'.
Status ParseTarget(std::string_view target, std::string* path,
                   std::map<std::string, std::string>* query);

}  // namespace rill::server
