// The parts of PostgresCDCConnector that do not talk to a server: the pgoutput
// message parser (protocol version 1), the PostgreSQL type -> Arrow type
// mapping, the text-format value parsers (the same text a COPY ... TO STDOUT
// and pgoutput's 't' tuple columns carry), and the ChangeBatcher that turns
// tuples into Arrow batches with the _rill_op column (rill/common/row_ops.h).
//
// Threads: everything here is owned by one thread at a time (the connector's
// reader thread); no shared state.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <arrow/type_fwd.h>

#include "rill/common/status.h"
#include "rill/connector/connector.h"

namespace rill::pgcdc_internal {

/// How numeric columns map to Arrow (the connector's `numeric_as` option).
enum class NumericAs {
  kDecimal,  ///< numeric(p, s) -> decimal128(p, s); numeric -> decimal128(38, 9)
  kFloat64,  ///< every numeric -> float64
};

/// Parse "decimal" or "float64".
Result<NumericAs> ParseNumericAs(std::string_view text);

/// Well-known type OIDs (pg_type.h).
namespace oid {
inline constexpr uint32_t kBool = 16, kBytea = 17, kName = 19, kInt8 = 20, kInt2 = 21,
                          kInt4 = 23, kText = 25, kOid = 26, kJson = 114, kFloat4 = 700,
                          kFloat8 = 701, kBpchar = 1042, kVarchar = 1043, kDate = 1082,
                          kTimestamp = 1114, kTimestamptz = 1184, kNumeric = 1700,
                          kUuid = 2950, kJsonb = 3802;
}  // namespace oid

/// The element type OID of an array type OID (_int4 -> int4), 0 if `type_oid`
/// is not an array of a mapped scalar.
uint32_t ArrayElementOid(uint32_t type_oid);

/// The Arrow type of a PostgreSQL column (see docs/postgres_cdc.md): int2/4/8
/// -> int16/32/64, oid -> int64, float4/8 -> float32/64, bool -> bool,
/// numeric per `numeric_as` (precision over 38 -> utf8), text, varchar, bpchar,
/// name, json, jsonb, uuid -> utf8, bytea -> binary, date -> date32, timestamp
/// -> timestamp[us], timestamptz -> timestamp[us, UTC], one-dimensional arrays
/// of those -> list<element>; any other type -> utf8 (its text form).
std::shared_ptr<arrow::DataType> MapPgType(uint32_t type_oid, int32_t typmod,
                                           NumericAs numeric_as);

/// One column of a relation (a Relation message, or the catalog).
struct PgColumn {
  std::string name;
  uint32_t type_oid = 0;
  int32_t typmod = -1;
  bool key = false;  ///< part of the replica identity
};

/// A relation as pgoutput describes it.
struct PgRelation {
  uint32_t oid = 0;
  std::string nspname;
  std::string relname;
  char replica_identity = 'd';  ///< d default, f full, i index, n nothing
  std::vector<PgColumn> columns;
};

/// One column value of a TupleData: 'n' null, 'u' unchanged TOAST (not sent),
/// 't' text (in `text`).
struct PgValue {
  char kind = 'n';
  std::string_view text;
};

/// A parsed pgoutput message (only the fields of its type are set). Views
/// point into the parsed payload.
struct PgMessage {
  char type = 0;  ///< 'B' begin, 'C' commit, 'R' relation, 'I', 'U', 'D', 'T', 'O', 'Y', 'M'
  uint64_t lsn = 0;      ///< B: final_lsn (the commit's LSN); C: commit_lsn
  uint64_t end_lsn = 0;  ///< C: end of the commit record (the position after it)
  int64_t timestamp = 0; ///< B, C: commit time (microseconds since 2000-01-01)
  uint32_t xid = 0;      ///< B
  PgRelation relation;   ///< R
  uint32_t relid = 0;    ///< I, U, D
  char old_kind = 0;     ///< U, D: 'K' (key columns), 'O' (all columns) or 0 (none)
  std::vector<PgValue> old_tuple;
  std::vector<PgValue> new_tuple;
  std::vector<uint32_t> truncate_relids;  ///< T
};

/// Parse one pgoutput message (protocol version 1, text tuples). Invalid,
/// naming the message type and what was short or unknown, for bad bytes.
Status ParsePgOutput(std::string_view payload, PgMessage* out);

/// Format an LSN as PostgreSQL does ("16/B374D848"); parse it back.
std::string FormatLsn(uint64_t lsn);
Result<uint64_t> ParseLsn(std::string_view text);

/// Split one line of COPY ... TO STDOUT (text format, without its '\n') into
/// its fields: `\N` is null ('n'), others are unescaped ('t'); `scratch` holds
/// the unescaped bytes the views may point into (reserved by the caller so
/// that it does not move: at least line.size() bytes).
void SplitCopyLine(std::string_view line, std::vector<PgValue>* fields, std::string* scratch);

/// Builds the batches of one relation's changes: the mapped columns plus
/// kWriteOpColumn (int8 RowOp codes). A row whose value cannot be converted
/// becomes a kSkip row and a RejectedRecord (the row is never half applied).
class ChangeBatcher {
 public:
  /// `relation`: the source's columns; `target`: the target table's user
  /// columns when known (then the batch has exactly those columns, in that
  /// order, relation columns the target lacks are dropped and counted in
  /// unknown_columns(); target columns the relation lacks are null); null:
  /// the relation's columns. `primary_key`: the source table's key (for
  /// updates that change it: a delete of the old key comes first).
  static Result<std::unique_ptr<ChangeBatcher>> Make(
      const PgRelation& relation, const std::shared_ptr<arrow::Schema>& target,
      const std::vector<std::string>& primary_key, NumericAs numeric_as,
      std::string connector_name);
  ~ChangeBatcher();

  /// Append an insert / an upsert of `values` (the relation's columns in
  /// order). `fallback` (the old tuple of an update, may be empty) gives the
  /// values of unchanged TOAST columns. `position` names the change in rejects.
  void AddUpsert(const std::vector<PgValue>& values, const std::vector<PgValue>& fallback,
                 const std::string& position);
  /// Append an update: a delete of the old key first when the key changed
  /// (`old_values` given, 'K' or 'O'), then the upsert.
  void AddUpdate(char old_kind, const std::vector<PgValue>& old_values,
                 const std::vector<PgValue>& new_values, const std::string& position);
  /// Append a delete of the key in `old_values` (key or all columns).
  void AddDelete(const std::vector<PgValue>& old_values, const std::string& position);
  /// Append a truncation row.
  void AddTruncate();
  /// Rows appended since the last Flush.
  int64_t rows() const;
  /// Return the rows appended so far as one batch and start over (null when
  /// none).
  Result<std::shared_ptr<arrow::RecordBatch>> Flush();
  /// Take the rejects of the rows appended so far.
  std::vector<RejectedRecord> TakeRejects();
  /// Relation columns the target table does not have.
  const std::vector<std::string>& unknown_columns() const;
  /// The schema of the batches (with kWriteOpColumn last).
  const std::shared_ptr<arrow::Schema>& schema() const;

  struct Impl;

 private:
  explicit ChangeBatcher(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// Whether changing a column from `before` to `after` (both mapped types)
/// keeps the target table's values meaningful: the same type, or a widening
/// of an integer or floating-point type.
bool CompatibleTypeChange(const arrow::DataType& before, const arrow::DataType& after);

}  // namespace rill::pgcdc_internal
