// LiveTable: an in-memory Arrow table that changes every tick.
//
// A LiveTable holds rows in chunks (immutable Arrow record batches) plus, per
// chunk, a bitmap of the rows still alive. Writes never modify a published
// chunk: an upsert appends the incoming batch as a new chunk and clears the
// alive bits of the rows it replaces, so its cost is proportional to the batch,
// not to the table. Each write ends by publishing a new immutable TableVersion
// that readers load lock-free; compaction rewrites chunks whose rows are mostly
// dead and merges small chunks.
//
// Implemented in live_table.cc (creation, the write path, subscribers),
// table_version.cc, reconcile.cc, retention.cc (expiring rows),
// compaction.cc and prepared_keys.cc (a key index built ahead of
// ReplaceState); live_table_internal.h holds what they share.
//
// Threads: writes (Write, ReplaceState, ApplyRetention, Compact) may come from
// any thread and are serialized by the table; normally the engine's tick thread
// is the only writer. snapshot() and the read accessors may be called from any
// thread at any time. Subscribers are called on the writing thread, after the
// write, with no lock held.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <arrow/type_fwd.h>

#include "rill/common/clock.h"
#include "rill/common/snapshot_cell.h"
#include "rill/common/status.h"
#include "rill/table/change_feed.h"
#include "rill/table/retention.h"
#include "rill/table/schema.h"

namespace rill {

class KeyIndex;
/// A key index built ahead of a LiveTable::ReplaceState, off the writing
/// thread (LiveTable::PrepareKeys). Opaque outside table/.
struct PreparedKeys;
namespace table_internal {
class ChangeLog;
struct ChangeEntry;
enum class Removal : uint8_t;
}  // namespace table_internal

/// One chunk of a published version: a batch (with system columns) and which
/// of its rows are alive.
struct VersionChunk {
  std::shared_ptr<arrow::RecordBatch> batch;
  /// Bit i set = row i alive. Null when every row is alive.
  std::shared_ptr<arrow::Buffer> alive;
  int64_t live_rows = 0;
};

/// An immutable, consistent state of a LiveTable. Safe to share across threads.
class TableVersion {
 public:
  TableVersion(std::shared_ptr<arrow::Schema> schema, std::vector<VersionChunk> chunks,
               uint64_t version, double published_at);

  /// The full schema, system columns last.
  const std::shared_ptr<arrow::Schema>& schema() const { return schema_; }
  const std::vector<VersionChunk>& chunks() const { return chunks_; }
  /// Number of live rows.
  int64_t num_rows() const { return num_rows_; }
  /// Monotonic version number: 0 for the empty table, +1 per write that changed it.
  uint64_t version() const { return version_; }
  /// Unix seconds at which this version was published.
  double published_at() const { return published_at_; }
  /// Bytes referenced by the chunks (buffers counted once per chunk).
  int64_t nbytes() const;

  /// Return the live rows of `chunk` as a batch: the batch itself when all rows
  /// are alive (zero copy), otherwise a filtered copy.
  static Result<std::shared_ptr<arrow::RecordBatch>> LiveBatch(const VersionChunk& chunk);

  /// Return the live rows as a table, in write order (oldest first).
  Result<std::shared_ptr<arrow::Table>> ToTable() const;

  /// Return a reader over the live rows, one batch per non-empty chunk. The
  /// reader keeps this version alive.
  Result<std::shared_ptr<arrow::RecordBatchReader>> MakeReader() const;

 private:
  std::shared_ptr<arrow::Schema> schema_;
  std::vector<VersionChunk> chunks_;
  uint64_t version_;
  double published_at_;
  int64_t num_rows_ = 0;
};

/// How a table behaves. Values left unset come from the schema metadata.
struct TableOptions {
  /// Key columns; when empty, the schema's "primary_key" metadata is used.
  std::vector<std::string> primary_key;
  /// Mode; when unset, the schema's "mode" metadata, else snapshot.
  std::optional<TableMode> mode;
  std::optional<RetentionPolicy> retention;
  /// When a table has more chunks than this, and more than one per 8192 live
  /// rows, adjacent small chunks (under 8192 rows) are merged, into chunks of
  /// at most 16384 rows, until it has no more. 0 disables merging (and the
  /// coalescing of an unkeyed table's small batches written together).
  int64_t auto_compact_chunks = 32;
  /// A chunk whose dead rows exceed this fraction is rewritten.
  double compact_dead_fraction = 0.5;
  /// Rewritten chunks (dead rows) and the coalesced batches of a write grow
  /// up to this many rows.
  int64_t target_chunk_rows = 128 * 1024;
  /// Source of z_insert_ts / z_update_ts and of "now" for retention.
  Clock clock;
};

/// What one write did.
struct WriteStats {
  int64_t rows_in = 0;       ///< rows offered
  int64_t inserted = 0;      ///< new keys (or appended rows)
  int64_t updated = 0;       ///< rows that replaced an existing key
  int64_t expired = 0;       ///< rows removed by retention
  int64_t deleted = 0;       ///< rows removed by deletes (keys found) and truncations
  int64_t delete_misses = 0;  ///< delete rows whose key was not in the table
};

/// What LiveTable::LookupKeys found: rows of one version.
struct KeyLookup {
  /// The version the rows belong to (the table's current one at the lookup).
  std::shared_ptr<const TableVersion> version;
  /// The version's live rows whose key is one of the keys asked for, with the
  /// full schema, each once, in the version's row order (a scan's order).
  std::shared_ptr<arrow::Table> rows;
};

/// A live table. See the file comment for the storage model and threads.
class LiveTable : public std::enable_shared_from_this<LiveTable> {
 public:
  using Subscriber = std::function<void(const std::shared_ptr<const TableVersion>&)>;
  using SubscriptionId = uint64_t;
  /// Called when a subscriber throws; `what` is the exception text.
  using ErrorHandler = std::function<void(const std::string& table, const std::string& what)>;

  /// Create a table. `schema` holds the user's columns (system columns, if
  /// present, are dropped and re-added). Invalid for an append table without a
  /// retention policy that sets max_rows or max_age_seconds, for unknown key
  /// columns, and for a retention time column that is missing or not a time.
  static Result<std::shared_ptr<LiveTable>> Make(std::string name,
                                                 std::shared_ptr<arrow::Schema> schema,
                                                 TableOptions options = {});
  ~LiveTable();

  const std::string& name() const { return name_; }
  /// Full schema: user columns, then z_insert_ts, z_update_ts.
  const std::shared_ptr<arrow::Schema>& schema() const { return schema_; }
  /// User columns only.
  const std::shared_ptr<arrow::Schema>& user_schema() const { return user_schema_; }
  const std::vector<std::string>& primary_key() const { return primary_key_; }
  TableMode mode() const { return mode_; }
  const std::optional<RetentionPolicy>& retention() const { return options_.retention; }
  const TableOptions& options() const { return options_; }
  /// True when writes upsert by key (snapshot mode with a key).
  bool keyed() const { return index_ != nullptr; }

  /// Return the current version. Any thread; never blocks, except to run the
  /// refresher of a stale table (see SetRefresher).
  std::shared_ptr<const TableVersion> snapshot() const {
    if (stale_.load(std::memory_order_acquire)) RunRefresher();
    return current_.Load();
  }
  /// Live rows of the current version. Any thread.
  int64_t num_rows() const { return snapshot()->num_rows(); }

  /// Write `batches` as one version: upsert by key in snapshot mode with a key,
  /// append otherwise; then apply retention and compaction and publish. Each
  /// batch is reconciled with the schema first (see Reconcile); if any batch
  /// cannot be, nothing is written and the error names the column and types.
  /// A batch with the operation column (row_ops.h: kWriteOpColumn) applies its
  /// rows in order, each an upsert, a delete of its key or a truncation (keyed
  /// tables only: Invalid for an append or unkeyed table when a row deletes or
  /// truncates). `now` defaults to the table's clock.
  Result<WriteStats> Write(const std::vector<std::shared_ptr<arrow::RecordBatch>>& batches,
                           std::optional<double> now = std::nullopt);
  Result<WriteStats> Write(const std::shared_ptr<arrow::RecordBatch>& batch,
                           std::optional<double> now = std::nullopt);
  Result<WriteStats> Write(const std::shared_ptr<arrow::Table>& table,
                           std::optional<double> now = std::nullopt);

  /// Delete the rows whose key is in `keys` (a batch or table holding at least
  /// the key columns; other columns are ignored), as one version, through the
  /// key index: O(keys). Keys not in the table are counted (delete_misses), not
  /// an error. Published (subscribers, the change feed: `delete` rows with the
  /// last values) only when a row was deleted. Invalid for an append table or
  /// a table without a primary key, and for a missing key column.
  Result<WriteStats> Delete(const std::shared_ptr<arrow::RecordBatch>& keys,
                            std::optional<double> now = std::nullopt);
  Result<WriteStats> Delete(const std::shared_ptr<arrow::Table>& keys,
                            std::optional<double> now = std::nullopt);
  /// Delete the rows of an append (or unkeyed) table whose integer `column`
  /// holds one of `values`, as one version (the change feed reports each as a
  /// delete; published only when a row was deleted). For the rows of Kafka
  /// partitions that moved to another instance (`_partition IN (...)`).
  /// Invalid for a keyed table (delete by key), a missing or non-integer column.
  Result<WriteStats> DeleteWhereIn(const std::string& column, const std::vector<int64_t>& values,
                                   std::optional<double> now = std::nullopt);
  /// Remove every row (a keyed table), as one version; the change feed reports
  /// each as a delete. Invalid for an append or unkeyed table.
  Result<WriteStats> Truncate(std::optional<double> now = std::nullopt);

  /// Replace the whole state with `table` (reconciled like Write; in snapshot
  /// mode with a key the last row per key wins). System columns present in
  /// `table` are kept, missing ones are set to now. `prepared` (PrepareKeys
  /// over `table`'s key columns) is taken as the key index instead of building
  /// one when this table has never held a chunk and its key columns have the
  /// prepared types, and `table` splits into batches of the prepared lengths;
  /// otherwise it is ignored. The result is the same either way.
  Result<WriteStats> ReplaceState(const std::shared_ptr<arrow::Table>& table,
                                  std::optional<double> now = std::nullopt,
                                  std::shared_ptr<PreparedKeys> prepared = nullptr);

  /// Build the key index that ReplaceState(table) would build into a new
  /// keyed snapshot table of `user_schema` with `primary_key`, from `keys`:
  /// the key columns of `table` (by name; same rows, same chunks; other
  /// columns are ignored). Lets a caller build it while it still reads the
  /// rest of `table` (checkpoint restore). Null when there is nothing to
  /// prepare (no key, a key column missing from `keys` or `user_schema`, or
  /// of another type there). Any thread; touches no table.
  static Result<std::shared_ptr<PreparedKeys>> PrepareKeys(
      const arrow::Schema& user_schema, const std::vector<std::string>& primary_key,
      const arrow::Table& keys);

  /// Find the rows whose key equals a row of `keys` (the key columns, by name
  /// and with their types; other columns are ignored; a null is the null key)
  /// through the key index, in the current version: O(keys), where a scan of
  /// the version is O(rows). nullopt when the index cannot tell for the
  /// current version: the table is not keyed, or a write failed half-way and
  /// nothing was published since (the caller scans instead). Invalid for a
  /// missing key column or another type. Any thread: probes under the write
  /// lock (microseconds; waits for a running write to publish).
  Result<std::optional<KeyLookup>> LookupKeys(const arrow::RecordBatch& keys);

  /// Remove expired rows now; publish if anything changed.
  Result<int64_t> ApplyRetention(std::optional<double> now = std::nullopt);

  /// Rewrite chunks with dead rows and merge small chunks. With `full`, rewrite
  /// the table into chunks of target_chunk_rows whatever their state.
  Status Compact(bool full = false);

  /// Return `batch` cast to the user schema: columns matched by name in any
  /// order, missing nullable columns filled with nulls, types cast when Arrow
  /// can cast them safely; system columns in the batch are dropped. Invalid,
  /// naming the column and both types, when that is impossible; Invalid also for
  /// unknown columns and for nulls in a non-nullable column. A batch with the
  /// operation column keeps it, last, as int8 RowOp codes (row_ops.h); its
  /// delete and truncate rows are exempt from the null check, and a missing
  /// column is filled with nulls whatever its nullability.
  Result<std::shared_ptr<arrow::RecordBatch>> Reconcile(
      const std::shared_ptr<arrow::RecordBatch>& batch) const;

  /// Call `callback` with every new version. Any thread.
  SubscriptionId Subscribe(Subscriber callback);
  /// Stop calling a subscriber. Returns false if `id` was unknown. Any thread.
  bool Unsubscribe(SubscriptionId id);
  /// Where subscriber exceptions are reported (default: the log).
  void SetErrorHandler(ErrorHandler handler);
  /// True when at least one subscriber is registered. Any thread.
  bool has_subscribers() const;

  /// Build this table's state on demand: after MarkStale(), the next snapshot()
  /// (on whichever thread reads) calls `refresher` first, which publishes the
  /// new state (ReplaceState or Write); readers wait for it, so none sees the
  /// state from before MarkStale(). For a table written on every tick but
  /// rarely read (rill_metrics): the tick only marks it. Set once, before the
  /// table is shared; the refresher must not call snapshot() of this table.
  /// Any thread; SetRefresher(nullptr) returns once no refresh is running.
  void SetRefresher(std::function<void()> refresher);
  /// Mark the state stale (only meaningful with a refresher). Any thread; no lock.
  void MarkStale() { stale_.store(true, std::memory_order_release); }

  /// Estimated bytes per row (schema estimate, refined by the data once rows exist).
  int64_t EstimateRowSize() const;
  /// Rows of this table that fit in `memory_bytes`.
  int64_t EstimateRecordsCapacity(int64_t memory_bytes) const;

  /// Number of chunks in the current state (for tests and metrics).
  int64_t num_chunks() const;

  /// Open a change feed (change_feed.h): from now on, and while any feed is
  /// open, every write records what it did, per published version; the log
  /// starts at the current version (a feed opened on a table at version 0 reads
  /// every change from the empty table). The feed may outlive the table (it then
  /// reads the last published state). Any thread; takes the write lock briefly.
  std::shared_ptr<ChangeFeed> OpenChangeFeed(ChangeFeedOptions options = {});

 private:
  struct Chunk;
  struct InsertTimes;
  LiveTable(std::string name, std::shared_ptr<arrow::Schema> user_schema,
            std::vector<std::string> primary_key, TableMode mode, TableOptions options);

  // A *Locked function must be called with write_mu_ held.
  // With `given_prev`, the key index already holds the batch (a prepared
  // index, slot by slot) and given_prev[i] is what its UpsertAll returned.
  Status WriteOneLocked(const std::shared_ptr<arrow::RecordBatch>& batch, double now,
                        WriteStats* stats, const uint64_t* given_prev = nullptr);
  /// WriteOneLocked's keyed part: point the index at the batch's rows (in
  /// `slot`) and retire the rows they replace, which hand their insert times
  /// to `ins`; `alive` and `live` take the batch's own repeated keys.
  Status RetireReplacedLocked(const std::shared_ptr<arrow::RecordBatch>& batch,
                              uint32_t slot, double now, WriteStats* stats,
                              const uint64_t* given_prev, InsertTimes* ins,
                              std::shared_ptr<arrow::Buffer>* alive, int64_t* live);
  /// ReplaceState's writes: each reconciled batch as a chunk, its system
  /// columns taken from the input batch (positions in_ins / in_upd, -1: none).
  Status WriteReplacementLocked(
      const std::vector<std::shared_ptr<arrow::RecordBatch>>& batches,
      const std::vector<std::shared_ptr<arrow::RecordBatch>>& reconciled, int in_ins,
      int in_upd, double t, PreparedKeys* prepared, WriteStats* stats);
  Status WriteReplacementBatchLocked(const arrow::RecordBatch& input,
                                     const std::shared_ptr<arrow::RecordBatch>& reconciled,
                                     int in_ins, int in_upd, double t,
                                     const uint64_t* given_prev, WriteStats* stats);
  /// ReplaceState's check: true when `prepared` can serve as the key index of
  /// `batches` written into this table now (it then takes its index).
  bool AdoptPreparedLocked(PreparedKeys* prepared,
                           const std::vector<std::shared_ptr<arrow::RecordBatch>>& batches);
  /// Delete the keys of `keys` (user-schema layout: only the key columns are
  /// read; row_ops.cc).
  Status DeleteKeysLocked(const arrow::RecordBatch& keys, WriteStats* stats);
  void TruncateLocked(WriteStats* stats);
  /// Delete and Truncate: run `remove` under the write lock, then compact and
  /// publish (and notify) if it removed a row.
  Result<WriteStats> RemoveAndPublish(std::optional<double> now,
                                      const std::function<Status(WriteStats*)>& remove);
  /// Apply a reconciled batch with the operation column, run by run.
  Status WriteOpsLocked(const std::shared_ptr<arrow::RecordBatch>& batch, double now,
                        WriteStats* stats);
  /// Reconcile; null_check = false leaves the non-nullable columns unchecked
  /// (the caller checks the rows that are written).
  Result<std::shared_ptr<arrow::RecordBatch>> ReconcileImpl(
      const std::shared_ptr<arrow::RecordBatch>& batch, bool null_check) const;
  Status ApplyRetentionLocked(double now, int64_t* expired);
  Status CompactLocked(bool full);
  Status RewriteLocked(size_t begin, size_t end);
  /// Make slots_[slot] hold `batch` and derive its insert-time pointer and
  /// retention time range.
  void SetChunkLocked(uint32_t slot, std::shared_ptr<arrow::RecordBatch> batch,
                      std::shared_ptr<arrow::Buffer> alive, int64_t live_rows);
  /// Point the key index (if any) at every row of slots_[slot]. With
  /// `moved_from`, row i is a copy of the row at location moved_from[i]
  /// (compaction), found by that location.
  Status IndexChunkLocked(uint32_t slot, const uint64_t* moved_from = nullptr);
  void KillRowLocked(uint64_t location);
  void EraseKeyLocked(uint32_t slot, int64_t row);
  void DropEmptyChunksLocked();
  /// Change log hooks (no-ops unless a feed is open, i.e. pending_ is set).
  /// Start a locked write: stop recording when the last feed has closed.
  void BeginLogLocked();
  /// Record the chunk just written to `slot` (its `updated` bits: which rows
  /// replaced an existing key).
  void LogWrittenLocked(uint32_t slot, std::shared_ptr<arrow::Buffer> updated,
                        std::vector<std::pair<int32_t, int32_t>> origins = {});
  /// Record that the row at `location` leaves the table for `reason`; call it
  /// before KillRowLocked. A row written by the version being built is taken
  /// out of that version's writes instead (and reported as removed only if it
  /// had replaced an older row of its key). Returns true when the row's key
  /// existed before this version (the new row of an update is then an update,
  /// not an insert). Issue 25's Delete(key) calls it with Removal::kDelete.
  bool LogRemovedLocked(uint64_t location, table_internal::Removal reason);
  /// Record that rows [begin, end) of slots_[slot] expire at once (retention
  /// of a whole chunk or a prefix of an unkeyed chunk), before slots_ changes.
  void LogExpiredRangeLocked(uint32_t slot, int64_t begin, int64_t end);
  /// Record that every live row of slots_[slot] is deleted (a truncation).
  void LogTruncatedChunkLocked(uint32_t slot);
  uint32_t AllocateSlotLocked();
  void PublishLocked(double now);
  /// The chunks that hold live rows, in order (what PublishLocked publishes).
  using LiveLayout = std::vector<std::pair<uint32_t, const arrow::RecordBatch*>>;
  LiveLayout LiveLayoutLocked() const;
  void RunRefresher() const;
  void Notify(const std::shared_ptr<const TableVersion>& version);
  Result<std::shared_ptr<arrow::RecordBatch>> WithSystemColumnsLocked(
      const std::shared_ptr<arrow::RecordBatch>& user_batch,
      std::shared_ptr<arrow::Buffer> insert_ts, double now);
  Result<std::shared_ptr<arrow::Buffer>> NowBufferLocked(int64_t n, double now);

  const std::string name_;
  std::shared_ptr<arrow::Schema> user_schema_;
  std::shared_ptr<arrow::Schema> schema_;
  std::vector<std::string> primary_key_;
  TableMode mode_;
  TableOptions options_;
  Clock clock_;
  int insert_ts_column_;
  int time_column_ = -1;  // retention time column in the full schema

  std::mutex write_mu_;
  std::unique_ptr<KeyIndex> index_;   // guarded by write_mu_; null when not keyed
  std::vector<Chunk> slots_;          // guarded by write_mu_
  std::vector<uint32_t> free_slots_;  // guarded by write_mu_
  std::vector<uint32_t> order_;       // guarded by write_mu_; slots in write order
  int64_t live_rows_ = 0;             // guarded by write_mu_
  uint64_t version_ = 0;              // guarded by write_mu_
  // True while index_ and slots_ describe the published version: false from
  // the start of a locked write until it publishes (LookupKeys).
  bool index_published_ = true;       // guarded by write_mu_
  std::vector<uint64_t> prev_scratch_;  // guarded by write_mu_
  // guarded by write_mu_; rows that replaced one (a write into an empty table)
  std::vector<std::pair<int64_t, uint64_t>> replaced_scratch_;
  std::vector<uint64_t> moved_scratch_;  // guarded by write_mu_; old locations (compaction)
  std::shared_ptr<arrow::Buffer> now_buffer_;  // guarded by write_mu_; filled with now_value_
  double now_value_ = 0;                       // guarded by write_mu_
  // The change log: created by the first OpenChangeFeed; recording_ while
  // feeds are open, pending_ the entry of the version being built.
  std::shared_ptr<table_internal::ChangeLog> log_;          // guarded by write_mu_
  bool recording_ = false;                                  // guarded by write_mu_
  std::unique_ptr<table_internal::ChangeEntry> pending_;    // guarded by write_mu_

  SnapshotCell<TableVersion> current_;
  mutable std::mutex refresh_mu_;        // one refresh at a time; readers wait
  std::function<void()> refresher_;      // guarded by refresh_mu_
  mutable std::atomic<bool> stale_{false};

  mutable std::mutex subscribers_mu_;
  std::map<SubscriptionId, std::shared_ptr<Subscriber>> subscribers_;  // guarded
  SubscriptionId next_subscription_ = 1;                               // guarded
  ErrorHandler error_handler_;                                         // guarded
};

/// Return `new_rows` upserted into `old_rows` by `primary_key` (last row per
/// key wins; old rows keep their position order, replaced ones move to the
/// end). A pure function on Arrow tables, as the seed's `upsert_table`.
Result<std::shared_ptr<arrow::Table>> UpsertTable(const std::shared_ptr<arrow::Table>& old_rows,
                                                  const std::shared_ptr<arrow::Table>& new_rows,
                                                  const std::vector<std::string>& primary_key);

}  // namespace rill
