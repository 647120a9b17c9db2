// Private to src/rill/sql: a DuckDB result collector that builds the query's
// result as an Arrow table directly, sharing input memory where it can.
//
// DuckDB's own collectors copy every result chunk into a ColumnDataCollection,
// and ResultToArrowTable copies it again into Arrow arrays. This collector
// converts each chunk once, as it arrives. A fixed-width result column whose
// values DuckDB did not compute but still reads from a buffer of the query's
// input (its arrow scan hands DuckDB pointers into Arrow buffers; projections
// pass them on) is not copied at all: the Arrow column is a slice of that
// input buffer. The bytes a vector points at are, by definition, its values,
// and Arrow buffers are immutable, so the slice equals the copy DuckDB would
// have made, whatever the query did to get there. A slice shorter than half
// its buffer is copied after all, so a result never holds more than twice
// the memory of a copy.
//
// Used by SqlEngine::QueryPreparedWith (StreamSqlTask's new rows).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <arrow/type_fwd.h>

#include "rill/common/status.h"

namespace duckdb {
class ClientContext;
class PhysicalOperator;
class PreparedStatementData;
class QueryResult;
}  // namespace duckdb

namespace rill::sql_internal {

/// Buffers a result may share instead of copying: the value buffers of the
/// fixed-width columns of tables a query scans. Immutable once built; any
/// thread.
class SharedInputBuffers {
 public:
  /// Add the value buffers of every fixed-width column of `table`.
  void AddTable(const arrow::Table& table);
  /// Sort what was added; call once, before Find.
  void Seal();
  /// Return the buffer holding every byte of [data, data + size), or null.
  const std::shared_ptr<arrow::Buffer>* Find(const uint8_t* data, int64_t size) const;
  bool empty() const { return buffers_.empty(); }

 private:
  std::vector<std::shared_ptr<arrow::Buffer>> buffers_;  // by address once sealed
};

/// Make the collector for one execution of the statement `data` (a
/// duckdb::get_result_collector_t body): it gathers the result into an Arrow
/// table of batches of about `batch_rows` rows, sharing `shared` (may be null)
/// where it can. Its result is read with TakeCollectedTable. The collector
/// sinks in parallel when the plan need not keep the row order, else on one
/// thread. DuckDB's threads call it while the query runs.
duckdb::PhysicalOperator& MakeArrowTableCollector(
    duckdb::ClientContext& context, duckdb::PreparedStatementData& data,
    std::shared_ptr<const SharedInputBuffers> shared, int64_t batch_rows);

/// Return the table of a result produced by MakeArrowTableCollector's
/// collector (Invalid for any other result, or a failed one).
Result<std::shared_ptr<arrow::Table>> TakeCollectedTable(duckdb::QueryResult& result);

}  // namespace rill::sql_internal
