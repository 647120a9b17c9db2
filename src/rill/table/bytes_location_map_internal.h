// BytesLocationMap: an open-addressing hash map from byte-string keys (string
// primary keys, encoded composite keys) to row locations, built for batched
// upserts (private to table/).
//
// The string counterpart of IntLocationMap (int_location_map_internal.h):
// linear probing over a power-of-two array of 32-byte slots {tag, location,
// key}, at most half full, backward-shift erase (no tombstones). A key's
// 64-bit hash is computed once (per batch, by the caller, in a tight loop);
// the slot keeps it as a tag whose low 5 bits are replaced by the key's
// length class (0..16, or 31 for longer keys), so one compare rejects keys of
// another hash or length, and rehashing and erasing never hash again.
//
// Keys of up to 16 bytes (most ids: "ord-000000123456", numbers, short
// codes) sit inside the slot: a probe that finds the slot has the key bytes in
// the same cache line, and compares them with two loads. Longer keys live in
// an append-only arena of 1 MiB blocks (growing never copies or re-touches
// old keys); the slot holds the key's arena position and length. UpsertBatch
// prefetches the home slots of rows a few positions ahead and, for long keys,
// the arena bytes of a key whose tag matches, a few rows later, so the
// comparison does not stall. The arena is rewritten when more than half of
// it is dead (erased keys).
//
// RelocateBatch re-points keys whose rows moved (compaction): it finds each
// key by its tag and old location, without reading the key bytes.
//
// Threads: not thread-safe.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <string_view>
#include <vector>

#include "rill/table/int_location_map_internal.h"

namespace rill {

class BytesLocationMap {
 public:
  static constexpr uint64_t kNone = ~uint64_t{0};

  BytesLocationMap() { Rehash(16); }

  /// Return the hash of `key` (the one every call here expects).
  static uint64_t Hash(const void* data, size_t len);
  static uint64_t Hash(std::string_view key) { return Hash(key.data(), key.size()); }

  /// Map keys[i] (with hashes[i] = Hash(keys[i])) to base + i for i in [0, n),
  /// in order; write each key's previous location (kNone if new) to prev[i].
  /// Rows with skip != nullptr && skip[i] != 0 are left out (prev[i] untouched).
  void UpsertBatch(const std::string_view* keys, const uint64_t* hashes, int64_t n,
                   uint64_t base, uint64_t* prev, const uint8_t* skip = nullptr);
  /// For i in [0, n): the key keys[i] (hash hashes[i]), which maps to old[i],
  /// now maps to base + i. The key is found by its old location (its bytes are
  /// not compared); a key that does not map to old[i] is upserted. Rows with
  /// skip != nullptr && skip[i] != 0 are left out.
  void RelocateBatch(const std::string_view* keys, const uint64_t* hashes, const uint64_t* old,
                     int64_t n, uint64_t base, const uint8_t* skip = nullptr);
  /// Map `key` to `location`; return the previous location or kNone.
  uint64_t Upsert(std::string_view key, uint64_t hash, uint64_t location);
  /// Remove `key` if it maps to `location`.
  void Erase(std::string_view key, uint64_t hash, uint64_t location);
  /// Return the location of `key` (hash `hash`), or kNone.
  uint64_t Find(std::string_view key, uint64_t hash) const {
    const uint64_t tag = TagOf(hash, key.size());
    for (size_t j = Home(tag);; j = (j + 1) & mask_) {
      const Slot& s = slots_[j];
      if (s.location == kNone || SameKey(s, tag, key)) return s.location;
    }
  }
  void Clear();
  size_t size() const { return size_; }

 private:
  static constexpr size_t kInline = 16;
  static constexpr uint64_t kLongClass = 31;
  static constexpr int kBlockBits = 20;  // arena blocks of 1 MiB
  static constexpr size_t kBlockSize = size_t{1} << kBlockBits;

  struct Slot {
    uint64_t tag;       // hash with its low 5 bits replaced by the length class
    uint64_t location;  // kNone = empty
    // The key's bytes when it has at most kInline; else {arena position, length}.
    alignas(8) char key[kInline];
  };

  static uint64_t TagOf(uint64_t hash, size_t len) {
    return (hash & ~uint64_t{31}) | (len <= kInline ? len : kLongClass);
  }
  static uint64_t Load64(const char* p) {
    uint64_t v;
    std::memcpy(&v, p, sizeof(v));
    return v;
  }
  static uint32_t Load32(const char* p) {
    uint32_t v;
    std::memcpy(&v, p, sizeof(v));
    return v;
  }
  /// Compare `len` (<= 16) bytes with overlapping loads.
  static bool ShortEqual(const char* a, const char* b, size_t len) {
    if (len >= 8) {
      return Load64(a) == Load64(b) && Load64(a + len - 8) == Load64(b + len - 8);
    }
    if (len >= 4) {
      return Load32(a) == Load32(b) && Load32(a + len - 4) == Load32(b + len - 4);
    }
    if (len == 0) return true;
    return a[0] == b[0] && a[len - 1] == b[len - 1] && a[len / 2] == b[len / 2];
  }
  static uint64_t LongRef(const Slot& s) { return Load64(s.key); }
  static uint64_t LongLen(const Slot& s) { return Load64(s.key + 8); }

  size_t Home(uint64_t tag) const { return static_cast<size_t>(tag >> shift_); }
  const char* ArenaAt(uint64_t ref) const {
    return blocks_[ref >> kBlockBits].get() + (ref & (kBlockSize - 1));
  }
  /// Whether slot `s` (occupied) holds `key`, whose tag is `tag`.
  bool SameKey(const Slot& s, uint64_t tag, std::string_view key) const {
    if (s.tag != tag) return false;
    if (key.size() <= kInline) return ShortEqual(s.key, key.data(), key.size());
    return LongLen(s) == key.size() &&
           std::memcmp(ArenaAt(LongRef(s)), key.data(), key.size()) == 0;
  }
  uint64_t UpsertOne(std::string_view key, uint64_t hash, uint64_t location);
  [[gnu::noinline]] uint64_t GrowAndUpsert(std::string_view key, uint64_t hash,
                                           uint64_t location);
  void StoreKey(Slot* s, std::string_view key);
  uint64_t AppendToArena(const char* data, size_t len);
  void Rehash(size_t capacity);
  void CompactArenaIfMostlyDead();

  std::vector<Slot, HugePageAllocator<Slot>> slots_;
  // The arena: keys longer than kInline, in blocks of kBlockSize (a longer key
  // gets a block of its own size); a position is block << kBlockBits | offset.
  std::vector<std::unique_ptr<char[]>> blocks_;
  size_t block_used_ = kBlockSize;  // bytes used in blocks_.back()
  size_t arena_bytes_ = 0;          // bytes of the keys stored in the arena
  size_t dead_bytes_ = 0;           // arena bytes of keys no longer in the map
  size_t mask_ = 0;
  int shift_ = 64;
  size_t size_ = 0;
};

}  // namespace rill
