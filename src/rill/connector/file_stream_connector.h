// FileStreamConnector: rows from files that appear in a folder.
//
// A reader thread watches the folder (inotify, with a polling fallback when
// inotify is unavailable), reads each new file whose name matches the pattern
// once it is complete, and pushes its rows into a BoundedBuffer:
//   .json .ndjson .jsonl   NDJSON or a JSON array (JsonDecoder, per-line rejects)
//   .csv                   Arrow's CSV reader (target column types when known)
//   .parquet               Arrow's Parquet reader
//   .arrow .ipc .feather   Arrow IPC, file or stream format
// A file is complete when it was renamed into place or closed after writing
// (inotify), or when its size and modification time stayed the same for
// `stable_ms` (polling, and files present at start). Processed files are
// remembered in a state file (one line per file: size, mtime, name; tailed
// files also keep their read offset) so that a restart reads nothing twice.
// The state file is the connector's source commit: it names only files whose
// rows the engine has applied (CommitApplied, without a Checkpointer) or that a
// complete checkpoint holds (CommitCheckpointed). A crash before that reads
// the files again (at-least-once), it never skips them.
// A file that cannot be read (corrupt Parquet, bad CSV, unreadable) becomes one
// reject (position "file NAME", the error, its first bytes) and counts in
// `errors`; it is never deleted: with `delete_after_process` it is moved to
// `<watch_path>/failed/` (the reject says where), otherwise it stays in place.
// Either way it is not read again (its state says read).
//
// With `tail`, NDJSON files are followed as they grow: complete lines appended
// after the last byte read are decoded; other formats are read once.
//
// Checkpoints: a file's rows are buffered and the file marked read in one step
// that Poll never splits, so SavePosition (the files read as of the last Poll)
// names exactly the files whose rows the engine has taken. RestorePosition
// replaces the processed set (and the state file) with a checkpoint's: files
// read after it are read again.
//
// delete_after_process deletes a file only once it is committed (see above):
// a file polled but not yet applied (or not yet in a complete checkpoint) is
// still on disk after a crash, and is read again.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "rill/connector/bounded_buffer.h"
#include "rill/connector/connector.h"
#include "rill/connector/json_decoder.h"

namespace rill {

/// Options of a FileStreamConnector.
struct FileStreamOptions {
  std::string watch_path;          ///< the folder to watch (must exist)
  std::string file_pattern = "*";  ///< fnmatch pattern of file names
  bool delete_after_process = false;
  bool tail = false;               ///< follow appended lines of NDJSON files
  int64_t poll_interval_ms = 200;  ///< rescan period (and inotify wait)
  int64_t stable_ms = 1000;        ///< unchanged this long = complete (no inotify event);
                                   ///< files are applied in name order, so a file not yet
                                   ///< complete holds back the names after it
  bool use_inotify = true;         ///< false: polling only
  /// The state file; empty: `<watch_path>/.rill-<connector name>.state`.
  std::string state_path;
  JsonDecodeOptions decode;        ///< for JSON files (schema: explicit, else the table's)
  BufferLimits limits;
  std::string name;
};

/// Reads new files of a folder on its own thread.
///
/// Threads: Start/Stop from the engine; Poll/TakeRejects from the tick thread;
/// stats() from any thread. With on_overflow = error the reader waits for room
/// instead of dropping (a file is not lost); the drop strategies drop and count.
class FileStreamConnector : public Connector {
 public:
  /// Make a connector. Invalid for a missing folder or bad options; IOError
  /// for an unreadable state file.
  static Result<std::shared_ptr<FileStreamConnector>> Make(std::string target_table,
                                                           FileStreamOptions options);
  ~FileStreamConnector() override;

  Status Start() override;
  void Stop() override;
  Result<std::vector<std::shared_ptr<arrow::RecordBatch>>> Poll() override;
  std::vector<RejectedRecord> TakeRejects() override;
  void SetTargetSchema(const std::shared_ptr<arrow::Schema>& schema) override;
  ConnectorStats stats() const override;
  /// {"files": [{"name", "size", "mtime_ns", "offset", "done"}, ...]}: the files
  /// read as of the last Poll. Tick thread.
  Result<std::string> SavePosition() const override;
  /// Replace the processed set with `position` (see the file comment).
  Status RestorePosition(std::string_view position) override;
  /// Commit the files of the last Poll: write them to the state file and
  /// delete those read whole when delete_after_process. The I/O is done by the
  /// reader thread (inline when the connector is not started). Tick thread.
  void CommitApplied() override;
  /// Commit the files of `position` (a SavePosition document of a complete
  /// checkpoint) as CommitApplied does, inline. Checkpoint writer thread.
  void CommitCheckpointed(std::string_view position) override;

  /// Scan the folder once and read what is ready (what the thread does every
  /// poll interval). For tests and for use without Start. Not concurrently
  /// with a started connector. With `present_are_complete`, every matching
  /// file present now counts as complete (the caller knows its writers are
  /// done; Python's read_batch() on a connector without an engine).
  Status ScanOnce(bool present_are_complete = false);

  /// Names of the files read so far (from the state). Any thread.
  std::vector<std::string> processed_files() const;
  /// Whether inotify is in use (false: polling). Any thread.
  bool using_inotify() const { return inotify_fd_ >= 0; }

 private:
  struct FileState {
    int64_t size = 0;
    int64_t mtime_ns = 0;
    int64_t offset = 0;       ///< tailed files: bytes consumed (up to a line end)
    bool done = false;        ///< read (and not tailed)
    double stable_since = 0;  ///< when size/mtime were last seen changing (seconds)
    bool closed = false;      ///< inotify saw it closed after writing / moved in
  };

  FileStreamConnector(std::string target_table, FileStreamOptions options,
                      std::unique_ptr<JsonDecoder> decoder);
  using FileMap = std::map<std::string, FileState>;
  Status LoadState();
  /// Replace the state file with `files`. Under commit_mu_ or before Start.
  Status WriteState(const FileMap& files);
  /// Write the pending commit (if any) to the state file, then delete the
  /// files it covers that wait for deletion. Any thread; one at a time.
  void ApplyPendingCommit();
  /// Parse a SavePosition document.
  Result<FileMap> ParsePosition(std::string_view position) const;
  void Run();
  void DrainInotify();
  using Batches = std::vector<std::shared_ptr<arrow::RecordBatch>>;
  Result<Batches> ReadFile(const std::string& name, FileState* state);
  Result<Batches> ReadWhole(const std::string& name, const std::string& path, int64_t size);
  Result<Batches> ReadTail(const std::string& name, const std::string& path, FileState* state);
  /// Buffer `batches` and record `read` as the file's state, in one step under
  /// deliver_mu_ (see the file comment); with `delete_when_committed`, the file
  /// is deleted once a commit covers it. False when stopped before it fit.
  bool Deliver(const std::string& name, Batches batches, const FileState& read,
               bool delete_when_committed);
  void AddRejects(std::vector<RejectedRecord> rejects);
  /// Reject the whole file `name` (one reject naming it and `error`, its first
  /// bytes as raw; counted in `errors`), moving it to failed/ first when
  /// `move_to_failed`. Reader thread.
  void RejectFile(const std::string& name, const std::string& path, const Status& error,
                  bool move_to_failed);
  /// Move `path` to `<watch_path>/failed/` (created if needed; a name taken
  /// there gets a ".N" suffix); return its new name relative to watch_path.
  Result<std::string> MoveToFailed(const std::string& name, const std::string& path);

  const FileStreamOptions options_;
  const bool explicit_schema_;
  BoundedBuffer buffer_;
  int inotify_fd_ = -1;

  // Lock order: commit_mu_, deliver_mu_, then mu_.
  std::mutex commit_mu_;           // one state-file commit at a time
  mutable std::mutex deliver_mu_;  // a push and its file's state change; Poll's drain
  mutable std::mutex mu_;
  std::condition_variable room_cv_;              // the buffer was drained
  std::map<std::string, FileState> files_;       // guarded by mu_
  std::map<std::string, FileState> unpolled_;    // guarded by mu_: changes since Poll
  std::map<std::string, FileState> polled_;      // guarded by mu_: as of the last Poll
  bool polled_changed_ = false;                  // guarded by mu_: polled_ not yet committed
  std::optional<FileMap> pending_commit_;        // guarded by mu_: to write to the state file
  std::set<std::string> to_delete_;              // guarded by mu_: delete once committed
  std::unique_ptr<JsonDecoder> decoder_;         // guarded by mu_
  std::shared_ptr<arrow::Schema> target_schema_; // guarded by mu_
  std::vector<RejectedRecord> rejects_;          // guarded by mu_
  ConnectorStats counters_;                      // guarded by mu_

  std::mutex scan_mu_;  // one scan at a time (thread or ScanOnce)
  std::atomic<bool> stop_{false};
  std::atomic<bool> running_{false};  // the reader thread runs (and applies commits)
  std::thread thread_;
};

}  // namespace rill
