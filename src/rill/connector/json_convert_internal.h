// Private to connector/: how one JSON value becomes one Arrow value.
//
// JsonDecoder reads a value with simdjson On-Demand by the typed getter of its
// column's type, straight into the column's buffers (json_columns_internal.h);
// nulls, other types and errors are read as a JsonScalar and converted by the
// column's ColumnSpec into a Cell, which is then written.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <arrow/type_fwd.h>
#include <simdjson.h>

#include "rill/common/status.h"

namespace rill::json_internal {

/// How a column is filled.
enum class ColKind {
  kSigned, kUnsigned, kFloat, kBool, kString, kBinary,
  kTimestamp, kDate32, kDate64, kStruct, kList, kMap,
};

/// A column (or nested child) and the decoding facts derived from its type.
struct ColumnSpec {
  std::string name;
  /// `name` has no '"' or '\\': a raw (still escaped) key equal to it is it.
  bool plain_name = true;
  /// plain_name of at most 15 bytes: name + '"' as 16 bytes, and the mask of
  /// those that count (RawKeyIs compares them with two loads).
  bool short_name = false;
  uint64_t name_bytes[2] = {0, 0};
  uint64_t name_mask[2] = {0, 0};
  ColKind kind = ColKind::kString;
  std::shared_ptr<arrow::DataType> type;  ///< the output type
  int type_id = 0;                        ///< type->id(), an arrow::Type::type
  bool nullable = true;
  /// utf8 only: numbers and booleans become their JSON text too (columns of
  /// inferred fields whose values disagree in type); otherwise they are refused.
  bool any_as_text = false;
  int64_t min = 0;       ///< kSigned range
  uint64_t max = 0;      ///< kSigned / kUnsigned upper bound
  int unit = 0;          ///< arrow::TimeUnit::type of kTimestamp
  int32_t list_size = -1;///< fixed_size_list length
  std::vector<ColumnSpec> children;  ///< struct fields, list value, map key+item
};

/// True when the raw (still escaped) key at `raw` (just past its opening
/// quote, in padded input: 16 bytes readable) is `spec`'s plain name.
inline bool RawKeyIs(const char* raw, const ColumnSpec& spec) {
  if (spec.short_name) {
    uint64_t lo, hi;
    std::memcpy(&lo, raw, 8);
    std::memcpy(&hi, raw + 8, 8);
    return ((lo & spec.name_mask[0]) == spec.name_bytes[0]) &
           ((hi & spec.name_mask[1]) == spec.name_bytes[1]);
  }
  return spec.plain_name && raw[spec.name.size()] == '"' &&
         std::memcmp(raw, spec.name.data(), spec.name.size()) == 0;
}

/// Build the spec of a field; types the decoder cannot fill become utf8.
ColumnSpec MakeSpec(const arrow::Field& field);
/// The schema of what the specs produce.
std::shared_ptr<arrow::Schema> SpecSchema(const std::vector<ColumnSpec>& specs);

/// One JSON value, already classified.
struct JsonScalar {
  enum Type { kNull, kBool, kInt, kUInt, kDouble, kBigNumber, kString, kObject, kArray };
  Type type = kNull;
  bool b = false;
  int64_t i = 0;
  uint64_t u = 0;
  double d = 0;
  /// kString: the unescaped string; others: the JSON text of the value.
  std::string_view text;
};

/// One converted value, ready to append.
struct Cell {
  bool null = true;
  int64_t i = 0;
  uint64_t u = 0;
  double d = 0;
  bool b = false;
  std::string_view s;  ///< strings and binary
};

/// Convert `v` for `spec` into `cell`. Invalid naming the expected type and
/// the value on mismatch; nested kinds are only checked by shape here (the
/// decoder writes them with WriteNested).
Status Convert(const JsonScalar& v, const ColumnSpec& spec, Cell* cell);

/// Read an On-Demand value into `out` (consuming it).
simdjson::error_code ReadScalar(simdjson::ondemand::value value, JsonScalar* out);

/// "got a string \"ab…\"" style description of a value for errors.
std::string Describe(const JsonScalar& v);

/// The message of a simdjson error.
std::string JsonErrorMessage(simdjson::error_code error);

}  // namespace rill::json_internal
