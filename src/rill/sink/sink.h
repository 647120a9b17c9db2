// Sinks: a table's changes written on to Kafka, PostgreSQL or files.
//
// A Sink reads one table's change feed (table/change_feed.h) on its own
// thread and hands the changes to its SinkWriter (KafkaSinkWriter,
// PostgresSinkWriter, FileSinkWriter), which knows the target. The Sink owns
// everything common: when to write (interval_seconds / max_batch_rows), the
// mode (changelog / upsert / append), retries with backoff and the bounded
// backlog (on_error), counters, and the commit protocol below. A sink never
// blocks the tick: when its backlog is full under on_error=retry it asks the
// engine to hold back the table's connectors (backpressure), which buffer or
// apply their overflow policy as they do when the tick is slow.
//
// Commits and exactly-once (docs/sinks.md states the guarantees):
// - A writer writes changes inside an open unit (a Kafka transaction, a
//   PostgreSQL transaction, a file under a temporary name) and Commit makes the
//   unit visible together with its progress: the version it brings the target
//   to, stored in the target itself in the same atomic step (Kafka: the
//   transaction's consumer-group offsets of a progress group, with the version
//   in the offset metadata; PostgreSQL: the rill_sink_progress row; files: the
//   version range in the committed file names). LoadProgress reads it back.
// - Without a checkpoint directory: at-least-once. The sink writes every
//   version as it is published and commits per batch; after a crash it resumes
//   from the target's progress (what was written but not committed is
//   rolled back by the target, or, for Kafka without exactly_once, written
//   again).
// - With a checkpoint directory (and for Kafka, exactly_once=True): the sink
//   writes only versions that a complete checkpoint holds, and commits once per
//   checkpoint (CommitPoint::epoch = the checkpoint's id), after the checkpoint
//   is complete on disk. The checkpoint also holds, for each such sink, the
//   changes after the sink's last commit (a file section written by the
//   checkpointer's writer thread), so that after a crash between a complete
//   checkpoint and the sink's commit the restored engine writes exactly those
//   changes again: the target sees every change once. When the input is Kafka
//   too, the commit also carries the input offsets of that checkpoint
//   (CommitPoint::source_offsets -> send_offsets_to_transaction): end-to-end
//   exactly-once Kafka -> Rill -> Kafka.
//
// Threads: Start/Stop from any thread (not concurrently); stats() from any
// thread. SinkWriter methods are called only from the sink's own thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <arrow/type_fwd.h>

#include "rill/common/status.h"
#include "rill/table/change_feed.h"

namespace rill {

/// What a sink writes.
enum class SinkMode {
  kChangelog,  ///< every change as a row, with its _op and _version columns
  kUpsert,     ///< the current value per key; deletes as deletes (keyed tables)
  kAppend,     ///< appended rows only (append tables; inserts of keyed tables)
};
/// "changelog", "upsert", "append".
const char* SinkModeName(SinkMode mode);
Result<SinkMode> ParseSinkMode(std::string_view name);

/// What a sink does when its target fails.
enum class SinkErrorPolicy {
  kRetry,  ///< retry with backoff, keeping a bounded backlog, then backpressure
  kDrop,   ///< drop the failed batch: counted in dropped_rows, alerted
};
const char* SinkErrorPolicyName(SinkErrorPolicy policy);
Result<SinkErrorPolicy> ParseSinkErrorPolicy(std::string_view name);

/// Options every sink has (the pipeline file's and rills.sinks' names).
struct SinkOptions {
  std::string name;   ///< unique among the engine's sinks
  std::string table;  ///< the source table
  SinkMode mode = SinkMode::kChangelog;
  /// Write at least this often when there are changes (seconds, > 0).
  double interval_seconds = 1.0;
  /// Write as soon as this many change rows are pending (and never more in one
  /// write). 0: no row bound.
  int64_t max_batch_rows = 100000;
  SinkErrorPolicy on_error = SinkErrorPolicy::kRetry;
  /// First and longest wait between retries (doubling).
  double retry_initial_seconds = 0.1;
  double retry_max_seconds = 10.0;
  /// Change rows held while the target fails before backpressure (retry).
  int64_t max_backlog_rows = 1000000;
  /// Also write rows removed by the table's retention policy, as deletes.
  bool emit_retention_deletes = false;
};

/// What a sink has done. Counters are monotonic.
struct SinkStats {
  int64_t rows_written = 0;   ///< change rows committed at the target
  int64_t batches = 0;        ///< commits
  int64_t bytes = 0;          ///< bytes written (as the writer counts them)
  int64_t errors = 0;         ///< failed writes or commits
  int64_t retries = 0;
  int64_t dropped_rows = 0;   ///< dropped by on_error=drop
  int64_t snapshots = 0;      ///< full-state writes after falling behind the log
  uint64_t committed_version = 0;  ///< the version the target holds (CommitPoint::version)
  int64_t lag_versions = 0;   ///< table version - committed_version
  double lag_seconds = 0;     ///< now - publish time of the oldest uncommitted change
  bool backpressure = false;  ///< holding back the table's connectors now
  std::string last_error;
};

/// Where a commit brings the target.
struct CommitPoint {
  /// The table version whose changes are all written. A restored engine
  /// numbers its tables' versions anew; the sink then goes on from the
  /// checkpoint's numbering (sink/README.md), so that this, _version and
  /// LoadProgress stay comparable across restarts.
  uint64_t version = 0;
  /// The checkpoint this commit belongs to (exactly-once), 0 without one.
  uint64_t epoch = 0;
  /// Kafka input positions of that checkpoint: topic -> partition -> next offset
  /// (empty when the input is not Kafka or there is no checkpoint).
  std::map<std::string, std::map<int32_t, int64_t>> source_offsets;
  /// The Kafka consumer group those offsets belong to ("" when none).
  std::string source_group;
};

/// What a target last committed (SinkWriter::LoadProgress).
struct SinkProgress {
  uint64_t version = 0;
  uint64_t epoch = 0;
};

/// The target-specific half of a sink. Called on the sink's thread only.
class SinkWriter {
 public:
  virtual ~SinkWriter() = default;
  /// Connect / create what is needed (the target table, the directory, the
  /// transactional producer). Called before anything else, and again after a
  /// failure (a retry); must be safe to call after Close.
  virtual Status Open(const std::shared_ptr<arrow::Schema>& table_schema,
                      const std::vector<std::string>& primary_key) = 0;
  /// What the target last committed; nullopt when it holds nothing of this sink.
  virtual Result<std::optional<SinkProgress>> LoadProgress() = 0;
  /// Write `changes` (ChangeSchema batches, in version order; for a snapshot,
  /// the full state, replacing what the target held of this sink) into the
  /// open unit, starting one if none is open. In upsert mode the rows are
  /// already coalesced to the last change per key.
  virtual Status Write(const ChangeSet& changes, SinkMode mode) = 0;
  /// Make everything written since the last Commit visible, with `point` as the
  /// progress, atomically.
  virtual Status Commit(const CommitPoint& point) = 0;
  /// Drop the open unit (after a failed Write/Commit, before a retry).
  virtual void Abort() = 0;
  /// Release connections (Stop). Must be safe to call twice.
  virtual void Close() = 0;
  /// Bytes written so far (for SinkStats::bytes).
  virtual int64_t bytes_written() const = 0;
  /// "kafka", "postgres", "file".
  virtual const char* type() const = 0;

  // Someone else's transaction (scale-out: an application instance commits its
  // Kafka sinks' output in its own transactions, SinkSet::DriveKafkaSinks).
  /// The Kafka cluster ("bootstrap.servers") this writer writes to; "" for a
  /// writer that cannot write into another producer's transaction.
  virtual std::string external_transaction_cluster() const { return ""; }
  /// Prepare to write through WriteInto only (no connection of its own).
  virtual Status OpenExternal(const std::shared_ptr<arrow::Schema>& /*table_schema*/,
                              const std::vector<std::string>& /*primary_key*/) {
    return Status::NotImplemented(type(), " sinks cannot write into another transaction");
  }
  /// Produce `changes` (as Write does) with `producer` (an rd_kafka_t* whose
  /// transaction is open); its owner commits or aborts. A snapshot in upsert
  /// mode writes its rows (keys the target held and the snapshot lacks are
  /// not tombstoned).
  virtual Status WriteInto(void* /*producer*/, const ChangeSet& /*changes*/,
                           SinkMode /*mode*/) {
    return Status::NotImplemented(type(), " sinks cannot write into another transaction");
  }
};

}  // namespace rill
