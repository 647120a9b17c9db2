// Connector: a source of record batches for one target table.
//
// Connectors that read on their own threads (Kafka, WebSocket, files) push into
// a BoundedBuffer; the tick thread drains it. A connector never blocks the tick.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <arrow/type_fwd.h>

#include "rill/common/status.h"

namespace rill {

/// What a connector has done so far. Counters are monotonic.
struct ConnectorStats {
  int64_t buffered_records = 0;
  int64_t buffered_bytes = 0;
  int64_t pushed_records = 0;    ///< accepted into the buffer
  int64_t dropped_records = 0;   ///< dropped by the overflow strategy
  int64_t refused_records = 0;   ///< refused with an error (on_overflow = error)
  int64_t drained_records = 0;   ///< handed to the engine
  int64_t errors = 0;            ///< failed reads
  // Decoding connectors (NDJSON, files, WebSocket, Kafka) also count these.
  int64_t received_bytes = 0;    ///< raw bytes received (before decoding)
  int64_t received_records = 0;  ///< records (lines, array elements) received
  int64_t parsed_records = 0;    ///< records decoded into rows
  int64_t rejected_records = 0;  ///< records that failed to decode (see TakeRejects)
  /// Rejects beyond the connector's cap of pending rejects between two Polls
  /// (counted, not kept in rill_rejects; the engine raises an alert).
  int64_t rejects_overflowed = 0;
  int64_t unknown_fields = 0;    ///< fields not in the schema (ignored and counted)
  /// Kafka messages with a key and a null value (deletes by key, or skipped:
  /// see KafkaConnector's file comment).
  int64_t tombstones = 0;
  int64_t reconnects = 0;        ///< reconnections after a drop (network connectors)
  int64_t lag = 0;               ///< records not yet read at the source (Kafka: sum of lags)
  // Change data capture (PostgresCDCConnector).
  int64_t lag_bytes = 0;  ///< WAL bytes the source holds for this reader (slot lag)
  /// The initial snapshot: rows copied so far, the table's estimated rows
  /// (pg_class.reltuples; -1 unknown), rows per second, seconds left (-1
  /// unknown), and whether it is complete (1) or running (0; -1: none taken).
  int64_t snapshot_rows = 0;
  int64_t snapshot_rows_total = -1;
  int64_t snapshot_rows_per_s = 0;
  int64_t snapshot_eta_seconds = -1;
  int64_t snapshot_done = -1;
};

/// One input record that could not be decoded; the engine writes it to
/// `rill_rejects`.
struct RejectedRecord {
  std::string connector;  ///< the connector's name
  std::string position;   ///< where: "line 3, byte 120", "file f.ndjson, line 3, …",
                          ///< "partition 0, offset 17"
  std::string error;      ///< what was wrong, naming the field when there is one
  std::string raw;        ///< the record's bytes, truncated to a bound
  int64_t raw_size = 0;   ///< the record's full size in bytes
  int64_t byte_offset = -1;  ///< the record's offset in its input, when known
};

/// Base class of all connectors.
///
/// Threads: Start/Stop are called by the engine (any thread, not concurrently);
/// Poll is called by the tick thread only; stats() from any thread.
class Connector {
 public:
  virtual ~Connector() = default;

  /// Unique name within an engine (defaults to the target table's name).
  const std::string& name() const { return name_; }
  const std::string& target_table() const { return target_table_; }
  /// Schema of the batches, if the connector knows it (null otherwise).
  const std::shared_ptr<arrow::Schema>& schema() const { return schema_; }

  /// Begin reading (spawn threads, open sockets). Default: nothing.
  virtual Status Start() { return Status::OK(); }
  /// Stop reading and join threads. Must be safe to call twice. Default: nothing.
  virtual void Stop() {}

  /// Return the batches that arrived since the last call (possibly none).
  /// An error is recorded by the engine against this connector; the engine
  /// calls Poll again next tick.
  virtual Result<std::vector<std::shared_ptr<arrow::RecordBatch>>> Poll() = 0;
  /// As Poll, but return at most `max_records` rows (0: no limit) and keep the
  /// rest buffered for the next tick, in order (EngineOptions::
  /// max_records_per_tick). Default: Poll(), for connectors whose own buffer
  /// already bounds one tick's intake because their reader waits for room
  /// (Kafka, files: their positions advance by whole reads).
  virtual Result<std::vector<std::shared_ptr<arrow::RecordBatch>>> PollAtMost(
      int64_t max_records) {
    (void)max_records;
    return Poll();
  }

  /// Return a copy of the counters. Any thread.
  virtual ConnectorStats stats() const = 0;

  /// Return the records that failed to decode since the last call (possibly
  /// none). Called by the tick thread after Poll. Default: none.
  virtual std::vector<RejectedRecord> TakeRejects() { return {}; }

  /// Tell the connector the schema of its target table (its user columns).
  /// Called by the engine when the connector is added to an engine whose
  /// table exists, and when the engine creates the table from connector data.
  /// Decoding connectors decode into this schema from then on. Any thread.
  /// Default: ignored.
  virtual void SetTargetSchema(const std::shared_ptr<arrow::Schema>& schema) { (void)schema; }

  // Checkpoints (engine/checkpoint.h) ---------------------------------------------
  /// Return where the connector stands as of the last Poll: exactly the input
  /// whose rows Poll has returned so far (or dropped by the overflow policy),
  /// as a JSON document; a connector restored to it reads on from the next
  /// record. Empty: the connector has no position (rows pushed by the
  /// application, as MemoryConnector). Tick thread, between Polls.
  virtual Result<std::string> SavePosition() const { return std::string(); }
  /// Resume from a position written by SavePosition: rows buffered and not yet
  /// polled are discarded (they are read again from the source), and reading
  /// goes on after the position. Invalid for a document this connector cannot
  /// read. Called at a tick boundary (never concurrently with Poll); a started
  /// connector is restarted. Default: nothing to restore.
  virtual Status RestorePosition(std::string_view position) {
    (void)position;
    return Status::OK();
  }
  /// Whether a checkpoint's rows of the target table are restored along with
  /// this connector's position. False for an application's Kafka source into
  /// a table that is not held per partition (cluster/application.h): its
  /// group's committed offsets, not the checkpoint's, say where it reads on,
  /// so its table starts empty as after a restart without a checkpoint.
  /// Default: true.
  virtual bool RestoresTableFromCheckpoint() const { return true; }

  // Source commits (Kafka group offsets) ---------------------------------------------
  /// Commit, at the source, the position as of the last Poll: the engine has
  /// applied every row Poll returned (written and published, or kept in
  /// rill_rejects) and every reject TakeRejects gave. Called by the tick thread
  /// after each Poll whose rows it accounted for, when no Checkpointer is
  /// attached. Never blocks on I/O. Default: nothing to commit.
  virtual void CommitApplied() {}
  /// The engine has applied the rows and rejects of the last Poll (every tick
  /// that polled, with or without a Checkpointer; after CommitApplied, so that what it allows
  /// is set when a revoke that waited for this commits it). A
  /// Kafka connector giving partitions back waits for it. Tick thread.
  virtual void Applied() {}
  /// Whether this source commits what each tick applied even while a
  /// Checkpointer is attached (an application's Kafka source: its commits go
  /// with the application's outputs, and a checkpoint only spares a replay).
  /// Default: false (commits follow the checkpoints).
  virtual bool CommitsFollowTicks() const { return false; }
  /// Commit, at the source, `position` (a SavePosition document) of a checkpoint
  /// that is now complete on disk. Called by the Checkpointer's writer thread or
  /// by Checkpointer::Save's caller, concurrently with Poll. Default: nothing.
  virtual void CommitCheckpointed(std::string_view position) { (void)position; }
  /// The consumer group the source positions belong to (Kafka's group.id), so
  /// that an exactly-once sink can commit them in its own transaction; "" when
  /// the source has none. Any thread.
  virtual std::string source_group() const { return std::string(); }

 protected:
  Connector(std::string name, std::string target_table, std::shared_ptr<arrow::Schema> schema)
      : name_(name.empty() ? target_table : std::move(name)),
        target_table_(std::move(target_table)),
        schema_(std::move(schema)) {}

 private:
  std::string name_;
  std::string target_table_;
  std::shared_ptr<arrow::Schema> schema_;
};

}  // namespace rill
