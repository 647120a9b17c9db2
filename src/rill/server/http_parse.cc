#include "rill/server/http_parse.h"

#include <cctype>

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket/rfc6455.hpp>

#include "rill/server/server_impl.h"

namespace rill::server {

namespace http = boost::beast::http;

Status FillHttpRequest(http::request<http::string_body>& req, HttpRequest* out) {
  out->method = std::string(req.method_string());
  RILL_RETURN_NOT_OK(ParseTarget(req.target(), &out->path, &out->query));
  for (const auto& field : req) {
    std::string name(field.name_string());
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    out->headers[name] = std::string(field.value());
  }
  out->body = std::move(req.body());
  return Status::OK();
}

ParsedRequest ParseHttpRequest(std::string_view bytes, int64_t max_header_bytes,
                               int64_t max_body_bytes) {
  ParsedRequest out;
  http::request_parser<http::string_body> parser;
  parser.header_limit(static_cast<uint32_t>(max_header_bytes));
  parser.body_limit(static_cast<uint64_t>(max_body_bytes));
  parser.eager(true);
  boost::beast::error_code ec;
  size_t used = parser.put(boost::asio::buffer(bytes.data(), bytes.size()), ec);
  out.consumed = used;
  if (!ec && !parser.is_done()) {
    if (parser.is_header_done() || used > 0 || bytes.empty()) {
      out.error_status = -1;
      out.error = "incomplete request";
      return out;
    }
  }
  if (ec == http::error::need_more) {
    out.error_status = -1;
    out.error = "incomplete request";
    return out;
  }
  if (ec) {
    out.error_status = ec == http::error::header_limit ? 431
                       : ec == http::error::body_limit ? 413
                                                       : 400;
    out.error = ec.message();
    return out;
  }
  http::request<http::string_body> req = parser.release();
  out.websocket_upgrade = boost::beast::websocket::is_upgrade(req);
  Status st = FillHttpRequest(req, &out.request);
  if (!st.ok()) {
    out.error_status = 400;
    out.error = st.message();
  }
  return out;
}

}  // namespace rill::server
