// StreamSqlTask: continuous SQL over the rows a live table received since the
// task's previous run, appended to an output table.
//
// A ScheduledSqlTask re-runs its query over whole tables and replaces its output,
// so its cost per run grows with the tables. A stream task runs its query with
// the source table's name bound to only the rows written since its previous
// run (the other tables in the query are the full live tables), and appends the
// result: filters, projections, per-row expressions and lookups of new rows in
// other tables cost O(new rows) per run. New rows are found as WindowTask finds
// them (window_task.h): engine writes carry strictly increasing z_update_ts, so
// the new rows are a suffix of the source's chunks, found from the newest
// chunk back. A row is seen once; rows removed by retention before a run are
// not seen; an upsert of a key is seen as a new row.
//
// The query runs through SqlEngine::QueryPreparedWith: prepared once and kept,
// executed over each run's new rows (the source's own view shows them), its
// result built as Arrow without an intermediate copy, projected fixed-width
// columns sharing the source's buffers. A query that also reads other tables
// is planned on each run instead, with their current statistics.
//
// The source is looked up by name on each run, so it may be a table that does
// not exist yet (a window task's output, made on its first emission): runs
// before it exists produce nothing.
//
// Threads: Run is called by the engine's tick thread only (as every task);
// construction from any thread. The engine must outlive the task.
#pragma once

#include <memory>
#include <string>

#include "rill/engine/task.h"

namespace rill {

class Engine;

class StreamSqlTask : public ScheduledSqlTask {
 public:
  /// Run `query` (one SELECT naming `source_table` and any other tables) over
  /// the rows of `engine`'s table `source_table` written since the previous run;
  /// append the result to `output_table` (an append table made on the first
  /// non-empty result, with `retention`, which append tables need). Add it with
  /// Engine::AddSqlTask. Invalid for a null engine, an empty name, source, query
  /// or output, or a retention without max_rows / max_age_seconds.
  static Result<std::shared_ptr<StreamSqlTask>> Make(std::string name, std::string query,
                                                     Engine* engine, std::string source_table,
                                                     std::string output_table,
                                                     RetentionPolicy retention,
                                                     double interval_seconds = 0);
  /// Read the new rows of the source and run the query over them (no output
  /// when there are none). Tick thread only.
  Result<TaskOutput> Run(SqlEngine& sql, double now) override;
  void SkipNewRowsOf(const LiveTable& table) override;
  void PauseNewRowsOf(const LiveTable& table) override;
  /// Return the source table's name.
  const std::string& source_table() const { return source_; }

 private:
  StreamSqlTask(std::string name, std::string query, Engine* engine, std::string source,
                std::string output_table, RetentionPolicy retention, double interval_seconds);
  Engine* engine_;
  std::string source_;
  double cursor_ = -1e300;  // tick thread only: the largest z_update_ts read
  bool paused_ = false;     // tick thread / tick boundary: a move of the source is applied
};

}  // namespace rill
