// DuckDB helpers for the folders that talk to DuckDB themselves (sql/ and
// metrics/, the ones that link rill_duckdb): which statements count as reads,
// and DuckDB results as Arrow tables. Including this header includes DuckDB,
// so no other folder may include it (the `layering` test checks).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <arrow/type_fwd.h>

#include <duckdb.hpp>

#include "rill/common/status.h"

namespace rill {

/// Return true for statements that only read: SELECT (which includes SHOW,
/// DESCRIBE, SUMMARIZE, VALUES) and EXPLAIN of such a statement. Any thread.
bool IsReadStatement(const duckdb::SQLStatement& statement);

/// Return a materialized DuckDB result as an Arrow table, converted in
/// batches of `batch_rows` rows. Takes ownership of `result`. Any thread.
Result<std::shared_ptr<arrow::Table>> ResultToArrowTable(
    duckdb::unique_ptr<duckdb::QueryResult> result, duckdb::idx_t batch_rows = 128 * 1024);

/// Prepare `statement` on `conn` without running it and return the type
/// DuckDB bound for each positional parameter ($1 is element 0), as DuckDB
/// names it ("BIGINT", "DECIMAL(18,3)", "TIMESTAMP WITH TIME ZONE"); "" where
/// DuckDB leaves the type open (`SELECT $1`). Invalid with DuckDB's message
/// when the statement does not prepare. The caller checks the statement kind.
/// Thread of `conn`.
Result<std::vector<std::string>> PreparedParameterTypes(
    duckdb::Connection& conn, duckdb::unique_ptr<duckdb::SQLStatement> statement);

/// Set the memory limit of `db` (bytes; DuckDB's max_memory), bypassing
/// lock_configuration, as `SET max_memory` would. Any thread.
Status SetDuckMemoryLimit(duckdb::DatabaseInstance& db, int64_t bytes);

}  // namespace rill
