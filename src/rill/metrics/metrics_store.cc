// MetricsStore: construction, lifecycle, the collector and writer loops, the
// writer, and the public API. The collector cycle is in metrics_cycle.cc.
#include "rill/metrics/metrics_store.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include <arrow/api.h>
#include <fmt/format.h>

#include "rill/common/host_stats.h"
#include "rill/common/logging.h"
#include "rill/common/thread_priority.h"
#include "rill/engine/engine.h"
#include "rill/metrics/metrics_store_internal.h"

namespace rill {

using metrics_internal::ConfigSnapshot;
using metrics_internal::MetricsDb;
using metrics_internal::WriteBatch;

namespace {

/// Add the rules stored in rill_alert_rules (by an earlier run) to `store`.
/// Their firing state starts afresh.
Status RestoreAlertRules(MetricsStore* store) {
  RILL_ASSIGN_OR_RAISE(
      auto table,
      store->QueryMetrics("SELECT name, metric, op, threshold, cooldown_seconds, severity, "
                          "message, webhook, enabled FROM rill_alert_rules ORDER BY name"));
  RILL_ASSIGN_OR_RAISE(table, table->CombineChunks());
  auto text = [&](int col, int64_t row) -> std::string {
    auto array = std::static_pointer_cast<arrow::StringArray>(table->column(col)->chunk(0));
    return array->IsNull(row) ? std::string() : std::string(array->GetView(row));
  };
  auto number = [&](int col, int64_t row) {
    return std::static_pointer_cast<arrow::DoubleArray>(table->column(col)->chunk(0))->Value(row);
  };
  for (int64_t row = 0; row < table->num_rows(); ++row) {
    AlertRule rule;
    rule.name = text(0, row);
    rule.metric = text(1, row);
    RILL_ASSIGN_OR_RAISE(rule.op, ParseCompareOp(text(2, row)));
    rule.threshold = number(3, row);
    rule.cooldown_seconds = number(4, row);
    RILL_ASSIGN_OR_RAISE(rule.severity, ParseSeverity(text(5, row)));
    rule.message = text(6, row);
    if (std::string webhook = text(7, row); !webhook.empty()) {
      rule.webhook = webhook;
    }
    rule.enabled =
        std::static_pointer_cast<arrow::BooleanArray>(table->column(8)->chunk(0))->Value(row);
    RILL_RETURN_NOT_OK(store->AddAlertRule(std::move(rule)));
  }
  return Status::OK();
}

using SteadyClock = std::chrono::steady_clock;

double SteadySeconds() {
  return std::chrono::duration<double>(SteadyClock::now().time_since_epoch()).count();
}

SteadyClock::duration Seconds(double s) {
  return std::chrono::duration_cast<SteadyClock::duration>(std::chrono::duration<double>(s));
}

Status ValidateOptions(const MetricsOptions& o) {
  auto positive = [](double v) { return std::isfinite(v) && v > 0; };
  if (o.path.empty()) {
    return Status::Invalid("metrics path must not be empty (use \":memory:\")");
  }
  if (!positive(o.flush_interval_seconds)) {
    return Status::Invalid("flush_interval_seconds must be positive");
  }
  if (!positive(o.telemetry_retention_seconds) || !positive(o.alert_retention_seconds)) {
    return Status::Invalid("retention must be positive");
  }
  if (o.event_queue_capacity <= 0 || o.write_queue_capacity <= 0) {
    return Status::Invalid("queue capacities must be positive");
  }
  if (!std::isfinite(o.rate_limit_window_seconds) || o.rate_limit_window_seconds < 0) {
    return Status::Invalid("rate_limit_window_seconds must be >= 0");
  }
  if (!positive(o.latency_sample_interval_seconds) || !positive(o.latency_window_seconds)) {
    return Status::Invalid("latency sampling intervals must be positive");
  }
  if (o.max_kpi_history_rows < 0) {
    return Status::Invalid("max_kpi_history_rows must be >= 0");
  }
  if (!std::isfinite(o.query_timeout_seconds) || o.query_timeout_seconds < 0) {
    return Status::Invalid("query_timeout_seconds must be >= 0");
  }
  return Status::OK();
}

}  // namespace

Result<std::unique_ptr<MetricsStore>> MetricsStore::Make(Engine* engine,
                                                         MetricsOptions options) {
  RILL_RETURN_NOT_OK(ValidateOptions(options));
  RILL_ASSIGN_OR_RAISE(std::unique_ptr<MetricsDb> db, MetricsDb::Open(options.path));
  const bool restore = options.restore_alert_rules;
  std::unique_ptr<MetricsStore> store(
      new MetricsStore(engine, std::move(options), std::move(db)));
  if (restore) {
    RILL_RETURN_NOT_OK(RestoreAlertRules(store.get()));
  }
  return store;
}

MetricsStore::MetricsStore(Engine* engine, MetricsOptions options,
                           std::unique_ptr<MetricsDb> db)
    : engine_(engine),
      options_(std::move(options)),
      db_(std::move(db)),
      inbox_(std::make_shared<EventInbox>(options_.event_queue_capacity)),
      collector_(std::make_unique<CollectorState>(options_)) {
  if (options_.clock) {
    clock_ = options_.clock;
  } else if (engine_ != nullptr) {
    clock_ = [engine = engine_] { return engine->Now(); };
  } else {
    clock_ = UnixNow;
  }
  // One sampler per process view: the engine's (behind rill_metrics), or our own.
  host_sampler_ = engine_ != nullptr ? engine_->host_sampler() : std::make_shared<HostSampler>();
  if (engine_ != nullptr) {
    // The window starts with the last tick before the store was attached.
    const uint64_t recorded = engine_->tick_log().recorded();
    collector_->tick_cursor = recorded > 0 ? recorded - 1 : 0;
    engine_listener_id_ = engine_->AddEventListener(
        [inbox = inbox_](const EngineEvent& event) { inbox->Push(event); });
  }
}

MetricsStore::~MetricsStore() {
  if (engine_ != nullptr) {
    engine_->RemoveEventListener(engine_listener_id_);
  }
  if (running_.load()) {
    Stop();
  } else {
    // Never started (or stopped since): keep alerts recorded meanwhile.
    bool pending;
    {
      std::lock_guard<std::mutex> lock(inbox_->mu);
      pending = !inbox_->events.empty();
    }
    if (pending) {
      WriteQueued(Cycle(/*covers=*/0, /*final=*/true));
    }
  }
  // The KPIs' incremental views go with the store (after its last cycle).
  std::vector<std::string> views;
  {
    std::lock_guard<std::mutex> lock(state_mu_);
    for (const auto& [name, e] : kpis_) views.push_back(e->view);
  }
  for (const auto& view : views) DropKpiView(view);
}

// Lifecycle ----------------------------------------------------------------

Status MetricsStore::Start() {
  std::lock_guard<std::mutex> lifecycle(lifecycle_mu_);
  if (running_.load()) {
    return Status::OK();
  }
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    collector_stop_ = false;
    writer_stop_ = false;
  }
  running_.store(true);
  writer_thread_ = std::thread([this] { WriterLoop(); });
  collector_thread_ = std::thread([this] { CollectorLoop(); });
  return Status::OK();
}

void MetricsStore::Stop() {
  std::lock_guard<std::mutex> lifecycle(lifecycle_mu_);
  if (!running_.load()) {
    return;
  }
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    collector_stop_ = true;
  }
  collector_cv_.notify_all();
  kpi_deadlines_.InterruptAll();  // a KPI query running now ends (and fails)
  collector_thread_.join();  // runs a final cycle first
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    writer_stop_ = true;
  }
  writer_cv_.notify_all();
  writer_thread_.join();  // drains the queue first
  {
    // Under the lock, so that a Flush() between its check and its wait
    // cannot miss the notification.
    std::lock_guard<std::mutex> lock(queue_mu_);
    running_.store(false);
  }
  covered_cv_.notify_all();
}

Status MetricsStore::Flush() {
  if (std::this_thread::get_id() == collector_thread_id_.load()) {
    // From an alert listener: the collector cannot wait for itself, so run a
    // cycle here. It covers no earlier Flush() request (covers = 0).
    WriteQueued(Cycle(/*covers=*/0, /*final=*/false));
    return Status::OK();
  }
  if (!running_.load()) {
    uint64_t covers;
    {
      std::lock_guard<std::mutex> lock(queue_mu_);
      covers = ++flush_requested_;
    }
    WriteQueued(Cycle(covers, /*final=*/false));
    return Status::OK();
  }
  std::unique_lock<std::mutex> lock(queue_mu_);
  const uint64_t target = ++flush_requested_;
  collector_cv_.notify_all();
  covered_cv_.wait(lock, [&] { return flush_covered_ >= target || !running_.load(); });
  if (flush_covered_ < target) {
    return Status::Cancelled("metrics store stopped before the flush completed");
  }
  return Status::OK();
}

void MetricsStore::CollectorLoop() {
  // The collector (KPI queries, alert rules) and the writer (its DuckDB file)
  // are background work: on a busy machine the tick thread goes first.
  LowerThisThreadPriority();
  collector_thread_id_.store(std::this_thread::get_id());
  const double interval = options_.flush_interval_seconds;
  const double sample_interval = options_.latency_sample_interval_seconds;
  auto next_flush = SteadyClock::now() + Seconds(interval);
  auto next_sample = SteadyClock::now();
  while (true) {
    std::unique_lock<std::mutex> lock(queue_mu_);
    collector_cv_.wait_until(lock, std::min(next_flush, next_sample), [&] {
      return collector_stop_ || flush_requested_ > collector_->requests_seen;
    });
    if (collector_stop_) {
      break;
    }
    const auto now = SteadyClock::now();
    const bool requested = flush_requested_ > collector_->requests_seen;
    const uint64_t covers = flush_requested_;
    lock.unlock();
    if (requested || now >= next_flush) {
      collector_->requests_seen = covers;
      Enqueue(Cycle(covers, /*final=*/false));
      next_flush = SteadyClock::now() + Seconds(interval);
    } else if (now >= next_sample) {
      SampleLatency();
      next_sample = now + Seconds(sample_interval);
    }
  }
  uint64_t covers;
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    covers = flush_requested_;
  }
  Enqueue(Cycle(covers, /*final=*/true));
  collector_thread_id_.store(std::thread::id());
}

void MetricsStore::WriterLoop() {
  LowerThisThreadPriority();
  while (true) {
    std::unique_ptr<QueuedBatch> batch;
    {
      std::unique_lock<std::mutex> lock(queue_mu_);
      writer_cv_.wait(lock, [&] { return !queue_.empty() || writer_stop_; });
      if (queue_.empty()) {
        return;  // stopping, and everything queued is written
      }
      batch = std::move(queue_.front());
      queue_.pop_front();
    }
    WriteQueued(std::move(batch));
  }
}

void MetricsStore::Enqueue(std::unique_ptr<QueuedBatch> batch) {
  const int64_t rows = batch->batch.num_rows();
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    if (static_cast<int64_t>(queue_.size()) < options_.write_queue_capacity) {
      queue_.push_back(std::move(batch));
      writer_cv_.notify_one();
      return;
    }
  }
  // The writer is behind: drop this batch, count it, report it with the next
  // batch that gets through (Cycle adds the alert).
  {
    std::lock_guard<std::mutex> lock(cycle_mu_);
    collector_->unreported_dropped_batches += 1;
    collector_->unreported_dropped_rows += rows;
  }
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    ++stats_.batches_dropped;
    stats_.rows_dropped += rows;
  }
  MarkCovered(batch->covers);
}

// Writer -------------------------------------------------------------------

void MetricsStore::WriteQueued(std::unique_ptr<QueuedBatch> queued) {
  {
    std::lock_guard<std::mutex> write_lock(write_mu_);
    const double delay = writer_delay_s_.load();
    if (delay > 0) {
      std::this_thread::sleep_for(Seconds(delay));
    }
    const double started = SteadySeconds();
    Status status = db_->Write(queued->batch);
    Status prune_status;
    int64_t pruned = 0;
    if (queued->now - last_prune_ >= options_.flush_interval_seconds) {
      last_prune_ = queued->now;
      metrics_internal::PruneCutoffs cutoffs;
      cutoffs.telemetry_before = queued->now - options_.telemetry_retention_seconds;
      cutoffs.alerts_before = queued->now - options_.alert_retention_seconds;
      auto result = db_->Prune(cutoffs);
      prune_status = result.status();
      pruned = result.ok() ? *result : 0;
    }
    std::unique_ptr<ConfigSnapshot> config;
    {
      std::lock_guard<std::mutex> lock(state_mu_);
      if (config_changed_) {
        config = SnapshotConfigLocked();
        config_changed_ = false;
      }
    }
    Status config_status = config ? db_->WriteConfig(*config) : Status::OK();
    const double duration = SteadySeconds() - started;

    Status failure = !status.ok() ? status : !prune_status.ok() ? prune_status : config_status;
    {
      std::lock_guard<std::mutex> lock(stats_mu_);
      stats_.last_write_duration_s = duration;
      stats_.rows_pruned += pruned;
      if (status.ok()) {
        ++stats_.batches_written;
        stats_.rows_written += queued->batch.num_rows();
        stats_.alerts_written += static_cast<int64_t>(queued->batch.alerts.size());
      }
      if (!failure.ok()) {
        ++stats_.write_errors;
        stats_.last_write_error = failure.ToString();
      }
    }
    if (!failure.ok()) {
      Logger("metrics")->error("metrics database write failed: {}", failure.ToString());
      if (!config_status.ok()) {
        std::lock_guard<std::mutex> lock(state_mu_);
        config_changed_ = true;  // retry with the next batch
      }
    }
  }
  MarkCovered(queued->covers);
}

void MetricsStore::MarkCovered(uint64_t covers) {
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    flush_covered_ = std::max(flush_covered_, covers);
  }
  covered_cv_.notify_all();
}

std::unique_ptr<ConfigSnapshot> MetricsStore::SnapshotConfigLocked() const {
  auto config = std::make_unique<ConfigSnapshot>();
  for (const auto& [name, e] : kpis_) {
    metrics_internal::KpiQueryRow row;
    row.query = e->query;
    row.created_at = e->created_at;
    row.last_run_at = e->last_run_at;
    row.last_value = e->value;
    row.last_error = e->last_error;
    row.runs = e->runs;
    row.errors = e->errors;
    config->kpis.push_back(std::move(row));
  }
  for (const auto& [name, e] : rules_) {
    config->rules.push_back({e->rule, e->state});
  }
  return config;
}

// Alerts -------------------------------------------------------------------

Status MetricsStore::PushAlert(std::string_view message, std::string_view severity,
                               std::string_view detail) {
  RILL_ASSIGN_OR_RAISE(Severity parsed, ParseSeverity(severity));
  EngineEvent event =
      EngineEvent::User(parsed, std::string(message), std::string(detail), clock_());
  if (engine_ != nullptr) {
    engine_->RecordEvent(std::move(event));  // delivered back through the listener
  } else {
    inbox_->Push(event);
  }
  return Status::OK();
}

uint64_t MetricsStore::AddAlertListener(AlertListener listener) {
  std::lock_guard<std::mutex> lock(state_mu_);
  const uint64_t id = next_alert_listener_++;
  alert_listeners_[id] = std::make_shared<AlertListener>(std::move(listener));
  return id;
}

void MetricsStore::RemoveAlertListener(uint64_t id) {
  std::lock_guard<std::mutex> lock(state_mu_);
  alert_listeners_.erase(id);
}

Result<std::shared_ptr<arrow::Table>> MetricsStore::QueryMetrics(std::string_view sql) const {
  return db_->Query(sql);
}

Result<std::shared_ptr<arrow::Table>> MetricsStore::QueryMetrics(
    std::string_view sql, QueryInterrupt* interrupt) const {
  return db_->Query(sql, interrupt);
}

Result<std::vector<std::string>> MetricsStore::MetricsParameterTypes(
    std::string_view sql) const {
  return db_->ParameterTypes(sql);
}

Status MetricsStore::SetMemoryLimit(int64_t bytes) { return db_->SetMemoryLimit(bytes); }

Status MetricsStore::DefineHelpers(const std::vector<std::string>& statements) {
  std::lock_guard<std::mutex> lock(write_mu_);
  return db_->DefineHelpers(statements);
}

// KPI queries --------------------------------------------------------------

Status MetricsStore::AddKpiQuery(KpiQuery query) {
  RILL_RETURN_NOT_OK(query.Validate());
  auto entry = std::make_shared<KpiEntry>();
  entry->query = std::move(query);
  entry->created_at = clock_();
  std::string replaced_view;
  {
    std::lock_guard<std::mutex> lock(state_mu_);
    auto& slot = kpis_[entry->query.name];
    if (slot != nullptr) replaced_view = slot->view;
    slot = entry;
    config_changed_ = true;
  }
  DropKpiView(replaced_view);
  return Status::OK();
}

Status MetricsStore::AddKpiQuery(std::string name, std::string sql, double interval_seconds,
                                 std::string_view chart_type, std::string x_col,
                                 std::string y_col) {
  KpiQuery query;
  query.name = std::move(name);
  query.sql = std::move(sql);
  query.interval_seconds = interval_seconds;
  RILL_ASSIGN_OR_RAISE(query.chart_type, ParseChartType(chart_type));
  query.x_col = std::move(x_col);
  query.y_col = std::move(y_col);
  return AddKpiQuery(std::move(query));
}

Status MetricsStore::RemoveKpiQuery(const std::string& name) {
  std::string view;
  {
    std::lock_guard<std::mutex> lock(state_mu_);
    auto it = kpis_.find(name);
    if (it == kpis_.end()) {
      return Status::KeyError("no KPI query named '", name, "'");
    }
    view = it->second->view;
    kpis_.erase(it);
    config_changed_ = true;
  }
  DropKpiView(view);
  return Status::OK();
}

void MetricsStore::DropKpiView(const std::string& view) {
  if (view.empty() || engine_ == nullptr) return;
  (void)engine_->RemoveSqlTask(view);
  (void)engine_->DropTable(view);
}

std::vector<KpiSnapshot> MetricsStore::LatestKpis() const {
  std::vector<KpiSnapshot> out;
  std::lock_guard<std::mutex> lock(state_mu_);
  for (const auto& [name, e] : kpis_) {
    out.push_back({e->query, e->last_run_at, e->value, e->result, e->last_error, e->runs,
                   e->errors, e->maintenance});
  }
  return out;
}

// Alert rules --------------------------------------------------------------

Status MetricsStore::AddAlertRule(AlertRule rule) {
  RILL_RETURN_NOT_OK(rule.Validate());
  auto entry = std::make_shared<RuleEntry>();
  entry->rule = std::move(rule);
  entry->state.created_at = clock_();
  std::lock_guard<std::mutex> lock(state_mu_);
  rules_[entry->rule.name] = entry;
  config_changed_ = true;
  return Status::OK();
}

Status MetricsStore::AddAlertRule(std::string name, std::string metric, std::string_view op,
                                  double threshold, double cooldown_seconds,
                                  std::string_view severity,
                                  std::optional<std::string> webhook) {
  AlertRule rule;
  rule.name = std::move(name);
  rule.metric = std::move(metric);
  RILL_ASSIGN_OR_RAISE(rule.op, ParseCompareOp(op));
  rule.threshold = threshold;
  rule.cooldown_seconds = cooldown_seconds;
  RILL_ASSIGN_OR_RAISE(rule.severity, ParseSeverity(severity));
  rule.webhook = std::move(webhook);
  return AddAlertRule(std::move(rule));
}

Status MetricsStore::RemoveAlertRule(const std::string& name) {
  std::lock_guard<std::mutex> lock(state_mu_);
  if (rules_.erase(name) == 0) {
    return Status::KeyError("no alert rule named '", name, "'");
  }
  config_changed_ = true;
  return Status::OK();
}

std::vector<AlertRuleInfo> MetricsStore::AlertRules() const {
  std::vector<AlertRuleInfo> out;
  std::lock_guard<std::mutex> lock(state_mu_);
  for (const auto& [name, e] : rules_) {
    out.push_back({e->rule, e->state});
  }
  return out;
}

std::map<std::string, double> MetricsStore::CurrentValues() const {
  std::lock_guard<std::mutex> lock(state_mu_);
  return current_values_;
}

// Introspection ------------------------------------------------------------

MetricsStoreStats MetricsStore::stats() const {
  MetricsStoreStats out;
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    out = stats_;
  }
  {
    std::lock_guard<std::mutex> lock(inbox_->mu);
    out.events_received = inbox_->received;
    out.events_dropped = inbox_->dropped;
    out.event_queue_depth = static_cast<int64_t>(inbox_->events.size());
  }
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    out.write_queue_depth = static_cast<int64_t>(queue_.size());
  }
  return out;
}

void MetricsStore::SetWriterDelayForTesting(double seconds) { writer_delay_s_.store(seconds); }

}  // namespace rill
