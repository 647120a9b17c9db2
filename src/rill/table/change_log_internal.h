// Private to src/rill/table: the change log behind ChangeFeed (change_feed.h).
//
// The writer (LiveTable, under its write_mu_) builds one ChangeEntry per
// version while a feed is open: references to the chunks it wrote (with which
// rows count and which are updates) and to the rows it removed (chunk + row
// numbers, or a whole chunk / prefix). PublishLocked hands the entry to the
// ChangeLog, which holds the entries of versions (base, latest] for the open
// feeds; Read copies entry pointers under the log's mutex and materializes rows
// (gather, _op, _version) on the reader's thread.
//
// Threads: ChangeEntry is built by the writer and immutable once published;
// ChangeLog is thread-safe (one mutex, never held while rows are copied).
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <arrow/type_fwd.h>

#include "rill/common/status.h"
#include "rill/table/change_feed.h"

namespace rill {

class LiveTable;
class TableVersion;

namespace table_internal {

/// Why a row left the table.
enum class Removal : uint8_t {
  kUpdate = 0,     ///< replaced by a newer row of its key (old values: update_before)
  kDelete = 1,     ///< deleted by key (issue 25's LiveTable::Delete)
  kRetention = 2,  ///< expired (reported only with emit_retention_deletes)
};
inline constexpr int kNumRemovals = 3;

/// A chunk written by one version.
struct WrittenPart {
  std::shared_ptr<arrow::RecordBatch> batch;  ///< full schema; shared with the table
  /// Rows that count (bit set); null: all. Rows written and removed again in
  /// the same version are cleared. Copy-on-write: may be shared with the table.
  std::shared_ptr<arrow::Buffer> alive;
  /// Bit set = the row replaced a key that existed before this version
  /// (update); null: every row is an insert.
  std::shared_ptr<arrow::Buffer> updated;
  /// For each updated row: where this version logged the old row it replaced
  /// (index into ChangeEntry::removed, position in its rows), so that a delete
  /// of the new row in the same version turns that removal into the key's
  /// delete. Empty when no row is an update; cleared when sealed.
  std::vector<std::pair<int32_t, int32_t>> origins;
  int64_t live_rows = 0;  ///< set when the entry is sealed
};

/// Rows of one chunk removed by one version for one reason.
struct RemovedGroup {
  std::shared_ptr<arrow::RecordBatch> batch;  ///< the immutable chunk that held them
  Removal reason = Removal::kUpdate;
  /// all_rows: every row of `batch` whose bit is set in `mask` (null: every
  /// row); else the rows listed.
  bool all_rows = false;
  std::shared_ptr<arrow::Buffer> mask;
  std::vector<uint32_t> rows;
  int64_t num_rows = 0;
};

/// What one published version did.
struct ChangeEntry {
  uint64_t version = 0;
  double published_at = 0;
  /// ReplaceState: the log restarts at this version (older cursors: snapshot).
  bool reset = false;
  std::vector<WrittenPart> written;
  std::vector<RemovedGroup> removed;
  /// Writer only, until sealed: where the last LogRemovedLocked put its row
  /// ({-1, -1}: nowhere), and update removals that became deletes (their rows
  /// are taken out of their groups when sealed).
  std::pair<int32_t, int32_t> last_removed{-1, -1};
  std::vector<std::pair<int32_t, int32_t>> moved;
  int64_t written_rows = 0;  ///< set when sealed
  int64_t removed_rows[kNumRemovals] = {0, 0, 0};

  bool empty() const { return written.empty() && removed.empty(); }
  /// Change rows a Read with `options` produces for this entry.
  int64_t RowsFor(const ChangeReadOptions& options) const;
  /// Count the live rows of each written part (the writer, before publishing).
  void Seal();
};

/// The log of one table, shared by the table and its feeds (which may outlive it).
class ChangeLog : public std::enable_shared_from_this<ChangeLog> {
 public:
  ChangeLog(std::string table_name, std::shared_ptr<arrow::Schema> table_schema);

  /// Open feeds (read by the writer without the log's lock).
  int64_t open_feeds() const { return open_feeds_.load(std::memory_order_acquire); }

  /// The writer starts recording at `current` (entries forgotten, base = its version).
  void Restart(std::shared_ptr<const TableVersion> current);
  /// The writer published `current`; `entry` (may be null or empty) holds what it did.
  void Publish(std::unique_ptr<ChangeEntry> entry, std::shared_ptr<const TableVersion> current);

  /// Register a feed (the writer calls Restart first if it was not recording).
  std::shared_ptr<ChangeFeed> Open(ChangeFeedOptions options, std::weak_ptr<LiveTable> table);

 private:
  class Feed;
  struct FeedState {
    uint64_t acknowledged = 0;
    ChangeFeedOptions options;
  };
  /// The deleted rows of one version the bounds forgot before a feed with
  /// keep_forgotten_deletes had acknowledged it (change rows, copied).
  struct Grave {
    uint64_t version = 0;
    std::shared_ptr<arrow::RecordBatch> rows;
  };
  struct Ref {
    int64_t count = 0;
    int64_t bytes = 0;
  };
  friend class Feed;

  Result<ChangeSet> Read(uint64_t cursor, const ChangeReadOptions& options);
  void Acknowledge(uint64_t feed, uint64_t version);
  void Close(uint64_t feed);
  uint64_t current_version() const;
  ChangeFeedStats stats() const;

  // *Locked: mu_ held. Dropped entries go to `garbage`, freed after unlocking.
  void PushLocked(std::shared_ptr<const ChangeEntry> entry);
  void PopFrontLocked(std::vector<std::shared_ptr<const ChangeEntry>>* garbage);
  void ClearLocked(std::vector<std::shared_ptr<const ChangeEntry>>* garbage);
  void TrimLocked(std::vector<std::shared_ptr<const ChangeEntry>>* garbage);
  /// Keep `entry`'s deleted rows as a grave if a keeping feed still needs it.
  void BuryLocked(const ChangeEntry& entry);
  /// Drop graves every keeping feed acknowledged, and the oldest over the bound.
  void TrimGravesLocked();
  /// The log restarted at base_: deletes before it are unknown.
  void ClearGravesLocked();
  int64_t UnheldBytesLocked() const;
  void AddRef(const arrow::RecordBatch* batch, int delta);

  const std::string table_name_;
  const std::shared_ptr<arrow::Schema> change_schema_;
  std::atomic<int64_t> open_feeds_{0};

  mutable std::mutex mu_;
  std::shared_ptr<const TableVersion> latest_;              // guarded by mu_
  uint64_t base_ = 0;                                       // guarded: entries cover (base_, latest]
  std::deque<std::shared_ptr<const ChangeEntry>> entries_;  // guarded by mu_
  int64_t log_rows_ = 0;                                    // guarded by mu_
  std::unordered_map<const arrow::RecordBatch*, Ref> refs_;  // guarded: batches entries hold
  int64_t ref_bytes_ = 0;                                   // guarded: sum of refs_ bytes
  std::map<uint64_t, FeedState> feeds_;                     // guarded by mu_
  uint64_t next_feed_ = 1;                                  // guarded by mu_
  int64_t reads_ = 0;                                       // guarded by mu_
  int64_t rows_read_ = 0;                                   // guarded by mu_
  int64_t snapshots_ = 0;                                   // guarded by mu_
  std::deque<Grave> graves_;                                // guarded by mu_
  int64_t grave_rows_ = 0;                                  // guarded by mu_
  /// Graves hold every forgotten delete a keeping feed had not acknowledged
  /// of the versions after this one.
  uint64_t graves_base_ = 0;                                // guarded by mu_
  int64_t snapshots_missing_deletes_ = 0;                   // guarded by mu_
};

}  // namespace table_internal
}  // namespace rill
