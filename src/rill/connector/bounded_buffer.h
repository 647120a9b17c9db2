// BoundedBuffer: the backpressure buffer between producers and the tick thread.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string_view>
#include <vector>

#include <arrow/type_fwd.h>

#include "rill/common/status.h"
#include "rill/connector/connector.h"

namespace rill {

/// What to do when a push would exceed the buffer's limits.
enum class OverflowPolicy {
  kDropOldest,  ///< drop the oldest buffered rows (slicing batches exactly)
  kDropNewest,  ///< keep what is buffered, take only the part of the push that fits
  kError,       ///< refuse the whole push with CapacityError; nothing is dropped
};

/// Parse "drop_oldest", "drop_newest" or "error".
Result<OverflowPolicy> ParseOverflowPolicy(std::string_view text);
const char* OverflowPolicyName(OverflowPolicy policy);

/// Limits of a buffer; 0 means unlimited.
struct BufferLimits {
  int64_t max_records = 100000;
  int64_t max_bytes = 0;
  OverflowPolicy on_overflow = OverflowPolicy::kDropOldest;
};

/// A FIFO of record batches bounded by rows and bytes. Thread-safe: Push from
/// any thread, Drain from the consumer.
///
/// Byte accounting uses each batch's referenced buffer sizes, pro-rated by rows
/// for slices, so that partial drops count the bytes they free.
class BoundedBuffer {
 public:
  explicit BoundedBuffer(BufferLimits limits) : limits_(limits) {}

  /// Add `batches` as one push (empty batches are ignored). With kError,
  /// CapacityError when the push would not fit, saying how many rows were
  /// offered and how many fit; nothing is added then. With
  /// `oversize_when_empty`, kError takes a push larger than the limits when
  /// the buffer is empty (a reader that cannot split its input, e.g. Kafka
  /// messages whose positions advance as a whole, would otherwise wait forever).
  Status Push(const std::vector<std::shared_ptr<arrow::RecordBatch>>& batches,
              bool oversize_when_empty = false);
  /// As Push, for a reader that waits for room instead of losing the push
  /// (on_overflow = error: it holds the push, stops reading its source and
  /// offers the same push again later): a push that does not fit is not
  /// counted in `refused_records` (nothing was refused for good). Any thread.
  Status TryPush(const std::vector<std::shared_ptr<arrow::RecordBatch>>& batches,
                 bool oversize_when_empty = false);

  /// Remove and return everything buffered, oldest first.
  std::vector<std::shared_ptr<arrow::RecordBatch>> Drain() { return Drain(0); }
  /// Remove and return the oldest `max_records` rows at most (0: all), slicing
  /// the last batch taken; the rest stays buffered, in order.
  std::vector<std::shared_ptr<arrow::RecordBatch>> Drain(int64_t max_records);

  /// Counters (buffered_*, pushed, dropped, refused, drained).
  ConnectorStats stats() const;
  /// Rows that have left the queue from its front (drained, or dropped by
  /// drop_oldest). A push is settled once this reaches the `pushed_records`
  /// observed right after it (the queue is FIFO). Any thread.
  int64_t removed_records() const;
  const BufferLimits& limits() const { return limits_; }
  /// Change the overflow policy before the buffer is used (no push yet, no
  /// reader of limits() on another thread): a Kafka source joining an
  /// application's group waits for room instead of dropping.
  void SetOverflowPolicy(OverflowPolicy policy) { limits_.on_overflow = policy; }

 private:
  struct Entry {
    std::shared_ptr<arrow::RecordBatch> batch;
    int64_t bytes;
  };
  Status PushImpl(const std::vector<std::shared_ptr<arrow::RecordBatch>>& batches,
                  bool oversize_when_empty, bool count_refused);

  BufferLimits limits_;  // set at construction (SetOverflowPolicy before use)
  mutable std::mutex mu_;
  std::deque<Entry> queue_;  // guarded by mu_
  ConnectorStats stats_;     // guarded by mu_
};

/// Estimate the bytes of `batch` (its buffers, pro-rated for slices).
int64_t EstimateBatchBytes(const arrow::RecordBatch& batch);

}  // namespace rill
