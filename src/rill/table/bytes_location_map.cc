#include "rill/table/bytes_location_map_internal.h"

#include "rill/table/linear_probe_internal.h"

#include <arrow/util/bit_util.h>
#include <arrow/util/hashing.h>

namespace rill {

uint64_t BytesLocationMap::Hash(const void* data, size_t len) {
  // Arrow's string hash (XXH3 for long keys, a multiply-mix for keys up to 16
  // bytes) is made for masking low bits: for short keys its high bits depend
  // on a few input bytes only ("ord-000000123456" would cluster). Home() uses
  // the high bits, so finish with murmur3's fmix64, which spreads every bit.
  uint64_t h = arrow::internal::ComputeStringHash<0>(data, static_cast<int64_t>(len));
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  h ^= h >> 33;
  return h;
}

uint64_t BytesLocationMap::AppendToArena(const char* data, size_t len) {
  if (block_used_ + len > kBlockSize) {
    // A fresh block (blocks are never moved, so earlier keys stay put).
    blocks_.push_back(std::make_unique_for_overwrite<char[]>(std::max(len, kBlockSize)));
    block_used_ = 0;
  }
  const uint64_t ref =
      (static_cast<uint64_t>(blocks_.size() - 1) << kBlockBits) | static_cast<uint64_t>(block_used_);
  std::memcpy(blocks_.back().get() + block_used_, data, len);
  // A key of a block of its own fills it.
  block_used_ = len > kBlockSize ? kBlockSize : block_used_ + len;
  arena_bytes_ += len;
  return ref;
}

inline void BytesLocationMap::StoreKey(Slot* s, std::string_view key) {
  std::memset(s->key, 0, sizeof(s->key));
  if (key.size() <= kInline) {
    if (!key.empty()) std::memcpy(s->key, key.data(), key.size());
    return;
  }
  const uint64_t ref = AppendToArena(key.data(), key.size());
  const uint64_t len = key.size();
  std::memcpy(s->key, &ref, sizeof(ref));
  std::memcpy(s->key + 8, &len, sizeof(len));
}

// Inline (defined before its callers, used only here): a call through the
// shared library's PLT per row costs as much as the probe itself.
inline uint64_t BytesLocationMap::UpsertOne(std::string_view key, uint64_t hash,
                                            uint64_t location) {
  const uint64_t tag = TagOf(hash, key.size());
  size_t j = Home(tag);
  while (true) {
    Slot& s = slots_[j];
    if (s.location == kNone) {
      if ((size_ + 1) * 2 > slots_.size()) [[unlikely]] {
        // Grow only when a new key needs the room: re-upserting known keys
        // never allocates.
        return GrowAndUpsert(key, hash, location);
      }
      s.tag = tag;
      s.location = location;
      StoreKey(&s, key);
      ++size_;
      return kNone;
    }
    if (SameKey(s, tag, key)) {
      const uint64_t prev = s.location;
      s.location = location;
      return prev;
    }
    j = (j + 1) & mask_;
  }
}

uint64_t BytesLocationMap::GrowAndUpsert(std::string_view key, uint64_t hash,
                                         uint64_t location) {
  Rehash(slots_.size() * 2);
  return UpsertOne(key, hash, location);
}

void BytesLocationMap::Rehash(size_t capacity) {
  auto old = std::move(slots_);
  slots_.assign(capacity, Slot{0, kNone, {}});
  mask_ = capacity - 1;
  shift_ = 64 - arrow::bit_util::Log2(capacity);
  // Moves slots as they are (tag and key kept): nothing is hashed again.
  for (const Slot& s : old) {
    if (s.location == kNone) continue;
    size_t j = Home(s.tag);
    while (slots_[j].location != kNone) j = (j + 1) & mask_;
    slots_[j] = s;
  }
}

uint64_t BytesLocationMap::Upsert(std::string_view key, uint64_t hash, uint64_t location) {
  return UpsertOne(key, hash, location);
}

void BytesLocationMap::UpsertBatch(const std::string_view* keys, const uint64_t* hashes,
                                   int64_t n, uint64_t base, uint64_t* prev,
                                   const uint8_t* skip) {
  // The slot array grows inside UpsertOne when a new key needs it: a batch of
  // known keys never grows it (a prefetch of a freed slot address is harmless).
  // A batch with more rows than the map has keys (a first load) is sized for
  // at once, as in IntLocationMap::UpsertBatch.
  // Prefetches are written in the loop itself: GCC deems a helper that only
  // prefetches pure and drops the call.
  if (static_cast<size_t>(n) > size_) {
    const size_t capacity = CapacityFor(slots_.size(), static_cast<size_t>(n));
    if (capacity != slots_.size()) Rehash(capacity);
  }
  constexpr int64_t kAhead = 16;    // the home slot
  constexpr int64_t kKeyAhead = 8;  // a long key's arena bytes, once its slot is cached
  for (int64_t i = 0; i < n; ++i) {
    if (i + kAhead < n) {
      __builtin_prefetch(&slots_[Home(hashes[i + kAhead])], /*rw=*/1, /*locality=*/1);
    }
    if (i + kKeyAhead < n && keys[i + kKeyAhead].size() > kInline) {
      const uint64_t tag = TagOf(hashes[i + kKeyAhead], keys[i + kKeyAhead].size());
      const Slot& s = slots_[Home(tag)];
      if (s.location != kNone && s.tag == tag) {
        __builtin_prefetch(ArenaAt(LongRef(s)), /*rw=*/0, /*locality=*/1);
      }
    }
    if (skip && skip[i]) continue;
    prev[i] = UpsertOne(keys[i], hashes[i], base + static_cast<uint64_t>(i));
  }
}

void BytesLocationMap::RelocateBatch(const std::string_view* keys, const uint64_t* hashes,
                                     const uint64_t* old, int64_t n, uint64_t base,
                                     const uint8_t* skip) {
  constexpr int64_t kAhead = 16;
  for (int64_t i = 0; i < n; ++i) {
    if (i + kAhead < n) {
      __builtin_prefetch(&slots_[Home(hashes[i + kAhead])], /*rw=*/1, /*locality=*/1);
    }
    if (skip && skip[i]) continue;
    const uint64_t location = base + static_cast<uint64_t>(i);
    const uint64_t tag = TagOf(hashes[i], keys[i].size());
    size_t j = Home(tag);
    while (true) {
      Slot& s = slots_[j];
      if (s.location == kNone) {
        // Not where the caller said: fall back to comparing the bytes.
        UpsertOne(keys[i], hashes[i], location);
        break;
      }
      if (s.location == old[i] && s.tag == tag) {
        s.location = location;
        break;
      }
      j = (j + 1) & mask_;
    }
  }
}

void BytesLocationMap::Erase(std::string_view key, uint64_t hash, uint64_t location) {
  const uint64_t tag = TagOf(hash, key.size());
  size_t i = Home(tag);
  while (true) {
    Slot& s = slots_[i];
    if (s.location == kNone) return;
    if (SameKey(s, tag, key)) {
      if (s.location != location) return;
      break;
    }
    i = (i + 1) & mask_;
  }
  if (key.size() > kInline) dead_bytes_ += key.size();
  const size_t hole = BackwardShiftErase(
      slots_, mask_, i, [this](const Slot& s) { return Home(s.tag); },
      [](const Slot& s) { return s.location == kNone; });
  slots_[hole].location = kNone;
  --size_;
  CompactArenaIfMostlyDead();
}

void BytesLocationMap::CompactArenaIfMostlyDead() {
  if (dead_bytes_ < (size_t{1} << 16) || dead_bytes_ * 2 < arena_bytes_) return;
  auto old = std::move(blocks_);
  blocks_.clear();
  block_used_ = kBlockSize;
  arena_bytes_ = 0;
  for (Slot& s : slots_) {
    if (s.location == kNone || (s.tag & 31) != kLongClass) continue;
    const uint64_t ref = LongRef(s);
    const char* from = old[ref >> kBlockBits].get() + (ref & (kBlockSize - 1));
    const uint64_t at = AppendToArena(from, LongLen(s));
    std::memcpy(s.key, &at, sizeof(at));
  }
  dead_bytes_ = 0;
}

void BytesLocationMap::Clear() {
  slots_.assign(16, Slot{0, kNone, {}});
  mask_ = 15;
  shift_ = 64 - 4;
  size_ = 0;
  blocks_.clear();
  block_used_ = kBlockSize;
  arena_bytes_ = 0;
  dead_bytes_ = 0;
}

}  // namespace rill
