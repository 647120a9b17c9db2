// DuckDB helpers for the folders that talk to DuckDB themselves (sql/ and
// metrics/, the ones that link rill_duckdb): which statements count as reads,
// and DuckDB results as Arrow tables. Including this header includes DuckDB,
// so no other folder may include it (the `layering` test checks).
#pragma once

#include <memory>

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

}  // namespace rill
