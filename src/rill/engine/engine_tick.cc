// Engine: one tick (Step) and its steps. Everything here runs on the thread
// holding tick_mu_; the registry lock mu_ is taken only for short copies.
#include <chrono>
#include <cmath>

#include <arrow/record_batch.h>
#include <arrow/table.h>
#include <arrow/type.h>
#include <fmt/format.h>

#include "rill/common/arrow_init.h"
#include "rill/common/logging.h"
#include "rill/connector/connector.h"
#include "rill/engine/engine.h"
#include "rill/engine/system_tables_internal.h"
#include "rill/sql/sql_engine.h"
#include "rill/common/row_ops.h"

namespace rill {

using engine_internal::MakeMetricsRow;
using engine_internal::MakeRejectRow;

namespace {

// The host reading shown in rill_metrics is at most this old (unless another
// thread is sampling at that moment).
constexpr double kHostSampleMaxAgeSeconds = 1.0;

double SteadySeconds() {
  using namespace std::chrono;
  return duration_cast<nanoseconds>(steady_clock::now().time_since_epoch()).count() / 1e9;
}

}  // namespace

Result<double> Engine::Step() {
  // Read /proc (about once a second) before the tick, so the tick itself only
  // loads the latest reading.
  host_sampler_->Sample(kHostSampleMaxAgeSeconds);
  std::unique_lock<std::mutex> lock(tick_mu_, std::try_to_lock);
  if (!lock.owns_lock()) {
    if (tick_owner_ == std::this_thread::get_id()) {
      return Status::Invalid("step() called from inside a tick (from a callback)");
    }
    lock.lock();
  }
  tick_owner_ = std::this_thread::get_id();
  auto result = RunTick();
  tick_owner_ = std::thread::id();
  return result;
}

Result<double> Engine::RunTick() {
  const double t0 = SteadySeconds();
  double now = clock_();
  // Tick times strictly increase, so "written since the last tick" is well defined.
  if (now <= last_tick_now_) now = std::nextafter(last_tick_now_, INFINITY);
  last_tick_now_ = now;

  int64_t records = 0;
  // memory_budget_policy "shed": over the budget the connectors are not drained
  // (their buffers and on_overflow policies hold the input) until memory is back.
  if (!shedding_.load()) {
    IngestConnectors(now, &records);
  } else {
    backlog_.store(false);
  }
  ApplyRetention(now);
  RunDueTasks(now);
  const double latency = SteadySeconds() - t0;
  PublishMetrics(now, latency, records);
  CheckMemoryBudgetAt(now, /*notify_always=*/false);
  FlushRepeatedLogs(now);
  {
    std::lock_guard<std::recursive_mutex> running(hooks_mu_);
    const std::shared_ptr<const TickEndHooks> hooks = tick_end_hook_list_.Load();
    for (const auto& hook : *hooks) hook(now);
  }
  return latency;
}

Status Engine::AtTickBoundary(const std::function<Status()>& fn) {
  if (tick_owner_ == std::this_thread::get_id()) {
    return Status::Invalid("AtTickBoundary called from inside a tick (from a callback)");
  }
  std::lock_guard<std::mutex> lock(tick_mu_);
  return fn();
}

void Engine::PublishTickEndHooks() {
  auto list = std::make_shared<TickEndHooks>();
  for (const auto& [id, hook] : tick_end_hooks_) list->push_back(hook);
  tick_end_hook_list_.Store(std::move(list));
}

int64_t Engine::AddTickEndHook(std::function<void(double now)> hook) {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t id = next_tick_end_hook_++;
  tick_end_hooks_[id] = std::move(hook);
  PublishTickEndHooks();
  return id;
}

void Engine::RemoveTickEndHook(int64_t id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    tick_end_hooks_.erase(id);
    PublishTickEndHooks();
  }
  // Wait for a tick that copied it and may be running it (recursive: a hook
  // may remove itself).
  std::lock_guard<std::recursive_mutex> running(hooks_mu_);
}

void Engine::RejectBatch(const std::string& table, const std::string& source,
                         const std::shared_ptr<arrow::RecordBatch>& batch, const Status& reason,
                         double now) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++metrics_.rejected_batches;
    metrics_.rejected_records += batch->num_rows();
  }
  auto row = MakeRejectRow(now, table, source, reason, batch);
  const bool kept = row.ok() && rejects_->Write(*row, now).ok();
  RecordEvent(EngineEvent::Engine(Severity::kError, source,
                                  "Rejected " + std::to_string(batch->num_rows()) +
                                      " rows for table '" + table + "'" +
                                      (kept ? " (kept in rill_rejects)" : ""),
                                  reason.message(), now));
}

void Engine::IngestConnectors(double now, int64_t* records) {
  const int64_t cap = options_.max_records_per_tick;
  bool backlog = false;
  std::set<std::string> held;  // tables a sink holds back (SetTableBackpressure)
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [table, sources] : backpressure_) held.insert(table);
  }
  for (const auto& connector : Connectors()) {
    // Held back: its buffer fills and its overflow policy applies, as when the
    // tick is slow; nothing is polled, so nothing is committed either.
    if (!held.empty() && held.count(connector->target_table())) continue;
    auto polled = connector->PollAtMost(cap);  // cap 0: everything buffered
    if (!polled.ok()) {
      RecordEvent(EngineEvent::Engine(Severity::kError, connector->name(),
                                      "Connector '" + connector->name() + "' failed to read",
                                      polled.status().ToString(), now));
      continue;
    }
    if (cap > 0 && !backlog) {
      int64_t rows = 0;
      for (const auto& b : *polled) rows += b->num_rows();
      // Only a connector that gave its maximum can have rows left behind.
      backlog = rows >= cap && connector->stats().buffered_records > 0;
    }
    TakeConnectorRejects(*connector, now);
    NoteConnectorDrops(*connector, now);
    WritePolled(*connector, *polled, now, records);
    // Every row and reject of that Poll is now in its table or in rill_rejects.
    if (!commits_follow_checkpoints_.load() || connector->CommitsFollowTicks()) {
      connector->CommitApplied();
    }
    connector->Applied();
  }
  backlog_.store(backlog);
}

void Engine::WritePolled(Connector& connector,
                         const std::vector<std::shared_ptr<arrow::RecordBatch>>& batches,
                         double now, int64_t* records) {
  if (batches.empty()) return;
  auto table = FindTable(connector.target_table());
  if (!table) {
    // Create the target from the first batch, as get_or_create_table would.
    // (Without the operation column of change batches: row_ops.h.)
    auto schema = batches[0]->schema();
    if (const int op = schema->GetFieldIndex(kWriteOpColumn); op >= 0) {
      schema = *schema->RemoveField(op);
    }
    auto created = GetOrCreateTable(connector.target_table(), schema);
    if (!created.ok()) {
      for (const auto& b : batches) {
        RejectBatch(connector.target_table(), connector.name(), b, created.status(), now);
      }
      return;
    }
    table = *created;
    connector.SetTargetSchema(table->user_schema());
    RecordEvent(EngineEvent::Engine(
        Severity::kInfo, connector.name(),
        "Created table '" + table->name() + "' from connector data", "", now));
  }
  std::vector<std::shared_ptr<arrow::RecordBatch>> good;
  for (const auto& b : batches) {
    auto reconciled = table->Reconcile(b);
    if (!reconciled.ok()) {
      RejectBatch(table->name(), connector.name(), b, reconciled.status(), now);
      continue;
    }
    good.push_back(*reconciled);
  }
  if (good.empty()) return;
  auto written = table->Write(good, now);
  if (written.ok()) {
    *records += written->rows_in;
    return;
  }
  if (good.size() == 1) {
    RejectBatch(table->name(), connector.name(), good[0], written.status(), now);
    return;
  }
  // One batch spoiled the write (a delete sent to an append table, ...): the
  // others are kept, each written on its own, and only the bad ones rejected.
  for (const auto& b : good) {
    auto one = table->Write(b, now);
    if (!one.ok()) {
      RejectBatch(table->name(), connector.name(), b, one.status(), now);
      continue;
    }
    *records += one->rows_in;
  }
}

void Engine::ApplyRetention(double now) {
  std::vector<std::shared_ptr<LiveTable>> tables;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [name, t] : tables_) tables.push_back(t);
  }
  for (const auto& t : tables) {
    if (!t->retention()) continue;
    auto expired = t->ApplyRetention(now);
    if (!expired.ok()) {
      RecordEvent(EngineEvent::Engine(Severity::kError, t->name(),
                                      "Retention failed on table '" + t->name() + "'",
                                      expired.status().ToString(), now));
    }
  }
}

void Engine::RunDueTasks(double now) {
  std::vector<std::shared_ptr<Task>> tasks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [name, t] : tasks_) tasks.push_back(t);
  }
  for (const auto& task : tasks) {
    if (!task->Due(now)) continue;
    RunAndCountTask(*task, now);
  }
}

void Engine::RunAndCountTask(Task& task, double now) {
  task.MarkRun(now);
  const double t0 = SteadySeconds();
  const Status st = RunTask(task, now);
  const double duration = SteadySeconds() - t0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    task.stats.runs++;
    task.stats.last_duration_s = duration;
    task.stats.total_duration_s += duration;
    task.stats.last_run_at = now;
    task.FillStats(&task.stats);
    int64_t state_bytes = 0;
    for (const auto& [name, t] : tasks_) state_bytes += t->stats.state_bytes;
    task_state_bytes_.store(state_bytes);
    if (!st.ok()) {
      task.stats.errors++;
      task.stats.last_error = st.message();
    }
  }
  if (!st.ok()) {
    RecordEvent(EngineEvent::Engine(
        Severity::kError, task.name(), "Task '" + task.name() + "' failed: " + st.message(),
        "query: " + task.Describe() + "\nerror: " + st.ToString(), now));
  }
}

Status Engine::RunTask(Task& task, double now) {
  RILL_ASSIGN_OR_RAISE(TaskOutput output, task.Run(*sql_, now));
  if (!output.table) return Status::OK();
  auto table = FindTable(task.output_table());
  if (!table) {
    TableOptions options;
    options.primary_key = output.key.empty() ? task.primary_key() : output.key;
    options.retention = task.retention();
    if (task.retention() && task.primary_key().empty() && !output.replace) {
      options.mode = TableMode::kAppend;
    }
    auto schema = output.table->schema();
    if (int op = schema->GetFieldIndex(kWriteOpColumn); op >= 0) {
      RILL_ASSIGN_OR_RAISE(schema, schema->RemoveField(op));
    }
    RILL_ASSIGN_OR_RAISE(table, GetOrCreateTable(task.output_table(), schema, options));
  }
  return output.replace ? table->ReplaceState(output.table, now).status()
                        : table->Write(output.table, now).status();
}

std::vector<BusinessMetricValue> Engine::EvaluateBusinessMetrics(double now) {
  // Evaluated without the registry lock: evaluators may be Python and slow.
  std::vector<std::pair<std::string, BusinessMetric>> evaluators;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [name, fn] : business_metrics_) evaluators.emplace_back(name, fn);
  }
  std::vector<BusinessMetricValue> values;
  for (const auto& [name, fn] : evaluators) {
    BusinessMetricValue v{name, 0, false, ""};
    try {
      auto r = fn();
      if (r.ok()) {
        v.value = *r;
        v.ok = true;
      } else {
        v.error = r.status().ToString();
      }
    } catch (const std::exception& e) {
      v.error = e.what();
    } catch (...) {
      v.error = "unknown exception";
    }
    if (!v.ok) {
      RecordEvent(EngineEvent::Engine(Severity::kError, "metric:" + name,
                                      "Business metric '" + name + "' failed", v.error, now));
    }
    values.push_back(std::move(v));
  }
  return values;
}

void Engine::PublishMetrics(double now, double latency, int64_t records) {
  tick_log_.Record(latency);  // read by the metrics collector without a lock
  std::vector<BusinessMetricValue> values = EvaluateBusinessMetrics(now);
  const int64_t duckdb_bytes = sql_->MemoryUsage();
  const double wall = SteadySeconds();
  {
    std::lock_guard<std::mutex> lock(mu_);
    metrics_.timestamp = now;
    metrics_.ticks++;
    metrics_.total_records_processed += records;
    metrics_.last_batch_records = records;
    metrics_.last_batch_latency_s = latency;
    total_latency_s_ += latency;
    metrics_.avg_batch_latency_s = total_latency_s_ / metrics_.ticks;
    metrics_.max_batch_latency_s = std::max(metrics_.max_batch_latency_s, latency);
    // A running sum over the last second: O(1) per tick however fast ticks run.
    rate_window_.emplace_back(wall, records);
    rate_window_records_ += records;
    while (rate_window_.size() > 1 && wall - rate_window_.front().first > 1.0) {
      rate_window_records_ -= rate_window_.front().second;
      rate_window_.pop_front();
    }
    const int64_t window_records = rate_window_records_;
    const double span = std::max(wall - rate_window_.front().first,
                                 options_.trigger_interval_ms / 1000.0);
    metrics_.records_per_second = window_records / span;
    metrics_.arrow_allocated_bytes = ArrowAllocatedBytes();
    metrics_.arrow_peak_allocated_bytes = ArrowPeakBytes();
    metrics_.duckdb_memory_bytes = duckdb_bytes;
    metrics_.business_metrics = std::move(values);
    std::lock_guard<std::mutex> row_lock(metrics_row_mu_);  // a leaf lock, inside mu_
    metrics_row_ = metrics_;
  }
  // The row (23 one-value arrays and a new table version) is built when
  // rill_metrics is read, not on every tick (issue 16: the fixed cost of a
  // tick), unless someone subscribes to its versions.
  if (metrics_table_->has_subscribers()) {
    WriteMetricsRow();
  } else {
    metrics_table_->MarkStale();
  }
}

void Engine::WriteMetricsRow() {
  EngineMetrics m;
  {
    std::lock_guard<std::mutex> lock(metrics_row_mu_);
    m = metrics_row_;
  }
  auto row = MakeMetricsRow(m, host_sampler_->Latest());
  Status st =
      row.ok() ? metrics_table_->ReplaceState(*row, m.timestamp).status() : row.status();
  if (!st.ok()) Logger("engine")->error("updating rill_metrics failed: {}", st.ToString());
}

}  // namespace rill
