// The rows of the WebSocket `table:<name>` channel: change sets of a table's
// ChangeFeed formatted as JSON rows once (on a worker) and shared by every
// client, and each client's unsent changes, merged by key while the client is
// slow (last wins), bounded (beyond: the client gets a snapshot instead).
//
// Threads: WsTableChanges is immutable once made (any thread); a
// WsPendingChanges belongs to one session (its io strand).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <arrow/type_fwd.h>

#include "rill/common/status.h"
#include "rill/table/change_feed.h"

namespace rill {
class TableVersion;
}

namespace rill::server {

/// One change row, formatted.
struct WsChangeRow {
  std::string key;   ///< JSON of the key columns (keyed tables); empty otherwise
  ChangeOp op = ChangeOp::kInsert;
  uint64_t version = 0;
  std::string json;  ///< the row as a JSON object without its closing brace
};

/// The changes of one table after `from_version`, up to `to_version`.
struct WsTableChanges {
  uint64_t from_version = 0;
  uint64_t to_version = 0;
  int64_t table_rows = 0;   ///< rows of the table at to_version
  int64_t table_bytes = 0;  ///< bytes of the table at to_version
  bool snapshot = false;    ///< the feed fell behind: every client needs a snapshot
  std::vector<WsChangeRow> rows;
  /// The event frame of these changes for a client at `from_version` with
  /// nothing pending, formatted once and shared by every such client (null
  /// when they take more than one frame).
  std::shared_ptr<const std::string> frame;
  /// Rows of these changes that merged into an earlier row of their key in
  /// `frame` (counted as coalesced for each client that takes it, as its own
  /// merge would have been).
  int64_t frame_merged = 0;
};

/// Return `changes` formatted (key columns `key_columns` of the table schema;
/// update_before rows are left out).
Result<std::shared_ptr<const WsTableChanges>> FormatChanges(const ChangeSet& changes,
                                                            const std::vector<int>& key_columns);

/// Return the `snapshot` frame of `table` at `version`: its first `max_rows`
/// rows, each with _op "insert" and _version, and "truncated" when there are more.
Result<std::string> SnapshotFrame(const std::string& channel, const std::string& table,
                                  const TableVersion& version, int64_t max_rows);

/// {"type":"event","channel":...,"ts":...,"data":<data>}
std::string WsEventFrame(std::string_view channel, std::string_view data);

/// One client's unsent changes of one table channel.
class WsPendingChanges {
 public:
  /// Merge `changes` (rows of versions <= the client's version are skipped)
  /// and return how many rows merged into a pending row of their key; -1, with
  /// nothing kept, when more than `max_rows` rows would be pending (the client
  /// is too far behind: it needs a snapshot).
  int64_t Merge(const WsTableChanges& changes, int64_t max_rows);
  /// The client now holds the state at `version` (a snapshot was queued):
  /// forget rows of versions <= it.
  void Reset(uint64_t version);
  /// True when a frame is due: rows pending, or a newer version to report.
  bool due() const { return live_ > 0 || to_version_ > client_version_; }
  int64_t size() const { return live_; }
  uint64_t client_version() const { return client_version_; }
  /// Return the data of the next event frame (at most `max_rows` rows) and set
  /// `*more` when rows remain pending.
  std::string TakeFrame(const std::string& table, int64_t max_rows, bool* more);

 private:
  struct Entry {
    WsChangeRow row;
    bool erased = false;
  };
  uint64_t client_version_ = 0;  // the version the client is at (sent)
  uint64_t to_version_ = 0;      // the version the pending rows bring it to
  int64_t table_rows_ = 0;
  int64_t table_bytes_ = 0;
  std::vector<Entry> entries_;  // in arrival order; erased ones skipped
  std::unordered_map<std::string, size_t> by_key_;  // keyed rows: key -> entries_ index
  int64_t live_ = 0;
};

}  // namespace rill::server
