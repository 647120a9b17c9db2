// MetricsStore: the metrics database, structured alerts, KPI queries and
// server-side alert rules (the seed's sections 9 and 10).
//
// A MetricsStore attaches to an Engine from outside: it subscribes to the
// engine's events and reads its public accessors, nothing more. It owns an
// on-disk DuckDB database (`rill_metrics.db` by default, `:memory:` allowed),
// separate from the in-memory database of the live tables, and two threads:
//
//   collector ("rill-metrics")    every flush interval: samples host and engine
//                                 telemetry (host CPU and memory through the
//                                 engine's HostSampler, the one sampler behind
//                                 `rill_metrics` too), runs the KPI queries that are due
//                                 (Engine::Query reads published versions
//                                 lock-free), evaluates alert rules, turns the
//                                 queued events into rate-limited alerts, and
//                                 hands one WriteBatch to the writer. Between
//                                 flushes it samples tick latencies.
//   writer ("rill-metrics-db")    appends each batch in one transaction, prunes
//                                 old rows, rewrites the configuration tables.
//
// Nothing on the tick thread waits for either: the engine-event listener only
// appends to a bounded queue (a full queue drops the event and counts it), and
// the collector hands batches to the writer through a bounded queue (a full
// queue drops the batch, counts its rows, and reports the loss as an alert
// once the writer catches up). The tables are documented in README.md.
//
// Threads: every public method may be called from any thread, including from
// engine callbacks and alert listeners (listeners run on the collector thread
// with no store lock held; Flush() from a listener runs a cycle inline), except
// that Stop() and the destructor must not be called from an alert listener.
// The Engine must outlive the MetricsStore.
//
// Locks: state_mu_ guards KPI queries, rules, current values and listeners;
// cycle_mu_ serializes collector cycles; queue_mu_ the hand-off to the writer;
// write_mu_ the database writes; stats_mu_ the counters. A `...Locked` function
// is called with the mutex named at its declaration held.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <arrow/type_fwd.h>

#include "rill/common/clock.h"
#include "rill/common/status.h"
#include "rill/engine/event.h"
#include "rill/metrics/alert_rule.h"
#include "rill/metrics/kpi_query.h"
#include "rill/sql/query_deadlines.h"
#include "rill/sql/query_interrupt.h"

namespace rill {

class Engine;

class HostSampler;

namespace metrics_internal {
class MetricsDb;
struct AlertRow;
struct WriteBatch;
struct ConfigSnapshot;
}  // namespace metrics_internal

/// Default file name of the metrics database.
inline constexpr const char* kDefaultMetricsPath = "rill_metrics.db";

struct MetricsOptions {
  /// Database file; ":memory:" keeps it in memory.
  std::string path = kDefaultMetricsPath;
  double flush_interval_seconds = 1.0;
  /// Telemetry, table/connector/task stats, business metrics and KPI history
  /// older than this are deleted during the flush cycle.
  double telemetry_retention_seconds = 24 * 3600.0;
  /// Alerts older than this are deleted during the flush cycle.
  double alert_retention_seconds = 3600.0;
  /// Engine events waiting for the collector; beyond this they are dropped
  /// and counted (stats().events_dropped).
  int64_t event_queue_capacity = 10000;
  /// Flush batches waiting for the writer; beyond this new batches are dropped
  /// and counted (stats().batches_dropped, rows_dropped).
  int64_t write_queue_capacity = 64;
  /// Identical engine alerts within this window are folded into one alert
  /// with a count (see AlertRateLimiter). 0 disables the limit.
  double rate_limit_window_seconds = 60.0;
  /// How often the collector samples the tick latency between flushes.
  double latency_sample_interval_seconds = 0.05;
  /// Latency average / p99 / max are computed over this trailing window.
  double latency_window_seconds = 60.0;
  /// Rows of each KPI result written to rill_kpi_history.
  int64_t max_kpi_history_rows = 1000;
  /// A KPI query running longer than this is interrupted: that run fails
  /// (last_error says so) and an error alert `kpi:<name>` is recorded, as for
  /// any failing run. 0 = no limit.
  double query_timeout_seconds = 30;
  /// Load the alert rules stored in rill_alert_rules by an earlier run of the
  /// same database file (so server-side rules survive restarts).
  bool restore_alert_rules = true;
  /// Source of "now" (unix seconds) for timestamps and retention. Unset: the
  /// engine's clock, or the system clock without an engine.
  Clock clock;
};

/// Counters of a MetricsStore. Monotonic except queue depths.
struct MetricsStoreStats {
  int64_t flushes = 0;           ///< collector cycles
  int64_t batches_written = 0;
  int64_t rows_written = 0;
  int64_t alerts_written = 0;
  int64_t events_received = 0;   ///< engine events offered to the queue
  int64_t events_dropped = 0;    ///< events refused by the full event queue
  int64_t alerts_suppressed = 0; ///< repeats folded by the rate limiter
  int64_t batches_dropped = 0;   ///< batches refused by the full write queue
  int64_t rows_dropped = 0;      ///< rows in those batches
  int64_t write_errors = 0;
  int64_t rows_pruned = 0;
  int64_t kpi_runs = 0;
  int64_t kpi_errors = 0;
  int64_t rule_fires = 0;
  int64_t event_queue_depth = 0;
  int64_t write_queue_depth = 0;
  double last_write_duration_s = 0;
  double last_flush_duration_s = 0;
  std::string last_write_error;
};

/// An alert as written to rill_alerts (passed to alert listeners).
struct AlertRecord {
  double ts = 0;
  Severity severity = Severity::kWarning;
  EventSource source = EventSource::kEngine;
  std::string component;
  std::string message;
  std::string detail;
  std::string rule;       ///< the rule's name, for source "rule"
  std::optional<double> value;      ///< observed value, for source "rule"
  std::optional<double> threshold;  ///< for source "rule"
  int64_t count = 1;      ///< occurrences this alert stands for (rate limiting)
};

/// A KPI query with its latest result (for KPI cards).
struct KpiSnapshot {
  KpiQuery query;
  std::optional<double> last_run_at;
  /// The KPI value of the latest successful run (see ExtractKpiValue).
  std::optional<double> value;
  /// The latest successful result, unchanged.
  std::shared_ptr<arrow::Table> result;
  /// The error of the latest run; empty when it succeeded.
  std::string last_error;
  int64_t runs = 0;
  int64_t errors = 0;
  /// "incremental" when the query's result is kept up to date from the
  /// tables' changes (an engine task "__rill_kpi_<name>" writes it to the
  /// table of that name, which the KPI reads), "recompute (<why>)" when the
  /// query is re-run; empty until decided.
  std::string maintenance;
};

/// An alert rule with its state.
struct AlertRuleInfo {
  AlertRule rule;
  AlertRuleState state;
};

class MetricsStore {
 public:
  using AlertListener = std::function<void(const AlertRecord&)>;

  /// Open the database and subscribe to `engine`'s events (engine may be null:
  /// the store then records user alerts and host telemetry only). IOError when
  /// the database cannot be opened, Invalid for bad options. Events recorded
  /// before Start() are kept (up to the queue capacity) and written once the
  /// store starts or flushes.
  static Result<std::unique_ptr<MetricsStore>> Make(Engine* engine, MetricsOptions options = {});
  /// Stop (writing what is queued) and unsubscribe from the engine.
  ~MetricsStore();
  MetricsStore(const MetricsStore&) = delete;
  MetricsStore& operator=(const MetricsStore&) = delete;

  const MetricsOptions& options() const { return options_; }
  const std::string& path() const { return options_.path; }

  // Lifecycle ------------------------------------------------------------
  /// Start the collector and writer threads. No-op if running.
  Status Start();
  /// Run a final flush, write everything queued, and join the threads. Safe to
  /// call twice and without Start.
  void Stop();
  bool running() const { return running_.load(); }
  /// Run one flush cycle now and return once its batch is written (or
  /// dropped). Works with or without Start. Cancelled if the store stops
  /// meanwhile.
  Status Flush();

  // Alerts -----------------------------------------------------------------
  /// Record a user alert. `severity` is "error", "warning" (or "warn") or
  /// "info"; Invalid otherwise. With an engine, the alert goes through
  /// Engine::RecordEvent (so it is logged and reaches every event listener)
  /// and comes back to this store through its listener.
  Status PushAlert(std::string_view message, std::string_view severity = "warning",
                   std::string_view detail = {});
  /// Record an info alert.
  Status Alert(std::string_view message) { return PushAlert(message, "info"); }
  /// Record a warning alert.
  Status Warn(std::string_view message) { return PushAlert(message, "warning"); }
  /// Record an error alert.
  Status Error(std::string_view message, std::string_view detail = {}) {
    return PushAlert(message, "error", detail);
  }
  /// Call `listener` with each alert after rate limiting, on the collector
  /// thread, before it is written, with no store lock held (the listener may
  /// call back into the store). Returns an id for RemoveAlertListener.
  uint64_t AddAlertListener(AlertListener listener);
  void RemoveAlertListener(uint64_t id);

  // Queries ----------------------------------------------------------------
  /// Run one read-only SQL statement on the metrics database and return the
  /// result. Invalid for statements that write and for failing queries.
  Result<std::shared_ptr<arrow::Table>> QueryMetrics(std::string_view sql) const;
  /// As QueryMetrics; `interrupt` (may be null) stops the query from another
  /// thread (a timeout, a cancel request): it then fails with Cancelled.
  Result<std::shared_ptr<arrow::Table>> QueryMetrics(std::string_view sql,
                                                     QueryInterrupt* interrupt) const;
  /// DuckDB's type of each parameter ($1, ...) of `sql` on the metrics
  /// database ("" where it is open), the statement prepared but not run
  /// (pgwire's ParameterDescription). Any thread.
  Result<std::vector<std::string>> MetricsParameterTypes(std::string_view sql) const;
  /// DuckDB's memory limit of the metrics database (bytes > 0): a query that
  /// needs more fails with an out-of-memory error. Any thread.
  Status SetMemoryLimit(int64_t bytes);  /// Run CREATE statements (one per string: schemas, views, macros for
  /// QueryMetrics to use, e.g. pgwire's PostgreSQL catalogs). Any thread.
  Status DefineHelpers(const std::vector<std::string>& statements);

  // KPI queries ------------------------------------------------------------
  /// Add a KPI query, or replace the one with the same name (its state is
  /// reset). It first runs at the next flush. Invalid per KpiQuery::Validate.
  Status AddKpiQuery(KpiQuery query);
  /// Parse `chart_type` and add the query (the seed's add_dashboard_scheduled_query).
  Status AddKpiQuery(std::string name, std::string sql, double interval_seconds,
                     std::string_view chart_type = "line", std::string x_col = "ts",
                     std::string y_col = "");
  /// Remove a KPI query (its history stays until retention). KeyError if unknown.
  Status RemoveKpiQuery(const std::string& name);
  /// Every KPI query with its latest result, by name.
  std::vector<KpiSnapshot> LatestKpis() const;

  // Alert rules ------------------------------------------------------------
  /// Add an alert rule, or replace the one with the same name (its state is
  /// reset). Invalid per AlertRule::Validate.
  Status AddAlertRule(AlertRule rule);
  /// Parse `op` and `severity` and add the rule.
  Status AddAlertRule(std::string name, std::string metric, std::string_view op,
                      double threshold, double cooldown_seconds = 60,
                      std::string_view severity = "warning",
                      std::optional<std::string> webhook = std::nullopt);
  /// Remove a rule. KeyError if unknown.
  Status RemoveAlertRule(const std::string& name);
  /// Every rule with its state, by name.
  std::vector<AlertRuleInfo> AlertRules() const;

  /// The values rules can watch, as of the last flush: system metrics, per
  /// table/connector/task metrics, business metrics and KPI values, by name.
  std::map<std::string, double> CurrentValues() const;

  // Introspection ----------------------------------------------------------
  MetricsStoreStats stats() const;
  /// Test hook: make the writer sleep this long before each batch, as a slow
  /// disk would.
  void SetWriterDelayForTesting(double seconds);

 private:
  struct EventInbox;
  struct QueuedBatch;
  struct KpiEntry;
  struct RuleEntry;

  MetricsStore(Engine* engine, MetricsOptions options,
               std::unique_ptr<metrics_internal::MetricsDb> db);

  void CollectorLoop();
  void WriterLoop();

  // The collector cycle (metrics_cycle.cc). Cycle runs the steps under
  // cycle_mu_, then calls the alert listeners with no lock held.
  /// One flush: sample, run KPIs, evaluate rules, turn events into alerts, and
  /// return the batch to write. `covers` is the Flush() request it satisfies.
  std::unique_ptr<QueuedBatch> Cycle(uint64_t covers, bool final);
  struct CycleCounts;
  /// Host, engine, table, connector, task and business figures into `values`
  /// (keyed by rill_telemetry column or rule metric name) and `batch`. Caller
  /// holds cycle_mu_.
  void SampleLocked(double now, std::map<std::string, double>* values,
                    metrics_internal::WriteBatch* batch);
  void SampleEngineLocked(double now, std::map<std::string, double>* values,
                          metrics_internal::WriteBatch* batch);
  /// Run one KPI query with the timeout (collector thread, no lock held).
  Result<std::shared_ptr<arrow::Table>> RunKpiQuery(const std::string& sql);
  /// Run a KPI: from its incremental view when it has one that is current,
  /// else its query (deciding which on first use). Collector thread.
  Result<std::shared_ptr<arrow::Table>> RunKpi(KpiEntry& entry, double now);
  /// Remove a KPI's view task and table (no-op for "").
  void DropKpiView(const std::string& view);
  /// Run the KPI queries that are due (outside state_mu_) into `batch`.
  void RunDueKpis(double now, metrics_internal::WriteBatch* batch, CycleCounts* counts);
  /// Evaluate every rule against `values` (KPI values added); return the fired alerts.
  std::vector<metrics_internal::AlertRow> EvaluateRules(double now,
                                                        std::map<std::string, double>* values,
                                                        CycleCounts* counts);
  /// Drain queued events into rate-limited alerts (plus the store's own
  /// dropped-batch warning), appended to `alerts`. Caller holds cycle_mu_.
  void DrainEventsLocked(double now, bool final,
                         std::vector<metrics_internal::AlertRow>* alerts);
  /// Count the cycle in stats() and add the telemetry row to `batch`. Caller
  /// holds cycle_mu_.
  void FinishTelemetryLocked(double now, double started, const CycleCounts& counts,
                       std::map<std::string, double>* values,
                       metrics_internal::WriteBatch* batch);
  /// Call every alert listener with each alert. No lock may be held.
  void NotifyAlertListeners(const std::vector<metrics_internal::AlertRow>& alerts);
  void SampleLatency();
  /// Add the ticks the engine recorded since the last call to the latency
  /// window (cycle_mu_ held).
  void DrainTickLogLocked(double now);
  /// Write one batch (and the configuration if it changed). Writer thread, or
  /// the caller of Flush() when not running.
  void WriteQueued(std::unique_ptr<QueuedBatch> batch);
  void MarkCovered(uint64_t covers);
  /// Hand a batch to the writer, or drop and count it when the queue is full.
  void Enqueue(std::unique_ptr<QueuedBatch> batch);
  /// Caller holds state_mu_.
  std::unique_ptr<metrics_internal::ConfigSnapshot> SnapshotConfigLocked() const;

  Engine* engine_;  // borrowed; outlives this
  MetricsOptions options_;
  Clock clock_;
  std::shared_ptr<HostSampler> host_sampler_;  // the engine's, or the store's own
  std::unique_ptr<metrics_internal::MetricsDb> db_;
  std::shared_ptr<EventInbox> inbox_;  // shared with the engine listener
  uint64_t engine_listener_id_ = 0;

  // KPI queries, rules, current values, alert listeners: guarded by state_mu_.
  mutable std::mutex state_mu_;
  std::map<std::string, std::shared_ptr<KpiEntry>> kpis_;
  std::map<std::string, std::shared_ptr<RuleEntry>> rules_;
  std::map<std::string, double> current_values_;
  std::map<uint64_t, std::shared_ptr<AlertListener>> alert_listeners_;
  uint64_t next_alert_listener_ = 1;
  bool config_changed_ = true;

  // Collector state: guarded by cycle_mu_ (held by each cycle, whichever
  // thread runs it, and by the latency sampler and Enqueue for a moment).
  std::mutex cycle_mu_;
  struct CollectorState;
  std::unique_ptr<CollectorState> collector_;

  // Hand-off to the writer and flush bookkeeping: guarded by queue_mu_.
  mutable std::mutex queue_mu_;
  std::condition_variable writer_cv_;     // writer waits for batches
  std::condition_variable collector_cv_;  // collector waits for its next wake-up
  std::condition_variable covered_cv_;    // Flush() waits for its batch
  std::deque<std::unique_ptr<QueuedBatch>> queue_;
  uint64_t flush_requested_ = 0;
  uint64_t flush_covered_ = 0;
  bool collector_stop_ = false;
  bool writer_stop_ = false;

  std::mutex write_mu_;     // serializes writes to db_
  double last_prune_ = 0;   // guarded by write_mu_
  mutable std::mutex stats_mu_;
  MetricsStoreStats stats_;

  std::atomic<bool> running_{false};
  std::atomic<double> writer_delay_s_{0};
  QueryDeadlines kpi_deadlines_;  // KPI query timeouts (query_timeout_seconds)
  std::mutex lifecycle_mu_;
  std::thread collector_thread_;
  std::atomic<std::thread::id> collector_thread_id_{};  // for Flush() from a listener
  std::thread writer_thread_;
};

}  // namespace rill
