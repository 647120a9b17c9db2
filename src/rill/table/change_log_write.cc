// The write side of the change log: LiveTable's hooks (change_log_internal.h).
// Each costs a branch when no feed is open, and O(1) per row otherwise (no row
// is copied: the log references the table's immutable chunks).
#include <cstring>

#include <arrow/buffer.h>
#include <arrow/record_batch.h>
#include <arrow/util/bit_util.h>

#include "rill/common/arrow_init.h"
#include "rill/table/change_log_internal.h"
#include "rill/table/live_table.h"
#include "rill/table/live_table_internal.h"

namespace rill {

using table_internal::ChangeEntry;
using table_internal::ChangeLog;
using table_internal::RemovedGroup;
using table_internal::Removal;
using table_internal::RowOf;
using table_internal::SlotOf;
using table_internal::WrittenPart;

namespace {

/// Clear bits [begin, end) of `*bits` (null: all set; `n` bits), copying a shared bitmap first.
void ClearBits(std::shared_ptr<arrow::Buffer>* bits, int64_t n, int64_t begin, int64_t end) {
  if (!*bits) {
    *bits = *table_internal::AllAliveBitmap(n);
  } else if (bits->use_count() > 1) {
    *bits = *(*bits)->CopySlice(0, (*bits)->size(), TableMemoryPool());
  }
  arrow::bit_util::SetBitsTo((*bits)->mutable_data(), begin, end - begin, false);
}

}  // namespace

std::shared_ptr<ChangeFeed> LiveTable::OpenChangeFeed(ChangeFeedOptions options) {
  std::lock_guard<std::mutex> lock(write_mu_);
  if (!log_) log_ = std::make_shared<ChangeLog>(name_, schema_);
  if (!recording_) {
    log_->Restart(current_.Load());
    recording_ = true;
    pending_ = std::make_unique<ChangeEntry>();
  }
  return log_->Open(options, weak_from_this());
}

void LiveTable::BeginLogLocked() {
  if (recording_ && log_->open_feeds() == 0) {
    // The last feed closed: stop (OpenChangeFeed restarts at the then-current version).
    recording_ = false;
    pending_.reset();
  }
}

void LiveTable::LogWrittenLocked(uint32_t slot, std::shared_ptr<arrow::Buffer> updated,
                                 std::vector<std::pair<int32_t, int32_t>> origins) {
  Chunk& c = slots_[slot];
  c.log_version = version_ + 1;
  c.log_part = static_cast<int32_t>(pending_->written.size());
  c.log_row_offset = 0;
  pending_->written.push_back(
      WrittenPart{c.batch, c.alive, std::move(updated), std::move(origins), 0});
}

bool LiveTable::LogRemovedLocked(uint64_t location, Removal reason) {
  Chunk& c = slots_[SlotOf(location)];
  const uint64_t building = version_ + 1;
  int64_t row = RowOf(location);
  const std::shared_ptr<arrow::RecordBatch>* batch = &c.batch;
  if (c.log_version == building && c.log_part >= 0) {
    // Written by this version: it never reaches a reader as written.
    WrittenPart& part = pending_->written[c.log_part];
    row += c.log_row_offset;
    const bool was_update =
        part.updated && arrow::bit_util::GetBit(part.updated->data(), row);
    ClearBits(&part.alive, part.batch->num_rows(), row, row + 1);
    const std::pair<int32_t, int32_t> origin =
        was_update && row < static_cast<int64_t>(part.origins.size())
            ? part.origins[row]
            : std::pair<int32_t, int32_t>{-1, -1};
    // An update replaced by another row of this version: that row inherits
    // the update (and where its old row was logged).
    if (!was_update || reason == Removal::kUpdate) {
      pending_->last_removed = origin;
      return was_update;
    }
    if (origin.first >= 0) {
      // Removed (deleted or expired) after an update in this version: the
      // key's old row, logged as replaced by an update, is the one removed
      // (its values are the ones readers last saw); the new row was never shown.
      const RemovedGroup& from = pending_->removed[origin.first];
      RemovedGroup del;
      del.batch = from.batch;
      del.reason = reason;  // a delete, or an expiry (retention)
      del.rows.push_back(from.rows[origin.second]);
      pending_->moved.push_back(origin);
      pending_->removed.push_back(std::move(del));
      pending_->last_removed = {-1, -1};
      return true;
    }
    batch = &part.batch;
  }
  const int r = static_cast<int>(reason);
  if (c.log_group_version != building) {
    c.log_group_version = building;
    c.log_group[0] = c.log_group[1] = c.log_group[2] = -1;
  }
  if (c.log_group[r] < 0) {
    c.log_group[r] = static_cast<int32_t>(pending_->removed.size());
    RemovedGroup group;
    group.batch = *batch;
    group.reason = reason;
    pending_->removed.push_back(std::move(group));
  }
  auto& rows = pending_->removed[c.log_group[r]].rows;
  rows.push_back(static_cast<uint32_t>(row));
  pending_->last_removed = {c.log_group[r], static_cast<int32_t>(rows.size() - 1)};
  return true;
}

void LiveTable::LogExpiredRangeLocked(uint32_t slot, int64_t begin, int64_t end) {
  Chunk& c = slots_[slot];
  if (begin >= end) return;
  if (c.log_version == version_ + 1 && c.log_part >= 0) {
    WrittenPart& part = pending_->written[c.log_part];
    ClearBits(&part.alive, part.batch->num_rows(), begin + c.log_row_offset,
              end + c.log_row_offset);
    if (begin == 0) c.log_row_offset += end;  // the chunk becomes the slice [end, ...)
    return;
  }
  RemovedGroup group;
  group.reason = Removal::kRetention;
  group.all_rows = true;
  if (begin == 0 && end == c.batch->num_rows()) {
    group.batch = c.batch;
    group.mask = c.alive;
    group.num_rows = c.live_rows;
  } else {
    // A prefix of an unkeyed chunk with no dead rows.
    group.batch = c.batch->Slice(begin, end - begin);
    group.num_rows = end - begin;
  }
  pending_->removed.push_back(std::move(group));
}

void LiveTable::LogTruncatedChunkLocked(uint32_t slot) {
  Chunk& c = slots_[slot];
  if (c.log_version == version_ + 1 && c.log_part >= 0) {
    // Written by this version: each live row, as a single delete would.
    for (int64_t r = 0; r < c.batch->num_rows(); ++r) {
      if (!c.alive || arrow::bit_util::GetBit(c.alive->data(), r)) {
        LogRemovedLocked(table_internal::Location(slot, r), Removal::kDelete);
      }
    }
    return;
  }
  // Rows of this chunk deleted earlier in this version are in a group of
  // their own already (and no longer alive here).
  RemovedGroup group;
  group.reason = Removal::kDelete;
  group.all_rows = true;
  group.batch = c.batch;
  group.mask = c.alive;
  group.num_rows = c.live_rows;
  pending_->removed.push_back(std::move(group));
}

}  // namespace rill
