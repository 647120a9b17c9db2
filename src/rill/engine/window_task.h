// WindowTask: event-time windows over a live table, as an engine task.
//
// Each run (every tick by default) the task reads the rows of `source_table`
// written since its previous run, feeds them to a WindowOperator
// (window_operator.h: tumbling, hopping or session windows, watermark,
// incremental aggregates) and writes
//   - the windows that closed to `output_table` (an append table with
//     retention, created on the first run), or with EmitMode::kOnUpdate the
//     changed windows to `output_table` as a snapshot table keyed by
//     (window_start, window_end, group_by...) with an `is_final` column;
//   - the rows that were late or had no event time to the late table
//     (default "<output_table>_late": the source columns plus late_reason,
//     event_time, watermark, task), so no row vanishes.
//
// Reading new rows: every row written to a live table carries z_update_ts,
// the time of its write, and the engine's writes are stamped with strictly
// increasing tick times. The task keeps the largest z_update_ts it has read
// and walks the current version's chunks from the newest back until it meets
// a chunk whose last row is not newer, binary-searching the boundary inside
// it. The cost of a run is therefore proportional to the new rows, never to
// the table or the window contents.
//
// Snapshot (keyed) source tables: a window sees the table's stream of writes.
// An upsert of a key is a new event (the previous version of the row is not
// retracted from windows it already counted in); several writes of one key
// within one run count once, with the last value (the table keeps only that
// one). Rows removed by retention before the task read them are not seen.
//
// State: per open (window, key) group a few words per aggregation; closed
// windows are freed on emission. stats() has the sizes; they are also
// published in `rill_metrics` (business metrics "window:<task>:open_windows",
// "window:<task>:state_bytes", "window:<task>:late_rows").
//
// Threads: Run is called by the engine's tick thread only; stats() from any
// thread. Engine::AddWindowTask attaches the task to the engine (for reading
// and creating tables); the engine must outlive the attachment.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "rill/engine/task.h"
#include "rill/engine/window_operator.h"
#include "rill/engine/window_options.h"

namespace rill {

class Engine;

/// Counters of a window task: the operator's plus the task's own.
struct WindowTaskStats {
  WindowStats window;
  int64_t runs_with_rows = 0;
  int64_t late_rows_kept = 0;  ///< late rows written to the late table
  double cursor = 0;           ///< the largest z_update_ts read
};

class WindowTask : public Task, public std::enable_shared_from_this<WindowTask> {
 public:
  /// Invalid for empty names, an invalid spec (WindowSpec::Validate), a
  /// negative interval or late_max_rows < 1.
  static Result<std::shared_ptr<WindowTask>> Make(WindowTaskOptions options);

  const WindowTaskOptions& options() const { return options_; }
  const std::string& late_table() const { return options_.late_table; }
  std::string Describe() const override;
  Result<TaskOutput> Run(SqlEngine& sql, double now) override;
  void SkipNewRowsOf(const LiveTable& table) override;

  /// A copy of the counters. Any thread.
  WindowTaskStats stats_snapshot() const;

  /// Called by Engine::AddWindowTask: set the engine the task reads from.
  void Attach(Engine* engine);
  /// Called by Engine::AddWindowTask once the task is added: register its
  /// rill_metrics entries (business metrics "window:<name>:...").
  Status RegisterMetrics(Engine* engine);
  /// Called by Engine::RemoveWindowTask: unregister the metrics, forget the engine.
  void Detach(Engine* engine);

 private:
  explicit WindowTask(WindowTaskOptions options);
  Result<std::vector<std::shared_ptr<arrow::RecordBatch>>> ReadNewRows(
      const LiveTable& source);
  Status WriteLate(const std::shared_ptr<arrow::RecordBatch>& batch, const LateRows& late,
                   double now);

  WindowTaskOptions options_;
  std::atomic<Engine*> engine_{nullptr};
  std::shared_ptr<WindowOperator> op_;              // tick thread; made on the first run
  std::shared_ptr<arrow::Schema> source_schema_;    // tick thread
  double cursor_ = -1e300;                          // tick thread
  mutable std::mutex mu_;
  WindowTaskStats extra_;                           // guarded by mu_ (window is unused)
  std::shared_ptr<WindowOperator> published_op_;    // guarded by mu_; for stats()
};

}  // namespace rill
