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

void StreamSqlTask::SkipNewRowsOf(const LiveTable& table) {
  if (table.name() != source_) return;
  cursor_ = std::max(cursor_, NewestUpdateTs(*table.snapshot()));
  paused_ = false;
}

void StreamSqlTask::PauseNewRowsOf(const LiveTable& table) {
  if (table.name() == source_) paused_ = true;
}

Result<TaskOutput> StreamSqlTask::Run(SqlEngine& sql, double /*now*/) {
  if (paused_) return TaskOutput{nullptr, /*replace=*/false};
  auto table = engine_->GetTable(source_);
  if (!table.ok()) {
    // Not made yet (e.g. a window's output before its first emission).
    if (table.status().IsKeyError()) return TaskOutput{nullptr, /*replace=*/false};
    return table.status();
  }
  auto version = (*table)->snapshot();
  double cursor = cursor_;
  RILL_ASSIGN_OR_RAISE(auto batches, RowsUpdatedAfter(*version, &cursor));
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
