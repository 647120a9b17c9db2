// Engine: the registry of live tables, connectors and tasks, and the tick loop.
//
// Every tick (Step) the engine
//   1. drains each connector and writes its batches into the target table;
//      a batch that cannot be reconciled goes to `rill_rejects` with its
//      reason, and an error event is recorded,
//   2. applies retention to every table (compaction happens on write),
//   3. runs the SQL and join tasks that are due, writing their output tables,
//   4. evaluates business metrics, updates the `rill_metrics` table (its
//      columns are documented in engine/README.md), checks the memory budget.
// A failure in one connector, task or callback is logged, counted and recorded
// as an EngineEvent; the tick goes on. Log lines of events that repeat (a task
// failing on every tick) are rate-limited: one line per
// `log_repeat_window_seconds`, then one line with the repeat count.
//
// Host CPU and memory come from the engine's HostSampler (common/host_stats.h),
// which the metrics store shares; the tick only reads its latest reading.
//
// Threads: every public method may be called from any thread. Step() runs on
// the caller's thread, serialized with the background loop (Start). Callbacks
// (subscribers, business metrics, on_memory_warning, event listeners) run on
// the thread running the tick, with no engine lock held; they may call any
// engine method, including Stop(), and may drop the last owner of the engine.
//
// Destruction: from any thread. `delete` (unique_ptr, shared_ptr) stops the loop
// and every connector, joining the loop thread. Dropped from inside one of its
// own ticks (a callback on the loop thread, or on a thread running Step), the
// engine cannot be destroyed there: the tick would go on over freed members and
// the loop thread cannot join itself. operator delete then asks the loop to
// stop and hands the destruction to the process-wide reaper thread
// (common/reaper.h), which runs it once that tick is over;
// WaitForDeferredDestructions() waits for it.
//
// Locks and names: `mu_` guards the registry and the counters; `tick_mu_`
// serializes ticks. As everywhere in src/rill, a `...Locked` function is called
// with the mutex guarding the state it touches already held (named at its
// declaration); the tick steps (RunTick, IngestConnectors, ...) are not
// `Locked`: they run under tick_mu_ and take mu_ themselves for short copies.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <arrow/type_fwd.h>

#include "rill/common/clock.h"
#include "rill/common/host_stats.h"
#include "rill/common/tick_log.h"
#include "rill/common/repeat_limiter.h"
#include "rill/common/snapshot_cell.h"
#include "rill/common/status.h"
#include "rill/engine/checkpoint_participant.h"
#include "rill/engine/event.h"
#include "rill/engine/task.h"
#include "rill/table/live_table.h"

namespace rill {

class Connector;
class KafkaSharedConsumer;
struct RejectedRecord;
class SqlEngine;
class WindowTask;

/// What the engine does when allocated memory is over `memory_budget_bytes`.
enum class MemoryBudgetPolicy {
  /// Record a warning event and call on_memory_warning; keep taking input.
  kWarn,
  /// kWarn, and stop draining connectors until allocated memory is below 90 %
  /// of the budget: their buffers fill and their own on_overflow policy applies
  /// (rows dropped are counted as dropped, pushes refused under "error"; the
  /// Kafka and file readers wait for buffer room).
  kShed,
};
/// Parse "warn" or "shed". Invalid (naming memory_budget_policy) otherwise.
Result<MemoryBudgetPolicy> ParseMemoryBudgetPolicy(std::string_view text);
/// Return "warn" or "shed".
const char* MemoryBudgetPolicyName(MemoryBudgetPolicy policy);

/// How an Engine is made (Engine::Make validates it).
struct EngineOptions {
  /// Interval of the background loop's ticks (Start); must be > 0.
  int64_t trigger_interval_ms = 1000;
  /// 0 disables the memory budget. Measured as AllocatedBytes() (the Arrow
  /// pools, which hold the tables and the connectors' buffered batches, plus
  /// DuckDB's buffer manager, plus incremental views' state), checked at the
  /// end of every tick.
  int64_t memory_budget_bytes = 0;
  /// What happens over the budget (kShed needs memory_budget_bytes > 0).
  MemoryBudgetPolicy memory_budget_policy = MemoryBudgetPolicy::kWarn;
  /// Called (on the tick thread) when allocated bytes cross the budget.
  std::function<void(int64_t allocated, int64_t budget)> on_memory_warning;
  /// Rows one tick takes from each connector at most (0: everything buffered).
  /// Under overload this bounds a tick's duration: the rest stays in the
  /// connector's buffer (whose limits and overflow policy then apply), and the
  /// next tick starts as soon as this one ends, without waiting for the
  /// interval, until the backlog is gone.
  int64_t max_records_per_tick = 0;
  /// Default auto_compact_chunks for tables created by the engine (see TableOptions).
  int64_t auto_compact_chunks = 32;
  /// Rows kept in `rill_rejects`.
  int64_t max_reject_rows = 100000;
  /// Events kept in memory for recent_events().
  int64_t max_recent_events = 1000;
  /// DuckDB query threads (0 = DuckDB default).
  int sql_threads = 0;
  /// Log lines of an event repeated (same source, severity, component and
  /// message) within this window are folded into one line with a count when the
  /// window ends; the events themselves are all recorded. 0 logs every event.
  double log_repeat_window_seconds = 60.0;
  /// Source of "now" (unix seconds) for tick times and events; unset: the system clock.
  Clock clock;
};

/// An object a layer above the engine keeps per engine (the SinkSet), owned by
/// the engine (Engine::Extension). Destroyed by ~Engine after the loop has
/// stopped and before the connectors are stopped and the tables go.
class EngineExtension {
 public:
  virtual ~EngineExtension() = default;
};

struct BusinessMetricValue {
  std::string name;
  double value = 0;
  bool ok = false;
  std::string error;
};

/// A copy of the engine's counters as of the last tick. Names match the
/// `rill_metrics` columns (engine/README.md), latencies here in seconds.
struct EngineMetrics {
  double timestamp = 0;                ///< the last tick's time (engine clock)
  int64_t ticks = 0;
  int64_t total_records_processed = 0; ///< records written from connectors, since start
  int64_t last_batch_records = 0;      ///< of them, in the last tick
  double last_batch_latency_s = 0;     ///< duration of the last tick
  double avg_batch_latency_s = 0;      ///< mean tick duration since start
  double max_batch_latency_s = 0;      ///< longest tick since start
  double records_per_second = 0;       ///< over the ticks of the last second
  int64_t rejected_batches = 0;
  int64_t rejected_records = 0;
  int64_t errors = 0;                  ///< error events recorded
  int64_t memory_warnings = 0;
  int64_t checkpoint_failures = 0;     ///< checkpoint writes that failed (RecordCheckpointFailure)
  bool shedding = false;               ///< memory_budget_policy "shed" is holding input back now
  /// Records the connectors' buffers dropped by their overflow policy
  /// (drop_oldest / drop_newest), since start (engine_drops.cc).
  int64_t dropped_records = 0;
  /// Rejects beyond a connector's cap of pending rejects (counted, not kept in
  /// rill_rejects), since start.
  int64_t rejects_overflowed = 0;
  int64_t arrow_allocated_bytes = 0;   ///< the tables' Arrow memory pool, now
  int64_t arrow_peak_allocated_bytes = 0;  ///< its peak
  int64_t duckdb_memory_bytes = 0;     ///< the live tables' DuckDB buffer manager
  std::vector<BusinessMetricValue> business_metrics;
};

class Engine {
 public:
  using EventListener = std::function<void(const EngineEvent&)>;
  using BusinessMetric = std::function<Result<double>()>;

  static Result<std::unique_ptr<Engine>> Make(EngineOptions options = {});
  /// Stops the loop (joining its thread) and every connector. Never runs on
  /// the loop thread or inside a tick: operator delete sees to that.
  ~Engine();
  /// Destroy `engine` now, or, when called from inside one of its ticks, ask
  /// its loop to stop and destroy it on the reaper thread after that tick (see
  /// "Destruction" above). Any thread.
  static void operator delete(Engine* engine, std::destroying_delete_t);
  /// The allocation Make() uses, and its release if the constructor throws:
  /// the pair the destroying delete above frees with.
  static void* operator new(std::size_t size) { return ::operator new(size); }
  static void operator delete(void* memory) { ::operator delete(memory); }
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
  /// Names of user tables (not the rill_* system tables), sorted. Declared
  /// tables that have no schema yet are not included (see DeclaredTableNames).
  std::vector<std::string> TableNames() const;
  /// Drop a table and its view, or a declared table. KeyError if unknown.
  Status DropTable(const std::string& name);

  // Declared tables (engine_declared.cc) --------------------------------------
  /// Declare a table whose schema is not known yet, e.g. one fed by a
  /// connector. The first batch written to it (by a connector, a task, or
  /// TableForWrite / GetOrCreateTable) creates the LiveTable with that batch's
  /// schema and these `options` (the declared options win over any passed
  /// there). Until then:
  ///   - the name is taken (RegisterTable and DeclareTable fail), it is listed
  ///     by DeclaredTableNames() and TableDeclaration(), not by TableNames(),
  ///     and GetTable() returns KeyError;
  ///   - SQL does not see it: a query naming it fails, and Query() says the
  ///     table has no schema yet;
  ///   - Subscribe() works: the subscriber is called from the first version on.
  /// Invalid if the name is taken or reserved, for an invalid retention
  /// policy, and for an append table without one (CheckAppendRetention). A
  /// mode left unset is decided by the first batch's schema metadata
  /// (snapshot without it).
  Status DeclareTable(const std::string& name, TableOptions options = {});
  /// The options of a declared table that has no schema yet; nullopt otherwise.
  std::optional<TableOptions> TableDeclaration(const std::string& name) const;
  /// Names of the declared tables that have no schema yet, sorted.
  std::vector<std::string> DeclaredTableNames() const;
  /// Return the table `name`, creating a declared table from `schema` first.
  /// KeyError if the name is neither a table nor declared.
  Result<std::shared_ptr<LiveTable>> TableForWrite(const std::string& name,
                                                   std::shared_ptr<arrow::Schema> schema);

  // Connectors -------------------------------------------------------------
  /// Add and start a connector. Invalid if its name is taken.
  Status AddConnector(std::shared_ptr<Connector> connector);
  /// Stop and remove a connector; what it still buffered is written first.
  Status RemoveConnector(const std::string& name);
  /// The Kafka consumer of the application this engine is an instance of,
  /// for a source on the cluster `bootstrap_servers` (null: the source reads
  /// alone); cluster/application.h sets it.
  using KafkaGroupProvider = std::function<Result<std::shared_ptr<KafkaSharedConsumer>>(
      const std::string& bootstrap_servers)>;
  /// While set, AddConnector makes every Kafka source read through the
  /// provider's consumer (one group member per instance, topics
  /// co-partitioned). Null removes it. Any thread.
  void SetKafkaGroupProvider(KafkaGroupProvider provider);
  std::vector<std::shared_ptr<Connector>> Connectors() const;

  // Tasks ----------------------------------------------------------------
  Status AddSqlTask(std::shared_ptr<ScheduledSqlTask> task);
  Status RemoveSqlTask(const std::string& name);
  Status AddJoinTask(std::shared_ptr<TableJoinTask> task);
  Status RemoveJoinTask(const std::string& name);
  /// Add an event-time window task (window_task.h). Invalid if the name is taken.
  Status AddWindowTask(std::shared_ptr<WindowTask> task);
  Status RemoveWindowTask(const std::string& name);
  /// A copy of each task's counters, by task name.
  std::map<std::string, TaskStats> TaskStatistics() const;
  /// The tasks' own states (Task::SaveState) as one text, for the
  /// checkpoint section "task_states". Tick boundary.
  Result<std::string> SaveTaskStates();
  /// Give each task present its state from SaveTaskStates' text (tasks not
  /// present are skipped). Tick boundary of a restore.
  Status RestoreTaskStates(std::string_view text);
  /// Run the task `name` now, whether due or not, as a tick would (stats,
  /// events, output written); serialized with ticks. KeyError if unknown,
  /// Invalid from inside a tick. Any thread (DuckDBBridge.run_due_tasks).
  Status RunTaskNow(const std::string& name);
  /// The SQL and join tasks, ordered by name (engine_declared.cc).
  std::vector<std::shared_ptr<Task>> Tasks() const;

  // Observers ------------------------------------------------------------
  /// Call `callback` with each new version of `table` (a declared table's
  /// from its first version on). KeyError if unknown.
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
  /// Log (repeats folded, see log_repeat_window_seconds), count, keep and hand
  /// `event` to every listener; a zero `ts` becomes now. Any thread.
  void RecordEvent(EngineEvent event);
  /// The latest events, oldest first.
  std::vector<EngineEvent> RecentEvents() const;
  /// Count a failed checkpoint write (`checkpoint_failures` in rill_metrics)
  /// and record an error event (component "checkpoint") saying why. Any
  /// thread (the Checkpointer's writer thread).
  void RecordCheckpointFailure(uint64_t checkpoint_id, const Status& status);

  // SQL ------------------------------------------------------------------
  /// Run SQL over the live tables (and `rill_metrics`, `rill_rejects`).
  Result<std::shared_ptr<arrow::Table>> Query(std::string_view sql);
  SqlEngine& sql() { return *sql_; }

  // Loop -----------------------------------------------------------------
  /// Run one tick now; return its latency in seconds. Any thread; serialized
  /// with the background loop. Refreshes the host reading (at most once a
  /// second) before the tick, outside its latency.
  Result<double> Step();
  /// Start the background loop (ticks every trigger_interval_ms). No-op if running.
  Status Start();
  /// Stop the loop: returns after the current tick, joining the loop thread.
  /// From inside a tick (a callback on the loop thread, or on a thread running
  /// Step) it only asks the loop to end after its current tick and returns at
  /// once; Start() or the destructor joins the thread later. Any thread; safe
  /// to call twice.
  void Stop();
  bool running() const { return running_.load(); }

  // Metrics and memory -----------------------------------------------------
  /// Return a copy of the counters as of the last tick. Any thread.
  EngineMetrics GetMetrics() const;
  /// The sampler of host and process CPU and memory behind `rill_metrics`;
  /// the metrics store shares it. Lives as long as the engine or its holders.
  std::shared_ptr<HostSampler> host_sampler() const { return host_sampler_; }
  /// The duration of every recent tick, recorded by the tick without a lock;
  /// any thread may read it (TickLog::ReadSince) at its own pace.
  const TickLog& tick_log() const { return tick_log_; }
  /// Check allocated memory against the budget now; true if within budget.
  /// Under MemoryBudgetPolicy::kShed this also starts or ends shedding.
  bool CheckMemoryBudget();
  /// True while memory_budget_policy "shed" holds input back (ticks do not
  /// drain the connectors). Any thread.
  bool shedding() const { return shedding_.load(); }
  /// Bytes allocated by Arrow's memory pools plus DuckDB's buffer manager plus
  /// the tasks' own state (TaskStats::state_bytes: incremental views).
  int64_t AllocatedBytes() const;
  /// Compact every table.
  Status CompactAll(bool full = false);

  // Tick boundary (for checkpoints, engine/checkpoint.h) ----------------------------
  /// Run `fn` between two ticks: no tick runs meanwhile, so the tables and the
  /// connectors' positions (as of their last Poll) agree. Invalid from inside a
  /// tick (a callback on the tick thread). Any other thread.
  Status AtTickBoundary(const std::function<Status()>& fn);
  /// The rows table `table` holds now are no task's new input (Task::
  /// SkipNewRowsOf: they moved between an application's instances). Call at
  /// a tick boundary.
  void SkipNewRowsOf(const std::string& table);
  /// Until SkipNewRowsOf(table): no task reads `table`'s new rows (a move of
  /// partition shards is being applied). Tick boundary.
  void PauseNewRowsOf(const std::string& table);

  // Partitioned operator state (Task::PartitionedStateTable) ---------------
  /// Set by cluster/application.h: `sharded(table)` says whether `table` is
  /// held per input partition (a partition shard); `state_made(state, table)`
  /// is called (tick thread) when a task made the state table `state` of its
  /// partitioned state over `table`. Null functions remove them. Any thread.
  void SetPartitionShards(std::function<bool(const std::string&)> sharded,
                          std::function<void(const std::string&, const std::string&)> state_made);
  /// Whether `table` is held per input partition. Any thread.
  bool HeldPerPartition(const std::string& table) const;
  /// Called by a task that made its state table `state` over `table`.
  void StateTableMade(const std::string& state, const std::string& table);
  /// The state tables of the tasks with partitioned state over `table` (made
  /// now when missing). Tick boundary.
  std::vector<std::string> PartitionedStateTables(const std::string& table);
  /// Task::DropPartitions / RestorePartitions of every task over `table`.
  /// Tick boundary.
  Status DropTaskPartitions(const std::string& table, const std::vector<int32_t>& partitions);
  Status RestoreTaskPartitions(const std::string& table, const std::vector<int32_t>& partitions);
  /// Call `hook(now)` on the tick thread at the end of every tick, still at the
  /// tick boundary (the Checkpointer's captures, the cluster's commits), in the
  /// order added. Return its id for RemoveTickEndHook. Any thread.
  int64_t AddTickEndHook(std::function<void(double now)> hook);
  /// Remove a hook. When this returns no tick calls it any more (a tick
  /// running it has finished, unless called from the hook itself). Any thread.
  void RemoveTickEndHook(int64_t id);
  /// While on (a Checkpointer is attached), ticks do not commit source positions
  /// (Connector::CommitApplied); the Checkpointer commits what each completed
  /// checkpoint holds (Connector::CommitCheckpointed). Any thread.
  void SetCommitsFollowCheckpoints(bool on) { commits_follow_checkpoints_.store(on); }
  /// True while a Checkpointer is attached (see SetCommitsFollowCheckpoints). Any thread.
  bool commits_follow_checkpoints() const { return commits_follow_checkpoints_.load(); }

  // Checkpoint participants (engine/checkpoint_participant.h) -----------------
  /// Register `participant` under `name` (replacing one of that name): every
  /// checkpoint of this engine's Checkpointer captures, writes, completes and
  /// restores it. Any thread.
  void AddCheckpointParticipant(const std::string& name,
                                std::shared_ptr<CheckpointParticipant> participant);
  void RemoveCheckpointParticipant(const std::string& name);
  /// The participants, by name. Any thread.
  std::map<std::string, std::shared_ptr<CheckpointParticipant>> CheckpointParticipants() const;
  /// The checkpoint the last Checkpointer::Restore applied (nullopt if none);
  /// set by the Checkpointer. Any thread.
  std::optional<RestoredCheckpoint> last_restored_checkpoint() const;
  void SetRestoredCheckpoint(RestoredCheckpoint restored);

  // Extensions and backpressure (for sink/) ------------------------------------
  /// Return the extension stored under `key`, made by `make` on first call (the
  /// engine owns it; see EngineExtension for when it is destroyed). Any thread;
  /// `make` may call the engine, but not Extension.
  EngineExtension* Extension(const std::string& key,
                             const std::function<std::unique_ptr<EngineExtension>()>& make);
  /// The extension under `key`, or null. Any thread.
  EngineExtension* FindExtension(const std::string& key) const;
  /// Hold back (`on`) or release the connectors writing `table`, on behalf of
  /// `source` (a sink's name): while any source holds a table, ticks do not
  /// poll its connectors, whose buffers fill and apply their overflow policy as
  /// when the tick is slow. Any thread (a sink's).
  void SetTableBackpressure(const std::string& table, const std::string& source, bool on);
  /// True while some source holds `table` back. Any thread.
  bool TableBackpressured(const std::string& table) const;

 private:
  explicit Engine(EngineOptions options);
  Status Init();

  // Tick steps (engine_tick.cc): run by the thread holding tick_mu_.
  Result<double> RunTick();
  void IngestConnectors(double now, int64_t* records);
  /// Write one Poll's batches to the connector's table (created from the first
  /// batch if missing); batches that cannot be written go to rill_rejects.
  void WritePolled(Connector& connector,
                   const std::vector<std::shared_ptr<arrow::RecordBatch>>& batches, double now,
                   int64_t* records);
  void ApplyRetention(double now);
  void RunDueTasks(double now);
  Status RunTask(Task& task, double now);
  void RunAndCountTask(Task& task, double now);  // RunTask plus stats and events
  std::vector<BusinessMetricValue> EvaluateBusinessMetrics(double now);
  void PublishMetrics(double now, double latency, int64_t records);
  /// Write the rill_metrics row of the last published metrics (the table's
  /// refresher: run by the first reader after a tick, or by the tick itself
  /// when rill_metrics has subscribers).
  void WriteMetricsRow();
  /// Write `batch` to `rill_rejects` and record an error event. Callers hold tick_mu_.
  void RejectBatch(const std::string& table, const std::string& source,
                   const std::shared_ptr<arrow::RecordBatch>& batch, const Status& reason,
                   double now);

  /// Log `event` unless it repeats within the log window. Any thread.
  void LogEvent(const EngineEvent& event);
  /// Log one line per held-back repeat run whose window ended by `now`. Any thread.
  void FlushRepeatedLogs(double now);
  // Per-record rejects of decoding connectors (rejects_records.cc).
  void TakeConnectorRejects(Connector& connector, double now);
  void WriteRecordRejects(const std::string& table, std::vector<RejectedRecord> records,
                          double now);
  /// Count what `connector` dropped by its overflow policy and the rejects it
  /// could not keep since the last look (its stats against drop_watch_), and
  /// record a warning event naming the counts since the last such event, at
  /// most one per connector per kDropEventIntervalS (engine_drops.cc). Tick
  /// thread, after polling the connector.
  void NoteConnectorDrops(const Connector& connector, double now);
  void Loop();
  /// True on the loop thread and on a thread running a tick (Step). Any thread.
  bool InsideOwnTick();
  bool CheckMemoryBudgetAt(double now, bool notify_always);
  std::shared_ptr<LiveTable> FindTable(const std::string& name) const;
  // engine_declared.cc
  /// Create, register and publish a table. With `from_declaration`, a
  /// declaration of `name` is consumed (its options and subscribers are
  /// used); otherwise a declared name is taken.
  Result<std::shared_ptr<LiveTable>> CreateTable(const std::string& name,
                                                 std::shared_ptr<arrow::Schema> schema,
                                                 TableOptions options, bool from_declaration);
  Result<LiveTable::SubscriptionId> SubscribeDeclared(const std::string& table,
                                                      LiveTable::Subscriber callback);
  /// Map a subscription id handed out for a declared table to the table's own.
  LiveTable::SubscriptionId ResolveSubscription(const std::string& table,
                                                LiveTable::SubscriptionId id);
  /// `status` of a failed query, saying which declared tables it may miss.
  Status ExplainDeclaredTables(const Status& status) const;

  EngineOptions options_;
  Clock clock_;
  std::unique_ptr<SqlEngine> sql_;
  std::shared_ptr<HostSampler> host_sampler_;

  // Registry: guarded by mu_. Never held while calling callbacks or running a tick.
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<LiveTable>> tables_;
  /// A table declared without a schema (DeclareTable), and the subscribers
  /// waiting for its first version (by the ids Subscribe handed out).
  struct Declaration {
    TableOptions options;
    std::map<LiveTable::SubscriptionId, LiveTable::Subscriber> subscribers;
  };
  std::map<std::string, Declaration> declared_;
  /// (table, id handed out while declared) -> the table's own subscription id.
  std::map<std::pair<std::string, LiveTable::SubscriptionId>, LiveTable::SubscriptionId>
      subscription_aliases_;
  /// Ids handed out for declared tables; far above any table's own ids.
  LiveTable::SubscriptionId next_declared_subscription_ = uint64_t{1} << 48;
  std::map<std::string, std::shared_ptr<Connector>> connectors_;
  std::map<std::string, std::shared_ptr<Task>> tasks_;  // SQL and join tasks
  /// The tasks' TaskStats::state_bytes summed (counted in AllocatedBytes).
  std::atomic<int64_t> task_state_bytes_{0};
  std::map<std::string, std::string> task_kinds_;       // name -> "sql" | "join"
  std::map<std::string, BusinessMetric> business_metrics_;
  std::map<uint64_t, EventListener> listeners_;
  uint64_t next_listener_ = 1;
  std::deque<EngineEvent> recent_events_;
  EngineMetrics metrics_;
  std::mutex metrics_row_mu_;       // a leaf lock: guards metrics_row_
  EngineMetrics metrics_row_;       // what rill_metrics shows once refreshed
  TickLog tick_log_;  // written by the tick thread only
  std::deque<std::pair<double, int64_t>> rate_window_;  // (tick time, records)
  int64_t rate_window_records_ = 0;  // sum of the records in rate_window_
  double total_latency_s_ = 0;
  bool over_budget_ = false;
  // Ticks skip draining the connectors (MemoryBudgetPolicy::kShed); written by
  // CheckMemoryBudgetAt under mu_, read by the tick without it.
  std::atomic<bool> shedding_{false};

  std::shared_ptr<LiveTable> rejects_;
  // Connector name -> (time of its last reject event, rejects since then);
  // guarded by tick_mu_. Reject events are at most one per connector per 10 s.
  std::map<std::string, std::pair<double, int64_t>> reject_events_;
  std::shared_ptr<LiveTable> metrics_table_;
  /// Per connector name: its drop counters as last seen, and the drops not yet
  /// reported in an event; guarded by tick_mu_ (engine_drops.cc).
  struct DropWatch {
    int64_t dropped_seen = 0;
    int64_t overflowed_seen = 0;
    int64_t dropped_pending = 0;
    int64_t overflowed_pending = 0;
    double last_event = 0;  ///< time of the last drop event (0: none yet)
  };
  std::map<std::string, DropWatch> drop_watch_;

  // Rate limiting of log lines (events are all recorded): guarded by log_mu_.
  std::mutex log_mu_;
  std::unique_ptr<RepeatLimiter<EventRepeatKey, EngineEvent>> log_limiter_;

  // The tick-end hooks by id (Add/Remove, under mu_) and the list the tick
  // runs: published anew on each change, so a tick only loads a pointer. The
  // tick runs them holding hooks_mu_, which RemoveTickEndHook takes after
  // publishing to wait for a running hook.
  using TickEndHooks = std::vector<std::function<void(double)>>;
  std::map<int64_t, std::function<void(double)>> tick_end_hooks_;  // guarded by mu_
  int64_t next_tick_end_hook_ = 1;                                  // guarded by mu_
  SnapshotCell<TickEndHooks> tick_end_hook_list_{std::make_shared<const TickEndHooks>()};
  KafkaGroupProvider kafka_group_;                                  // guarded by mu_
  std::function<bool(const std::string&)> sharded_;                 // guarded by mu_
  std::function<void(const std::string&, const std::string&)> state_made_;  // guarded by mu_
  std::recursive_mutex hooks_mu_;
  /// Publish tick_end_hooks_ as the tick's list. mu_ held.
  void PublishTickEndHooks();
  std::map<std::string, std::shared_ptr<CheckpointParticipant>> participants_;  // guarded by mu_
  std::optional<RestoredCheckpoint> last_restore_;  // guarded by mu_
  /// Guards extensions_; held while an extension is made (which may take mu_).
  mutable std::mutex extensions_mu_;
  std::map<std::string, std::unique_ptr<EngineExtension>> extensions_;
  /// Table -> the sources holding it back (SetTableBackpressure); guarded by mu_.
  std::map<std::string, std::set<std::string>> backpressure_;
  std::mutex tick_mu_;  // serializes ticks
  std::atomic<std::thread::id> tick_owner_{};  // thread running a tick, if any
  double last_tick_now_ = 0;                   // guarded by tick_mu_
  // A connector still had rows buffered after the last tick took its
  // max_records_per_tick: the loop starts the next tick at once.
  std::atomic<bool> backlog_{false};
  std::atomic<bool> commits_follow_checkpoints_{false};  // SetCommitsFollowCheckpoints

  std::atomic<bool> running_{false};
  std::atomic<bool> stop_requested_{false};
  std::mutex loop_mu_;
  std::condition_variable loop_cv_;
  std::thread loop_thread_;
  std::thread::id loop_thread_id_;
};

}  // namespace rill
