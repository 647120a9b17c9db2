#include "rill/metrics/metrics_store.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include <arrow/api.h>
#include <fmt/format.h>

#include "rill/common/logging.h"
#include "rill/connector/connector.h"
#include "rill/engine/engine.h"
#include "rill/metrics/alert_limiter.h"
#include "rill/metrics/host_stats.h"
#include "rill/metrics/latency_window.h"
#include "rill/metrics/metrics_db_internal.h"

namespace rill {

using metrics_internal::AlertRow;
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

AlertRecord ToRecord(const AlertRow& row) {
  return AlertRecord{row.ts,   row.severity, row.source, row.component, row.message,
                     row.detail, row.rule,   row.value,  row.threshold, row.count};
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
  return Status::OK();
}

}  // namespace

// Engine events waiting for the collector. Shared with the engine listener so
// that a listener call racing with the store's destruction stays safe.
struct MetricsStore::EventInbox {
  explicit EventInbox(int64_t capacity) : capacity(capacity) {}

  // Called on the tick thread (and others): O(1), never blocks on I/O.
  void Push(const EngineEvent& event) {
    std::lock_guard<std::mutex> lock(mu);
    ++received;
    if (static_cast<int64_t>(events.size()) >= capacity) {
      ++dropped;
      return;
    }
    events.push_back(event);
  }

  std::deque<EngineEvent> Drain() {
    std::deque<EngineEvent> out;
    std::lock_guard<std::mutex> lock(mu);
    out.swap(events);
    return out;
  }

  const int64_t capacity;
  std::mutex mu;
  std::deque<EngineEvent> events;  // guarded by mu
  int64_t received = 0;            // guarded by mu
  int64_t dropped = 0;             // guarded by mu
};

struct MetricsStore::QueuedBatch {
  WriteBatch batch;
  uint64_t covers = 0;  // Flush() requests satisfied once this batch is handled
  double now = 0;
};

struct MetricsStore::KpiEntry {
  KpiQuery query;
  double created_at = 0;
  std::optional<double> last_run_at;
  std::optional<double> value;
  std::shared_ptr<arrow::Table> result;
  std::string last_error;
  int64_t runs = 0;
  int64_t errors = 0;
};

struct MetricsStore::RuleEntry {
  AlertRule rule;
  AlertRuleState state;
};

struct MetricsStore::CollectorState {
  CollectorState(const MetricsOptions& o)
      : latency(o.latency_window_seconds, /*max_samples=*/100000),
        limiter(o.rate_limit_window_seconds) {}

  CpuSampler cpu;
  LatencyWindow latency;
  AlertRateLimiter limiter;
  int64_t last_ticks = -1;
  uint64_t requests_seen = 0;
  int64_t unreported_dropped_rows = 0;
  int64_t unreported_dropped_batches = 0;
};

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
  collector_->cpu.Sample();  // prime, so the first flush reports a percentage
  if (engine_ != nullptr) {
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
    return;
  }
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
}

void MetricsStore::WriterLoop() {
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

// Collector ----------------------------------------------------------------

void MetricsStore::SampleLatency() {
  if (engine_ == nullptr) {
    return;
  }
  const EngineMetrics m = engine_->GetMetrics();
  std::lock_guard<std::mutex> lock(cycle_mu_);
  if (m.ticks != collector_->last_ticks && m.ticks > 0) {
    collector_->latency.Add(clock_(), m.last_latency_s);
  }
  collector_->last_ticks = m.ticks;
}

std::unique_ptr<MetricsStore::QueuedBatch> MetricsStore::Cycle(uint64_t covers, bool final) {
  std::lock_guard<std::mutex> cycle_lock(cycle_mu_);
  const double started = SteadySeconds();
  const double now = clock_();
  auto out = std::make_unique<QueuedBatch>();
  out->covers = covers;
  out->now = now;
  WriteBatch& batch = out->batch;
  CollectorState& c = *collector_;

  // System metrics, keyed by rill_telemetry column names.
  std::map<std::string, double> values;
  const CpuSampler::Reading cpu = c.cpu.Sample();
  values["cpu_percent"] = cpu.host_percent;
  values["process_cpu_percent"] = cpu.process_percent;
  values["process_rss_bytes"] = static_cast<double>(ProcessRssBytes());
  const SystemMemory memory = ReadSystemMemory();
  values["system_memory_used_bytes"] = static_cast<double>(memory.used_bytes);
  values["system_memory_total_bytes"] = static_cast<double>(memory.total_bytes);
  values["metrics_duckdb_memory_bytes"] = static_cast<double>(db_->MemoryUsage());
  values["metrics_db_file_bytes"] = static_cast<double>(DatabaseFileBytes(options_.path));

  std::map<std::string, double> business;
  if (engine_ != nullptr) {
    const EngineMetrics m = engine_->GetMetrics();
    if (m.ticks != c.last_ticks && m.ticks > 0) {
      c.latency.Add(now, m.last_latency_s);
    }
    c.last_ticks = m.ticks;
    c.latency.Expire(now);
    values["arrow_allocated_bytes"] = static_cast<double>(m.arrow_allocated_bytes);
    values["arrow_pool_peak_bytes"] = static_cast<double>(m.arrow_max_memory);
    values["live_duckdb_memory_bytes"] = static_cast<double>(m.duckdb_memory_bytes);
    values["rows_per_second"] = m.rows_per_second;
    values["tick_latency_last_s"] = m.last_latency_s;
    values["tick_latency_avg_s"] = c.latency.size() > 0 ? c.latency.Mean() : m.avg_latency_s;
    values["tick_latency_p99_s"] = c.latency.Quantile(0.99);
    values["tick_latency_max_s"] = c.latency.Max();
    values["tick_latency_samples"] = static_cast<double>(c.latency.size());
    values["ticks"] = static_cast<double>(m.ticks);
    values["records_processed"] = static_cast<double>(m.records_processed);
    values["rejected_batches"] = static_cast<double>(m.rejected_batches);
    values["rejected_records"] = static_cast<double>(m.rejected_records);
    values["engine_errors"] = static_cast<double>(m.errors);
    values["memory_warnings"] = static_cast<double>(m.memory_warnings);

    int64_t table_count = 0, table_rows = 0, table_bytes = 0;
    for (const std::string& name : engine_->TableNames()) {
      auto table = engine_->GetTable(name);
      if (!table.ok()) {
        continue;  // dropped meanwhile
      }
      const auto version = (*table)->snapshot();
      metrics_internal::TableStatRow row{now, name, version->num_rows(), version->nbytes(),
                                         static_cast<int64_t>(version->version())};
      values["table." + name + ".rows"] = static_cast<double>(row.rows);
      values["table." + name + ".bytes"] = static_cast<double>(row.bytes);
      ++table_count;
      table_rows += row.rows;
      table_bytes += row.bytes;
      batch.tables.push_back(std::move(row));
    }
    values["table_count"] = static_cast<double>(table_count);
    values["table_rows"] = static_cast<double>(table_rows);
    values["table_bytes"] = static_cast<double>(table_bytes);

    int64_t buffered = 0, dropped = 0, connector_errors = 0;
    for (const auto& connector : engine_->Connectors()) {
      const ConnectorStats s = connector->stats();
      const std::string prefix = "connector." + connector->name() + ".";
      values[prefix + "buffered_records"] = static_cast<double>(s.buffered_records);
      values[prefix + "dropped_records"] = static_cast<double>(s.dropped_records);
      values[prefix + "errors"] = static_cast<double>(s.errors);
      buffered += s.buffered_records;
      dropped += s.dropped_records;
      connector_errors += s.errors;
      batch.connectors.push_back({now, connector->name(), connector->target_table(),
                                  s.buffered_records, s.buffered_bytes, s.pushed_records,
                                  s.dropped_records, s.refused_records, s.drained_records,
                                  s.errors});
    }
    values["connector_buffered_records"] = static_cast<double>(buffered);
    values["connector_dropped_records"] = static_cast<double>(dropped);
    values["connector_errors"] = static_cast<double>(connector_errors);

    int64_t task_runs = 0, task_errors = 0;
    for (const auto& [name, s] : engine_->TaskStatistics()) {
      const std::string prefix = "task." + name + ".";
      values[prefix + "runs"] = static_cast<double>(s.runs);
      values[prefix + "errors"] = static_cast<double>(s.errors);
      values[prefix + "last_duration_s"] = s.last_duration_s;
      task_runs += s.runs;
      task_errors += s.errors;
      batch.tasks.push_back({now, name, s.runs, s.errors, s.last_duration_s,
                             s.runs > 0 ? s.total_duration_s / static_cast<double>(s.runs) : 0,
                             s.last_error});
    }
    values["task_runs"] = static_cast<double>(task_runs);
    values["task_errors"] = static_cast<double>(task_errors);

    for (const BusinessMetricValue& b : m.business_metrics) {
      if (b.ok) {
        business[b.name] = b.value;
        batch.business.push_back({now, b.name, b.value});
      }
    }
  }

  // KPI queries that are due run outside the state lock: they may take a while.
  std::vector<std::shared_ptr<KpiEntry>> due;
  {
    std::lock_guard<std::mutex> lock(state_mu_);
    for (const auto& [name, entry] : kpis_) {
      if (!entry->last_run_at.has_value() ||
          now - *entry->last_run_at >= entry->query.interval_seconds) {
        due.push_back(entry);
      }
    }
  }
  std::vector<EngineEvent> kpi_failures;
  int64_t kpi_runs = 0, kpi_errors = 0;
  for (const auto& entry : due) {
    Result<std::shared_ptr<arrow::Table>> result =
        engine_ != nullptr ? engine_->Query(entry->query.sql)
                           : Result<std::shared_ptr<arrow::Table>>(
                                 Status::Invalid("no engine attached to the metrics store"));
    std::optional<double> value;
    Status status = result.status();
    if (status.ok()) {
      auto extracted = ExtractKpiValue(**result, entry->query.y_col);
      status = extracted.status();
      if (status.ok()) {
        value = *extracted;
        auto cells = KpiCells(*result, options_.max_kpi_history_rows);
        if (cells.ok()) {
          for (KpiCell& cell : *cells) {
            batch.kpis.push_back({now, entry->query.name, std::move(cell)});
          }
        } else {
          status = cells.status();
        }
      }
    }
    ++kpi_runs;
    std::lock_guard<std::mutex> lock(state_mu_);
    entry->last_run_at = now;
    ++entry->runs;
    if (status.ok()) {
      entry->value = value;
      entry->result = *result;
      entry->last_error.clear();
    } else {
      ++entry->errors;
      ++kpi_errors;
      entry->last_error = status.message();
      EngineEvent event;
      event.ts = now;
      event.severity = Severity::kError;
      event.source = "engine";
      event.component = "kpi:" + entry->query.name;
      event.message = "KPI query '" + entry->query.name + "' failed";
      event.detail = status.ToString() + "\nSQL: " + entry->query.sql;
      kpi_failures.push_back(std::move(event));
    }
  }
  for (EngineEvent& event : kpi_failures) {
    if (engine_ != nullptr) {
      engine_->RecordEvent(std::move(event));  // comes back through the inbox
    } else {
      inbox_->Push(event);
    }
  }

  // Alert rules see system metrics, then business metrics, then KPI values
  // (later sources win on a name clash).
  std::vector<AlertRow> alerts;
  std::vector<std::shared_ptr<AlertListener>> listeners;
  int64_t rule_fires = 0;
  {
    std::lock_guard<std::mutex> lock(state_mu_);
    for (const auto& [name, v] : business) {
      values[name] = v;
    }
    for (const auto& [name, entry] : kpis_) {
      if (entry->value.has_value()) {
        values[name] = *entry->value;
      }
    }
    for (auto& [name, entry] : rules_) {
      auto it = values.find(entry->rule.metric);
      std::optional<double> value;
      if (it != values.end()) {
        value = it->second;
      }
      if (!EvaluateRule(entry->rule, value, now, &entry->state)) {
        continue;
      }
      ++rule_fires;
      AlertRow row;
      row.ts = now;
      row.severity = entry->rule.severity;
      row.source = "rule";
      row.component = entry->rule.metric;
      row.message = RuleAlertMessage(entry->rule, *value);
      row.detail = fmt::format("rule '{}': {} = {} {} threshold {}", name, entry->rule.metric,
                               *value, CompareOpName(entry->rule.op), entry->rule.threshold);
      row.rule = name;
      row.value = *value;
      row.threshold = entry->rule.threshold;
      alerts.push_back(std::move(row));
    }
    current_values_ = values;
    config_changed_ = config_changed_ || !due.empty() || !rules_.empty();
    for (const auto& [id, listener] : alert_listeners_) {
      listeners.push_back(listener);
    }
  }

  // Queued events become alerts, repeats folded by the rate limiter (engine
  // events only: user and rule alerts are deliberate).
  std::vector<CountedAlert> counted;
  for (const EngineEvent& event : inbox_->Drain()) {
    const double ts = event.ts > 0 ? event.ts : now;
    if (event.source == "engine") {
      c.limiter.Offer(event, ts, &counted);
    } else {
      counted.push_back({event, 1});
    }
  }
  c.limiter.Sweep(now, &counted);
  if (final) {
    c.limiter.FlushAll(&counted);
  }
  for (CountedAlert& a : counted) {
    AlertRow row;
    row.ts = a.event.ts > 0 ? a.event.ts : now;
    row.severity = a.event.severity;
    row.source = std::move(a.event.source);
    row.component = std::move(a.event.component);
    row.message = std::move(a.event.message);
    row.detail = std::move(a.event.detail);
    row.rule = std::move(a.event.rule);
    row.count = a.count;
    alerts.push_back(std::move(row));
  }
  if (c.unreported_dropped_batches > 0) {
    AlertRow row;
    row.ts = now;
    row.severity = Severity::kWarning;
    row.source = "engine";
    row.component = "metrics";
    row.message = "metrics writer fell behind; telemetry and alerts were dropped";
    row.detail = fmt::format("dropped {} rows in {} flush batches (write queue capacity {})",
                             c.unreported_dropped_rows, c.unreported_dropped_batches,
                             options_.write_queue_capacity);
    row.count = c.unreported_dropped_batches;
    alerts.push_back(std::move(row));
    c.unreported_dropped_rows = 0;
    c.unreported_dropped_batches = 0;
  }
  for (const AlertRow& row : alerts) {
    if (row.source == "rule") {
      const auto level = row.severity == Severity::kError     ? spdlog::level::err
                         : row.severity == Severity::kWarning ? spdlog::level::warn
                                                              : spdlog::level::info;
      Logger("metrics")->log(level, "rule alert [{}] {}", row.rule, row.message);
    }
    for (const auto& listener : listeners) {
      try {
        (*listener)(ToRecord(row));
      } catch (const std::exception& e) {
        Logger("metrics")->error("alert listener threw: {}", e.what());
      }
    }
  }
  batch.alerts = std::move(alerts);

  // The telemetry row, with the store's own pressure counters.
  int64_t events_dropped;
  {
    std::lock_guard<std::mutex> lock(inbox_->mu);
    events_dropped = inbox_->dropped;
  }
  int64_t queue_depth;
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    queue_depth = static_cast<int64_t>(queue_.size());
  }
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    values["metrics_events_dropped"] = static_cast<double>(events_dropped);
    values["metrics_rows_dropped"] = static_cast<double>(stats_.rows_dropped);
    values["metrics_queue_depth"] = static_cast<double>(queue_depth);
    ++stats_.flushes;
    stats_.kpi_runs += kpi_runs;
    stats_.kpi_errors += kpi_errors;
    stats_.rule_fires += rule_fires;
    stats_.alerts_suppressed = c.limiter.suppressed();
    stats_.last_flush_duration_s = SteadySeconds() - started;
  }
  metrics_internal::TelemetryRow telemetry;
  telemetry.ts = now;
  for (const auto& column : metrics_internal::TelemetryColumns()) {
    auto it = values.find(column.name);
    telemetry.values.push_back(it == values.end() ? std::nullopt
                                                  : std::optional<double>(it->second));
  }
  batch.telemetry = std::move(telemetry);
  return out;
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
  collector_->unreported_dropped_batches += 1;
  collector_->unreported_dropped_rows += rows;
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
  EngineEvent event;
  event.ts = clock_();
  event.severity = parsed;
  event.source = "user";
  event.message = std::string(message);
  event.detail = std::string(detail);
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

// KPI queries --------------------------------------------------------------

Status MetricsStore::AddKpiQuery(KpiQuery query) {
  RILL_RETURN_NOT_OK(query.Validate());
  auto entry = std::make_shared<KpiEntry>();
  entry->query = std::move(query);
  entry->created_at = clock_();
  std::lock_guard<std::mutex> lock(state_mu_);
  kpis_[entry->query.name] = entry;
  config_changed_ = true;
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
  std::lock_guard<std::mutex> lock(state_mu_);
  if (kpis_.erase(name) == 0) {
    return Status::KeyError("no KPI query named '", name, "'");
  }
  config_changed_ = true;
  return Status::OK();
}

std::vector<KpiSnapshot> MetricsStore::LatestKpis() const {
  std::vector<KpiSnapshot> out;
  std::lock_guard<std::mutex> lock(state_mu_);
  for (const auto& [name, e] : kpis_) {
    out.push_back({e->query, e->last_run_at, e->value, e->result, e->last_error, e->runs,
                   e->errors});
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
