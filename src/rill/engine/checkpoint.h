// Checkpointer: the engine's state on disk, written every interval and
// restored at start.
//
// One checkpoint holds, as of ONE tick boundary:
//   - every user table's current version (rows and the z_insert_ts /
//     z_update_ts columns), one file per table, Parquet or Arrow IPC (per
//     table), with the schema, primary key, mode and retention policy in the
//     manifest,
//   - every connector's position (Connector::SavePosition: the file
//     connector's processed files, Kafka's partition offsets) as of the last
//     Poll of that same tick, so the tables hold exactly the rows read up to
//     the positions, and replay after a restore neither loses nor repeats one,
//   - named sections added by the layers above (KPI queries and alert rules),
//   - the files of the checkpoint participants registered with the engine
//     (engine/checkpoint_participant.h: the sinks' uncommitted changes),
//     written into the temporary directory by the writer thread; once the
//     checkpoint is complete the participants are told (OnComplete), after
//     the sources committed its positions, and Restore hands them the
//     restored checkpoint.
//
// Layout of the checkpoint directory:
//   ckpt-00000042/           a complete checkpoint: manifest.json + table files
//   current -> ckpt-00000042 the newest (a symlink, replaced by rename)
//   <table>.parquet -> current/<table>.parquet   (one per table, for tools)
//   .tmp-ckpt-00000043/      one being written (removed when found at Make)
// A checkpoint is written into its .tmp- directory, every file and the
// directory are fsynced, then it is renamed to ckpt-N (atomic) and the parent
// fsynced: a crash at any moment leaves the previous checkpoints intact and
// the new one either complete or absent. Once a checkpoint is complete its
// connector positions are committed at their sources
// (Connector::CommitCheckpointed: Kafka group offsets); while a Checkpointer
// exists, ticks commit nothing (Engine::SetCommitsFollowCheckpoints), so a
// source's committed position never passes the newest complete checkpoint.
// Restore reads the newest complete one
// (falling back to older ones if it cannot be read). The newest `keep` are
// kept.
//
// Threads: capturing a checkpoint only pins the tables' immutable versions and
// copies the positions (on the tick thread, at the end of a tick, or at a tick
// boundary for Save()); the files are written by the checkpointer's own writer
// thread, so ticks go on meanwhile. Every public method may be called from any
// thread except from inside a tick (engine callbacks). The Checkpointer must
// not outlive its Engine.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "rill/common/status.h"

namespace rill {

class Engine;

namespace checkpoint_internal {
struct Capture;
}  // namespace checkpoint_internal

/// How a table is stored in a checkpoint.
enum class CheckpointFormat {
  kParquet,   ///< "<name>.parquet"
  kArrowIpc,  ///< "<name>.arrow" (Arrow IPC file format: fastest to write and read)
};

/// Parse "parquet", or "arrow" / "ipc" / "feather".
Result<CheckpointFormat> ParseCheckpointFormat(std::string_view text);
/// "parquet" or "arrow".
const char* CheckpointFormatName(CheckpointFormat format);

/// How a Checkpointer works (Checkpointer::Make validates it).
struct CheckpointOptions {
  /// The checkpoint directory (created if missing).
  std::string dir;
  /// Seconds between periodic checkpoints (> 0).
  double interval_seconds = 60.0;
  /// Complete checkpoints kept (>= 1); older ones are deleted after each write.
  int keep = 3;
  /// Default format of the table files.
  CheckpointFormat format = CheckpointFormat::kParquet;
  /// Per-table formats, overriding `format`.
  std::map<std::string, CheckpointFormat> table_formats;
  /// fsync files and directories (off only for tests and benchmarks that
  /// measure without the disk's flush).
  bool sync = true;
};

/// One complete checkpoint.
struct CheckpointInfo {
  uint64_t id = 0;
  std::string path;          ///< its directory
  double created_at = 0;     ///< engine time of the tick boundary it captured
  std::vector<std::string> tables;
  int64_t rows = 0;          ///< rows over all tables
  int64_t bytes = 0;         ///< bytes of the files written
  double write_seconds = 0;  ///< time to write it (0 when read back)
};

/// What a Checkpointer has done.
struct CheckpointStats {
  int64_t written = 0;
  int64_t failed = 0;
  int64_t skipped_busy = 0;   ///< due while the writer was still busy (retried next tick)
  double last_write_seconds = 0;
  std::string last_error;
  std::optional<CheckpointInfo> last;
};

/// Writes and restores checkpoints of one Engine (see the file comment).
class Checkpointer {
 public:
  /// Save a section: its text (any bytes). Called at the capture's tick boundary.
  using SaveSection = std::function<Result<std::string>()>;
  /// Restore a section from the text SaveSection returned.
  using RestoreSection = std::function<Status(std::string_view)>;

  /// Make a checkpointer over `engine` (borrowed; must outlive it). Creates the
  /// directory, removes interrupted `.tmp-` checkpoints. Invalid for bad
  /// options, IOError when the directory cannot be made.
  static Result<std::unique_ptr<Checkpointer>> Make(Engine* engine, CheckpointOptions options);
  /// Stop (see Stop()).
  ~Checkpointer();
  Checkpointer(const Checkpointer&) = delete;
  Checkpointer& operator=(const Checkpointer&) = delete;

  const CheckpointOptions& options() const { return options_; }

  /// Take a checkpoint every interval_seconds, at the end of the engine's ticks,
  /// written by the writer thread. The first is due one interval after Start.
  /// No-op if started.
  Status Start();
  /// Stop the periodic checkpoints; wait for the one being written. Idempotent.
  void Stop();
  bool started() const;

  /// True if a periodic checkpoint is due at `now` (engine seconds).
  bool IsDue(double now) const;
  /// Engine time of the last capture (0 before the first).
  double last_checkpoint_time() const;

  /// Capture at a tick boundary (waiting for a running tick) and write it now,
  /// on the calling thread, after any checkpoint being written. Return it.
  Result<CheckpointInfo> Save();
  /// Wait until no checkpoint is being written; return the last writer error (OK if none since the last call).
  Status Flush();

  /// Restore the newest complete checkpoint into the engine, at a tick
  /// boundary: each table's state is replaced (tables the engine lacks are
  /// created with the stored schema, key, mode and retention), connectors of
  /// the stored names resume from their positions, sections are restored.
  /// nullopt when there is no checkpoint. IOError/Invalid when none can be read.
  Result<std::optional<CheckpointInfo>> Restore();

  /// The text of section `name` in the checkpoint Restore would read (the
  /// newest readable one), without restoring anything; nullopt when there is
  /// no checkpoint or it has no such section. For a layer that must recreate
  /// its objects before the rows are restored (the pipeline catalog). Any thread.
  Result<std::optional<std::string>> ReadSection(const std::string& name) const;
  /// The complete checkpoints on disk, oldest first.
  Result<std::vector<CheckpointInfo>> List() const;

  /// Add a named section saved with every checkpoint and restored by Restore
  /// (after the tables). Replaces a section of the same name.
  void AddSection(const std::string& name, SaveSection save, RestoreSection restore);

  CheckpointStats stats() const;

 private:
  Checkpointer(Engine* engine, CheckpointOptions options, uint64_t next_id);
  /// Pin the tables' versions and copy positions and sections. Tick boundary.
  Result<std::unique_ptr<checkpoint_internal::Capture>> CaptureLocked(double now);
  void OnTickEnd(double now);
  void WriterLoop();
  Result<CheckpointInfo> Write(const checkpoint_internal::Capture& capture);
  /// Tell the connectors of a complete checkpoint to commit its positions at
  /// their sources (Connector::CommitCheckpointed). Under write_mu_.
  void CommitPositions(const checkpoint_internal::Capture& capture);
  /// Tell the checkpoint participants (checkpoint_participant.h) that the
  /// checkpoint of `capture` is complete. Under write_mu_.
  void NotifyComplete(const checkpoint_internal::Capture& capture, const CheckpointInfo& info);
  Status Apply(const checkpoint_internal::Capture& loaded);

  Engine* const engine_;
  const CheckpointOptions options_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  uint64_t next_id_;                                        // guarded by mu_
  double last_capture_ = 0;                                 // guarded by mu_
  bool started_ = false;                                    // guarded by mu_
  bool stopping_ = false;                                   // guarded by mu_
  bool writing_ = false;                                    // guarded by mu_
  std::unique_ptr<checkpoint_internal::Capture> pending_;   // guarded by mu_
  Status writer_error_;                                     // guarded by mu_
  CheckpointStats stats_;                                   // guarded by mu_
  struct Section {
    SaveSection save;
    RestoreSection restore;
  };
  std::map<std::string, Section> sections_;                 // guarded by mu_
  std::mutex write_mu_;  // one checkpoint written at a time (writer thread or Save)
  std::thread writer_;
  int64_t tick_hook_ = 0;  // the engine's id of OnTickEnd (Start to Stop)
};

}  // namespace rill
