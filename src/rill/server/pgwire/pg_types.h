// Arrow types as PostgreSQL types: the OID announced in RowDescription, and
// each value in text format (every type) or binary format (common scalars and
// one-dimensional arrays of them). Query results arrive as Arrow tables (DuckDB's
// own conversion), so the mapping is from Arrow types.
//
// Types with no PostgreSQL counterpart (structs, maps, unions, DuckDB's opaque
// extension types, nested lists) are announced as `text` (OID 25) and sent in a
// readable text form; no column is ever announced with OID 0 or 705.
//
// Also here: client parameters (text or binary, by type OID) as SQL literals.
//
// Threads: pure functions.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <arrow/type_fwd.h>

#include "rill/common/status.h"

namespace rill::pgwire {

/// PostgreSQL type OIDs used here (pg_type.oid).
namespace oid {
constexpr int32_t kBool = 16, kBytea = 17, kChar = 18, kName = 19, kInt8 = 20, kInt2 = 21,
                  kInt4 = 23, kText = 25, kOid = 26, kJson = 114, kFloat4 = 700,
                  kFloat8 = 701, kUnknown = 705, kBpchar = 1042, kVarchar = 1043,
                  kDate = 1082, kTime = 1083, kTimestamp = 1114, kTimestamptz = 1184,
                  kInterval = 1186, kNumeric = 1700, kUuid = 2950, kJsonb = 3802;
}  // namespace oid

/// How one result column is announced.
struct PgTypeInfo {
  int32_t oid = oid::kText;
  int16_t typlen = -1;  ///< bytes, -1 for variable length
};

/// Return the PostgreSQL type announced for an Arrow column type.
PgTypeInfo PgTypeFor(const arrow::DataType& type);

/// Return the PostgreSQL type OID of a parameter DuckDB bound to `duck_type`
/// (DuckDB's name: "BIGINT", "DECIMAL(18,3)", "TIMESTAMP WITH TIME ZONE",
/// "INTEGER[]"), 0 when there is none here or the type is open ("").
int32_t PgOidForDuckType(std::string_view duck_type);

/// Return the DuckDB type a parameter of PostgreSQL type `type_oid` becomes
/// ("BIGINT", "VARCHAR" for text and unspecified (0), "INTEGER[]"), "" when
/// its literal carries its own type (numeric) or the OID is not known here.
std::string DuckTypeForOid(int32_t type_oid);

/// Return the array type OID for an element OID, 0 if PostgreSQL has none here.
int32_t PgArrayOidFor(int32_t element_oid);

/// Return the PostgreSQL type name of an OID ("int4", "text", ...), "text" if unknown.
std::string_view PgTypeName(int32_t oid);

/// Appends one column's values to a DataRow: for each row, the int32 length
/// (-1 for NULL) and the bytes in the chosen format.
class PgColumnWriter {
 public:
  /// Invalid when `format` is binary (1) and the type has no binary encoding here.
  static Result<std::unique_ptr<PgColumnWriter>> Make(std::shared_ptr<arrow::DataType> type,
                                                      int16_t format);
  virtual ~PgColumnWriter() = default;
  /// Append the length-prefixed value of `array[row]` to `out`.
  virtual void Append(const arrow::Array& array, int64_t row, std::string* out) const = 0;
};

/// Append the PostgreSQL text form of `array[row]` (not NULL) to `out`.
void AppendText(const arrow::Array& array, int64_t row, std::string* out);

/// Return a parameter value as a SQL literal for DuckDB: a quoted string
/// (which DuckDB casts to what the context needs) or a typed literal when the
/// client named the type. `format` 0 = text, 1 = binary. Invalid for values
/// that do not decode as the announced type, NUL bytes in text and binary
/// formats of types not decoded here. NULL → "NULL".
Result<std::string> ParameterLiteral(const std::optional<std::string>& value, int32_t type_oid,
                                     int16_t format);

/// Return `s` as a single-quoted SQL string literal.
std::string QuoteLiteral(std::string_view s);

}  // namespace rill::pgwire
