// Helpers shared by the two places that talk to DuckDB (sql/ and metrics/):
// which statements count as reads, and DuckDB results as Arrow tables.
// Private to librill.
#pragma once

#include <memory>

#include <arrow/type_fwd.h>

#include <duckdb.hpp>

#include "rill/common/status.h"

namespace rill::sql_internal {

/// Return true for statements that only read: SELECT (which includes SHOW,
/// DESCRIBE, SUMMARIZE, VALUES) and EXPLAIN of such a statement.
bool IsReadStatement(const duckdb::SQLStatement& statement);

/// Return a materialized DuckDB result as an Arrow table, converted in
/// batches of `batch_rows` rows.
Result<std::shared_ptr<arrow::Table>> ResultToArrowTable(
    duckdb::unique_ptr<duckdb::QueryResult> result, duckdb::idx_t batch_rows = 128 * 1024);

}  // namespace rill::sql_internal
