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
// Partitioned state (an application's instance, docs/scale-out.md): over a
// source table held per input partition (Engine::HeldPerPartition), the task
// keeps one operator per input partition, as Kafka Streams keeps one task per
// partition: `_partition` joins the group_by columns (the output has it), a
// partition's rows go to its own operator, and after each run every operator
// is brought to the largest watermark among them, so lateness is judged as
// by one operator over the instance's rows. Its state moves with the
// partition. The task mirrors it in the keyed state table
// "<task>__state" (key _topic, _partition, _offset: the source's metadata
// columns): the on-time rows still in an open window of their partition,
// and per partition a marker row (_offset -1) with the operator's watermark
// in `_watermark`. A row leaves it when its last window closes
// (WindowOperator::StateHorizon). The application writes the state table to
// a changelog and, when a partition moves here, restores its rows there;
// RestorePartitions then rebuilds the partition's operator: its watermark
// from the marker, its open windows from the rows (ConsumeRestored). Windows
// the old owner emitted are not emitted again (their rows are gone, or they
// closed at the marker's watermark); windows it had not emitted are emitted
// here. A source without `_topic` and `_offset`, and a processing-time
// window, get partitioned operators but no state table (a moved partition's
// windows start empty).
//
// Threads: Run is called by the engine's tick thread only; stats() from any
// thread. Engine::AddWindowTask attaches the task to the engine (for reading
// and creating tables); the engine must outlive the attachment.
#pragma once

#include <atomic>
#include <cmath>
#include <map>
#include <memory>
#include <mutex>
#include <queue>
#include <string>
#include <vector>

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
  int64_t partitions = 0;      ///< partitioned state: the partitions held
  int64_t restored_rows = 0;   ///< partitioned state: rows restored from the state table
  int64_t state_rows = 0;      ///< partitioned state: rows the state table holds
};

/// The rows of `batch` at `indices` (late rows, a partition's rows).
Result<std::shared_ptr<arrow::RecordBatch>> TakeRows(
    const std::shared_ptr<arrow::RecordBatch>& batch, const std::vector<int64_t>& indices);

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
  void PauseNewRowsOf(const LiveTable& table) override;
  Result<std::string> PartitionedStateTable(const std::string& table) override;
  Status DropPartitions(const std::string& table,
                        const std::vector<int32_t>& partitions) override;
  Status RestorePartitions(const std::string& table, const std::vector<int32_t>& partitions,
                           double now) override;

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

  // Partitioned state (window_task_partitions.cc).
  /// A row of the state table, by event time (a min-heap).
  struct KeptRow {
    int64_t t_us;
    int32_t topic;  // index in topics_
    int64_t offset;
    bool operator>(const KeptRow& o) const { return t_us > o.t_us; }
  };
  struct Partition {
    std::shared_ptr<WindowOperator> op;
    std::priority_queue<KeptRow, std::vector<KeptRow>, std::greater<>> kept;
    double marker = NAN;  // the watermark the state table's marker row holds
  };
  enum class Mode { kUndecided, kSingle, kPartitioned };
  /// Decide once whether the task keeps its state per partition; make the
  /// state table then.
  Status DecideMode(const LiveTable& source);
  Result<Partition*> PartitionOf(SqlEngine& sql, int32_t partition);
  Result<TaskOutput> RunPartitioned(SqlEngine& sql, const LiveTable& source, double now);
  /// Write the on-time `rows` of `partition` to the state table.
  Status KeepRows(Partition& part, const std::shared_ptr<arrow::RecordBatch>& rows);
  /// Note `rows` (in the state table) in `part.kept`.
  Status IndexRows(Partition& part, const std::shared_ptr<arrow::RecordBatch>& rows);
  /// Delete the state rows before each operator's horizon; write the markers
  /// whose watermark moved.
  Status TrimState();
  void PublishOperators();

  WindowTaskOptions options_;
  std::atomic<Engine*> engine_{nullptr};
  Mode mode_ = Mode::kUndecided;                    // tick thread / tick boundary
  bool paused_ = false;                             // tick thread / tick boundary
  WindowSpec partition_spec_;                       // the spec with `_partition` in group_by
  std::map<int32_t, Partition> parts_;              // tick thread / tick boundary
  std::string state_table_;                         // "" without one
  std::shared_ptr<arrow::Schema> state_schema_;
  std::vector<std::string> topics_;                 // KeptRow::topic names
  double common_watermark_ = -INFINITY;             // the largest operator watermark
  SqlEngine* sql_ = nullptr;                        // the engine's, seen by the first run
  std::shared_ptr<WindowOperator> op_;              // tick thread; made on the first run
  std::shared_ptr<arrow::Schema> source_schema_;    // tick thread
  double cursor_ = -1e300;                          // tick thread
  mutable std::mutex mu_;
  WindowTaskStats extra_;                           // guarded by mu_ (window is unused)
  std::shared_ptr<WindowOperator> published_op_;    // guarded by mu_; for stats()
  std::vector<std::shared_ptr<WindowOperator>> published_parts_;  // guarded by mu_
};

}  // namespace rill
