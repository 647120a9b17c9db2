#include "rill/pipeline/options.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <memory>

namespace rill::pipeline {

namespace {

constexpr char kDetailType[] = "rill::pipeline::SqlState";

class SqlStateDetail : public arrow::StatusDetail {
 public:
  explicit SqlStateDetail(std::string sqlstate) : sqlstate_(std::move(sqlstate)) {}
  const char* type_id() const override { return kDetailType; }
  std::string ToString() const override { return "SQLSTATE " + sqlstate_; }
  const std::string& sqlstate() const { return sqlstate_; }

 private:
  std::string sqlstate_;
};


std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

Status BadValue(const OptionValue& value, const std::string& message) {
  return options_internal::At(value.where, DeclError(kSqlStateBadValue, message));
}

}  // namespace

Status DeclError(const char* sqlstate, std::string message) {
  return Status(arrow::StatusCode::Invalid, std::move(message),
                std::make_shared<SqlStateDetail>(sqlstate));
}

std::string SqlStateOf(const Status& status) {
  const auto& detail = status.detail();
  if (detail && std::string_view(detail->type_id()) == kDetailType) {
    return static_cast<const SqlStateDetail&>(*detail).sqlstate();
  }
  return "";
}

Status PrefixError(const Status& status, const std::string& prefix) {
  if (status.ok() || prefix.empty()) return status;
  return status.WithMessage(prefix, ": ", status.message());
}

namespace options_internal {
Status At(const std::string& where, const Status& status) { return PrefixError(status, where); }
}  // namespace options_internal

OptionValue OptionValue::Scalar(std::string text, std::string where) {
  OptionValue v;
  v.kind = Kind::kScalar;
  v.text = std::move(text);
  v.where = std::move(where);
  return v;
}

OptionValue OptionValue::List(const std::vector<std::string>& items) {
  OptionValue v;
  v.kind = Kind::kList;
  for (const auto& item : items) v.items.push_back(Scalar(item));
  return v;
}

const char* OptionTypeName(OptionType type) {
  switch (type) {
    case OptionType::kString:
      return "string";
    case OptionType::kInt:
      return "integer";
    case OptionType::kNumber:
      return "number";
    case OptionType::kBool:
      return "boolean";
    case OptionType::kNames:
      return "names";
    case OptionType::kStringMap:
      return "mapping";
    case OptionType::kAny:
      return "any";
  }
  return "?";
}

Result<bool> ParseBoolText(std::string_view text) {
  const std::string t = Lower(Trim(text));
  if (t == "true" || t == "yes" || t == "on" || t == "1" || t == "t" || t == "y") return true;
  if (t == "false" || t == "no" || t == "off" || t == "0" || t == "f" || t == "n") return false;
  return Status::Invalid("expected true or false, got '", std::string(text), "'");
}

Result<Converted> Convert(const OptionValue& value, OptionType type) {
  Converted out;
  out.raw = &value;
  const bool scalar = value.kind == OptionValue::Kind::kScalar;
  switch (type) {
    case OptionType::kString:
      if (!scalar) return BadValue(value, "expected a string");
      out.s = value.text;
      return out;
    case OptionType::kInt: {
      const std::string t = Trim(value.text);
      int64_t v = 0;
      auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
      if (!scalar || t.empty() || ec != std::errc() || end != t.data() + t.size()) {
        return BadValue(value, "expected an integer, got '" + (scalar ? value.text : "") + "'");
      }
      out.i = v;
      return out;
    }
    case OptionType::kNumber: {
      const std::string t = Trim(value.text);
      char* end = nullptr;
      const double v = scalar && !t.empty() ? std::strtod(t.c_str(), &end) : 0;
      if (!scalar || t.empty() || end != t.c_str() + t.size() || !std::isfinite(v)) {
        return BadValue(value, "expected a number, got '" + (scalar ? value.text : "") + "'");
      }
      out.d = v;
      return out;
    }
    case OptionType::kBool: {
      if (!scalar) return BadValue(value, "expected true or false");
      auto b = ParseBoolText(value.text);
      if (!b.ok()) return BadValue(value, b.status().message());
      out.b = *b;
      return out;
    }
    case OptionType::kNames: {
      if (scalar) {
        std::string_view rest = value.text;
        while (true) {
          const size_t comma = rest.find(',');
          std::string name = Trim(rest.substr(0, comma));
          if (!name.empty()) out.names.push_back(std::move(name));
          if (comma == std::string_view::npos) break;
          rest.remove_prefix(comma + 1);
        }
        if (out.names.empty()) return BadValue(value, "expected a name or a list of names");
        return out;
      }
      if (value.kind != OptionValue::Kind::kList) {
        return BadValue(value, "expected a name or a list of names");
      }
      for (const OptionValue& item : value.items) {
        if (item.kind != OptionValue::Kind::kScalar || Trim(item.text).empty()) {
          return BadValue(item.where.empty() ? value : item, "expected a name");
        }
        out.names.push_back(Trim(item.text));
      }
      return out;
    }
    case OptionType::kStringMap:
      if (value.kind != OptionValue::Kind::kMap) {
        return BadValue(value, "expected a mapping of names to values");
      }
      for (const OptionValue& v : value.items) {
        if (v.kind != OptionValue::Kind::kScalar) {
          return BadValue(v.where.empty() ? value : v,
                          "expected a string value for '" + v.key + "'");
        }
        out.map[v.key] = v.text;
      }
      return out;
    case OptionType::kAny:
      return out;
  }
  return BadValue(value, "unknown option type");
}

std::string Trim(std::string_view s) {
  size_t b = 0;
  size_t e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

}  // namespace rill::pipeline
