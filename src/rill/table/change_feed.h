// The change feed: what changed in a LiveTable between two published versions.
//
// Every consumer of changes (sinks, the WebSocket `table:<name>` channel,
// incremental views, scale-out changelogs) reads this one feed; nobody diffs
// snapshots by hand.
//
//     auto feed = table->OpenChangeFeed();          // the table now keeps a change log
//     uint64_t cursor = 0;                          // 0: nothing seen yet
//     RILL_ASSIGN_OR_RAISE(ChangeSet changes, feed->Read(cursor, {}));
//     ... use changes.batches (ChangeSchema: table columns + _op + _version) ...
//     cursor = changes.to_version;
//     feed->Acknowledge(cursor);                    // the log may forget what is acknowledged
//
// The log: while at least one ChangeFeed is open, each write of the table
// records what it did, per published version: the rows it inserted or
// updated (the new chunk, shared zero-copy), the rows it removed (by update:
// old values; by delete; by retention), as references into the immutable
// chunks that held them, so the tick does O(batch) work and copies nothing.
// Rows are materialized (gathered, _op/_version added) by Read, on the
// reader's thread. The log is trimmed below the lowest acknowledged version of
// the open feeds, and bounded (ChangeFeedOptions): a reader whose cursor is
// older than what the log still holds gets a snapshot (the full state at the
// current version, every row as "insert", ChangeSet::snapshot = true) and
// then changes from there; that is counted (ChangeFeedStats::snapshots), never
// a silent gap. Compaction does not produce changes (rows only move).
//
// Threads: OpenChangeFeed, Read, Acknowledge and stats may be called from any
// thread at any time; Read never blocks a write for longer than copying a few
// pointers out of the log.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <arrow/type_fwd.h>

#include "rill/common/status.h"

namespace rill {

/// What a change row says.
enum class ChangeOp : int8_t {
  kInsert = 0,        ///< a new key (keyed table) or an appended row
  kUpdate = 1,        ///< a key's new values (keyed table)
  kDelete = 2,        ///< a key or row removed; the row holds its last values
  kUpdateBefore = 3,  ///< a key's old values, just before its kUpdate row
                      ///< (only with ChangeReadOptions::include_old_values)
};
/// "insert", "update", "delete", "update_before".
const char* ChangeOpName(ChangeOp op);
/// The inverse of ChangeOpName (Invalid for anything else).
Result<ChangeOp> ParseChangeOp(std::string_view name);

/// Name of the operation column of a change batch (utf8, ChangeOpName values).
inline constexpr const char* kChangeOpColumn = "_op";
/// Name of the version column of a change batch (uint64: the version that made
/// the change).
inline constexpr const char* kChangeVersionColumn = "_version";

/// The schema of a change batch of a table with full schema `table_schema`
/// (user columns, z_insert_ts, z_update_ts): those columns, then _op (utf8,
/// not null) and _version (uint64, not null). Every field is nullable except
/// those two: a delete of a row whose values are no longer held carries only
/// its key.
std::shared_ptr<arrow::Schema> ChangeSchema(const std::shared_ptr<arrow::Schema>& table_schema);

/// How a ChangeFeed bounds its log (LiveTable::OpenChangeFeed).
struct ChangeFeedOptions {
  /// The log keeps at most this many change rows (all open feeds together);
  /// the oldest versions are forgotten first.
  int64_t max_log_rows = 4 * 1024 * 1024;
  /// ... and references at most this many bytes of chunks no version holds any more.
  int64_t max_log_bytes = 512LL * 1024 * 1024;
  /// When the bounds make the log forget versions this feed has not
  /// acknowledged, keep their deleted rows (copied: key and values, at most
  /// max_log_rows of them, the oldest forgotten first), so that a snapshot read
  /// with ChangeReadOptions::snapshot_deletes can say which keys went away in
  /// between. For readers that apply a snapshot as upserts over what they wrote
  /// (a compacted topic, an upsert sink driven by an application instance)
  /// rather than replacing it.
  bool keep_forgotten_deletes = false;
};

/// How one Read works.
struct ChangeReadOptions {
  /// Stop after the first version at which the rows read reach this (whole
  /// versions only: a version is never split). 0: no limit.
  int64_t max_rows = 0;
  /// Report rows removed by the table's retention policy as deletes (default:
  /// they are left out: a sink mirrors what was written, not what expired).
  bool emit_retention_deletes = false;
  /// Precede each update with an update_before row holding the old values.
  bool include_old_values = false;
  /// A snapshot (ChangeSet::snapshot) starts with a delete row for every key
  /// deleted after the cursor in versions the log forgot before this reader
  /// read them (kept only for feeds opened with keep_forgotten_deletes; a key
  /// inserted again since follows as an insert, so applying the rows in order
  /// as upserts and deletes leaves exactly the table's state).
  bool snapshot_deletes = false;
};

/// The changes after one cursor.
struct ChangeSet {
  /// The cursor that was read from.
  uint64_t from_version = 0;
  /// The version these changes bring the reader to: the next cursor.
  uint64_t to_version = 0;
  /// True: `batches` are the full state at to_version (every row "insert"),
  /// and the reader must replace what it holds (it fell behind what the log
  /// holds, or had seen nothing). False: the changes (from_version, to_version].
  bool snapshot = false;
  /// ChangeSchema rows, in version order (within a version: deletes and
  /// update_before rows before the rows written by that version).
  std::vector<std::shared_ptr<arrow::RecordBatch>> batches;
  int64_t num_rows = 0;
  /// A snapshot read with snapshot_deletes: the leading delete rows.
  int64_t snapshot_delete_rows = 0;
  /// A snapshot read with snapshot_deletes whose delete rows may be
  /// incomplete: the log restarted (ReplaceState, no feed open) or forgot
  /// more deleted rows than it keeps since the cursor.
  bool snapshot_deletes_incomplete = false;
  /// Unix seconds at which to_version was published.
  double published_at = 0;
};

/// Counters of a table's change log. Monotonic except the two sizes.
struct ChangeFeedStats {
  int64_t open_feeds = 0;
  int64_t log_versions = 0;      ///< versions the log holds now
  int64_t log_rows = 0;          ///< change rows the log holds now
  int64_t reads = 0;
  int64_t rows_read = 0;
  int64_t snapshots = 0;         ///< reads answered with a snapshot after a gap
  uint64_t oldest_version = 0;   ///< a cursor >= this reads changes, not a snapshot
  int64_t forgotten_delete_rows = 0;  ///< deleted rows kept for snapshots (now)
  /// snapshot_deletes reads that could not say every deleted key
  int64_t snapshots_missing_deletes = 0;
};

/// One consumer's handle on a table's change log (LiveTable::OpenChangeFeed).
/// The log is kept while any handle is alive. Any thread.
class ChangeFeed {
 public:
  virtual ~ChangeFeed() = default;
  /// The changes after `cursor` (a ChangeSet::to_version from an earlier Read,
  /// or 0 for "nothing seen": a snapshot unless the log reaches back to the
  /// empty table). Never blocks the table's writer.
  virtual Result<ChangeSet> Read(uint64_t cursor, const ChangeReadOptions& options) = 0;
  /// This consumer no longer needs versions <= `version`.
  virtual void Acknowledge(uint64_t version) = 0;
  /// The table's current version.
  virtual uint64_t current_version() const = 0;
  virtual ChangeFeedStats stats() const = 0;
  virtual const std::string& table_name() const = 0;
};

}  // namespace rill
