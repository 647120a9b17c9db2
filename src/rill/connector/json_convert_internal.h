// Private to connector/: how one JSON value becomes one Arrow value.
//
// JsonDecoder reads a value with simdjson On-Demand, by a typed getter for the
// column's kind (or, for nulls, other types and errors, as a JsonScalar that is
// converted by the column's ColumnSpec), into a Cell; values of struct/list/map
// columns are checked while they are read and staged as NestedOps. Cells and
// ops are appended only once the whole record converted.
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
  uint32_t generation = 0;  ///< record that set it (cells of other records are unset)
  bool null = true;
  int64_t i = 0;
  uint64_t u = 0;
  double d = 0;
  bool b = false;
  std::string_view s;  ///< strings and binary
};

/// The builders of a struct/list/map column, one node per node of its spec.
struct NestedNode {
  const ColumnSpec* spec = nullptr;
  arrow::ArrayBuilder* builder = nullptr;
  std::vector<NestedNode> children;  ///< struct fields, list value, map key+item
};

/// Pair `spec` (a nested column's, which must outlive the node) with the
/// builder made for its type and, recursively, the child builders.
NestedNode MakeNestedNode(const ColumnSpec& spec, arrow::ArrayBuilder* builder);

/// One staged append of a nested value (applied in order once the record
/// converted).
struct NestedOp {
  enum Kind : uint8_t { kNull, kScalar, kStart, kMapKey };
  Kind kind = kNull;
  const NestedNode* node = nullptr;
  Cell cell;  ///< kScalar: the value; kMapKey: the key in `cell.s`
};

/// Convert `v` for `spec` into `cell`. Invalid naming the expected type and
/// the value on mismatch; nested kinds are only checked by shape here (the
/// record reads them with StageNested).
Status Convert(const JsonScalar& v, const ColumnSpec& spec, Cell* cell);

/// Append `cell` (converted for the scalar kind of `spec`) to `builder`.
Status AppendCell(const Cell& cell, const ColumnSpec& spec, arrow::ArrayBuilder* builder);

/// Read the non-null object/array `value` of `node`'s nested column, checking
/// that it converts (every value below it, including those of fields the
/// struct does not have), and add its appends to `ops`. Errors name the path
/// below the column (".a[2]: expected …").
Status StageNested(simdjson::ondemand::value& value, const NestedNode& node,
                   std::vector<NestedOp>* ops);

/// Apply staged appends.
Status ApplyNestedOps(const std::vector<NestedOp>& ops);

/// Read an On-Demand value into `out` (consuming it).
simdjson::error_code ReadScalar(simdjson::ondemand::value value, JsonScalar* out);

/// Read `value` for `spec` by the typed getter its kind calls for. True when
/// it was read into `cell` (not null, in range); false leaves the value
/// unconsumed for ReadScalar and Convert (nulls, other types, errors), or, for
/// temporal kinds, consumed into `*text` when it was a string.
inline bool ReadTyped(simdjson::ondemand::value& value, const ColumnSpec& spec, Cell* cell,
                    JsonScalar* text) {
  switch (spec.kind) {
    case ColKind::kSigned: {
      int64_t v;
      if (value.get_int64().get(v) || v < spec.min || v > static_cast<int64_t>(spec.max)) {
        return false;
      }
      cell->i = v;
      cell->u = static_cast<uint64_t>(v);
      break;
    }
    case ColKind::kUnsigned: {
      uint64_t v;
      if (value.get_uint64().get(v) || v > spec.max) return false;
      cell->u = v;
      cell->i = static_cast<int64_t>(v);
      break;
    }
    case ColKind::kFloat:
      if (value.get_double().get(cell->d)) return false;
      break;
    case ColKind::kBool:
      if (value.get_bool().get(cell->b)) return false;
      break;
    case ColKind::kString:
    case ColKind::kBinary:
      if (value.get_string().get(cell->s)) return false;
      break;
    case ColKind::kTimestamp:
    case ColKind::kDate32:
    case ColKind::kDate64:
      if (!value.get_string().get(text->text)) text->type = JsonScalar::kString;
      return false;
    default:
      return false;
  }
  cell->null = false;
  return true;
}
/// "got a string \"ab…\"" style description of a value for errors.
std::string Describe(const JsonScalar& v);

/// The message of a simdjson error.
std::string JsonErrorMessage(simdjson::error_code error);

}  // namespace rill::json_internal
