#include "rill/engine/window_task.h"

#include <algorithm>
#include <cmath>

#include <arrow/array.h>
#include <arrow/builder.h>
#include <arrow/compute/api_vector.h>
#include <arrow/datum.h>
#include <arrow/record_batch.h>
#include <arrow/table.h>
#include <arrow/type.h>

#include "rill/engine/engine.h"
#include "rill/table/live_table.h"
#include "rill/table/schema.h"

namespace rill {
namespace {

constexpr int64_t kDefaultOutputRows = 1000000;

std::vector<std::string> OutputKey(const WindowTaskOptions& o) {
  if (o.spec.emit != EmitMode::kOnUpdate) return {};
  std::vector<std::string> key = {"window_start", "window_end"};
  key.insert(key.end(), o.spec.group_by.begin(), o.spec.group_by.end());
  return key;
}

RetentionPolicy OutputRetention(const WindowTaskOptions& o) {
  if (o.retention && o.retention->enabled()) return *o.retention;
  RetentionPolicy policy;
  policy.max_rows = kDefaultOutputRows;
  return policy;
}

Status Prefix(const Status& st, const std::string& task) {
  return st.WithMessage("window task '", task, "': ", st.message());
}

}  // namespace

Result<std::shared_ptr<arrow::RecordBatch>> TakeRows(
    const std::shared_ptr<arrow::RecordBatch>& batch, const std::vector<int64_t>& indices) {
  arrow::Int64Builder b;
  RILL_RETURN_NOT_OK(b.AppendValues(indices));
  std::shared_ptr<arrow::Array> idx;
  RILL_RETURN_NOT_OK(b.Finish(&idx));
  RILL_ASSIGN_OR_RAISE(auto taken, arrow::compute::Take(arrow::Datum(batch), arrow::Datum(idx)));
  return taken.record_batch();
}

WindowTask::WindowTask(WindowTaskOptions options)
    : Task(options.name, options.output_table, options.interval_seconds, OutputKey(options),
           OutputRetention(options)),
      options_(std::move(options)) {}

Result<std::shared_ptr<WindowTask>> WindowTask::Make(WindowTaskOptions options) {
  const std::string who = "WindowTask '" + options.name + "': ";
  if (options.name.empty()) return Status::Invalid("a window task needs a name");
  if (options.source_table.empty()) return Status::Invalid(who, "source_table is required");
  if (options.output_table.empty()) return Status::Invalid(who, "output_table is required");
  if (options.source_table == options.output_table) {
    return Status::Invalid(who, "output_table must differ from source_table");
  }
  if (!(options.interval_seconds >= 0)) {
    return Status::Invalid(who, "interval_seconds must be >= 0");
  }
  if (options.late_max_rows < 1) return Status::Invalid(who, "late_max_rows must be >= 1");
  if (options.late_table.empty()) options.late_table = options.output_table + "_late";
  if (options.retention) RILL_RETURN_NOT_OK(options.retention->Validate());
  auto valid = options.spec.Validate();
  if (!valid.ok()) return valid.WithMessage(who, valid.message());
  return std::shared_ptr<WindowTask>(new WindowTask(std::move(options)));
}

std::string WindowTask::Describe() const {
  const auto& s = options_.spec;
  std::string text = std::string(WindowKindName(s.kind)) + " window task over '" +
                     options_.source_table + "' by " +
                     (s.time_column.empty() ? std::string("processing time") : s.time_column) +
                     " into '" + options_.output_table + "':";
  for (const auto& a : s.aggregations) text += " " + a.output + " = " + a.expression + ";";
  return text;
}

void WindowTask::Attach(Engine* engine) { engine_.store(engine); }

Status WindowTask::RegisterMetrics(Engine* engine) {
  std::weak_ptr<WindowTask> weak = weak_from_this();
  auto metric = [weak](auto field) -> Engine::BusinessMetric {
    return [weak, field]() -> Result<double> {
      auto task = weak.lock();
      if (!task) return 0.0;
      return field(task->stats_snapshot());
    };
  };
  const std::string prefix = "window:" + name() + ":";
  RILL_RETURN_NOT_OK(engine->RegisterBusinessMetric(
      prefix + "open_windows", metric([](const WindowTaskStats& s) {
        return static_cast<double>(s.window.windows_open);
      })));
  RILL_RETURN_NOT_OK(engine->RegisterBusinessMetric(
      prefix + "state_bytes", metric([](const WindowTaskStats& s) {
        return static_cast<double>(s.window.state_bytes);
      })));
  return engine->RegisterBusinessMetric(
      prefix + "late_rows", metric([](const WindowTaskStats& s) {
        return static_cast<double>(s.window.late_rows + s.window.null_time_rows);
      }));
}

void WindowTask::Detach(Engine* engine) {
  const std::string prefix = "window:" + name() + ":";
  for (const char* m : {"open_windows", "state_bytes", "late_rows"}) {
    (void)engine->UnregisterBusinessMetric(prefix + m);
  }
  engine_.store(nullptr);
}

WindowTaskStats WindowTask::stats_snapshot() const {
  std::shared_ptr<WindowOperator> op;
  WindowTaskStats out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    out = extra_;
    op = published_op_;
  }
  std::vector<std::shared_ptr<WindowOperator>> parts;
  {
    std::lock_guard<std::mutex> lock(mu_);
    parts = published_parts_;
  }
  if (!parts.empty()) {
    // Partitioned: the sums of the partitions' counters, the largest times.
    out.window.watermark = out.window.max_event_time = -INFINITY;
    for (const auto& p : parts) {
      const WindowStats s = p->stats();
      out.window.rows_in += s.rows_in;
      out.window.late_rows += s.late_rows;
      out.window.null_time_rows += s.null_time_rows;
      out.window.windows_open = std::max(out.window.windows_open, s.windows_open);
      out.window.groups_open += s.groups_open;
      out.window.groups_emitted += s.groups_emitted;
      out.window.updates_emitted += s.updates_emitted;
      out.window.state_bytes += s.state_bytes;
      out.window.watermark = std::max(out.window.watermark, s.watermark);
      out.window.max_event_time = std::max(out.window.max_event_time, s.max_event_time);
    }
  } else if (op) {
    out.window = op->stats();
  } else {
    out.window.watermark = out.window.max_event_time = -INFINITY;
  }
  return out;
}

Result<std::vector<std::shared_ptr<arrow::RecordBatch>>> WindowTask::ReadNewRows(
    const LiveTable& source) {
  return RowsUpdatedAfter(*source.snapshot(), &cursor_);
}

void WindowTask::SkipNewRowsOf(const LiveTable& table) {
  if (table.name() == options_.source_table) {
    cursor_ = std::max(cursor_, NewestUpdateTs(*table.snapshot()));
    paused_ = false;
  }
}

void WindowTask::PauseNewRowsOf(const LiveTable& table) {
  // The whole task waits: a run meanwhile would change the state table
  // while its moves are being applied.
  if (table.name() == options_.source_table) paused_ = true;
}

Status WindowTask::WriteLate(const std::shared_ptr<arrow::RecordBatch>& batch,
                             const LateRows& late, double now) {
  Engine* engine = engine_.load();
  if (!engine) return Status::Invalid("not attached to an engine");
  RILL_ASSIGN_OR_RAISE(auto rows, TakeRows(batch, late.rows));
  std::vector<std::shared_ptr<arrow::Field>> fields;
  std::vector<std::shared_ptr<arrow::Array>> columns;
  for (int i = 0; i < rows->num_columns(); ++i) {
    if (IsSystemColumn(rows->schema()->field(i)->name())) continue;
    fields.push_back(rows->schema()->field(i)->WithMetadata(nullptr));
    columns.push_back(rows->column(i));
  }
  arrow::StringBuilder reason, task;
  arrow::DoubleBuilder event_time, watermark;
  for (size_t i = 0; i < late.rows.size(); ++i) {
    RILL_RETURN_NOT_OK(reason.Append(LateReasonName(late.reasons[i])));
    RILL_RETURN_NOT_OK(task.Append(name()));
    RILL_RETURN_NOT_OK(std::isnan(late.event_times[i]) ? event_time.AppendNull()
                                                       : event_time.Append(late.event_times[i]));
    RILL_RETURN_NOT_OK(watermark.Append(late.watermark));
  }
  std::shared_ptr<arrow::Array> a_reason, a_time, a_watermark, a_task;
  RILL_RETURN_NOT_OK(reason.Finish(&a_reason));
  RILL_RETURN_NOT_OK(event_time.Finish(&a_time));
  RILL_RETURN_NOT_OK(watermark.Finish(&a_watermark));
  RILL_RETURN_NOT_OK(task.Finish(&a_task));
  fields.push_back(arrow::field("late_reason", arrow::utf8()));
  fields.push_back(arrow::field("event_time", arrow::float64()));
  fields.push_back(arrow::field("watermark", arrow::float64()));
  fields.push_back(arrow::field("task", arrow::utf8()));
  columns.insert(columns.end(), {a_reason, a_time, a_watermark, a_task});
  auto schema = arrow::schema(fields);
  auto out = arrow::RecordBatch::Make(schema, rows->num_rows(), columns);
  TableOptions options;
  options.mode = TableMode::kAppend;
  options.retention = RetentionPolicy{options_.late_max_rows, std::nullopt, kInsertTsColumn};
  RILL_ASSIGN_OR_RAISE(auto table, engine->GetOrCreateTable(options_.late_table, schema, options));
  RILL_RETURN_NOT_OK(table->Write(out, now).status());
  std::lock_guard<std::mutex> lock(mu_);
  extra_.late_rows_kept += out->num_rows();
  return Status::OK();
}

Result<TaskOutput> WindowTask::Run(SqlEngine& sql, double now) {
  Engine* engine = engine_.load();
  if (!engine) return Prefix(Status::Invalid("not attached to an engine"), name());
  auto source = engine->GetTable(options_.source_table);
  if (!source.ok()) return Prefix(source.status(), name());
  sql_ = &sql;
  if (paused_) return TaskOutput{nullptr, /*replace=*/false};
  if (mode_ == Mode::kUndecided) {
    auto decided = DecideMode(**source);
    if (!decided.ok()) return Prefix(decided, name());
  }
  if (mode_ == Mode::kPartitioned) {
    auto out = RunPartitioned(sql, **source, now);
    if (!out.ok()) return Prefix(out.status(), name());
    return out;
  }
  if (!op_) {
    auto made = WindowOperator::Make(options_.spec, (*source)->schema(), &sql);
    if (!made.ok()) return Prefix(made.status(), name());
    op_ = std::shared_ptr<WindowOperator>(std::move(made).ValueUnsafe());
    std::lock_guard<std::mutex> lock(mu_);
    published_op_ = op_;
  }
  auto batches = ReadNewRows(**source);
  if (!batches.ok()) return Prefix(batches.status(), name());
  Status late_status;
  for (const auto& batch : *batches) {
    LateRows late;
    auto st = op_->Consume(batch, now, &late);
    if (!st.ok()) return Prefix(st, name());
    if (!late.rows.empty()) {
      // Keep going: a failing side table must not stop the windows.
      auto written = WriteLate(batch, late, now);
      if (!written.ok() && late_status.ok()) late_status = written;
    }
  }
  auto emitted = op_->Emit(now);
  if (!emitted.ok()) return Prefix(emitted.status(), name());
  {
    std::lock_guard<std::mutex> lock(mu_);
    extra_.cursor = cursor_;
    if (!batches->empty()) ++extra_.runs_with_rows;
  }
  if (!late_status.ok()) {
    engine->RecordEvent(EngineEvent::Engine(
        Severity::kError, name(),
        "Window task '" + name() + "' could not keep late rows in '" + options_.late_table +
            "' (they are counted)",
        late_status.ToString(), now));
  }
  return TaskOutput{std::move(emitted).ValueUnsafe(), /*replace=*/false};
}

}  // namespace rill
