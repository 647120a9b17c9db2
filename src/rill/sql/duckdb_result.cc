#include "rill/sql/duckdb_result.h"

#include <arrow/c/bridge.h>
#include <arrow/record_batch.h>
#include <arrow/table.h>

#include <duckdb/common/arrow/result_arrow_wrapper.hpp>
#include <duckdb/parser/statement/explain_statement.hpp>

namespace rill {

bool IsReadStatement(const duckdb::SQLStatement& statement) {
  switch (statement.type) {
    case duckdb::StatementType::SELECT_STATEMENT:
      return true;
    case duckdb::StatementType::EXPLAIN_STATEMENT: {
      // EXPLAIN ANALYZE runs the statement it explains.
      const auto& explain = statement.Cast<duckdb::ExplainStatement>();
      return explain.stmt != nullptr && IsReadStatement(*explain.stmt);
    }
    default:
      return false;
  }
}

Result<std::shared_ptr<arrow::Table>> ResultToArrowTable(
    duckdb::unique_ptr<duckdb::QueryResult> result, duckdb::idx_t batch_rows) {
  auto wrapper =
      std::make_unique<duckdb::ResultArrowArrayStreamWrapper>(std::move(result), batch_rows);
  // The stream's release callback deletes the wrapper, so the stream owns it.
  ArrowArrayStream* stream = &wrapper.release()->stream;
  RILL_ASSIGN_OR_RAISE(auto reader, arrow::ImportRecordBatchReader(stream));
  return reader->ToTable();
}

}  // namespace rill
