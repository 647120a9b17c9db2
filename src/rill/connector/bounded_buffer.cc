#include "rill/connector/bounded_buffer.h"

#include <algorithm>
#include <cstdint>

#include <arrow/array/data.h>
#include <arrow/record_batch.h>
#include <arrow/type_traits.h>
#include <arrow/util/bit_util.h>
#include <arrow/util/byte_size.h>

namespace rill {

Result<OverflowPolicy> ParseOverflowPolicy(std::string_view text) {
  if (text == "drop_oldest") return OverflowPolicy::kDropOldest;
  if (text == "drop_newest") return OverflowPolicy::kDropNewest;
  if (text == "error") return OverflowPolicy::kError;
  return Status::Invalid("Unknown on_overflow '", text,
                         "': expected 'drop_oldest', 'drop_newest' or 'error'");
}

const char* OverflowPolicyName(OverflowPolicy policy) {
  switch (policy) {
    case OverflowPolicy::kDropOldest: return "drop_oldest";
    case OverflowPolicy::kDropNewest: return "drop_newest";
    case OverflowPolicy::kError: return "error";
  }
  return "?";
}

namespace {

/// Bytes of the bitmap bits [offset, offset + length), in whole bytes.
int64_t BitmapBytes(int64_t offset, int64_t length) {
  return arrow::bit_util::CeilDiv(offset + length, 8) - offset / 8;
}

/// The referenced bytes of a flat column (primitive, boolean, string, binary),
/// as arrow::util::ReferencedBufferSize counts them; -1 for other types.
int64_t FlatColumnBytes(const arrow::ArrayData& d) {
  int64_t bytes = d.buffers[0] ? BitmapBytes(d.offset, d.length) : 0;
  const arrow::Type::type id = d.type->id();
  if (id == arrow::Type::BOOL) return bytes + BitmapBytes(d.offset, d.length);
  if (arrow::is_primitive(id)) {
    return bytes + d.length * (d.type->byte_width());
  }
  // Offsets: `length` of them, as Arrow counts (not length + 1).
  if (id == arrow::Type::STRING || id == arrow::Type::BINARY) {
    if (d.length == 0) return bytes;
    const int32_t* offsets = d.GetValues<int32_t>(1);
    return bytes + d.length * 4 + (offsets[d.length] - offsets[0]);
  }
  if (id == arrow::Type::LARGE_STRING || id == arrow::Type::LARGE_BINARY) {
    if (d.length == 0) return bytes;
    const int64_t* offsets = d.GetValues<int64_t>(1);
    return bytes + d.length * 8 + (offsets[d.length] - offsets[0]);
  }
  return -1;
}

}  // namespace

int64_t EstimateBatchBytes(const arrow::RecordBatch& batch) {
  // Once per pushed batch: flat columns are counted here directly (issue 16:
  // ReferencedBufferSize's generic range walk cost more than the push itself).
  int64_t flat = 0;
  for (int i = 0; i < batch.num_columns(); ++i) {
    const int64_t b = FlatColumnBytes(*batch.column_data(i));
    if (b < 0) {
      flat = -1;
      break;
    }
    flat += b;
  }
  if (flat >= 0) return flat;
  // ReferencedBufferSize pro-rates fixed-width buffers of slices; fall back to
  // the total size when the computation is not supported for a type.
  auto referenced = arrow::util::ReferencedBufferSize(batch);
  if (referenced.ok()) return *referenced;
  return arrow::util::TotalBufferSize(batch);
}

namespace {

/// Bytes of the first `rows` rows of an entry of `bytes` over `total` rows.
int64_t ProRate(int64_t bytes, int64_t rows, int64_t total) {
  return total == 0 ? 0 : static_cast<int64_t>(static_cast<__int128>(bytes) * rows / total);
}

}  // namespace

Status BoundedBuffer::Push(const std::vector<std::shared_ptr<arrow::RecordBatch>>& batches,
                           bool oversize_when_empty) {
  return PushImpl(batches, oversize_when_empty, /*count_refused=*/true);
}

Status BoundedBuffer::TryPush(const std::vector<std::shared_ptr<arrow::RecordBatch>>& batches,
                              bool oversize_when_empty) {
  return PushImpl(batches, oversize_when_empty, /*count_refused=*/false);
}

Status BoundedBuffer::PushImpl(const std::vector<std::shared_ptr<arrow::RecordBatch>>& batches,
                               bool oversize_when_empty, bool count_refused) {
  std::vector<Entry> incoming;
  int64_t rows = 0;
  int64_t bytes = 0;
  for (const auto& b : batches) {
    if (!b || b->num_rows() == 0) continue;
    Entry e{b, EstimateBatchBytes(*b)};
    rows += b->num_rows();
    bytes += e.bytes;
    incoming.push_back(std::move(e));
  }
  if (incoming.empty()) return Status::OK();

  std::lock_guard<std::mutex> lock(mu_);
  const int64_t max_rows = limits_.max_records;
  const int64_t max_bytes = limits_.max_bytes;
  auto fits = [&](int64_t r, int64_t b) {
    return (max_rows <= 0 || stats_.buffered_records + r <= max_rows) &&
           (max_bytes <= 0 || stats_.buffered_bytes + b <= max_bytes);
  };
  auto add = [&](Entry e) {
    stats_.buffered_records += e.batch->num_rows();
    stats_.buffered_bytes += e.bytes;
    stats_.pushed_records += e.batch->num_rows();
    queue_.push_back(std::move(e));
  };

  switch (limits_.on_overflow) {
    case OverflowPolicy::kError: {
      if (!fits(rows, bytes) && !(oversize_when_empty && queue_.empty())) {
        if (count_refused) stats_.refused_records += rows;
        return Status::CapacityError(
            "Buffer full: push of ", rows, " rows (", bytes, " bytes) refused; buffered ",
            stats_.buffered_records, " rows / ", stats_.buffered_bytes,
            " bytes, limits max_buffer_records=", max_rows, " max_buffer_bytes=", max_bytes,
            " (0 = unlimited)");
      }
      for (auto& e : incoming) add(std::move(e));
      return Status::OK();
    }
    case OverflowPolicy::kDropNewest: {
      bool full = false;
      for (auto& e : incoming) {
        const int64_t n = e.batch->num_rows();
        if (!full && fits(n, e.bytes)) {
          add(std::move(e));
          continue;
        }
        // Take the longest prefix that fits; drop the rest of the push.
        int64_t take = full ? 0 : n;
        if (!full) {
          if (max_rows > 0) take = std::min(take, max_rows - stats_.buffered_records);
          if (max_bytes > 0 && e.bytes > 0) {
            const int64_t room = std::max<int64_t>(0, max_bytes - stats_.buffered_bytes);
            // ProRate(bytes, take, n) <= room  <=>  take <= room * n / bytes.
            take = std::min<int64_t>(
                take, static_cast<int64_t>(static_cast<__int128>(room) * n / e.bytes));
          }
          take = std::max<int64_t>(take, 0);
        }
        if (take > 0) add(Entry{e.batch->Slice(0, take), ProRate(e.bytes, take, n)});
        stats_.dropped_records += n - take;
        full = true;
      }
      return Status::OK();
    }
    case OverflowPolicy::kDropOldest: {
      for (auto& e : incoming) add(std::move(e));
      // Drop from the front (slicing exactly) until within limits.
      while (!queue_.empty() && !fits(0, 0)) {
        Entry& front = queue_.front();
        const int64_t n = front.batch->num_rows();
        int64_t drop = n;
        if (max_rows > 0 && stats_.buffered_records > max_rows) {
          drop = std::min(n, stats_.buffered_records - max_rows);
        }
        if (max_bytes > 0 && stats_.buffered_bytes > max_bytes) {
          const int64_t over = stats_.buffered_bytes - max_bytes;
          int64_t by_bytes = n;
          if (front.bytes > 0) {
            by_bytes = std::min<int64_t>(n, (over * n + front.bytes - 1) / front.bytes);
          }
          drop = (max_rows > 0 && stats_.buffered_records > max_rows) ? std::max(drop, by_bytes)
                                                                       : by_bytes;
        }
        drop = std::max<int64_t>(drop, 1);
        stats_.dropped_records += drop;
        stats_.buffered_records -= drop;
        if (drop >= n) {
          stats_.buffered_bytes -= front.bytes;
          queue_.pop_front();
        } else {
          const int64_t kept_bytes = ProRate(front.bytes, n - drop, n);
          stats_.buffered_bytes -= front.bytes - kept_bytes;
          front.batch = front.batch->Slice(drop);
          front.bytes = kept_bytes;
        }
      }
      return Status::OK();
    }
  }
  return Status::OK();
}

std::vector<std::shared_ptr<arrow::RecordBatch>> BoundedBuffer::Drain(int64_t max_records) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::shared_ptr<arrow::RecordBatch>> out;
  int64_t room = max_records > 0 ? max_records : INT64_MAX;
  while (!queue_.empty() && room > 0) {
    Entry& front = queue_.front();
    const int64_t n = front.batch->num_rows();
    if (n <= room) {
      room -= n;
      stats_.drained_records += n;
      stats_.buffered_records -= n;
      stats_.buffered_bytes -= front.bytes;
      out.push_back(std::move(front.batch));
      queue_.pop_front();
      continue;
    }
    // Take the first `room` rows; the rest stays at the front.
    const int64_t taken_bytes = ProRate(front.bytes, room, n);
    out.push_back(front.batch->Slice(0, room));
    front.batch = front.batch->Slice(room);
    front.bytes -= taken_bytes;
    stats_.drained_records += room;
    stats_.buffered_records -= room;
    stats_.buffered_bytes -= taken_bytes;
    room = 0;
  }
  if (queue_.empty()) stats_.buffered_bytes = 0;  // no pro-rating remainder left behind
  return out;
}

int64_t BoundedBuffer::removed_records() const {
  std::lock_guard<std::mutex> lock(mu_);
  // Only drop_oldest drops rows that were queued; drop_newest never queues them.
  return stats_.drained_records +
         (limits_.on_overflow == OverflowPolicy::kDropOldest ? stats_.dropped_records : 0);
}

ConnectorStats BoundedBuffer::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace rill
