#include "rill/engine/stream_sql_task.h"

#include <algorithm>

#include <arrow/array.h>
#include <arrow/compute/api_vector.h>
#include <arrow/datum.h>
#include <arrow/record_batch.h>
#include <arrow/table.h>

#include "rill/engine/engine.h"
#include "rill/sql/sql_engine.h"
#include "rill/table/live_table.h"
#include "rill/table/schema.h"

namespace rill {
namespace {

// The rows of `version` with z_update_ts > *cursor (a suffix of its chunks, see
// the file comment of stream_sql_task.h); advances *cursor.
Result<std::vector<std::shared_ptr<arrow::RecordBatch>>> NewRows(const TableVersion& version,
                                                                 double* cursor) {
  const auto& chunks = version.chunks();
  const int upd = version.schema()->GetFieldIndex(kUpdateTsColumn);
  std::vector<std::shared_ptr<arrow::RecordBatch>> out;
  double newest = *cursor;
  for (size_t i = chunks.size(); i-- > 0;) {
    const VersionChunk& chunk = chunks[i];
    const int64_t n = chunk.batch->num_rows();
    if (n == 0) continue;
    const double* ts = chunk.batch->column(upd)->data()->GetValues<double>(1);
    if (ts[n - 1] <= *cursor) break;
    newest = std::max(newest, ts[n - 1]);
    const int64_t first = std::upper_bound(ts, ts + n, *cursor) - ts;
    std::shared_ptr<arrow::RecordBatch> rows = chunk.batch->Slice(first);
    if (chunk.alive && chunk.live_rows < n) {
      auto mask = std::make_shared<arrow::BooleanArray>(n, chunk.alive)->Slice(first);
      RILL_ASSIGN_OR_RAISE(auto filtered,
                           arrow::compute::Filter(arrow::Datum(rows), arrow::Datum(mask)));
      rows = filtered.record_batch();
    }
    if (rows->num_rows() > 0) out.push_back(std::move(rows));
    if (first > 0) break;
  }
  std::reverse(out.begin(), out.end());
  *cursor = newest;
  return out;
}

}  // namespace

Result<std::shared_ptr<StreamSqlTask>> StreamSqlTask::Make(std::string name, std::string query,
                                                           Engine* engine,
                                                           std::string source_table,
                                                           std::string output_table,
                                                           RetentionPolicy retention,
                                                           double interval_seconds) {
  if (!engine) return Status::Invalid("stream SQL task '", name, "': no engine");
  if (name.empty() || query.empty() || source_table.empty() || output_table.empty()) {
    return Status::Invalid(
        "stream SQL task: name, query, source and output table must not be empty");
  }
  if (!retention.max_rows && !retention.max_age_seconds) {
    return Status::Invalid("stream SQL task '", name,
                           "': the output retention needs max_rows or max_age_seconds");
  }
  RILL_RETURN_NOT_OK(retention.Validate());
  if (interval_seconds < 0) {
    return Status::Invalid("stream SQL task '", name, "': negative interval");
  }
  return std::shared_ptr<StreamSqlTask>(
      new StreamSqlTask(std::move(name), std::move(query), engine, std::move(source_table),
                        std::move(output_table), std::move(retention), interval_seconds));
}

StreamSqlTask::StreamSqlTask(std::string name, std::string query, Engine* engine,
                             std::string source, std::string output_table,
                             RetentionPolicy retention, double interval_seconds)
    : ScheduledSqlTask(std::move(name), std::move(query), std::move(output_table),
                       interval_seconds, /*primary_key=*/{},
                       /*use_prepared_statements=*/false, std::move(retention),
                       IncrementalMode::kOff),
      engine_(engine), source_(std::move(source)) {}

Result<TaskOutput> StreamSqlTask::Run(SqlEngine& sql, double /*now*/) {
  auto table = engine_->GetTable(source_);
  if (!table.ok()) {
    // Not made yet (e.g. a window's output before its first emission).
    if (table.status().IsKeyError()) return TaskOutput{nullptr, /*replace=*/false};
    return table.status();
  }
  auto version = (*table)->snapshot();
  double cursor = cursor_;
  RILL_ASSIGN_OR_RAISE(auto batches, NewRows(*version, &cursor));
  if (batches.empty()) {
    cursor_ = cursor;
    return TaskOutput{nullptr, /*replace=*/false};
  }
  RILL_ASSIGN_OR_RAISE(auto rows, arrow::Table::FromRecordBatches(version->schema(), batches));
  auto result = sql.QueryPreparedWith(query(), {{source_, rows}});
  if (!result.ok()) {
    return Status(result.status().code(), name() + ": " + result.status().message());
  }
  // Advance only after a successful run, so a failing query sees the rows again.
  cursor_ = cursor;
  if ((*result)->num_rows() == 0) return TaskOutput{nullptr, /*replace=*/false};
  return TaskOutput{std::move(result).ValueUnsafe(), /*replace=*/false};
}

}  // namespace rill
