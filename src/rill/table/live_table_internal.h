// Private to src/rill/table: the mutable side of a LiveTable shared by the
// files that implement it (live_table.cc: creation and the write path;
// compaction.cc; retention.cc: expiring rows). A row's location packs its
// chunk slot and its row in that chunk into one uint64_t, the value the key
// index stores.
//
// Threads: everything here is used under the table's write_mu_.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include <arrow/type_fwd.h>

#include "rill/common/status.h"
#include "rill/table/key_index_internal.h"
#include "rill/table/live_table.h"

namespace rill {

/// One slot of LiveTable::slots_: a chunk and what the write path derives
/// from it once.
struct LiveTable::Chunk {
  std::shared_ptr<arrow::RecordBatch> batch;
  std::shared_ptr<arrow::Buffer> alive;  // null = all alive
  int64_t live_rows = 0;
  const double* insert_ts = nullptr;     // raw z_insert_ts values of `batch`
  bool has_time_range = false;           // min/max of the retention time column
  double time_min = 0;
  double time_max = 0;
  bool in_use = false;
  // Change log (only while a feed is open). log_version: the version being
  // built when this chunk was written (log_part: its index in the pending
  // entry's writes; row r here is row r + log_row_offset of that part's batch)
  // or when log_group was last set (the pending entry's removal groups of
  // this chunk, per Removal).
  uint64_t log_version = 0;
  int32_t log_part = -1;
  int64_t log_row_offset = 0;
  uint64_t log_group_version = 0;
  int32_t log_group[3] = {-1, -1, -1};
};

/// The z_insert_ts column of a chunk being written (WriteOneLocked). A row's
/// insert time is the write's `now` unless it replaces a row, whose insert
/// time it keeps. The column is allocated at the first row that keeps another
/// time; until then (and for a batch of new keys only: a first load, an
/// append) the chunk shares the write's `now` buffer, its z_update_ts. Rows
/// are set in increasing order.
struct LiveTable::InsertTimes {
  explicit InsertTimes(int64_t rows) : n(rows) {}
  /// Return row `row`'s insert time so far.
  double Get(int64_t row, double now) const { return row < filled ? values[row] : now; }
  /// Give row `row` (above every row set before) the insert time `value`.
  Status Set(int64_t row, double value, double now) {
    if (values == nullptr) RILL_RETURN_NOT_OK(Allocate());
    SetAllocated(row, value, now);
    return Status::OK();
  }
  /// Allocate the column (its rows are then written by SetAllocated and Finish).
  Status Allocate();
  /// Set, once the column is allocated.
  void SetAllocated(int64_t row, double value, double now) {
    if (row != filled) std::fill(values + filled, values + row, now);
    values[row] = value;
    filled = row + 1;
  }
  /// Return the column, or null when every row's insert time is `now`.
  Result<std::shared_ptr<arrow::Buffer>> Finish(double now);

  int64_t n;
  std::shared_ptr<arrow::Buffer> buffer;  // null until a row keeps an older time
  double* values = nullptr;               // buffer's data
  int64_t filled = 0;                     // rows [0, filled) hold their time
  // Change log only (logging: a feed is open): which rows are updates, and
  // where their old rows sit (see WrittenPart).
  bool logging = false;
  std::shared_ptr<arrow::Buffer> updated;
  std::vector<std::pair<int32_t, int32_t>> origins;
};

/// What LiveTable::PrepareKeys builds (prepared_keys.cc): a key index over
/// the non-empty chunks of a table's key columns, the i-th of them written as
/// if into slot i, and what its UpsertAll returned for each.
struct PreparedKeys {
  std::vector<std::shared_ptr<arrow::Field>> key_fields;  // at key_columns
  std::vector<int> key_columns;        // positions in the user schema
  std::vector<int64_t> batch_rows;     // every chunk's length, empty ones too
  std::unique_ptr<KeyIndex> index;     // null once adopted
  std::vector<std::vector<uint64_t>> prev;  // per non-empty chunk
};

namespace table_internal {

/// Return the location of `row` of the chunk in `slot`.
constexpr uint64_t Location(uint32_t slot, int64_t row) {
  return (static_cast<uint64_t>(slot) << 32) | static_cast<uint64_t>(row);
}
/// Return the slot of a location.
constexpr uint32_t SlotOf(uint64_t location) { return static_cast<uint32_t>(location >> 32); }
/// Return the row of a location.
constexpr int64_t RowOf(uint64_t location) { return static_cast<int64_t>(location & 0xffffffffu); }

/// A reconciled batch with the operation column (last), as Write applies it:
/// without the column when every row is an upsert (and for an unkeyed table,
/// skipped rows left out); Invalid when an unkeyed or append table is asked
/// to delete or truncate. delete.cc.
Result<std::shared_ptr<arrow::RecordBatch>> PrepareOpBatch(
    const LiveTable& table, std::shared_ptr<arrow::RecordBatch> batch);

/// Return a validity bitmap of `n` set bits from the tables' memory pool.
Result<std::shared_ptr<arrow::Buffer>> AllAliveBitmap(int64_t n);

}  // namespace table_internal
}  // namespace rill
