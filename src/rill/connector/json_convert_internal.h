// Private to connector/: how one JSON value becomes one Arrow value.
//
// JsonDecoder reads a value with simdjson (On-Demand for top-level fields, the
// DOM for values inside struct/list/map columns), turns it into a JsonScalar,
// converts it by the column's ColumnSpec into a Cell (checking everything that
// can fail), and appends Cells only once the whole record converted.
#pragma once

#include <cstdint>
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
  ColKind kind = ColKind::kString;
  std::shared_ptr<arrow::DataType> type;  ///< the output type
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
  std::string_view s;  ///< strings and binary; JSON text of nested values
  /// Nested values: the parsed value (valid until its column's parser parses again).
  simdjson::dom::element element;
};

/// Convert `v` for `spec` into `cell`. Invalid naming the expected type and
/// the value on mismatch; nested kinds are only checked by shape here (the
/// record converts them with CheckNested).
Status Convert(const JsonScalar& v, const ColumnSpec& spec, Cell* cell);

/// Append `cell` (converted for `spec`; nested cells checked by CheckNested)
/// to `builder`.
Status AppendCell(const Cell& cell, const ColumnSpec& spec, arrow::ArrayBuilder* builder);

/// Parse `cell->s` (inside a buffer with simdjson padding) with `dom` into
/// `cell->element` and check that it converts into the nested `spec`.
Status CheckNested(const ColumnSpec& spec, simdjson::dom::parser* dom, Cell* cell);

/// Read an On-Demand value into `out` (consuming it).
simdjson::error_code ReadScalar(simdjson::ondemand::value value, JsonScalar* out);

/// "got a string \"ab…\"" style description of a value for errors.
std::string Describe(const JsonScalar& v);

/// The message of a simdjson error.
std::string JsonErrorMessage(simdjson::error_code error);

}  // namespace rill::json_internal
