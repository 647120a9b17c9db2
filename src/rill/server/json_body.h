// Reading request bodies and building small documents with Boost.JSON.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <boost/json.hpp>

#include "rill/common/status.h"

namespace rill::server {

/// Parse a request body that must be one JSON object. Invalid saying what is wrong.
Result<boost::json::object> ParseJsonObject(std::string_view body);

/// Field readers: nullopt when absent or null; Invalid naming the field when it
/// has the wrong type.
Result<std::optional<std::string>> GetString(const boost::json::object& obj,
                                             std::string_view key);
Result<std::optional<double>> GetNumber(const boost::json::object& obj, std::string_view key);
Result<std::optional<bool>> GetBool(const boost::json::object& obj, std::string_view key);

/// A number as JSON, null for non-finite values.
boost::json::value JsonNumber(double value);

}  // namespace rill::server
