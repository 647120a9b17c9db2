// Engine: the registry of live tables, connectors and tasks, and the tick loop.
//
// Every tick (Step) the engine
//   1. drains each connector and writes its batches into the target table;
//      a batch that cannot be reconciled goes to `rill_rejects` with its
//      reason, and an error event is recorded,
//   2. applies retention to every table (compaction happens on write),
//   3. runs the SQL and join tasks that are due, writing their output tables,
//   4. evaluates business metrics, updates the `rill_metrics` table, checks the
//      memory budget.
// A failure in one connector, task or callback is logged, counted and recorded
// as an EngineEvent; the tick goes on.
//
// Threads: every public method may be called from any thread. Step() runs on
// the caller's thread, serialized with the background loop (Start). Callbacks
// (subscribers, business metrics, on_memory_warning, event listeners) run on
// the thread running the tick, with no engine lock held; they may call any
// engine method, including Stop().
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
#include <thread>
#include <vector>

#include <arrow/type_fwd.h>

#include "rill/common/clock.h"
#include "rill/common/status.h"
#include "rill/engine/event.h"
#include "rill/engine/task.h"
#include "rill/table/live_table.h"

namespace rill {

class Connector;
struct RejectedRecord;
class SqlEngine;

struct EngineOptions {
  int64_t trigger_interval_ms = 1000;
  /// 0 disables the memory budget.
  int64_t memory_budget_bytes = 0;
  /// Called (on the tick thread) when allocated bytes cross the budget.
  std::function<void(int64_t allocated, int64_t budget)> on_memory_warning;
  /// Default auto_compact_chunks for tables created by the engine (see TableOptions).
  int64_t auto_compact_chunks = 32;
  /// Rows kept in `rill_rejects`.
  int64_t max_reject_rows = 100000;
  /// Events kept in memory for recent_events().
  int64_t max_recent_events = 1000;
  /// DuckDB query threads (0 = DuckDB default).
  int sql_threads = 0;
  Clock clock;
};

struct BusinessMetricValue {
  std::string name;
  double value = 0;
  bool ok = false;
  std::string error;
};

/// A copy of the engine's counters.
struct EngineMetrics {
  double timestamp = 0;
  int64_t ticks = 0;
  int64_t records_processed = 0;
  int64_t last_batch_records = 0;
  double last_latency_s = 0;
  double avg_latency_s = 0;
  double max_latency_s = 0;
  double rows_per_second = 0;  ///< over the last second of ticks
  int64_t rejected_batches = 0;
  int64_t rejected_records = 0;
  int64_t errors = 0;          ///< error events recorded
  int64_t memory_warnings = 0;
  int64_t arrow_allocated_bytes = 0;
  int64_t arrow_max_memory = 0;
  int64_t duckdb_memory_bytes = 0;
  std::vector<BusinessMetricValue> business_metrics;
};

class Engine {
 public:
  using EventListener = std::function<void(const EngineEvent&)>;
  using BusinessMetric = std::function<Result<double>()>;

  static Result<std::unique_ptr<Engine>> Make(EngineOptions options = {});
  /// Stops the loop and every connector.
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  const EngineOptions& options() const { return options_; }
  double Now() const { return clock_(); }

  // Tables ---------------------------------------------------------------
  /// Create and register a table. Invalid if the name is taken or reserved
  /// (`rill_*`), or for the reasons of LiveTable::Make.
  Result<std::shared_ptr<LiveTable>> RegisterTable(const std::string& name,
                                                   std::shared_ptr<arrow::Schema> schema,
                                                   TableOptions options = {});
  /// KeyError naming the table if unknown.
  Result<std::shared_ptr<LiveTable>> GetTable(const std::string& name) const;
  /// Return the table, creating it with `schema` if it does not exist.
  Result<std::shared_ptr<LiveTable>> GetOrCreateTable(const std::string& name,
                                                      std::shared_ptr<arrow::Schema> schema,
                                                      TableOptions options = {});
  /// Names of user tables (not the rill_* system tables), sorted.
  std::vector<std::string> TableNames() const;
  /// Drop a table and its view. KeyError if unknown.
  Status DropTable(const std::string& name);

  // Connectors -------------------------------------------------------------
  /// Add and start a connector. Invalid if its name is taken.
  Status AddConnector(std::shared_ptr<Connector> connector);
  /// Stop and remove a connector; what it still buffered is written first.
  Status RemoveConnector(const std::string& name);
  std::vector<std::shared_ptr<Connector>> Connectors() const;

  // Tasks ----------------------------------------------------------------
  Status AddSqlTask(std::shared_ptr<ScheduledSqlTask> task);
  Status RemoveSqlTask(const std::string& name);
  Status AddJoinTask(std::shared_ptr<TableJoinTask> task);
  Status RemoveJoinTask(const std::string& name);
  /// A copy of each task's counters, by task name.
  std::map<std::string, TaskStats> TaskStatistics() const;

  // Observers ------------------------------------------------------------
  /// Call `callback` with each new version of `table`. KeyError if unknown.
  Result<LiveTable::SubscriptionId> Subscribe(const std::string& table,
                                              LiveTable::Subscriber callback);
  Status Unsubscribe(const std::string& table, LiveTable::SubscriptionId id);
  /// Evaluate `evaluator` every tick; its value appears in metrics.
  Status RegisterBusinessMetric(const std::string& name, BusinessMetric evaluator);
  Status UnregisterBusinessMetric(const std::string& name);
  /// Receive every recorded event (on the recording thread). Returns an id.
  uint64_t AddEventListener(EventListener listener);
  void RemoveEventListener(uint64_t id);

  // Events ---------------------------------------------------------------
  /// Log, count and publish an event. Any thread.
  void RecordEvent(EngineEvent event);
  /// The latest events, oldest first.
  std::vector<EngineEvent> RecentEvents() const;

  // SQL ------------------------------------------------------------------
  /// Run SQL over the live tables (and `rill_metrics`, `rill_rejects`).
  Result<std::shared_ptr<arrow::Table>> Query(std::string_view sql);
  SqlEngine& sql() { return *sql_; }

  // Loop -----------------------------------------------------------------
  /// Run one tick now; return its latency in seconds. Any thread; serialized
  /// with the background loop.
  Result<double> Step();
  /// Start the background loop (ticks every trigger_interval_ms). No-op if running.
  Status Start();
  /// Stop the loop: returns after the current tick, at once when called from
  /// a callback on the loop's own thread. Safe to call twice.
  void Stop();
  bool running() const { return running_.load(); }

  // Metrics and memory -----------------------------------------------------
  EngineMetrics GetMetrics() const;
  /// Check allocated memory against the budget now; true if within budget.
  bool CheckMemoryBudget();
  /// Bytes allocated by Arrow's memory pools plus DuckDB's buffer manager.
  int64_t AllocatedBytes() const;
  /// Compact every table.
  Status CompactAll(bool full = false);

 private:
  explicit Engine(EngineOptions options);
  Status Init();
  Result<double> StepLocked();
  void IngestLocked(double now, int64_t* records);
  void RunTasksLocked(double now);
  void UpdateMetricsLocked(double now, double latency, int64_t records);
  void RejectBatch(const std::string& table, const std::string& source,
                   const std::shared_ptr<arrow::RecordBatch>& batch, const Status& reason,
                   double now);
  // Per-record rejects of decoding connectors (rejects_records.cc).
  void TakeConnectorRejects(Connector& connector, double now);
  void WriteRecordRejects(const std::string& table, std::vector<RejectedRecord> records,
                          double now);
  void Loop();
  bool CheckMemoryBudgetAt(double now, bool notify_always);
  std::shared_ptr<LiveTable> FindTable(const std::string& name) const;

  EngineOptions options_;
  Clock clock_;
  std::unique_ptr<SqlEngine> sql_;

  // Registry: guarded by mu_. Never held while calling callbacks or running a tick.
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<LiveTable>> tables_;
  std::map<std::string, std::shared_ptr<Connector>> connectors_;
  std::map<std::string, std::shared_ptr<Task>> tasks_;  // SQL and join tasks
  std::map<std::string, std::string> task_kinds_;       // name -> "sql" | "join"
  std::map<std::string, BusinessMetric> business_metrics_;
  std::map<uint64_t, EventListener> listeners_;
  uint64_t next_listener_ = 1;
  std::deque<EngineEvent> recent_events_;
  EngineMetrics metrics_;
  std::deque<std::pair<double, int64_t>> rate_window_;  // (tick time, records)
  double total_latency_s_ = 0;
  bool over_budget_ = false;

  std::shared_ptr<LiveTable> rejects_;
  // Connector name -> (time of its last reject event, rejects since then);
  // guarded by tick_mu_. Reject events are at most one per connector per 10 s.
  std::map<std::string, std::pair<double, int64_t>> reject_events_;
  std::shared_ptr<LiveTable> metrics_table_;

  std::mutex tick_mu_;  // serializes ticks
  std::atomic<std::thread::id> tick_owner_{};  // thread running a tick, if any
  double last_tick_now_ = 0;                   // guarded by tick_mu_
  double last_cpu_s_ = 0;                      // guarded by tick_mu_
  double last_cpu_wall_ = 0;                   // guarded by tick_mu_

  std::atomic<bool> running_{false};
  std::atomic<bool> stop_requested_{false};
  std::mutex loop_mu_;
  std::condition_variable loop_cv_;
  std::thread loop_thread_;
  std::thread::id loop_thread_id_;
};

}  // namespace rill
