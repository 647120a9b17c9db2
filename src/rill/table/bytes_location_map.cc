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

void BytesLocationMap::StoreKey(Slot* s, std::string_view key) {
  s->len = key.size();
  s->ref = 0;
  if (key.size() <= kInline) {
    if (!key.empty()) std::memcpy(&s->ref, key.data(), key.size());
    return;
  }
  s->ref = arena_.size();
  arena_.insert(arena_.end(), key.begin(), key.end());
}

uint64_t BytesLocationMap::UpsertOne(std::string_view key, uint64_t hash, uint64_t location) {
  size_t j = Home(hash);
  while (true) {
    Slot& s = slots_[j];
    if (s.location == kNone) {
      if ((size_ + 1) * 2 > slots_.size()) {
        // Grow only when a new key needs the room: re-upserting known keys
        // (compaction re-indexes whole chunks) never allocates.
        Rehash(slots_.size() * 2);
        return UpsertOne(key, hash, location);
      }
      s.hash = hash;
      s.location = location;
      StoreKey(&s, key);
      ++size_;
      return kNone;
    }
    if (s.hash == hash && SameKey(s, key)) {
      const uint64_t prev = s.location;
      s.location = location;
      return prev;
    }
    j = (j + 1) & mask_;
  }
}

void BytesLocationMap::Rehash(size_t capacity) {
  auto old = std::move(slots_);
  slots_.assign(capacity, Slot{0, kNone, 0, 0});
  mask_ = capacity - 1;
  shift_ = 64 - arrow::bit_util::Log2(capacity);
  // Moves slots as they are (hash and key reference kept): nothing is hashed again.
  for (const Slot& s : old) {
    if (s.location == kNone) continue;
    size_t j = Home(s.hash);
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
  constexpr int64_t kAhead = 16;
  for (int64_t i = 0; i < n; ++i) {
    if (i + kAhead < n) {
      __builtin_prefetch(&slots_[Home(hashes[i + kAhead])], /*rw=*/1, /*locality=*/1);
    }
    if (skip && skip[i]) continue;
    prev[i] = UpsertOne(keys[i], hashes[i], base + static_cast<uint64_t>(i));
  }
}

void BytesLocationMap::Erase(std::string_view key, uint64_t hash, uint64_t location) {
  size_t i = Home(hash);
  while (true) {
    Slot& s = slots_[i];
    if (s.location == kNone) return;
    if (s.hash == hash && SameKey(s, key)) {
      if (s.location != location) return;
      break;
    }
    i = (i + 1) & mask_;
  }
  if (slots_[i].len > kInline) dead_bytes_ += slots_[i].len;
  const size_t hole = BackwardShiftErase(
      slots_, mask_, i, [this](const Slot& s) { return Home(s.hash); },
      [](const Slot& s) { return s.location == kNone; });
  slots_[hole].location = kNone;
  --size_;
  CompactArenaIfMostlyDead();
}

void BytesLocationMap::CompactArenaIfMostlyDead() {
  if (dead_bytes_ < (size_t{1} << 16) || dead_bytes_ * 2 < arena_.size()) return;
  std::vector<char> fresh;
  fresh.reserve(arena_.size() - dead_bytes_);
  for (Slot& s : slots_) {
    if (s.location == kNone || s.len <= kInline) continue;
    const uint64_t at = fresh.size();
    fresh.insert(fresh.end(), arena_.data() + s.ref, arena_.data() + s.ref + s.len);
    s.ref = at;
  }
  arena_ = std::move(fresh);
  dead_bytes_ = 0;
}

void BytesLocationMap::Clear() {
  slots_.assign(16, Slot{0, kNone, 0, 0});
  mask_ = 15;
  shift_ = 64 - 4;
  size_ = 0;
  arena_.clear();
  dead_bytes_ = 0;
}

}  // namespace rill
