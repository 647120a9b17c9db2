// The parts of the PostgreSQL sink that do not talk to a server: how Arrow
// types map to PostgreSQL types, and the encoder of COPY ... (FORMAT binary).
//
// Type mapping (docs/sinks.md, "PostgreSQL sink"):
//   int8, int16, uint8 -> smallint; int32, uint16 -> integer; int64, uint32 -> bigint;
//   uint64 -> numeric(20,0); float16, float32 -> real; float64 -> double precision;
//   bool -> boolean; utf8, large_utf8 -> text; binary, large_binary,
//   fixed_size_binary -> bytea; timestamp with a time zone -> timestamptz (the
//   instant), without -> timestamp; date32, date64 -> date; time32, time64 -> time;
//   duration -> interval; decimal128/256(p, s) -> numeric(p, s); list, large_list,
//   fixed_size_list, struct, map -> jsonb (nested values as JSON: lists as arrays,
//   structs as objects, maps as arrays of {"key", "value"}); dictionary -> the
//   mapping of its value type; null -> text (always NULL).
// Lists go to jsonb rather than PostgreSQL arrays: arrays cannot hold lists of
// structs or ragged nested lists, and jsonb can hold every Arrow value.
//
// Most columns are staged with their target type; uint64 and decimals are
// staged as text (their binary numeric form is not worth encoding) and cast in
// the INSERT ... SELECT.
//
// Threads: everything here is pure; any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <arrow/type_fwd.h>

#include "rill/common/status.h"

namespace rill::postgres_sink_internal {

/// How one Arrow column is written.
struct PgColumnType {
  std::string target;  ///< the type of the target column (CREATE TABLE)
  std::string stage;   ///< the type of the staging column (what COPY writes)
  /// True when the staged value needs an explicit cast to the target type.
  bool cast = false;
};

/// The PostgreSQL types of an Arrow type. NotImplemented (naming `column`) for
/// types with no mapping (unions, extension types without a storage mapping).
Result<PgColumnType> MapArrowType(const arrow::DataType& type, const std::string& column);

/// `name` as a quoted SQL identifier ("a""b").
std::string QuoteIdentifier(const std::string& name);
/// "name" or "schema.name" as a quoted, possibly qualified, identifier.
std::string QuoteQualifiedName(const std::string& name);

/// Encodes Arrow columns as the rows of COPY ... FROM STDIN (FORMAT binary).
class CopyBinaryEncoder {
 public:
  /// An encoder of the columns `columns` (indices into batches of `schema`).
  /// A uint64 column named _version (the change feed's) is written as bigint.
  static Result<std::unique_ptr<CopyBinaryEncoder>> Make(
      const std::shared_ptr<arrow::Schema>& schema, const std::vector<int>& columns);
  virtual ~CopyBinaryEncoder() = default;
  /// Append the 19-byte header of a binary COPY stream to `out`.
  static void AppendHeader(std::string* out);
  /// Append the trailer (-1 as int16) to `out`.
  static void AppendTrailer(std::string* out);
  /// Bind `batch` (same schema as Make's) for the next AppendRows.
  virtual Status Bind(const arrow::RecordBatch& batch) = 0;
  /// Append rows [begin, end) of the bound batch as COPY tuples.
  virtual void AppendRows(int64_t begin, int64_t end, std::string* out) = 0;
};

/// The value at `index` of `array` as JSON text (for jsonb columns).
void AppendJsonValue(const arrow::Array& array, int64_t index, std::string* out);

}  // namespace rill::postgres_sink_internal
