// The change log and the ChangeFeed handles over it (change_log_internal.h).
#include "rill/table/change_log_internal.h"

#include <algorithm>
#include <functional>
#include <limits>

#include <arrow/array.h>
#include <arrow/array/util.h>
#include <arrow/buffer.h>
#include <arrow/builder.h>
#include <arrow/compute/api.h>
#include <arrow/record_batch.h>
#include <arrow/scalar.h>
#include <arrow/util/bit_util.h>
#include <arrow/util/bitmap_ops.h>
#include <arrow/util/byte_size.h>

#include "rill/common/arrow_init.h"
#include "rill/table/gather_internal.h"
#include "rill/table/live_table.h"

namespace rill::table_internal {

namespace {

bool BitOf(const std::shared_ptr<arrow::Buffer>& bits, int64_t i) {
  return !bits || arrow::bit_util::GetBit(bits->data(), i);
}

/// The op a removal is reported as (false: not reported with `options`).
bool RemovalOp(Removal reason, const ChangeReadOptions& options, ChangeOp* op) {
  switch (reason) {
    case Removal::kUpdate:
      *op = ChangeOp::kUpdateBefore;
      return options.include_old_values;
    case Removal::kDelete:
      *op = ChangeOp::kDelete;
      return true;
    case Removal::kRetention:
      *op = ChangeOp::kDelete;
      return options.emit_retention_deletes;
  }
  return false;
}

Result<std::shared_ptr<arrow::Array>> ConstantOps(ChangeOp op, int64_t n) {
  return arrow::MakeArrayFromScalar(arrow::StringScalar(ChangeOpName(op)), n, TableMemoryPool());
}

/// `rows` (table schema) with _op and _version appended, relabelled as `schema`.
Result<std::shared_ptr<arrow::RecordBatch>> WithChangeColumns(
    const std::shared_ptr<arrow::Schema>& schema, const arrow::RecordBatch& rows,
    std::shared_ptr<arrow::Array> ops, uint64_t version) {
  auto columns = rows.columns();
  columns.push_back(std::move(ops));
  RILL_ASSIGN_OR_RAISE(auto versions,
                       arrow::MakeArrayFromScalar(arrow::UInt64Scalar(version), rows.num_rows(),
                                                  TableMemoryPool()));
  columns.push_back(std::move(versions));
  return arrow::RecordBatch::Make(schema, rows.num_rows(), std::move(columns));
}

Result<std::shared_ptr<arrow::RecordBatch>> RowsOf(const std::shared_ptr<arrow::RecordBatch>& batch,
                                                   const std::shared_ptr<arrow::Buffer>& mask,
                                                   int64_t live_rows) {
  if (!mask || live_rows == batch->num_rows()) return batch;
  return GatherLiveRows(batch->schema(), {{batch, mask, live_rows}}, TableMemoryPool());
}

Result<std::shared_ptr<arrow::RecordBatch>> RemovedRows(const RemovedGroup& group) {
  if (group.all_rows) return RowsOf(group.batch, group.mask, group.num_rows);
  auto indices = std::make_shared<arrow::UInt32Array>(
      static_cast<int64_t>(group.rows.size()),
      arrow::Buffer::Wrap(group.rows.data(), group.rows.size()));
  arrow::compute::ExecContext ctx(TableMemoryPool());
  RILL_ASSIGN_OR_RAISE(auto taken, arrow::compute::Take(group.batch, indices,
                                                        arrow::compute::TakeOptions::NoBoundsCheck(),
                                                        &ctx));
  return taken.record_batch();
}

/// Append the change rows of `entry` to `out` (removals first, then writes).
Status Materialize(const std::shared_ptr<arrow::Schema>& schema, const ChangeEntry& entry,
                   const ChangeReadOptions& options,
                   std::vector<std::shared_ptr<arrow::RecordBatch>>* out) {
  for (const auto& group : entry.removed) {
    ChangeOp op;
    if (group.num_rows == 0 || !RemovalOp(group.reason, options, &op)) continue;
    RILL_ASSIGN_OR_RAISE(auto rows, RemovedRows(group));
    RILL_ASSIGN_OR_RAISE(auto ops, ConstantOps(op, rows->num_rows()));
    RILL_ASSIGN_OR_RAISE(auto batch, WithChangeColumns(schema, *rows, ops, entry.version));
    out->push_back(std::move(batch));
  }
  for (const auto& part : entry.written) {
    if (part.live_rows == 0) continue;
    RILL_ASSIGN_OR_RAISE(auto rows, RowsOf(part.batch, part.alive, part.live_rows));
    std::shared_ptr<arrow::Array> ops;
    if (!part.updated) {
      RILL_ASSIGN_OR_RAISE(ops, ConstantOps(ChangeOp::kInsert, rows->num_rows()));
    } else {
      arrow::StringBuilder builder(TableMemoryPool());
      RILL_RETURN_NOT_OK(builder.Reserve(part.live_rows));
      RILL_RETURN_NOT_OK(builder.ReserveData(part.live_rows * 6));
      const int64_t n = part.batch->num_rows();
      for (int64_t r = 0; r < n; ++r) {
        if (!BitOf(part.alive, r)) continue;
        const bool update = arrow::bit_util::GetBit(part.updated->data(), r);
        builder.UnsafeAppend(update ? "update" : "insert", 6);
      }
      RILL_RETURN_NOT_OK(builder.Finish(&ops));
    }
    RILL_ASSIGN_OR_RAISE(auto batch, WithChangeColumns(schema, *rows, ops, entry.version));
    out->push_back(std::move(batch));
  }
  return Status::OK();
}

/// Append `entry`'s deleted rows (change rows) to `out`.
Status DeletedRows(const std::shared_ptr<arrow::Schema>& schema, const ChangeEntry& entry,
                   std::vector<std::shared_ptr<arrow::RecordBatch>>* out) {
  for (const auto& group : entry.removed) {
    if (group.num_rows == 0 || group.reason != Removal::kDelete) continue;
    RILL_ASSIGN_OR_RAISE(auto rows, RemovedRows(group));
    RILL_ASSIGN_OR_RAISE(auto ops, ConstantOps(ChangeOp::kDelete, rows->num_rows()));
    RILL_ASSIGN_OR_RAISE(auto batch, WithChangeColumns(schema, *rows, ops, entry.version));
    out->push_back(std::move(batch));
  }
  return Status::OK();
}

/// `entry`'s deleted rows as change rows in one batch of their own (copied, so
/// that the chunks that held them can go); null when it deleted nothing.
Result<std::shared_ptr<arrow::RecordBatch>> CopyOfDeletes(
    const std::shared_ptr<arrow::Schema>& schema, const ChangeEntry& entry) {
  std::vector<std::shared_ptr<arrow::RecordBatch>> parts;
  RILL_RETURN_NOT_OK(DeletedRows(schema, entry, &parts));
  if (parts.empty()) return nullptr;
  // Two inputs at least: Concatenate copies (a whole removed chunk is shared).
  if (parts.size() == 1) parts.push_back(parts.front()->Slice(0, 0));
  return arrow::ConcatenateRecordBatches(parts, TableMemoryPool());
}

}  // namespace

int64_t ChangeEntry::RowsFor(const ChangeReadOptions& options) const {
  int64_t rows = written_rows + removed_rows[static_cast<int>(Removal::kDelete)];
  if (options.include_old_values) rows += removed_rows[static_cast<int>(Removal::kUpdate)];
  if (options.emit_retention_deletes) {
    rows += removed_rows[static_cast<int>(Removal::kRetention)];
  }
  return rows;
}

void ChangeEntry::Seal() {
  written_rows = 0;
  for (auto& part : written) {
    part.live_rows = part.alive ? arrow::internal::CountSetBits(part.alive->data(), 0,
                                                                part.batch->num_rows())
                                : part.batch->num_rows();
    written_rows += part.live_rows;
  }
  // Update removals that became deletes (LogRemovedLocked) leave their groups.
  std::sort(moved.begin(), moved.end(), std::greater<>());
  for (const auto& [group, pos] : moved) {
    auto& rows = removed[group].rows;
    rows.erase(rows.begin() + pos);
  }
  moved.clear();
  for (auto& part : written) {
    part.origins.clear();
    part.origins.shrink_to_fit();
  }
  for (auto& n : removed_rows) n = 0;
  for (auto& group : removed) {
    if (!group.all_rows) group.num_rows = static_cast<int64_t>(group.rows.size());
    removed_rows[static_cast<int>(group.reason)] += group.num_rows;
  }
}

// ---------------------------------------------------------------------------
// ChangeLog::Feed: one consumer's handle.

class ChangeLog::Feed final : public ChangeFeed {
 public:
  Feed(std::shared_ptr<ChangeLog> log, uint64_t id, std::weak_ptr<LiveTable> table)
      : log_(std::move(log)), id_(id), table_(std::move(table)) {}
  ~Feed() override { log_->Close(id_); }

  Result<ChangeSet> Read(uint64_t cursor, const ChangeReadOptions& options) override {
    // A stale table (SetRefresher) publishes its fresh state first.
    if (auto table = table_.lock()) (void)table->snapshot();
    return log_->Read(cursor, options);
  }
  void Acknowledge(uint64_t version) override { log_->Acknowledge(id_, version); }
  uint64_t current_version() const override { return log_->current_version(); }
  ChangeFeedStats stats() const override { return log_->stats(); }
  const std::string& table_name() const override { return log_->table_name_; }

 private:
  std::shared_ptr<ChangeLog> log_;
  const uint64_t id_;
  std::weak_ptr<LiveTable> table_;
};

// ---------------------------------------------------------------------------
// ChangeLog

ChangeLog::ChangeLog(std::string table_name, std::shared_ptr<arrow::Schema> table_schema)
    : table_name_(std::move(table_name)), change_schema_(ChangeSchema(table_schema)) {}

void ChangeLog::Restart(std::shared_ptr<const TableVersion> current) {
  std::vector<std::shared_ptr<const ChangeEntry>> garbage;
  std::lock_guard<std::mutex> lock(mu_);
  ClearLocked(&garbage);
  latest_ = std::move(current);
  base_ = latest_->version();
  ClearGravesLocked();
}

void ChangeLog::Publish(std::unique_ptr<ChangeEntry> entry,
                        std::shared_ptr<const TableVersion> current) {
  std::vector<std::shared_ptr<const ChangeEntry>> garbage;
  std::lock_guard<std::mutex> lock(mu_);
  latest_ = std::move(current);
  if (entry && entry->reset) {
    ClearLocked(&garbage);
    base_ = latest_->version();
    ClearGravesLocked();
  } else if (entry && !entry->empty()) {
    entry->version = latest_->version();
    entry->published_at = latest_->published_at();
    PushLocked(std::shared_ptr<const ChangeEntry>(std::move(entry)));
  }
  TrimLocked(&garbage);
}

std::shared_ptr<ChangeFeed> ChangeLog::Open(ChangeFeedOptions options,
                                            std::weak_ptr<LiveTable> table) {
  uint64_t id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    id = next_feed_++;
    feeds_[id] = FeedState{base_, options};
    open_feeds_.store(static_cast<int64_t>(feeds_.size()), std::memory_order_release);
  }
  return std::make_shared<Feed>(shared_from_this(), id, std::move(table));
}

void ChangeLog::Close(uint64_t feed) {
  std::vector<std::shared_ptr<const ChangeEntry>> garbage;
  std::lock_guard<std::mutex> lock(mu_);
  feeds_.erase(feed);
  open_feeds_.store(static_cast<int64_t>(feeds_.size()), std::memory_order_release);
  TrimLocked(&garbage);
}

void ChangeLog::Acknowledge(uint64_t feed, uint64_t version) {
  std::vector<std::shared_ptr<const ChangeEntry>> garbage;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = feeds_.find(feed);
  if (it == feeds_.end()) return;
  version = std::min(version, latest_->version());
  it->second.acknowledged = std::max(it->second.acknowledged, version);
  TrimLocked(&garbage);
}

uint64_t ChangeLog::current_version() const {
  std::lock_guard<std::mutex> lock(mu_);
  return latest_->version();
}

ChangeFeedStats ChangeLog::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  ChangeFeedStats s;
  s.open_feeds = static_cast<int64_t>(feeds_.size());
  s.log_versions = static_cast<int64_t>(entries_.size());
  s.log_rows = log_rows_;
  s.reads = reads_;
  s.rows_read = rows_read_;
  s.snapshots = snapshots_;
  s.oldest_version = base_;
  s.forgotten_delete_rows = grave_rows_;
  s.snapshots_missing_deletes = snapshots_missing_deletes_;
  return s;
}

void ChangeLog::AddRef(const arrow::RecordBatch* batch, int delta) {
  auto [it, inserted] = refs_.try_emplace(batch);
  if (inserted) {
    it->second.bytes = arrow::util::TotalBufferSize(*batch);
    ref_bytes_ += it->second.bytes;
  }
  it->second.count += delta;
  if (it->second.count <= 0) {
    ref_bytes_ -= it->second.bytes;
    refs_.erase(it);
  }
}

void ChangeLog::PushLocked(std::shared_ptr<const ChangeEntry> entry) {
  log_rows_ += entry->RowsFor({/*max_rows=*/0, /*emit_retention_deletes=*/true,
                               /*include_old_values=*/true});
  for (const auto& part : entry->written) AddRef(part.batch.get(), +1);
  for (const auto& group : entry->removed) AddRef(group.batch.get(), +1);
  entries_.push_back(std::move(entry));
}

void ChangeLog::PopFrontLocked(std::vector<std::shared_ptr<const ChangeEntry>>* garbage) {
  auto entry = std::move(entries_.front());
  entries_.pop_front();
  BuryLocked(*entry);
  base_ = std::max(base_, entry->version);
  log_rows_ -= entry->RowsFor({0, true, true});
  for (const auto& part : entry->written) AddRef(part.batch.get(), -1);
  for (const auto& group : entry->removed) AddRef(group.batch.get(), -1);
  garbage->push_back(std::move(entry));
}

void ChangeLog::ClearLocked(std::vector<std::shared_ptr<const ChangeEntry>>* garbage) {
  for (auto& entry : entries_) garbage->push_back(std::move(entry));
  entries_.clear();
  refs_.clear();
  ref_bytes_ = 0;
  log_rows_ = 0;
}

int64_t ChangeLog::UnheldBytesLocked() const {
  // Bytes of the batches the entries hold, less those the latest version holds
  // anyway (an over-estimate for slices of a held chunk: conservative).
  int64_t bytes = ref_bytes_;
  for (const auto& chunk : latest_->chunks()) {
    auto it = refs_.find(chunk.batch.get());
    if (it != refs_.end()) bytes -= it->second.bytes;
  }
  return bytes;
}

void ChangeLog::TrimLocked(std::vector<std::shared_ptr<const ChangeEntry>>* garbage) {
  if (!latest_) return;
  if (feeds_.empty()) {
    ClearLocked(garbage);
    base_ = latest_->version();
    ClearGravesLocked();
    return;
  }
  uint64_t acknowledged = std::numeric_limits<uint64_t>::max();
  int64_t max_rows = std::numeric_limits<int64_t>::max();
  int64_t max_bytes = std::numeric_limits<int64_t>::max();
  for (const auto& [id, feed] : feeds_) {
    acknowledged = std::min(acknowledged, feed.acknowledged);
    max_rows = std::min(max_rows, feed.options.max_log_rows);
    max_bytes = std::min(max_bytes, feed.options.max_log_bytes);
  }
  while (!entries_.empty() && entries_.front()->version <= acknowledged) {
    PopFrontLocked(garbage);
  }
  if (acknowledged > base_ && acknowledged <= latest_->version()) base_ = acknowledged;
  while (!entries_.empty() && log_rows_ > max_rows) PopFrontLocked(garbage);
  while (!entries_.empty() && ref_bytes_ > max_bytes && UnheldBytesLocked() > max_bytes) {
    PopFrontLocked(garbage);
  }
  TrimGravesLocked();
}

void ChangeLog::BuryLocked(const ChangeEntry& entry) {
  if (entry.removed_rows[static_cast<int>(Removal::kDelete)] == 0) return;
  bool needed = false;
  for (const auto& [id, feed] : feeds_) {
    needed = needed || (feed.options.keep_forgotten_deletes && feed.acknowledged < entry.version);
  }
  if (!needed) return;
  auto rows = CopyOfDeletes(change_schema_, entry);
  if (!rows.ok() || !*rows) {
    // Out of memory copying them: a later snapshot says it is incomplete.
    if (!rows.ok()) graves_base_ = std::max(graves_base_, entry.version);
    return;
  }
  grave_rows_ += (*rows)->num_rows();
  graves_.push_back({entry.version, std::move(*rows)});
}

void ChangeLog::TrimGravesLocked() {
  uint64_t acknowledged = std::numeric_limits<uint64_t>::max();
  int64_t max_rows = std::numeric_limits<int64_t>::max();
  for (const auto& [id, feed] : feeds_) {
    if (!feed.options.keep_forgotten_deletes) continue;
    acknowledged = std::min(acknowledged, feed.acknowledged);
    max_rows = std::min(max_rows, feed.options.max_log_rows);
  }
  while (!graves_.empty() && graves_.front().version <= acknowledged) {
    grave_rows_ -= graves_.front().rows->num_rows();
    graves_.pop_front();
  }
  while (!graves_.empty() && grave_rows_ > max_rows) {
    graves_base_ = std::max(graves_base_, graves_.front().version);
    grave_rows_ -= graves_.front().rows->num_rows();
    graves_.pop_front();
  }
}

void ChangeLog::ClearGravesLocked() {
  graves_.clear();
  grave_rows_ = 0;
  graves_base_ = base_;
}

Result<ChangeSet> ChangeLog::Read(uint64_t cursor, const ChangeReadOptions& options) {
  ChangeSet out;
  out.from_version = cursor;
  std::shared_ptr<const TableVersion> latest;
  std::vector<std::shared_ptr<const ChangeEntry>> picked;
  std::vector<std::shared_ptr<arrow::RecordBatch>> deleted;  // a snapshot's leading deletes
  {
    std::lock_guard<std::mutex> lock(mu_);
    latest = latest_;
    if (cursor > latest->version()) {
      return Status::Invalid("Change feed of table '", table_name_, "': cursor ", cursor,
                             " is ahead of the table's version ", latest->version());
    }
    ++reads_;
    out.to_version = latest->version();
    out.published_at = latest->published_at();
    if (cursor < base_) {
      out.snapshot = true;
      if (cursor != 0) ++snapshots_;
      if (cursor != 0 && options.snapshot_deletes) {
        for (const auto& grave : graves_) {
          if (grave.version > cursor) deleted.push_back(grave.rows);
        }
        picked.assign(entries_.begin(), entries_.end());  // all after the cursor
        if (cursor < graves_base_) {
          out.snapshot_deletes_incomplete = true;
          ++snapshots_missing_deletes_;
        }
      }
    } else {
      auto it = std::upper_bound(
          entries_.begin(), entries_.end(), cursor,
          [](uint64_t v, const std::shared_ptr<const ChangeEntry>& e) { return v < e->version; });
      int64_t rows = 0;
      for (; it != entries_.end(); ++it) {
        picked.push_back(*it);
        rows += (*it)->RowsFor(options);
        if (options.max_rows > 0 && rows >= options.max_rows) {
          if (std::next(it) != entries_.end()) {
            out.to_version = (*it)->version;
            out.published_at = (*it)->published_at;
          }
          break;
        }
      }
    }
  }
  // Materialize outside the lock, on this (the reader's) thread.
  if (out.snapshot) {
    // The deletes the reader missed, those forgotten and those the log holds.
    out.batches = std::move(deleted);
    for (const auto& entry : picked) {
      RILL_RETURN_NOT_OK(DeletedRows(change_schema_, *entry, &out.batches));
    }
    for (const auto& b : out.batches) out.snapshot_delete_rows += b->num_rows();
    for (const auto& chunk : latest->chunks()) {
      if (chunk.live_rows == 0) continue;
      RILL_ASSIGN_OR_RAISE(auto rows, TableVersion::LiveBatch(chunk));
      RILL_ASSIGN_OR_RAISE(auto ops, ConstantOps(ChangeOp::kInsert, rows->num_rows()));
      RILL_ASSIGN_OR_RAISE(auto batch,
                           WithChangeColumns(change_schema_, *rows, ops, latest->version()));
      out.batches.push_back(std::move(batch));
    }
  } else {
    for (const auto& entry : picked) {
      RILL_RETURN_NOT_OK(Materialize(change_schema_, *entry, options, &out.batches));
    }
  }
  for (const auto& b : out.batches) out.num_rows += b->num_rows();
  std::lock_guard<std::mutex> lock(mu_);
  rows_read_ += out.num_rows;
  return out;
}

}  // namespace rill::table_internal
