#include "rill/table/int_location_map_internal.h"

#include "rill/table/linear_probe_internal.h"

#include <arrow/util/bit_util.h>

namespace rill {

void IntLocationMap::Rehash(size_t capacity) {
  auto old = std::move(slots_);
  slots_.assign(capacity, Slot{0, kNone});
  mask_ = capacity - 1;
  shift_ = 64 - arrow::bit_util::Log2(capacity);
  size_ = 0;
  for (const Slot& s : old) {
    if (s.location != kNone) Upsert(s.key, s.location);
  }
}

uint64_t IntLocationMap::Upsert(int64_t key, uint64_t location) {
  return UpsertOne(key, location);
}

void IntLocationMap::UpsertBatch(const int64_t* keys, int64_t n, uint64_t base, uint64_t* prev,
                                 const uint8_t* valid_bitmap, int64_t valid_offset) {
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
      prev[i] = kNone;
      continue;
    }
    prev[i] = UpsertOne(keys[i], base + static_cast<uint64_t>(i));
  }
}

void IntLocationMap::Erase(int64_t key, uint64_t location) {
  size_t i = Home(key);
  while (true) {
    Slot& s = slots_[i];
    if (s.location == kNone) return;
    if (s.key == key) {
      if (s.location != location) return;
      break;
    }
    i = (i + 1) & mask_;
  }
  const size_t hole = BackwardShiftErase(
      slots_, mask_, i, [this](const Slot& s) { return Home(s.key); },
      [](const Slot& s) { return s.location == kNone; });
  slots_[hole].location = kNone;
  --size_;
}

void IntLocationMap::Clear() {
  slots_.assign(16, Slot{0, kNone});
  mask_ = 15;
  shift_ = 64 - 4;
  size_ = 0;
}

}  // namespace rill
