// Tasks: scheduled SQL and join/aggregate pipelines that write output tables.
//
// A Task computes a table from the live tables when it is due (every
// `interval_seconds`); the engine writes the result into the task's output
// table, creating it from the first result's schema (with the task's primary
// key and retention) when it does not exist. ScheduledSqlTask runs one SQL
// query; TableJoinTask joins (and optionally aggregates) two tables in one
// DuckDB query. Nothing here touches DuckDB directly: tasks run through
// SqlEngine, which reads one published version of each table.
//
// Ownership: tasks are shared. The caller makes one (std::make_shared or
// TableJoinTask::Make) and hands it to Engine::AddSqlTask / AddJoinTask; the
// engine keeps it until RemoveSqlTask / RemoveJoinTask, and the caller may keep
// its pointer to read options and the watermark. A task's failure is returned
// as a Status by Run; the engine counts it in TaskStats, records an
// EngineEvent (component: the task name) and runs the task again when due.
//
// Threads: Due, MarkRun and Run are called by the tick thread only (the engine
// serializes ticks), so a task needs no lock of its own. Construction and the
// const accessors of the configuration (name, output_table, query, options,
// BuildSql) may be called from any thread; `stats` is written by the tick
// thread under the engine's registry lock and read through
// Engine::TaskStatistics; watermark() and Describe() of a TableJoinTask belong
// to the tick thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <arrow/type_fwd.h>

#include "rill/common/status.h"
#include "rill/table/retention.h"

namespace rill {

class SqlEngine;
class LiveTable;

/// What a task produced in one run.
struct TaskOutput {
  std::shared_ptr<arrow::Table> table;
  /// true: replace the output table's state; false: write (upsert/append) the rows
  /// (a table with row_ops.h's kWriteOpColumn applies upserts and deletes by key).
  bool replace = true;
  /// The key of the output table when this run creates it (empty: the task's
  /// primary_key): an incremental view's group or join key.
  std::vector<std::string> key;
};

/// How a ScheduledSqlTask keeps its result up to date (its `incremental` option).
enum class IncrementalMode {
  kAuto,  ///< maintain from the sources' change feeds when the query allows, else re-run it
  kOn,    ///< maintain incrementally; a query that cannot be is refused (naming why)
  kOff,   ///< re-run the whole query every interval
};
/// Parse "auto", "true"/"on"/"yes"/"1", "false"/"off"/"no"/"0" (case-insensitive).
Result<IncrementalMode> ParseIncrementalMode(std::string_view text);
/// "auto", "true" or "false".
const char* IncrementalModeName(IncrementalMode mode);

/// Counters of a task (monotonic, except the last_* values). Copied out by
/// Engine::TaskStatistics.
struct TaskStats {
  int64_t runs = 0;
  int64_t errors = 0;
  double last_duration_s = 0;
  double total_duration_s = 0;
  double last_run_at = 0;
  std::string last_error;
  /// ScheduledSqlTask: "incremental", or "recompute (<why>)" when the query is
  /// re-run (incremental=false, or auto with a query outside the maintainable
  /// shapes); empty before the first run and for other tasks.
  std::string maintenance;
  /// Bytes of state an incremental task keeps (groups, min/max multisets).
  int64_t state_bytes = 0;
  /// Incremental runs: change rows read from the sources, and output rows
  /// upserted / deleted (monotonic).
  int64_t changes_read = 0;
  int64_t rows_upserted = 0;
  int64_t rows_deleted = 0;
  /// Incremental runs that rebuilt the state from the whole query (the first
  /// run, a source replaced, a reader behind its change log; not a restore
  /// from a checkpoint that holds the state).
  int64_t rebuilds = 0;
};

/// Base of scheduled tasks. Threads: see the top of this file (Due, MarkRun,
/// Run: tick thread only).
class LiveTable;
class TableVersion;

/// The rows of `version` with z_update_ts > *cursor, in write order: a suffix
/// of its chunks, since z_update_ts never decreases along them (rows of
/// tasks that read a table's new rows: windows, stream SQL); advances
/// *cursor to the newest z_update_ts read.
Result<std::vector<std::shared_ptr<arrow::RecordBatch>>> RowsUpdatedAfter(
    const TableVersion& version, double* cursor);
/// The newest z_update_ts of `version`'s rows (-1e300 when it has none).
double NewestUpdateTs(const TableVersion& version);

class Task {
 public:
  virtual ~Task() = default;
  const std::string& name() const { return name_; }
  const std::string& output_table() const { return output_table_; }
  double interval_seconds() const { return interval_seconds_; }
  const std::vector<std::string>& primary_key() const { return primary_key_; }
  /// Retention for the output table (needed when the output is append-only).
  const std::optional<RetentionPolicy>& retention() const { return retention_; }
  /// Human-readable description (the SQL) for error reports.
  virtual std::string Describe() const = 0;

  /// Return true when the task has never run or `interval_seconds` passed
  /// since its last run. Tick thread only.
  bool Due(double now) const { return !ran_ || now - last_run_ >= interval_seconds_; }
  /// Note a run started at `now` (successful or not). Tick thread only.
  void MarkRun(double now) { ran_ = true; last_run_ = now; }

  /// Compute the task's output at time `now` (the tick's time); the engine
  /// writes it. A failure is returned, never thrown. Tick thread only.
  virtual Result<TaskOutput> Run(SqlEngine& sql, double now) = 0;

  /// What a checkpoint keeps of the task's own state so that a restore need
  /// not rebuild it (an incremental view's groups); empty when nothing. Tick
  /// boundary (no run in progress).
  virtual Result<std::string> SaveState() { return std::string(); }
  /// Take back what SaveState returned, at a restore's tick boundary: the
  /// tables hold the checkpoint's rows (the output table included).
  virtual Status RestoreState(SqlEngine& /*sql*/, std::string_view /*state*/) {
    return Status::OK();
  }

  /// The rows `table` holds now are not new input for this task: they moved
  /// between an application's instances (a partition shard restored or
  /// dropped), they did not arrive. A task that reads a table's new rows
  /// (windows, stream SQL) moves its cursor past them. Tick boundary.
  virtual void SkipNewRowsOf(const LiveTable& /*table*/) {}
  /// A move of `table`'s rows starts: read none of its new rows until
  /// SkipNewRowsOf(table) ends it (the rows restored meanwhile are moves).
  /// Tick boundary.
  virtual void PauseNewRowsOf(const LiveTable& /*table*/) {}

  // Partitioned operator state (an application's instance; engine/README.md).
  // A task whose state follows the partitions of its input table `table` (a
  // window over a partition shard) keeps it per input partition, and mirrors
  // it in a keyed table that has a `_partition` column (the state table,
  // which the application gives a changelog).
  /// The name of the task's state table for input `table` (made on the first
  /// call), or "" when the task keeps no partitioned state of it. Tick
  /// boundary or tick thread.
  virtual Result<std::string> PartitionedStateTable(const std::string& /*table*/) {
    return std::string();
  }
  /// `partitions` of `table` moved away: forget their state (the state
  /// table's rows of them are deleted by the caller). Tick boundary.
  virtual Status DropPartitions(const std::string& /*table*/,
                                const std::vector<int32_t>& /*partitions*/) {
    return Status::OK();
  }
  /// The state table holds the restored state of `partitions` of `table`:
  /// rebuild their state from it. Tick boundary.
  virtual Status RestorePartitions(const std::string& /*table*/,
                                   const std::vector<int32_t>& /*partitions*/,
                                   double /*now*/) {
    return Status::OK();
  }

  /// Copy what the task itself tracks (maintenance, state size) into
  /// `stats`. Tick thread, under the engine's registry lock, after each run.
  virtual void FillStats(TaskStats* /*stats*/) const {}

  /// Written by the tick thread under the engine's registry lock; read it
  /// through Engine::TaskStatistics.
  TaskStats stats;

 protected:
  Task(std::string name, std::string output_table, double interval_seconds,
       std::vector<std::string> primary_key, std::optional<RetentionPolicy> retention)
      : name_(std::move(name)), output_table_(std::move(output_table)),
        interval_seconds_(interval_seconds), primary_key_(std::move(primary_key)),
        retention_(std::move(retention)) {}

 private:
  std::string name_;
  std::string output_table_;
  double interval_seconds_;
  std::vector<std::string> primary_key_;
  std::optional<RetentionPolicy> retention_;
  bool ran_ = false;
  double last_run_ = 0;
};

/// Run `query` when due; its result replaces the output table's state.
/// With `use_prepared_statements` the query is prepared once and the plan
/// re-executed on every run (SqlEngine::QueryPrepared); otherwise it is parsed
/// and planned on every run. Results are the same.
class ScheduledSqlTask : public Task {
 public:
  /// `retention`: for the output table (StreamSqlTask appends and needs one).
  ScheduledSqlTask(std::string name, std::string query, std::string output_table,
                   double interval_seconds = 1.0, std::vector<std::string> primary_key = {},
                   bool use_prepared_statements = true,
                   std::optional<RetentionPolicy> retention = std::nullopt,
                   IncrementalMode incremental = IncrementalMode::kAuto);
  ~ScheduledSqlTask() override;
  const std::string& query() const { return query_; }
  bool use_prepared_statements() const { return use_prepared_statements_; }
  IncrementalMode incremental() const { return incremental_; }
  std::string Describe() const override { return query_; }
  Result<TaskOutput> Run(SqlEngine& sql, double now) override;
  Result<std::string> SaveState() override;
  Status RestoreState(SqlEngine& sql, std::string_view state) override;

  /// Analyse the query against the tables registered in `sql` now: OK when
  /// it can be maintained incrementally, else Invalid naming the part of
  /// the plan that cannot (what incremental=true refuses with). Any thread.
  static Status CheckIncremental(SqlEngine& sql, const std::string& query);

 protected:
  /// Run the whole query; its result replaces the output.
  Result<TaskOutput> Recompute(SqlEngine& sql);
  void FillStats(TaskStats* stats) const override;

 private:

  std::string query_;
  bool use_prepared_statements_;
  IncrementalMode incremental_;
  /// The maintained view (ivm_task.cc), made on the first run; tick thread only.
  struct Incremental;
  std::unique_ptr<Incremental> ivm_;
  bool ivm_decided_ = false;  // tick thread only
  std::string maintenance_;   // tick thread only; TaskStats::maintenance
};

enum class JoinType { kInner, kLeftOuter, kRightOuter, kFullOuter };
/// Parse "inner", "left outer", "left", "right outer", "right", "full outer", "full",
/// "outer" (case-insensitive; "_" may stand for the space). Invalid otherwise.
Result<JoinType> ParseJoinType(std::string_view text);

enum class AggregateFunction { kSum, kCount, kAvg, kMin, kMax, kCountDistinct };
/// Parse "sum", "count", "avg"/"mean", "min", "max", "count_distinct"
/// (case-insensitive). Invalid otherwise, listing the accepted names.
Result<AggregateFunction> ParseAggregateFunction(std::string_view text);
/// Return the canonical name ("sum", "count", "avg", "min", "max",
/// "count_distinct"), used in output column names.
const char* AggregateFunctionName(AggregateFunction fn);
/// Return "inner", "left outer", "right outer" or "full outer".
const char* JoinTypeName(JoinType type);

struct JoinTaskOptions {
  std::string name;
  std::string left_table;
  std::string right_table;
  std::vector<std::string> keys;        ///< left key columns
  std::vector<std::string> right_keys;  ///< right key columns (default: keys)
  std::string output_table;
  JoinType join_type = JoinType::kInner;
  std::vector<std::string> group_by;
  /// (column, function); output columns are named "<column>_<function>".
  std::vector<std::pair<std::string, AggregateFunction>> aggregations;
  std::vector<std::string> primary_key;
  /// Join only left rows written since the previous run and append the result.
  bool incremental = false;
  std::optional<RetentionPolicy> retention;
  double interval_seconds = 1.0;
};

/// Join two live tables (and optionally aggregate) when due. Runs as one DuckDB
/// query over the tables' views, so both sides are read at one version each.
/// Incremental tasks join only left rows whose z_update_ts is after the
/// previous successful run's `now` and return rows to append/upsert; other
/// tasks replace the output table's state.
class TableJoinTask : public Task {
 public:
  /// Invalid for empty table names or keys, mismatched key counts, duplicate
  /// output aggregations, or incremental right/full outer joins (which would
  /// re-emit every unmatched right row on each run). Columns are checked
  /// against the schemas at run time.
  static Result<std::shared_ptr<TableJoinTask>> Make(JoinTaskOptions options);
  std::string Describe() const override;
  Result<TaskOutput> Run(SqlEngine& sql, double now) override;
  const JoinTaskOptions& options() const { return options_; }
  /// Return the SQL the task runs over tables of these full schemas (system
  /// columns included) with watermark `since` (no filter when unset). KeyError
  /// when a key, group-by or aggregated column is missing.
  ///
  /// Without aggregations the output has every left user column, then every
  /// right user column that is not a right key (renamed "<name>_right" on a
  /// clash); for right and full outer joins the left key columns take the right
  /// key's value on rows without a left match. With aggregations the output has
  /// the group_by columns, then one "<column>_<function>" per aggregation
  /// (integer sums are BIGINT). System columns are never output: the output
  /// table stamps its own.
  Result<std::string> BuildSql(const arrow::Schema& left, const arrow::Schema& right,
                               std::optional<double> since) const;
  /// Watermark of the next incremental run: the `now` of the last successful
  /// run, unset before it.
  std::optional<double> watermark() const { return watermark_; }

 private:
  explicit TableJoinTask(JoinTaskOptions options);
  JoinTaskOptions options_;
  std::optional<double> watermark_;  // tick thread only
  std::string last_sql_;             // tick thread only; for Describe()
};

}  // namespace rill
