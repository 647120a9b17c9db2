// PostgresCDCConnector: a PostgreSQL table's changes by logical replication
// (libpq's replication protocol, the built-in `pgoutput` plugin).
//
// What it does (docs/postgres_cdc.md has the user's view):
//   1. Ensures the publication (`publication`, default "rill_<slot_name>",
//      created FOR TABLE <table> when missing).
//   2. Initial snapshot (snapshot = true and no checkpointed position): drops
//      the slot if it exists, creates it with CREATE_REPLICATION_SLOT ...
//      LOGICAL pgoutput EXPORT_SNAPSHOT, and copies the table with COPY ... TO
//      STDOUT (text) in a REPEATABLE READ transaction that SET TRANSACTION
//      SNAPSHOT to the exported snapshot: exactly the rows as of the slot's
//      consistent point. The first snapshot batch starts with a truncate row
//      (a re-snapshot replaces what the table held).
//   3. Streams the slot from there (START_REPLICATION ... LOGICAL lsn
//      (proto_version '1', publication_names '…')): each transaction's
//      inserts, updates, deletes and truncates of the table become one push of
//      batches with kWriteOpColumn (rill/common/row_ops.h), so the engine
//      applies a whole transaction in one tick.
//
// Positions: SavePosition is {"slot", "snapshot_done", "lsn"} as of the last
// Poll, where lsn is the end LSN of the last transaction (or keepalive
// position between transactions) whose rows Poll returned. The slot's
// confirmed_flush_lsn is advanced by standby status updates (sent every
// status_interval_ms) only to what CommitApplied (no checkpointer) or
// CommitCheckpointed (a complete checkpoint) allowed, so after a crash the
// server still has every change after the restored position; transactions
// ending at or before the restored LSN are skipped: nothing twice.
//
// The reader thread waits for the first Poll before it touches the server, so
// that a RestorePosition that comes between Start and the first tick (the
// engine restores a checkpoint after adding its connectors) is seen before a
// fresh start would drop and re-create the slot.
//
// Errors never stop the connector: a failed connection, a server restart, a
// dropped slot or publication are reported once per outage by Poll (the
// engine records them as alerts) and retried with a backoff (reconnects in
// the stats). Schema changes: a Relation message with a new column is picked
// up at once; a column whose type changes incompatibly is reported and the
// relation's later rows go to rill_rejects.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "rill/connector/connector.h"

namespace rill {

/// Options of a PostgresCDCConnector.
struct PostgresCDCOptions {
  std::string dsn;        ///< libpq connection string (host=… dbname=… or a URI)
  std::string table;      ///< "name" or "schema.name"
  std::string slot_name;  ///< the logical replication slot (created when missing)
  /// The publication; empty: "rill_<slot_name>", created FOR TABLE <table>.
  std::string publication;
  /// Take the initial snapshot when there is no checkpointed position.
  /// false: stream the existing slot from its confirmed position (a missing
  /// slot is created; rows before it are not read).
  bool snapshot = true;
  std::string numeric_as = "decimal";  ///< "decimal" | "float64"
  /// Rows buffered before the reader waits (a transaction is never split; a
  /// transaction larger than this is taken when the buffer is empty).
  int64_t max_buffer_records = 100000;
  int64_t snapshot_batch_rows = 65536;  ///< rows per snapshot batch
  int64_t status_interval_ms = 1000;   ///< standby status updates (and lag queries)
  /// Report (once per crossing) when the slot's lag passes this many bytes;
  /// 0: never.
  int64_t lag_alert_bytes = 1LL << 30;
  double reconnect_initial_seconds = 0.2;
  double reconnect_max_seconds = 5.0;
  std::string name;
};

/// Mirrors one PostgreSQL table into its target table.
///
/// Threads: Start/Stop/RestorePosition from the engine; Poll, TakeRejects,
/// SavePosition and CommitApplied from the tick thread; CommitCheckpointed from
/// the checkpoint writer; stats() from any thread.
class PostgresCDCConnector : public Connector {
 public:
  /// Invalid for a bad option (empty dsn, table or slot_name, numeric_as).
  static Result<std::shared_ptr<PostgresCDCConnector>> Make(std::string target_table,
                                                            PostgresCDCOptions options);
  ~PostgresCDCConnector() override;

  /// Start the reader thread (it connects at the first Poll).
  Status Start() override;
  /// Stop the reader thread (sends a last standby status update).
  void Stop() override;
  /// Every buffered transaction (whole), or once per outage / alert a Status
  /// describing it (the rows stay buffered).
  Result<std::vector<std::shared_ptr<arrow::RecordBatch>>> Poll() override;
  std::vector<RejectedRecord> TakeRejects() override;
  void SetTargetSchema(const std::shared_ptr<arrow::Schema>& schema) override;
  ConnectorStats stats() const override;

  Result<std::string> SavePosition() const override;
  Status RestorePosition(std::string_view position) override;
  /// Allow the slot to confirm the position of the last Poll.
  void CommitApplied() override;
  /// Allow the slot to confirm the position of a complete checkpoint.
  void CommitCheckpointed(std::string_view position) override;

  /// The publication used ("rill_<slot_name>" by default).
  const std::string& publication() const;
  /// The LSN the slot may confirm (what the last status update sent or will send).
  uint64_t confirmed_lsn() const;

  struct Impl;

 private:
  PostgresCDCConnector(std::string target_table, PostgresCDCOptions options);
  std::unique_ptr<Impl> impl_;
};

}  // namespace rill
