#include "rill/sql/duckdb_result.h"

#include <arrow/c/bridge.h>
#include <arrow/record_batch.h>
#include <arrow/table.h>

#include <cstdlib>

#include <duckdb/common/arrow/result_arrow_wrapper.hpp>
#include <duckdb/main/prepared_statement_data.hpp>
#include <duckdb/storage/buffer_manager.hpp>
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

Result<std::vector<std::string>> PreparedParameterTypes(
    duckdb::Connection& conn, duckdb::unique_ptr<duckdb::SQLStatement> statement) {
  try {
    auto prepared = conn.Prepare(std::move(statement));
    if (prepared->HasError()) {
      return Status::Invalid(prepared->GetError());
    }
    std::vector<std::string> types;
    for (const auto& [name, type] : prepared->GetExpectedParameterTypes()) {
      // Positional parameters are named by their number ("1" for $1).
      char* end = nullptr;
      const long position = std::strtol(name.c_str(), &end, 10);
      if (end == name.c_str() || *end != '\0' || position < 1 || position > 65535) {
        continue;
      }
      if (types.size() < static_cast<size_t>(position)) {
        types.resize(static_cast<size_t>(position));
      }
      const auto id = type.id();
      const bool open = id == duckdb::LogicalTypeId::UNKNOWN ||
                        id == duckdb::LogicalTypeId::SQLNULL ||
                        id == duckdb::LogicalTypeId::STRING_LITERAL ||
                        id == duckdb::LogicalTypeId::INTEGER_LITERAL ||
                        id == duckdb::LogicalTypeId::ANY || id == duckdb::LogicalTypeId::INVALID;
      types[static_cast<size_t>(position - 1)] = open ? std::string() : type.ToString();
    }
    return types;
  } catch (const std::exception& e) {
    return Status::Invalid(duckdb::ErrorData(e).Message());
  }
}

Status SetDuckMemoryLimit(duckdb::DatabaseInstance& db, int64_t bytes) {
  if (bytes <= 0) {
    return Status::Invalid("memory limit must be positive, got ", bytes);
  }
  try {
    auto& config = duckdb::DBConfig::GetConfig(db);
    config.options.maximum_memory = static_cast<duckdb::idx_t>(bytes);
    duckdb::BufferManager::GetBufferManager(db).SetMemoryLimit(
        static_cast<duckdb::idx_t>(bytes));
  } catch (const std::exception& e) {
    return Status::Invalid("cannot set the DuckDB memory limit: ",
                           duckdb::ErrorData(e).Message());
  }
  return Status::OK();
}

}  // namespace rill
