// Row operations: how one batch written to a LiveTable mixes upserts, deletes
// and truncations (issue 25).
//
// A batch given to LiveTable::Write (or pushed by a connector) may carry the
// column kWriteOpColumn. Its rows are then applied in order, each as its
// operation says: an upsert (or append) of the row, a delete of the row's key
// (only the key columns are read; the other columns may be null), or a
// truncation (the table is emptied at that point; the row's values are
// ignored). One push can so mix upserts and deletes of the same key and the
// last one wins. The column holds int8 RowOp codes, or strings (case-
// insensitive): "insert", "upsert", "update", "c", "u", "r" (read, Debezium's
// snapshot rows) upsert; "delete", "d" delete; "truncate", "t" truncate;
// "update_before" (the change feed's old values) is skipped. Null is an upsert.
// Connectors name the user's column with their `op_column` option and rename
// it to kWriteOpColumn; decoders of change formats (Debezium, Kafka
// tombstones, PostgreSQL CDC) write kWriteOpColumn themselves, as int8 codes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <arrow/type_fwd.h>

#include "rill/common/status.h"

namespace rill {

/// The name of the operation column of a batch written to a table.
inline constexpr char kWriteOpColumn[] = "_rill_op";

/// What one row of a batch does (the int8 values of kWriteOpColumn).
enum class RowOp : int8_t {
  kUpsert = 0,    ///< insert or replace the row (append tables: append it)
  kDelete = 1,    ///< delete the row's key (keyed tables only)
  kTruncate = 2,  ///< remove every row of the table (keyed tables only)
  kSkip = 3,      ///< ignore the row (a change feed's update_before)
};

/// Parse an operation name (see the file comment). Invalid names the value.
Result<RowOp> ParseRowOp(std::string_view name);
/// "upsert", "delete", "truncate", "skip".
const char* RowOpName(RowOp op);

/// Return `column` as int8 RowOp codes: an int8 column is checked (every value
/// a code), a string column (utf8, large_utf8, dictionary of strings) parsed.
/// Invalid, naming the row and the value, for anything else.
Result<std::shared_ptr<arrow::Array>> NormalizeRowOps(const std::shared_ptr<arrow::Array>& column);

/// Return `batch` with the column `op_column` renamed to kWriteOpColumn (the
/// connectors' `op_column` option). `batch` itself when it has no such column
/// (every row an upsert).
Result<std::shared_ptr<arrow::RecordBatch>> RenameOpColumn(
    const std::shared_ptr<arrow::RecordBatch>& batch, const std::string& op_column);

}  // namespace rill
