// Compaction: rewrite chunks whose rows are mostly dead and merge small ones.
#include "rill/table/live_table.h"

#include <algorithm>
#include <cstring>

#include <arrow/buffer.h>
#include <arrow/record_batch.h>
#include <arrow/util/bit_util.h>

#include "rill/common/arrow_init.h"
#include "rill/table/gather_internal.h"
#include "rill/table/live_table_internal.h"

namespace rill {

namespace {

/// See CompactLocked: large tables may hold a chunk per this many live rows.
constexpr int64_t kMinAverageChunkRows = 8192;

/// Append the locations of the live rows of the chunk in `slot` (`n` rows,
/// `alive` as in Chunk: null = all alive), in row order.
void AppendLiveLocations(uint32_t slot, int64_t n, const arrow::Buffer* alive,
                         std::vector<uint64_t>* out) {
  if (alive == nullptr) {
    for (int64_t r = 0; r < n; ++r) out->push_back(table_internal::Location(slot, r));
    return;
  }
  const uint8_t* bits = alive->data();
  const int64_t words = n / 64;
  for (int64_t w = 0; w < words; ++w) {
    uint64_t word;
    std::memcpy(&word, bits + w * 8, 8);  // little-endian: bit i of the word = row 64w + i
    while (word != 0) {
      out->push_back(table_internal::Location(slot, w * 64 + __builtin_ctzll(word)));
      word &= word - 1;
    }
  }
  for (int64_t r = words * 64; r < n; ++r) {
    if (arrow::bit_util::GetBit(bits, r)) out->push_back(table_internal::Location(slot, r));
  }
}

}  // namespace

void LiveTable::DropEmptyChunksLocked() {
  size_t out = 0;
  for (size_t i = 0; i < order_.size(); ++i) {
    uint32_t slot = order_[i];
    if (slots_[slot].live_rows == 0) {
      slots_[slot] = Chunk{};
      free_slots_.push_back(slot);
    } else {
      order_[out++] = slot;
    }
  }
  order_.resize(out);
}

Status LiveTable::RewriteLocked(size_t begin, size_t end) {
  // Rewrite order_[begin, end) into one chunk of their live rows.
  std::vector<table_internal::GatherPart> parts;
  int64_t total = 0;
  for (size_t i = begin; i < end; ++i) {
    const Chunk& c = slots_[order_[i]];
    parts.push_back({c.batch, c.alive, c.live_rows});
    total += c.live_rows;
  }
  if (parts.empty() ||
      (parts.size() == 1 && parts[0].live_rows == parts[0].batch->num_rows())) {
    return Status::OK();  // nothing to drop, nothing to merge
  }
  RILL_ASSIGN_OR_RAISE(auto merged,
                       table_internal::GatherLiveRows(schema_, parts, TableMemoryPool()));
  if (index_) {
    // Where each merged row comes from (the gather's order), so that the index
    // finds the moved keys by location instead of comparing their bytes.
    moved_scratch_.clear();
    moved_scratch_.reserve(static_cast<size_t>(total));
    for (size_t i = begin; i < end; ++i) {
      const Chunk& c = slots_[order_[i]];
      AppendLiveLocations(order_[i], c.batch->num_rows(), c.alive.get(), &moved_scratch_);
    }
    if (static_cast<int64_t>(moved_scratch_.size()) != total) {
      return Status::Invalid("Table '", name_, "': compaction found ", moved_scratch_.size(),
                             " live rows, expected ", total);
    }
  }
  const uint32_t slot = AllocateSlotLocked();
  SetChunkLocked(slot, std::move(merged), nullptr, total);
  RILL_RETURN_NOT_OK(IndexChunkLocked(slot, moved_scratch_.data()));
  for (size_t i = begin; i < end; ++i) {
    uint32_t old = order_[i];
    slots_[old] = Chunk{};
    free_slots_.push_back(old);
  }
  order_.erase(order_.begin() + begin + 1, order_.begin() + end);
  order_[begin] = slot;
  return Status::OK();
}

Status LiveTable::CompactLocked(bool full) {
  DropEmptyChunksLocked();
  const int64_t target = std::max<int64_t>(options_.target_chunk_rows, 1);
  if (full) {
    // Rewrite everything into one batch, then cut it into chunks of `target`.
    if (order_.empty()) return Status::OK();
    RILL_RETURN_NOT_OK(RewriteLocked(0, order_.size()));
    const uint32_t whole = order_[0];
    std::shared_ptr<arrow::RecordBatch> all = slots_[whole].batch;
    if (all->num_rows() <= target) return Status::OK();
    order_.clear();
    slots_[whole] = Chunk{};
    free_slots_.push_back(whole);
    for (int64_t start = 0; start < all->num_rows(); start += target) {
      auto piece = all->Slice(start, std::min(target, all->num_rows() - start));
      const uint32_t slot = AllocateSlotLocked();
      const int64_t rows = piece->num_rows();
      SetChunkLocked(slot, std::move(piece), nullptr, rows);
      if (index_) {
        moved_scratch_.resize(static_cast<size_t>(rows));
        for (int64_t r = 0; r < rows; ++r) {
          moved_scratch_[r] = table_internal::Location(whole, start + r);
        }
        RILL_RETURN_NOT_OK(IndexChunkLocked(slot, moved_scratch_.data()));
      }
      order_.push_back(slot);
    }
    return Status::OK();
  }
  // Merging small chunks copies rows that dead-row compaction would not have
  // touched, so a large table may hold more chunks than auto_compact_chunks, as
  // long as they average kMinAverageChunkRows rows: a 1M-row table merges above
  // 122 chunks, not 32, which cuts the rows compaction copies (and re-indexes)
  // per upserted row from about 2 to about 1.2 under random upserts.
  const int64_t max_chunks =
      std::max(options_.auto_compact_chunks, live_rows_ / kMinAverageChunkRows);
  // Merge only while there are too many chunks: one merge per write in a
  // steady state, not every small chunk at once (hundreds of thousands of
  // rows copied in one tick).
  auto merging = [&] {
    return options_.auto_compact_chunks > 0 && static_cast<int64_t>(order_.size()) > max_chunks;
  };
  // Merging makes chunks of kMinAverageChunkRows to twice that (or up to
  // `target`, if smaller): enough for the average above, and a merged chunk
  // is not merged again. Merging up to `target` made a growing chunk that every
  // merge copied again (up to 128k rows in one tick, for a few new rows: the
  // tail of the 10 ms-tick latency, issue 15).
  const int64_t small_rows = std::min(target / 2, kMinAverageChunkRows);
  const int64_t merge_rows = std::min(target, 2 * kMinAverageChunkRows);
  auto dirty = [&](const Chunk& c) {
    return c.live_rows < c.batch->num_rows() &&
           (full || c.batch->num_rows() - c.live_rows >
                        options_.compact_dead_fraction * c.batch->num_rows());
  };
  size_t i = 0;
  while (i < order_.size()) {
    const Chunk& first = slots_[order_[i]];
    const bool merge = merging();
    bool small = merge && first.live_rows < small_rows;
    if (!dirty(first) && !small) {
      ++i;
      continue;
    }
    // Grow a group of adjacent chunks, up to `cap` rows, that are dirty (their
    // rewrite is due anyway, so grouping them costs nothing) or, when merging,
    // small.
    size_t j = i + 1;
    int64_t rows = first.live_rows;
    const int64_t cap = dirty(first) ? target : merge_rows;
    while (j < order_.size()) {
      const Chunk& next = slots_[order_[j]];
      const bool joins = dirty(next) || (merge && next.live_rows < small_rows);
      if (!joins || rows + next.live_rows > cap) break;
      rows += next.live_rows;
      ++j;
    }
    if (j - i == 1 && !dirty(first)) {
      ++i;
      continue;
    }
    RILL_RETURN_NOT_OK(RewriteLocked(i, j));
    ++i;
  }
  return Status::OK();
}

}  // namespace rill
