// What sink_set.cc (the registry, the checkpoint participant), sink_runner.cc
// (a sink's thread), sink_epochs.cc (the exactly-once half) and
// sink_section.cc (the checkpoint file of a sink) share.
//
// Version spaces: a sink works in its table's versions (the feed's cursors)
// and tells its target "logical" versions = table version + offset_. The
// offset is 0 until a restore: a restored engine numbers its table's versions
// anew (the restore publishes one version), and the offset makes the logical
// versions go on from the checkpoint's, so the target's progress (which
// LoadProgress returns) stays comparable across restarts.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "rill/engine/checkpoint_participant.h"
#include "rill/engine/event.h"
#include "rill/sink/sink.h"
#include "rill/sink/sink_set.h"
#include "rill/table/change_feed.h"
#include "rill/table/live_table.h"

namespace rill {

class Engine;

namespace sink_internal {

using BatchVector = std::vector<std::shared_ptr<arrow::RecordBatch>>;

/// A sink's file in a checkpoint ("sinks/<name>.arrow"): the change rows
/// after the sink's last commit, up to the checkpoint's version, in logical
/// versions (sink_section.cc).
struct SinkSection {
  uint64_t epoch = 0;    ///< the checkpoint id
  uint64_t base = 0;     ///< logical version the sink had committed (rows are after it)
  uint64_t version = 0;  ///< logical version of the checkpoint's table version
  /// The rows could not be kept (the feed's log had forgotten them): a restore
  /// whose target is behind `version` writes a snapshot.
  bool needs_snapshot = false;
  BatchVector rows;  ///< ChangeSchema rows, every mode's (the mode is applied on write)
};

/// Write `section` as `<dir>/sinks/<escaped name>.arrow` (fsynced with `sync`);
/// return the bytes written.
Result<int64_t> WriteSinkSection(const std::string& dir, const std::string& sink,
                                 const std::shared_ptr<arrow::Schema>& change_schema,
                                 const SinkSection& section, bool sync);
/// Read a sink's section of the checkpoint in `dir`; nullopt when it has none.
Result<std::optional<SinkSection>> ReadSinkSection(const std::string& dir,
                                                   const std::string& sink);

/// What a sink restores from (SinkRunner::SetRestore).
struct SinkRestore {
  RestoredCheckpoint checkpoint;
  std::optional<SinkSection> section;
  uint64_t restored_version = 0;  ///< the table's version right after the restore
  std::shared_ptr<const TableVersion> state;  ///< that version, for a snapshot
};

/// A completed checkpoint as far as one sink is concerned.
struct Epoch {
  uint64_t id = 0;
  uint64_t table_version = 0;
  std::map<std::string, std::map<int32_t, int64_t>> source_offsets;
  std::string source_group;
};

/// One sink: its thread, its state, its counters. Shared by the SinkSet and
/// by its own thread (which holds a reference while it runs).
class SinkRunner : public Sink, public std::enable_shared_from_this<SinkRunner> {
 public:
  SinkRunner(Engine* engine, SinkOptions options, std::unique_ptr<SinkWriter> writer,
             std::shared_ptr<LiveTable> table, std::shared_ptr<ChangeFeed> feed);
  ~SinkRunner() override;

  const SinkOptions& options() const override { return options_; }
  const char* type() const override { return writer_type_; }
  SinkStats stats() const override;
  Status Flush(double timeout_seconds) override;
  const std::shared_ptr<LiveTable>& table() const { return table_; }

  /// Subscribe to the table's versions and start the thread. Once.
  void Start();

  // Driven by an application instance's transactions (sink_driven.cc,
  // DrivenSinks) ---------------------------------------------------------------
  /// Instead of Start: subscribe to the table's versions, no thread. The
  /// writer is opened with OpenExternal first (SinkSet::Add).
  void StartDriven();
  /// Before StartDriven, once.
  void MarkDriven() { driven_ = true; }
  bool driven() const { return driven_; }
  /// The newest table version seen.
  uint64_t seen_version() const;
  /// True when versions after the last commit up to `version` exist.
  bool HasChangesUpTo(uint64_t version) const;
  /// Produce the changes (last commit, to_version] with `producer`.
  Status WriteDriven(void* producer, uint64_t to_version);
  /// Flush (bounded), unsubscribe, stop. Idempotent.
  void StopDriven(double flush_seconds);
  /// The transaction holding WriteDriven's rows committed.
  void DrivenCommitted(uint64_t to_version);
  /// ... or was aborted: the next commit writes the changes again.
  void DrivenAborted(const Status& why);
  /// ... or was aborted and the inputs are read again: skip to `to_version`.
  void DrivenDiscard(uint64_t to_version, const Status& why);
  /// Flush (bounded by `flush_seconds`), stop and join the thread. A thread
  /// stuck in its writer longer than that is left to finish on its own (it
  /// no longer touches the engine). Idempotent.
  void Stop(double flush_seconds);

  // Moves (an application's partition shards, cluster/) ------------------------
  /// The table's versions after `after` are moves, up to EndMoves: rows
  /// restored or dropped because a partition changed instance, which a sink
  /// not driven by the application does not write. Any thread.
  void BeginMoves(uint64_t after);
  /// The moves that began last end at `through`.
  void EndMoves(uint64_t through);

  // Checkpoints (sink_epochs.cc) ---------------------------------------------
  /// Tick thread, at a checkpoint's capture: the file writer of this sink's
  /// section (the rows after its last commit up to `table_version`).
  CheckpointFileWriter CaptureSection(uint64_t id, uint64_t table_version);
  /// Writer thread: a checkpoint is complete; commit up to it.
  void OnCheckpointComplete(const CompletedCheckpoint& done);
  /// Restore from a checkpoint (before or after Start; any thread, at a tick
  /// boundary). Sets the sink's state (version offset, committed version, the
  /// section's rows as the carry, the checkpoint's epoch) at once, so that a
  /// checkpoint captured before the sink's thread has read its target already
  /// holds what the restored one held; the thread then compares the target's
  /// progress with the section and keeps only what the target lacks.
  void SetRestore(std::shared_ptr<SinkRestore> restore);

 private:
  /// One ChangeSet read and not committed (at-least-once).
  struct Pending {
    ChangeSet changes;
  };

  void Subscribe();
  void Run();
  /// Open the writer, retrying with backoff; false when stopped first.
  bool OpenWriter();
  /// Decide where to start from the target's progress (at-least-once rules).
  /// Leaves the state alone when a restore set it meanwhile (SetRestore),
  /// unless `after_restore` (a restore without this sink's section).
  void Resume(bool after_restore = false);
  /// Wait for something to do: a version, a flush, an epoch, a retry time, stop.
  /// False when stopping.
  bool WaitForWork();
  bool checkpoint_mode() const;

  // At-least-once (sink_runner.cc).
  void ReadBacklog();
  bool BatchDue(double now) const;
  void WriteRound();
  /// Write `rows` in max_batch_rows groups (the first one flagged `snapshot`)
  /// and commit `point`; writes nothing but the commit when `rows` is empty.
  Status WriteAndCommit(const BatchVector& rows, bool snapshot, const CommitPoint& point);
  /// Apply the mode: upsert coalesces, append keeps inserts, changelog all.
  Result<BatchVector> ApplyMode(const BatchVector& rows, bool snapshot) const;
  /// Count a failure and plan what comes next (retry after backoff, or drop);
  /// `abort`: the open unit is dropped (not after a failed Open/LoadProgress).
  /// Returns true when the rows are to be dropped.
  bool OnFailure(const Status& status, int64_t rows, bool abort = true);
  void OnSuccess(uint64_t table_version, int64_t rows);
  void UpdateBackpressure();
  void Alert(Severity severity, const std::string& message, const std::string& detail);
  void Acknowledge();

  // Exactly-once (sink_epochs.cc).
  void HandleRestore();
  void RunEpoch();
  /// Read the feed's changes (from_version, to_version] (table versions), with
  /// `offset` added to their _version; `*snapshot` set when the feed answered
  /// with the full state instead, as of `*reached` (>= to_version).
  Result<BatchVector> ReadRange(uint64_t from_version, uint64_t to_version, int64_t offset,
                                bool* snapshot, uint64_t* reached);

  double WallNow() const;

  Engine* engine_;  // guarded by engine_mu_ (null once abandoned)
  mutable std::mutex engine_mu_;
  const SinkOptions options_;
  std::unique_ptr<SinkWriter> writer_;  // the sink's thread only
  const char* writer_type_;
  const std::shared_ptr<LiveTable> table_;
  const std::shared_ptr<ChangeFeed> feed_;
  LiveTable::SubscriptionId subscription_ = 0;
  std::thread thread_;

  // Shared with the subscriber (tick thread), Flush, stats, the checkpointer.
  struct Shared {
    std::mutex mu;
    std::condition_variable cv;
    uint64_t table_version = 0;                       // newest version seen
    std::deque<std::pair<uint64_t, double>> published;  // (version, published_at), trimmed
  };
  std::shared_ptr<Shared> shared_;
  // Guarded by shared_->mu:
  bool stop_ = false;
  bool done_ = false;
  int64_t flush_requests_ = 0;
  SinkStats stats_;
  uint64_t committed_ = 0;  ///< table version whose changes are all committed
  int64_t offset_ = 0;      ///< logical = table version + offset_
  std::optional<Epoch> completed_;       ///< newest completed checkpoint not yet committed
  uint64_t newest_checkpoint_version_ = 0;  ///< its table version (for Flush)
  std::shared_ptr<SinkRestore> restore_;
  /// A restore set committed_/offset_/carry_ (SetRestore): Resume must not
  /// overwrite them.
  bool restored_ = false;
  std::multiset<uint64_t> pinned_;       ///< bases of sections being written
  /// Rows restored from a checkpoint and not yet committed (logical versions),
  /// after carry_base_; a snapshot when carry_snapshot_.
  BatchVector carry_;
  uint64_t carry_base_ = 0;
  bool carry_snapshot_ = false;
  bool has_carry_ = false;

  // The sink's thread only:
  std::deque<Pending> backlog_;
  int64_t backlog_rows_ = 0;
  uint64_t read_cursor_ = 0;
  double backlog_since_ = 0;   // wall time the oldest pending change was read
  bool force_snapshot_ = false;
  std::atomic<bool> failing_{false};  // written by the sink's thread only
  /// Once a Checkpointer was attached the sink stays exactly-once: a
  /// checkpointer going away (shutdown) must not let it write versions no
  /// checkpoint holds. Guarded by engine_mu_.
  mutable bool epochs_seen_ = false;
  bool reopen_ = false;
  int attempts_ = 0;
  double retry_at_ = 0;
  int64_t dropped_in_stretch_ = 0;
  std::atomic<bool> backpressure_{false};  // written by the sink's thread

  // Driven (sink_driven.cc): set once before StartDriven; the rest on the
  // instance's committing thread only.
  bool driven_ = false;
  bool driven_started_ = false;  // guarded by shared_->mu
  uint64_t driven_reached_ = 0;  ///< the version WriteDriven brought the target to
  int64_t driven_rows_ = 0;      ///< rows it produced
  bool driven_snapshot_ = false;
  DrivenSinks::RowFilter row_filter_;  // guarded by shared_->mu (DrivenSinks::SetRowFilter)
  /// BeginMoves/EndMoves: (after, through] ranges of versions not written;
  /// through is UINT64_MAX while open. Guarded by shared_->mu.
  std::vector<std::pair<uint64_t, uint64_t>> moves_;
  /// `batches` without the rows of moves_.
  Result<BatchVector> DropMoves(const BatchVector& batches) const;

  friend class DrivenSinksImpl;
};

}  // namespace sink_internal
}  // namespace rill
