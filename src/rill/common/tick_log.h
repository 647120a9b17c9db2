// TickLog: the durations of the most recent ticks, written by the tick thread
// without a lock or an allocation and read by any number of readers (the
// metrics collector), each at its own pace with its own cursor.
//
// A ring of kCapacity slots (the last kCapacity - 1 ticks can be read back):
// the writer stores a tick's duration in its slot
// (release) and then publishes the count of ticks recorded (release). A reader
// copies the slots past its cursor, then reads the count again and keeps only
// the slots that the writer cannot have overwritten meanwhile; ticks that were
// overwritten before being read are counted as lost. A slow reader never
// delays the tick.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

namespace rill {

class TickLog {
 public:
  static constexpr uint64_t kCapacity = 4096;

  /// Record the duration of one tick. Called by whichever thread runs the tick
  /// (ticks are serialized by the engine: one writer at a time).
  void Record(double seconds) {
    const uint64_t n = recorded_.load(std::memory_order_relaxed);
    slots_[n % kCapacity].store(seconds, std::memory_order_release);
    recorded_.store(n + 1, std::memory_order_release);
  }

  /// Ticks recorded so far (a cursor that reads only what comes next).
  uint64_t recorded() const { return recorded_.load(std::memory_order_acquire); }

  /// Call `fn(seconds)` for each tick recorded after `*cursor`, oldest first,
  /// and move the cursor past them. Returns how many of those ticks were
  /// overwritten before they could be read (skipped). Any thread; `cursor` is
  /// the caller's own.
  template <typename Fn>
  int64_t ReadSince(uint64_t* cursor, Fn&& fn) const {
    const uint64_t end = recorded_.load(std::memory_order_acquire);
    uint64_t begin = *cursor < end ? *cursor : end;
    // The writer's next tick goes into the slot of tick `end - kCapacity`:
    // at most kCapacity - 1 ticks can be read back.
    if (end - begin > kCapacity - 1) begin = end - (kCapacity - 1);
    std::array<double, 256> copy;
    int64_t lost = static_cast<int64_t>(begin - (*cursor < end ? *cursor : end));
    while (begin < end) {
      const uint64_t stop = end - begin > copy.size() ? begin + copy.size() : end;
      for (uint64_t s = begin; s < stop; ++s) {
        copy[s - begin] = slots_[s % kCapacity].load(std::memory_order_acquire);
      }
      // The writer, now at tick `after`, may be storing tick `after` into the
      // slot of tick `after - kCapacity`: slots at or below that are not kept.
      const uint64_t after = recorded_.load(std::memory_order_acquire);
      for (uint64_t s = begin; s < stop; ++s) {
        if (s + kCapacity > after) {
          fn(copy[s - begin]);
        } else {
          ++lost;
        }
      }
      begin = stop;
    }
    *cursor = end;
    return lost;
  }

 private:
  std::atomic<uint64_t> recorded_{0};
  std::array<std::atomic<double>, kCapacity> slots_{};
};

}  // namespace rill
