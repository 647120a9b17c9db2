// IntLocationMap: an open-addressing hash map from int64 keys to row
// locations, built for batched upserts (private to table/).
//
// Linear probing over a power-of-two array of {key, location + 1} slots (all
// zero bytes = empty, so a new array needs no filling: zeroed_array_internal.h),
// at most half full; erase shifts later entries back (no tombstones).
// UpsertBatch prefetches the slots of rows a few positions ahead, so that a
// batch of random keys over a table larger than the CPU caches overlaps its
// cache misses instead of paying them one after another.
//
// Threads: not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <utility>
#include <vector>

#include <sys/mman.h>

#include "rill/common/huge_page_allocator.h"
#include "rill/table/page_memory_internal.h"

namespace rill {

class IntLocationMap {
 public:
  static constexpr uint64_t kNone = ~uint64_t{0};
  /// A row of a batch that had a previous location: {row, previous location}.
  using Replaced = std::pair<int64_t, uint64_t>;

  IntLocationMap() { Rehash(16); }

  /// Map keys[i] to base + i for i in [0, n), in order; write the previous
  /// location of each key (kNone if new) to prev[i]. Rows whose bit in
  /// `valid_bitmap` is clear (nulls) are left out and get prev[i] = kNone.
  void UpsertBatch(const int64_t* keys, int64_t n, uint64_t base, uint64_t* prev,
                   const uint8_t* valid_bitmap = nullptr, int64_t valid_offset = 0);
  /// As UpsertBatch, but append to `replaced` only the rows that had a
  /// previous location, in row order, instead of writing one per row: a
  /// first load of distinct keys writes nothing but the map.
  void UpsertBatchReplaced(const int64_t* keys, int64_t n, uint64_t base,
                           std::vector<Replaced>* replaced,
                           const uint8_t* valid_bitmap = nullptr, int64_t valid_offset = 0);

  /// Map `key` to `location`; return the previous location or kNone.
  uint64_t Upsert(int64_t key, uint64_t location);
  /// Remove `key` if it maps to `location`.
  void Erase(int64_t key, uint64_t location);
  /// Return the location of `key`, or kNone.
  uint64_t Find(int64_t key) const {
    for (size_t j = Home(key);; j = (j + 1) & mask_) {
      const Slot& s = slots_[j];
      if (s.stored == 0 || s.key == key) return s.stored - 1;  // empty: kNone
    }
  }
  void Clear();
  size_t size() const { return size_; }

 private:
  struct Slot {
    int64_t key;
    uint64_t stored;  // location + 1 (kNone + 1 wraps to 0: empty)
  };
  static constexpr uint64_t kFibonacci = 0x9E3779B97F4A7C15ull;

  size_t Home(int64_t key) const {
    // Fibonacci hashing: multiply, keep the high bits.
    return static_cast<size_t>((static_cast<uint64_t>(key) * kFibonacci) >> shift_);
  }
  // Map `key` to `location`; return the previous location. The slot array
  // grows only when a new key needs the room: re-upserting known keys
  // (compaction re-indexes whole chunks) never allocates.
  uint64_t UpsertOne(int64_t key, uint64_t location) {
    size_t j = Home(key);
    while (true) {
      Slot& s = slots_[j];
      if (s.stored == 0) {
        if ((size_ + 1) * 2 > slots_.size()) {
          Rehash(slots_.size() * 2);
          return UpsertOne(key, location);
        }
        s.key = key;
        s.stored = location + 1;
        ++size_;
        return kNone;
      }
      if (s.key == key) {
        const uint64_t prev = s.stored - 1;
        s.stored = location + 1;
        return prev;
      }
      j = (j + 1) & mask_;
    }
  }
  /// The loop of both batch upserts: calls emit(i, previous) for every row.
  template <typename Emit>
  void UpsertRows(const int64_t* keys, int64_t n, uint64_t base, const uint8_t* valid_bitmap,
                  int64_t valid_offset, Emit emit);

  void Rehash(size_t capacity);

  ZeroedArray<Slot> slots_;
  size_t mask_ = 0;
  int shift_ = 64;
  size_t size_ = 0;
};

}  // namespace rill
