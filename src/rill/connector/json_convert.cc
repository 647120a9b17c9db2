#include "rill/connector/json_convert_internal.h"

#include <cmath>
#include <cstdlib>
#include <limits>

#include <arrow/builder.h>
#include <arrow/type.h>
#include <arrow/util/value_parsing.h>

namespace rill::json_internal {

namespace {

using simdjson::error_code;
namespace dom = simdjson::dom;
namespace ondemand = simdjson::ondemand;

constexpr size_t kDescribeChars = 40;
constexpr int64_t kMillisPerDay = 86400000;

std::string_view TrimRight(std::string_view s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n' ||
                        s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

/// The JSON text of a number (DOM numbers carry no text unless asked for).
std::string NumberText(const JsonScalar& v) {
  if (!v.text.empty()) return std::string(v.text);
  if (v.type == JsonScalar::kInt) return std::to_string(v.i);
  if (v.type == JsonScalar::kUInt) return std::to_string(v.u);
  return std::to_string(v.d);
}

Status Mismatch(const ColumnSpec& spec, const JsonScalar& v) {
  return Status::Invalid("expected ", spec.type->ToString(), ", ", Describe(v));
}

/// Parse an ISO-8601 timestamp into `unit`; fractions finer than the unit are
/// truncated rather than refused (Arrow's parser only takes digits the unit holds).
bool ParseIsoTimestamp(std::string_view s, arrow::TimeUnit::type unit, int64_t* out) {
  if (arrow::internal::ParseTimestampISO8601(s.data(), s.size(), unit, out)) return true;
  if (unit == arrow::TimeUnit::NANO) return false;
  int64_t nanos = 0;
  if (!arrow::internal::ParseTimestampISO8601(s.data(), s.size(), arrow::TimeUnit::NANO,
                                              &nanos)) {
    return false;
  }
  int64_t div = unit == arrow::TimeUnit::SECOND ? 1000000000
                : unit == arrow::TimeUnit::MILLI ? 1000000
                                                 : 1000;
  int64_t q = nanos / div;
  if (nanos % div < 0) --q;  // floor for times before the epoch
  *out = q;
  return true;
}

bool DoubleToInt64(double d, int64_t* out) {
  if (!std::isfinite(d) || d < -9.2233720368547758e18 || d >= 9.2233720368547758e18) {
    return false;
  }
  *out = static_cast<int64_t>(d);
  return true;
}

Status ConvertTemporal(const JsonScalar& v, const ColumnSpec& spec, Cell* cell) {
  if (v.type == JsonScalar::kString) {
    int64_t value = 0;
    auto unit = spec.kind == ColKind::kTimestamp ? static_cast<arrow::TimeUnit::type>(spec.unit)
                                                 : arrow::TimeUnit::MILLI;
    if (!ParseIsoTimestamp(v.text, unit, &value)) {
      return Status::Invalid("expected an ISO-8601 ", spec.type->ToString(), ", ",
                             Describe(v));
    }
    if (spec.kind == ColKind::kDate32) {
      int64_t days = value / kMillisPerDay - (value % kMillisPerDay < 0 ? 1 : 0);
      value = days;
    } else if (spec.kind == ColKind::kDate64) {
      value -= value % kMillisPerDay;  // date64 holds whole days
    }
    cell->i = value;
    return Status::OK();
  }
  int64_t value = 0;
  if (v.type == JsonScalar::kInt) {
    value = v.i;
  } else if (v.type == JsonScalar::kDouble) {
    if (!DoubleToInt64(v.d, &value)) {
      return Status::Invalid("number ", NumberText(v), " out of range for ", spec.type->ToString());
    }
  } else {
    return Mismatch(spec, v);
  }
  if (spec.kind == ColKind::kDate32 &&
      (value < std::numeric_limits<int32_t>::min() || value > std::numeric_limits<int32_t>::max())) {
    return Status::Invalid("number ", NumberText(v), " out of range for date32");
  }
  cell->i = value;
  return Status::OK();
}

Status ConvertInteger(const JsonScalar& v, const ColumnSpec& spec, Cell* cell) {
  if (v.type == JsonScalar::kInt) {
    const bool ok = spec.kind == ColKind::kSigned
                  ? v.i >= spec.min && (v.i < 0 || static_cast<uint64_t>(v.i) <= spec.max)
                  : v.i >= 0 && static_cast<uint64_t>(v.i) <= spec.max;
    if (!ok) {
      return Status::Invalid("integer ", v.i, " out of range for ", spec.type->ToString());
    }
    cell->i = v.i;
    cell->u = static_cast<uint64_t>(v.i);
    return Status::OK();
  }
  if (v.type == JsonScalar::kUInt || v.type == JsonScalar::kBigNumber) {
    if (v.type == JsonScalar::kUInt && v.u <= spec.max) {
      cell->u = v.u;
      cell->i = static_cast<int64_t>(v.u);
      return Status::OK();
    }
    return Status::Invalid("integer ", v.text.empty() ? std::to_string(v.u) : std::string(v.text),
                           " out of range for ", spec.type->ToString());
  }
  return Mismatch(spec, v);
}

}  // namespace

ColumnSpec MakeSpec(const arrow::Field& field) {
  ColumnSpec spec;
  spec.name = field.name();
  spec.plain_name = spec.name.find_first_of("\\\"") == std::string::npos;
  if (spec.plain_name && spec.name.size() <= 15) {
    spec.short_name = true;
    unsigned char bytes[16] = {}, mask[16] = {};
    std::memcpy(bytes, spec.name.data(), spec.name.size());
    bytes[spec.name.size()] = '"';
    std::memset(mask, 0xff, spec.name.size() + 1);
    std::memcpy(spec.name_bytes, bytes, 16);
    std::memcpy(spec.name_mask, mask, 16);
  }
  spec.type = field.type();
  spec.nullable = field.nullable();
  using arrow::Type;
  switch (field.type()->id()) {
#define RILL_SIGNED(ID, CT)                            \
  case Type::ID:                                       \
    spec.kind = ColKind::kSigned;                      \
    spec.min = std::numeric_limits<CT>::min();         \
    spec.max = std::numeric_limits<CT>::max();         \
    break;
    RILL_SIGNED(INT8, int8_t)
    RILL_SIGNED(INT16, int16_t)
    RILL_SIGNED(INT32, int32_t)
    RILL_SIGNED(INT64, int64_t)
#undef RILL_SIGNED
#define RILL_UNSIGNED(ID, CT)                          \
  case Type::ID:                                       \
    spec.kind = ColKind::kUnsigned;                    \
    spec.max = std::numeric_limits<CT>::max();         \
    break;
    RILL_UNSIGNED(UINT8, uint8_t)
    RILL_UNSIGNED(UINT16, uint16_t)
    RILL_UNSIGNED(UINT32, uint32_t)
    RILL_UNSIGNED(UINT64, uint64_t)
#undef RILL_UNSIGNED
    case Type::FLOAT:
    case Type::DOUBLE:
      spec.kind = ColKind::kFloat;
      break;
    case Type::BOOL:
      spec.kind = ColKind::kBool;
      break;
    case Type::STRING:
    case Type::LARGE_STRING:
      spec.kind = ColKind::kString;
      break;
    case Type::BINARY:
    case Type::LARGE_BINARY:
      spec.kind = ColKind::kBinary;
      break;
    case Type::TIMESTAMP:
      spec.kind = ColKind::kTimestamp;
      spec.unit = static_cast<const arrow::TimestampType&>(*field.type()).unit();
      break;
    case Type::DATE32:
      spec.kind = ColKind::kDate32;
      break;
    case Type::DATE64:
      spec.kind = ColKind::kDate64;
      break;
    case Type::STRUCT:
      spec.kind = ColKind::kStruct;
      for (const auto& child : field.type()->fields()) spec.children.push_back(MakeSpec(*child));
      break;
    case Type::LIST:
    case Type::LARGE_LIST:
    case Type::FIXED_SIZE_LIST:
      spec.kind = ColKind::kList;
      spec.children.push_back(MakeSpec(*field.type()->field(0)));
      if (field.type()->id() == Type::FIXED_SIZE_LIST) {
        spec.list_size = static_cast<const arrow::FixedSizeListType&>(*field.type()).list_size();
      }
      break;
    case Type::MAP: {
      const auto& map = static_cast<const arrow::MapType&>(*field.type());
      if (map.key_type()->id() == Type::STRING) {
        spec.kind = ColKind::kMap;
        spec.children.push_back(MakeSpec(*map.key_field()));
        spec.children.push_back(MakeSpec(*map.item_field()));
        break;
      }
      [[fallthrough]];
    }
    default:
      // Dictionaries, decimals, times, … : JSON text; the engine casts it.
      spec.kind = ColKind::kString;
      spec.type = arrow::utf8();
      break;
  }
  if (spec.kind == ColKind::kStruct || spec.kind == ColKind::kList || spec.kind == ColKind::kMap) {
    // Children that fell back to utf8 change the nested type.
    std::vector<std::shared_ptr<arrow::Field>> fields;
    for (const auto& c : spec.children) fields.push_back(arrow::field(c.name, c.type, c.nullable));
    if (spec.kind == ColKind::kStruct) {
      spec.type = arrow::struct_(fields);
    } else if (spec.kind == ColKind::kMap) {
      spec.type = std::make_shared<arrow::MapType>(fields[0], fields[1]);
    } else if (field.type()->id() == arrow::Type::LARGE_LIST) {
      spec.type = arrow::large_list(fields[0]);
    } else if (spec.list_size >= 0) {
      spec.type = arrow::fixed_size_list(fields[0], spec.list_size);
    } else {
      spec.type = arrow::list(fields[0]);
    }
  }
  spec.type_id = spec.type->id();
  return spec;
}

std::shared_ptr<arrow::Schema> SpecSchema(const std::vector<ColumnSpec>& specs) {
  std::vector<std::shared_ptr<arrow::Field>> fields;
  for (const auto& s : specs) fields.push_back(arrow::field(s.name, s.type, s.nullable));
  return arrow::schema(std::move(fields));
}

std::string Describe(const JsonScalar& v) {
  auto cut = [](std::string_view s) {
    return s.size() <= kDescribeChars ? std::string(s)
                                      : std::string(s.substr(0, kDescribeChars)) + "...";
  };
  switch (v.type) {
    case JsonScalar::kNull: return "got null";
    case JsonScalar::kBool: return v.b ? "got true" : "got false";
    case JsonScalar::kString: return "got a string \"" + cut(v.text) + "\"";
    case JsonScalar::kObject: return "got an object";
    case JsonScalar::kArray: return "got an array";
    default:
      if (!v.text.empty()) return "got the number " + cut(v.text);
      if (v.type == JsonScalar::kInt) return "got the number " + std::to_string(v.i);
      if (v.type == JsonScalar::kUInt) return "got the number " + std::to_string(v.u);
      return "got the number " + std::to_string(v.d);
  }
}

std::string JsonErrorMessage(error_code error) {
  return std::string("invalid JSON: ") + simdjson::error_message(error);
}

Status Convert(const JsonScalar& v, const ColumnSpec& spec, Cell* cell) {
  cell->null = v.type == JsonScalar::kNull;
  if (cell->null) return Status::OK();
  switch (spec.kind) {
    case ColKind::kSigned:
    case ColKind::kUnsigned:
      return ConvertInteger(v, spec, cell);
    case ColKind::kFloat:
      if (v.type == JsonScalar::kInt) {
        cell->d = static_cast<double>(v.i);
      } else if (v.type == JsonScalar::kUInt) {
        cell->d = static_cast<double>(v.u);
      } else if (v.type == JsonScalar::kDouble || v.type == JsonScalar::kBigNumber) {
        if (!std::isfinite(v.d)) {
          return Status::Invalid("number ", NumberText(v), " out of range for ", spec.type->ToString());
        }
        cell->d = v.d;
      } else {
        return Mismatch(spec, v);
      }
      return Status::OK();
    case ColKind::kBool:
      if (v.type != JsonScalar::kBool) return Mismatch(spec, v);
      cell->b = v.b;
      return Status::OK();
    case ColKind::kString:
      // Strings unescaped; objects and arrays (and, for inferred mixed fields,
      // anything) as their JSON text.
      if (v.type != JsonScalar::kString && v.type != JsonScalar::kObject &&
          v.type != JsonScalar::kArray && !spec.any_as_text) {
        return Mismatch(spec, v);
      }
      cell->s = v.text;
      return Status::OK();
    case ColKind::kBinary:
      if (v.type != JsonScalar::kString) return Mismatch(spec, v);
      cell->s = v.text;
      return Status::OK();
    case ColKind::kTimestamp:
    case ColKind::kDate32:
    case ColKind::kDate64:
      return ConvertTemporal(v, spec, cell);
    case ColKind::kStruct:
    case ColKind::kMap:
      if (v.type != JsonScalar::kObject) return Mismatch(spec, v);
      cell->s = v.text;
      return Status::OK();
    case ColKind::kList:
      if (v.type != JsonScalar::kArray) return Mismatch(spec, v);
      cell->s = v.text;
      return Status::OK();
  }
  return Mismatch(spec, v);
}

error_code ReadScalar(ondemand::value value, JsonScalar* out) {
  ondemand::json_type type;
  error_code err = value.type().get(type);
  if (err) return err;
  switch (type) {
    case ondemand::json_type::null: {
      bool is_null = false;
      if ((err = value.is_null().get(is_null))) return err;
      if (!is_null) return simdjson::N_ATOM_ERROR;
      out->type = JsonScalar::kNull;
      return simdjson::SUCCESS;
    }
    case ondemand::json_type::boolean:
      out->type = JsonScalar::kBool;
      out->text = TrimRight(value.raw_json_token());
      return value.get_bool().get(out->b);
    case ondemand::json_type::string:
      out->type = JsonScalar::kString;
      return value.get_string().get(out->text);
    case ondemand::json_type::number: {
      out->text = TrimRight(value.raw_json_token());
      ondemand::number number;
      err = value.get_number().get(number);
      if (err) {
        // Integers beyond 64 bits: keep them as doubles (float columns take them).
        std::string token(out->text);
        char* end = nullptr;
        out->d = std::strtod(token.c_str(), &end);
        if (token.empty() || end != token.c_str() + token.size()) return err;
        out->type = JsonScalar::kBigNumber;
        return simdjson::SUCCESS;
      }
      switch (number.get_number_type()) {
        case ondemand::number_type::signed_integer:
          out->type = JsonScalar::kInt;
          out->i = number.get_int64();
          break;
        case ondemand::number_type::unsigned_integer:
          out->type = JsonScalar::kUInt;
          out->u = number.get_uint64();
          break;
        default:
          out->type = JsonScalar::kDouble;
          out->d = number.get_double();
      }
      return simdjson::SUCCESS;
    }
    case ondemand::json_type::object: {
      ondemand::object obj;
      if ((err = value.get_object().get(obj))) return err;
      out->type = JsonScalar::kObject;
      return obj.raw_json().get(out->text);
    }
    case ondemand::json_type::array: {
      ondemand::array arr;
      if ((err = value.get_array().get(arr))) return err;
      out->type = JsonScalar::kArray;
      return arr.raw_json().get(out->text);
    }
  }
  return simdjson::INCORRECT_TYPE;
}

}  // namespace rill::json_internal
