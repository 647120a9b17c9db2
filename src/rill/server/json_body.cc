#include "rill/server/json_body.h"

#include <cmath>

namespace rill::server {

Result<boost::json::object> ParseJsonObject(std::string_view body) {
  if (body.empty()) {
    return Status::Invalid("the request body is empty; expected a JSON object");
  }
  boost::system::error_code ec;
  boost::json::parse_options options;
  options.max_depth = 64;
  boost::json::value value = boost::json::parse(body, ec, {}, options);
  if (ec) {
    return Status::Invalid("the request body is not valid JSON: ", ec.message());
  }
  if (!value.is_object()) {
    return Status::Invalid("the request body must be a JSON object");
  }
  return std::move(value.as_object());
}

Result<std::optional<std::string>> GetString(const boost::json::object& obj,
                                             std::string_view key) {
  const boost::json::value* v = obj.if_contains(key);
  if (v == nullptr || v->is_null()) {
    return std::nullopt;
  }
  if (!v->is_string()) {
    return Status::Invalid("field '", key, "' must be a string");
  }
  return std::string(v->as_string());
}

Result<std::optional<double>> GetNumber(const boost::json::object& obj, std::string_view key) {
  const boost::json::value* v = obj.if_contains(key);
  if (v == nullptr || v->is_null()) {
    return std::nullopt;
  }
  if (v->is_double()) {
    return v->as_double();
  }
  if (v->is_int64()) {
    return static_cast<double>(v->as_int64());
  }
  if (v->is_uint64()) {
    return static_cast<double>(v->as_uint64());
  }
  return Status::Invalid("field '", key, "' must be a number");
}

Result<std::optional<bool>> GetBool(const boost::json::object& obj, std::string_view key) {
  const boost::json::value* v = obj.if_contains(key);
  if (v == nullptr || v->is_null()) {
    return std::nullopt;
  }
  if (!v->is_bool()) {
    return Status::Invalid("field '", key, "' must be true or false");
  }
  return v->as_bool();
}

boost::json::value JsonNumber(double value) {
  if (!std::isfinite(value)) {
    return nullptr;
  }
  return value;
}

}  // namespace rill::server
