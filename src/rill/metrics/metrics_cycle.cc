// MetricsStore's collector cycle: sample → run due KPI queries → evaluate rules
// → turn queued events into rate-limited alerts → finish the telemetry row;
// then, with no lock held, call the alert listeners. Runs on the collector
// thread (or on the caller of Flush() when the store is not running).
#include <algorithm>
#include <chrono>

#include <arrow/api.h>
#include <fmt/format.h>

#include "rill/common/host_stats.h"
#include "rill/common/logging.h"
#include "rill/connector/connector.h"
#include "rill/sink/sink_set.h"
#include "rill/engine/engine.h"
#include "rill/engine/task.h"
#include "rill/metrics/metrics_store_internal.h"
#include "rill/sql/sql_engine.h"

namespace rill {

using metrics_internal::AlertRow;
using metrics_internal::WriteBatch;

namespace {

double SteadySeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

AlertRecord ToRecord(const AlertRow& row) {
  return AlertRecord{row.ts,   row.severity, row.source, row.component, row.message,
                     row.detail, row.rule,   row.value,  row.threshold, row.count};
}

AlertRow ToRow(EngineEvent&& event, int64_t count, double now) {
  AlertRow row;
  row.ts = event.ts > 0 ? event.ts : now;
  row.severity = event.severity;
  row.source = event.source;
  row.component = std::move(event.component);
  row.message = std::move(event.message);
  row.detail = std::move(event.detail);
  row.rule = std::move(event.rule);
  row.count = count;
  return row;
}

double D(int64_t v) { return static_cast<double>(v); }

}  // namespace

std::unique_ptr<MetricsStore::QueuedBatch> MetricsStore::Cycle(uint64_t covers, bool final) {
  auto out = std::make_unique<QueuedBatch>();
  {
    std::lock_guard<std::mutex> cycle_lock(cycle_mu_);
    const double started = SteadySeconds();
    const double now = clock_();
    out->covers = covers;
    out->now = now;
    WriteBatch& batch = out->batch;
    CycleCounts counts;
    // System metrics, keyed by rill_telemetry column names (and rule metric names).
    std::map<std::string, double> values;
    SampleLocked(now, &values, &batch);
    RunDueKpis(now, &batch, &counts);
    std::vector<AlertRow> alerts = EvaluateRules(now, &values, &counts);
    DrainEventsLocked(now, final, &alerts);
    for (const AlertRow& row : alerts) {
      if (row.source == EventSource::kRule) {
        const auto level = row.severity == Severity::kError     ? spdlog::level::err
                           : row.severity == Severity::kWarning ? spdlog::level::warn
                                                                : spdlog::level::info;
        Logger("metrics")->log(level, "rule alert [{}] {}", row.rule, row.message);
      }
    }
    batch.alerts = std::move(alerts);
    FinishTelemetryLocked(now, started, counts, &values, &batch);
  }
  // No lock held: a listener may call back into the store.
  NotifyAlertListeners(out->batch.alerts);
  return out;
}

void MetricsStore::SampleLatency() {
  if (engine_ == nullptr) {
    return;
  }
  std::lock_guard<std::mutex> lock(cycle_mu_);
  DrainTickLogLocked(clock_());
}

void MetricsStore::DrainTickLogLocked(double now) {
  CollectorState& c = *collector_;
  c.lost_ticks += engine_->tick_log().ReadSince(
      &c.tick_cursor, [&](double seconds) { c.latency.Add(now, seconds); });
}

void MetricsStore::SampleLocked(double now, std::map<std::string, double>* values,
                                WriteBatch* batch) {
  // Half a flush interval: the engine's own (per-second) readings in between
  // are reused rather than taken twice.
  const HostSample host = host_sampler_->Sample(options_.flush_interval_seconds / 2);
  std::map<std::string, double>& v = *values;
  v["cpu_usage"] = host.cpu_usage_percent;
  v["process_cpu_percent"] = host.process_cpu_percent;
  v["process_rss_bytes"] = D(host.process_rss_bytes);
  v["used_memory"] = D(host.used_memory_bytes);
  v["total_memory"] = D(host.total_memory_bytes);
  // Rule-watchable only (not a rill_telemetry column): the dashboard's "memory %".
  v["memory_percent"] = host.total_memory_bytes > 0
                            ? 100.0 * D(host.used_memory_bytes) / D(host.total_memory_bytes)
                            : 0.0;
  v["metrics_duckdb_memory_bytes"] = D(db_->MemoryUsage());
  v["metrics_db_file_bytes"] = D(metrics_internal::DatabaseFileBytes(options_.path));
  if (engine_ != nullptr) {
    SampleEngineLocked(now, values, batch);
  }
}

void MetricsStore::SampleEngineLocked(double now, std::map<std::string, double>* values,
                                      WriteBatch* batch) {
  std::map<std::string, double>& v = *values;
  CollectorState& c = *collector_;
  const EngineMetrics m = engine_->GetMetrics();
  DrainTickLogLocked(now);
  c.latency.Expire(now);
  v["arrow_allocated_bytes"] = D(m.arrow_allocated_bytes);
  v["arrow_peak_allocated_bytes"] = D(m.arrow_peak_allocated_bytes);
  v["duckdb_memory_bytes"] = D(m.duckdb_memory_bytes);
  v["records_per_second"] = m.records_per_second;
  v["last_batch_latency_ms"] = m.last_batch_latency_s * 1e3;
  v["avg_batch_latency_ms"] = m.avg_batch_latency_s * 1e3;
  v["window_avg_batch_latency_ms"] = c.latency.Mean() * 1e3;
  v["window_p99_batch_latency_ms"] = c.latency.Quantile(0.99) * 1e3;
  v["window_max_batch_latency_ms"] = c.latency.Max() * 1e3;
  v["window_batch_latency_samples"] = D(static_cast<int64_t>(c.latency.size()));
  v["ticks"] = D(m.ticks);
  v["total_records_processed"] = D(m.total_records_processed);
  v["rejected_batches"] = D(m.rejected_batches);
  v["rejected_records"] = D(m.rejected_records);
  v["engine_errors"] = D(m.errors);
  v["memory_warnings"] = D(m.memory_warnings);

  int64_t table_count = 0, table_rows = 0, table_bytes = 0;
  for (const std::string& name : engine_->TableNames()) {
    auto table = engine_->GetTable(name);
    if (!table.ok()) {
      continue;  // dropped meanwhile
    }
    const auto version = (*table)->snapshot();
    metrics_internal::TableStatRow row{now, name, version->num_rows(), version->nbytes(),
                                       static_cast<int64_t>(version->version())};
    v["table." + name + ".rows"] = D(row.rows);
    v["table." + name + ".bytes"] = D(row.bytes);
    ++table_count;
    table_rows += row.rows;
    table_bytes += row.bytes;
    batch->tables.push_back(std::move(row));
  }
  v["table_count"] = D(table_count);
  v["table_rows"] = D(table_rows);
  v["table_bytes"] = D(table_bytes);

  int64_t buffered = 0, dropped = 0, connector_errors = 0;
  for (const auto& connector : engine_->Connectors()) {
    const ConnectorStats s = connector->stats();
    const std::string prefix = "connector." + connector->name() + ".";
    v[prefix + "buffered_records"] = D(s.buffered_records);
    v[prefix + "dropped_records"] = D(s.dropped_records);
    v[prefix + "errors"] = D(s.errors);
    buffered += s.buffered_records;
    dropped += s.dropped_records;
    connector_errors += s.errors;
    batch->connectors.push_back({now, connector->name(), connector->target_table(),
                                 s.buffered_records, s.buffered_bytes, s.pushed_records,
                                 s.dropped_records, s.refused_records, s.drained_records,
                                 s.errors, s.received_records, s.parsed_records,
                                 s.rejected_records, s.lag, s.lag_bytes, s.snapshot_rows,
                                 s.snapshot_rows_total});
    if (s.snapshot_done >= 0) {  // change data capture: slot lag, snapshot progress
      v[prefix + "lag_bytes"] = D(s.lag_bytes);
      v[prefix + "snapshot_rows"] = D(s.snapshot_rows);
    }
  }
  v["connector_buffered_records"] = D(buffered);
  v["connector_dropped_records"] = D(dropped);
  v["connector_errors"] = D(connector_errors);

  int64_t sink_rows = 0, sink_errors = 0, sink_lag = 0;
  for (const auto& sink : SinkSet::For(engine_).List()) {
    const SinkStats s = sink->stats();
    const std::string prefix = "sink." + sink->name() + ".";
    v[prefix + "rows_written"] = D(s.rows_written);
    v[prefix + "errors"] = D(s.errors);
    v[prefix + "dropped_rows"] = D(s.dropped_rows);
    v[prefix + "lag_versions"] = D(s.lag_versions);
    v[prefix + "lag_seconds"] = s.lag_seconds;
    v[prefix + "backpressure"] = s.backpressure ? 1.0 : 0.0;
    sink_rows += s.rows_written;
    sink_errors += s.errors;
    sink_lag = std::max(sink_lag, s.lag_versions);
    batch->sinks.push_back({now, sink->name(), sink->type(), sink->options().table,
                            s.rows_written, s.batches, s.bytes, s.errors, s.retries,
                            s.dropped_rows, s.snapshots,
                            static_cast<int64_t>(s.committed_version), s.lag_versions,
                            s.lag_seconds, s.backpressure});
  }
  v["sink_rows_written"] = D(sink_rows);
  v["sink_errors"] = D(sink_errors);
  v["sink_max_lag_versions"] = D(sink_lag);

  int64_t task_runs = 0, task_errors = 0;
  for (const auto& [name, s] : engine_->TaskStatistics()) {
    const std::string prefix = "task." + name + ".";
    v[prefix + "runs"] = D(s.runs);
    v[prefix + "errors"] = D(s.errors);
    v[prefix + "last_duration_s"] = s.last_duration_s;
    v[prefix + "state_bytes"] = D(s.state_bytes);
    task_runs += s.runs;
    task_errors += s.errors;
    batch->tasks.push_back({now, name, s.runs, s.errors, s.last_duration_s,
                            s.runs > 0 ? s.total_duration_s / D(s.runs) : 0, s.last_error,
                            s.maintenance, s.state_bytes});
  }
  v["task_runs"] = D(task_runs);
  v["task_errors"] = D(task_errors);

  // Business metrics: rule metric names, not telemetry columns (later sources
  // win on a name clash: business metrics over system metrics).
  for (const BusinessMetricValue& b : m.business_metrics) {
    if (b.ok) {
      v[b.name] = b.value;
      batch->business.push_back({now, b.name, b.value});
    }
  }
}

Result<std::shared_ptr<arrow::Table>> MetricsStore::RunKpiQuery(const std::string& sql) {
  if (engine_ == nullptr) {
    return Status::Invalid("no engine attached to the metrics store");
  }
  QueryInterrupt interrupt;
  QueryDeadlines::Scope deadline(&kpi_deadlines_, options_.query_timeout_seconds, &interrupt);
  auto result = engine_->sql().Query(sql, &interrupt);
  if (deadline.Fired() && !result.ok()) {
    return Status::Cancelled("the KPI query ran longer than query_timeout_seconds (",
                             options_.query_timeout_seconds, " s) and was interrupted");
  }
  if (!result.ok() && SqlErrorType(result.status()) == "Catalog") {
    // Fails again at once (binding), through the engine, which says which
    // declared tables the query may be missing.
    return engine_->Query(sql);
  }
  return result;
}

// A KPI reads its incremental view only if the view's task ran this recently.
constexpr double kKpiViewMaxAgeSeconds = 1.0;

Result<std::shared_ptr<arrow::Table>> MetricsStore::RunKpi(KpiEntry& entry, double now) {
  std::string view, maintenance;
  {
    std::lock_guard<std::mutex> lock(state_mu_);
    view = entry.view;
    maintenance = entry.maintenance;
  }
  if (engine_ != nullptr && maintenance.empty()) {
    // Decide once the query binds: kept up to date by an engine task, or re-run.
    Status st = ScheduledSqlTask::CheckIncremental(engine_->sql(), entry.query.sql);
    if (st.ok()) {
      const std::string name = "__rill_kpi_" + entry.query.name;
      (void)engine_->RemoveSqlTask(name);  // a leftover of an earlier store
      Status added = engine_->AddSqlTask(std::make_shared<ScheduledSqlTask>(
          name, entry.query.sql, name, entry.query.interval_seconds, std::vector<std::string>{},
          /*use_prepared_statements=*/false, std::nullopt, IncrementalMode::kOn));
      if (added.ok()) {
        view = name;
        maintenance = "incremental";
      } else {
        maintenance = "recompute (" + added.message() + ")";
      }
    } else if (st.message().find("is not maintainable") != std::string::npos) {
      maintenance = "recompute (" + st.message() + ")";
      Logger("metrics")->info("KPI '{}' re-runs its query every {} s: {}", entry.query.name,
                              entry.query.interval_seconds, st.message());
    }
    std::lock_guard<std::mutex> lock(state_mu_);
    entry.view = view;
    entry.maintenance = maintenance;
  }
  if (!view.empty()) {
    auto stats = engine_->TaskStatistics();
    auto it = stats.find(view);
    // The view is as of the task's last run: read it while the engine ticks
    // (the task ran within the last second), else re-run the query (an engine
    // that is not stepped would leave the view behind its tables).
    if (it != stats.end() && it->second.maintenance == "incremental" && it->second.errors == 0 &&
        it->second.runs > 0 && now - it->second.last_run_at <= kKpiViewMaxAgeSeconds &&
        engine_->GetTable(view).ok()) {
      return engine_->sql().Query("SELECT * EXCLUDE (z_insert_ts, z_update_ts) FROM " +
                                  QuoteIdentifier(view));
    }
  }
  return RunKpiQuery(entry.query.sql);
}

void MetricsStore::RunDueKpis(double now, WriteBatch* batch, CycleCounts* counts) {
  // Due queries run outside the state lock: they may take a while.
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
  std::vector<EngineEvent> failures;
  for (const auto& entry : due) {
    Result<std::shared_ptr<arrow::Table>> result = RunKpi(*entry, now);
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
            batch->kpis.push_back({now, entry->query.name, std::move(cell)});
          }
        } else {
          status = cells.status();
        }
      }
    }
    ++counts->kpi_runs;
    std::lock_guard<std::mutex> lock(state_mu_);
    entry->last_run_at = now;
    ++entry->runs;
    if (status.ok()) {
      entry->value = value;
      entry->result = *result;
      entry->last_error.clear();
    } else {
      ++entry->errors;
      ++counts->kpi_errors;
      entry->last_error = status.message();
      failures.push_back(EngineEvent::Engine(
          Severity::kError, "kpi:" + entry->query.name,
          "KPI query '" + entry->query.name + "' failed",
          status.ToString() + "\nSQL: " + entry->query.sql, now));
    }
  }
  for (EngineEvent& event : failures) {
    if (engine_ != nullptr) {
      engine_->RecordEvent(std::move(event));  // comes back through the inbox
    } else {
      inbox_->Push(event);
    }
  }
}

std::vector<AlertRow> MetricsStore::EvaluateRules(double now,
                                                  std::map<std::string, double>* values,
                                                  CycleCounts* counts) {
  std::vector<AlertRow> alerts;
  std::lock_guard<std::mutex> lock(state_mu_);
  // Rules see system metrics, then business metrics, then KPI values.
  for (const auto& [name, entry] : kpis_) {
    if (entry->value.has_value()) {
      (*values)[name] = *entry->value;
    }
  }
  for (auto& [name, entry] : rules_) {
    auto it = values->find(entry->rule.metric);
    std::optional<double> value;
    if (it != values->end()) {
      value = it->second;
    }
    if (!EvaluateRule(entry->rule, value, now, &entry->state)) {
      continue;
    }
    ++counts->rule_fires;
    AlertRow row;
    row.ts = now;
    row.severity = entry->rule.severity;
    row.source = EventSource::kRule;
    row.component = entry->rule.metric;
    row.message = RuleAlertMessage(entry->rule, *value);
    row.detail = fmt::format("rule '{}': {} = {} {} threshold {}", name, entry->rule.metric,
                             *value, CompareOpName(entry->rule.op), entry->rule.threshold);
    row.rule = name;
    row.value = *value;
    row.threshold = entry->rule.threshold;
    alerts.push_back(std::move(row));
  }
  current_values_ = *values;
  config_changed_ = config_changed_ || !rules_.empty() || counts->kpi_runs > 0;
  return alerts;
}

void MetricsStore::DrainEventsLocked(double now, bool final, std::vector<AlertRow>* alerts) {
  CollectorState& c = *collector_;
  // Engine events are folded by the rate limiter; user and rule alerts are
  // deliberate and pass as they are.
  std::vector<CountedAlert> counted;
  for (const EngineEvent& event : inbox_->Drain()) {
    const double ts = event.ts > 0 ? event.ts : now;
    if (event.source == EventSource::kEngine) {
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
    alerts->push_back(ToRow(std::move(a.item), a.count, now));
  }
  if (c.unreported_dropped_batches > 0) {
    EngineEvent lost = EngineEvent::Engine(
        Severity::kWarning, "metrics",
        "metrics writer fell behind; telemetry and alerts were dropped",
        fmt::format("dropped {} rows in {} flush batches (write queue capacity {})",
                    c.unreported_dropped_rows, c.unreported_dropped_batches,
                    options_.write_queue_capacity),
        now);
    alerts->push_back(ToRow(std::move(lost), c.unreported_dropped_batches, now));
    c.unreported_dropped_rows = 0;
    c.unreported_dropped_batches = 0;
  }
}

void MetricsStore::FinishTelemetryLocked(double now, double started, const CycleCounts& counts,
                                   std::map<std::string, double>* values, WriteBatch* batch) {
  // The store's own pressure counters.
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
    (*values)["metrics_events_dropped"] = D(events_dropped);
    (*values)["metrics_rows_dropped"] = D(stats_.rows_dropped);
    (*values)["metrics_queue_depth"] = D(queue_depth);
    ++stats_.flushes;
    stats_.kpi_runs += counts.kpi_runs;
    stats_.kpi_errors += counts.kpi_errors;
    stats_.rule_fires += counts.rule_fires;
    stats_.alerts_suppressed = collector_->limiter.suppressed();
    stats_.last_flush_duration_s = SteadySeconds() - started;
  }
  metrics_internal::TelemetryRow telemetry;
  telemetry.ts = now;
  for (const auto& column : metrics_internal::TelemetryColumns()) {
    auto it = values->find(column.name);
    telemetry.values.push_back(it == values->end() ? std::nullopt
                                                   : std::optional<double>(it->second));
  }
  batch->telemetry = std::move(telemetry);
}

void MetricsStore::NotifyAlertListeners(const std::vector<AlertRow>& alerts) {
  if (alerts.empty()) {
    return;
  }
  std::vector<std::shared_ptr<AlertListener>> listeners;
  {
    std::lock_guard<std::mutex> lock(state_mu_);
    for (const auto& [id, listener] : alert_listeners_) {
      listeners.push_back(listener);
    }
  }
  for (const AlertRow& row : alerts) {
    const AlertRecord record = ToRecord(row);
    for (const auto& listener : listeners) {
      try {
        (*listener)(record);
      } catch (const std::exception& e) {
        Logger("metrics")->error("alert listener threw: {}", e.what());
      }
    }
  }
}

}  // namespace rill
