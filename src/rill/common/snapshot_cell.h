// SnapshotCell<T>: a single-writer, many-reader cell holding an immutable value.
//
// The writer publishes a new `shared_ptr<const T>` with Store(); readers call
// Load() from any thread and keep the value alive for as long as they hold it.
// Readers never block the writer and never see a half-built value.
#pragma once

#include <atomic>
#include <memory>

namespace rill {

template <typename T>
class SnapshotCell {
 public:
  SnapshotCell() = default;
  explicit SnapshotCell(std::shared_ptr<const T> value) : value_(std::move(value)) {}

  /// Return the current value. Any thread.
  std::shared_ptr<const T> Load() const { return value_.load(std::memory_order_acquire); }

  /// Publish `value`. Any thread, but callers serialize writes themselves.
  void Store(std::shared_ptr<const T> value) {
    value_.store(std::move(value), std::memory_order_release);
  }

 private:
  // acquire/release: a reader that sees the pointer sees the fully built value.
  std::atomic<std::shared_ptr<const T>> value_;
};

}  // namespace rill
