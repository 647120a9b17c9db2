#include "rill/server/http_types.h"

#include "rill/server/json_writer.h"

namespace rill::server {

std::string_view HttpRequest::header(const std::string& name) const {
  auto it = headers.find(name);
  return it == headers.end() ? std::string_view() : std::string_view(it->second);
}

std::optional<std::string> HttpRequest::param(const std::string& name) const {
  auto it = query.find(name);
  if (it == query.end()) {
    return std::nullopt;
  }
  return it->second;
}

std::string_view ReasonPhrase(int status) {
  switch (status) {
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 411: return "Length Required";
    case 413: return "Payload Too Large";
    case 415: return "Unsupported Media Type";
    case 426: return "Upgrade Required";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return "Unknown";
  }
}

HttpReply ErrorReply(int status, std::string_view message) {
  std::string body = "{\"code\":";
  AppendJsonString(ReasonPhrase(status), &body);
  body.append(",\"status\":");
  body.append(std::to_string(status));
  body.append(",\"message\":");
  AppendJsonString(message, &body);
  body.push_back('}');
  HttpReply reply;
  reply.status = status;
  reply.body = std::move(body);
  return reply;
}

HttpReply StatusReply(const Status& status) {
  int code = 500;
  switch (status.code()) {
    case arrow::StatusCode::Invalid:
    case arrow::StatusCode::TypeError:
    case arrow::StatusCode::IndexError:
      code = 400;
      break;
    case arrow::StatusCode::KeyError:
      code = 404;
      break;
    case arrow::StatusCode::Cancelled:
      code = 504;
      break;
    case arrow::StatusCode::CapacityError:
      code = 413;
      break;
    case arrow::StatusCode::AlreadyExists:
      code = 409;
      break;
    case arrow::StatusCode::NotImplemented:
      code = 501;
      break;
    default:
      break;
  }
  return ErrorReply(code, status.message());
}

HttpReply JsonReply(std::string json, int status) {
  HttpReply reply;
  reply.status = status;
  reply.body = std::move(json);
  return reply;
}

std::optional<std::string> PercentDecode(std::string_view text, bool plus_is_space) {
  std::string out;
  out.reserve(text.size());
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '%') {
      if (i + 2 >= text.size()) {
        return std::nullopt;
      }
      int hi = hex(text[i + 1]);
      int lo = hex(text[i + 2]);
      if (hi < 0 || lo < 0) {
        return std::nullopt;
      }
      out.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else if (c == '+' && plus_is_space) {
      out.push_back(' ');
    } else {
      out.push_back(c);
    }
  }
  return out;
}

Status ParseTarget(std::string_view target, std::string* path,
                   std::map<std::string, std::string>* query) {
  if (target.empty() || target[0] != '/') {
    return Status::Invalid("the request target must start with '/'");
  }
  size_t q = target.find('?');
  auto decoded = PercentDecode(target.substr(0, q), /*plus_is_space=*/false);
  if (!decoded) {
    return Status::Invalid("malformed percent-escape in the request path");
  }
  *path = std::move(*decoded);
  query->clear();
  if (q == std::string_view::npos) {
    return Status::OK();
  }
  std::string_view rest = target.substr(q + 1);
  while (!rest.empty()) {
    size_t amp = rest.find('&');
    std::string_view pair = rest.substr(0, amp);
    rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
    if (pair.empty()) {
      continue;
    }
    size_t eq = pair.find('=');
    auto key = PercentDecode(pair.substr(0, eq), true);
    auto value = PercentDecode(
        eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1), true);
    if (!key || !value) {
      return Status::Invalid("malformed percent-escape in the query string");
    }
    (*query)[*key] = std::move(*value);
  }
  return Status::OK();
}

}  // namespace rill::server
