#include "rill/table/int_location_map_internal.h"

#include "rill/table/linear_probe_internal.h"

#include <arrow/util/bit_util.h>

namespace rill {

void IntLocationMap::Rehash(size_t capacity) {
  ZeroedArray<Slot> old = std::move(slots_);
  slots_ = ZeroedArray<Slot>(capacity);  // all empty: no fill needed
  mask_ = capacity - 1;
  shift_ = 64 - arrow::bit_util::Log2(capacity);
  size_ = 0;
  for (const Slot& s : old) {
    if (s.stored != 0) Upsert(s.key, s.stored - 1);
  }
}

uint64_t IntLocationMap::Upsert(int64_t key, uint64_t location) {
  return UpsertOne(key, location);
}

template <typename Emit>
void IntLocationMap::UpsertRows(const int64_t* keys, int64_t n, uint64_t base,
                                const uint8_t* valid_bitmap, int64_t valid_offset, Emit emit) {
  // The slot array grows inside UpsertOne when a new key needs it: a batch of
  // known keys never grows it (a prefetch of a freed slot address is harmless).
  // A batch with more rows than the map has keys (a first load) is sized for
  // at once instead of doubling through every power of two on the way: with
  // distinct keys the map ends with at least n keys (issue 16: rehashing was a
  // third of the first tick of a 1K-row load).
  if (static_cast<size_t>(n) > size_) {
    const size_t capacity = CapacityFor(slots_.size(), static_cast<size_t>(n));
    if (capacity != slots_.size()) Rehash(capacity);
  }
  constexpr int64_t kAhead = 16;
  for (int64_t i = 0; i < n; ++i) {
    if (i + kAhead < n) {
      __builtin_prefetch(&slots_[Home(keys[i + kAhead])], /*rw=*/1, /*locality=*/1);
    }
    if (valid_bitmap && !arrow::bit_util::GetBit(valid_bitmap, valid_offset + i)) {
      emit(i, kNone);
      continue;
    }
    emit(i, UpsertOne(keys[i], base + static_cast<uint64_t>(i)));
  }
}

void IntLocationMap::UpsertBatch(const int64_t* keys, int64_t n, uint64_t base, uint64_t* prev,
                                 const uint8_t* valid_bitmap, int64_t valid_offset) {
  UpsertRows(keys, n, base, valid_bitmap, valid_offset,
             [prev](int64_t i, uint64_t p) { prev[i] = p; });
}

void IntLocationMap::UpsertBatchReplaced(const int64_t* keys, int64_t n, uint64_t base,
                                         std::vector<Replaced>* replaced,
                                         const uint8_t* valid_bitmap, int64_t valid_offset) {
  UpsertRows(keys, n, base, valid_bitmap, valid_offset, [replaced](int64_t i, uint64_t p) {
    if (p != kNone) replaced->emplace_back(i, p);
  });
}

void IntLocationMap::Erase(int64_t key, uint64_t location) {
  size_t i = Home(key);
  while (true) {
    Slot& s = slots_[i];
    if (s.stored == 0) return;
    if (s.key == key) {
      if (s.stored != location + 1) return;
      break;
    }
    i = (i + 1) & mask_;
  }
  const size_t hole = BackwardShiftErase(
      slots_, mask_, i, [this](const Slot& s) { return Home(s.key); },
      [](const Slot& s) { return s.stored == 0; });
  slots_[hole].stored = 0;
  --size_;
}

void IntLocationMap::Clear() {
  slots_ = ZeroedArray<Slot>(16);
  mask_ = 15;
  shift_ = 64 - 4;
  size_ = 0;
}

}  // namespace rill
