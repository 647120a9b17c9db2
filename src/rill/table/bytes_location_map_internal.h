// BytesLocationMap: an open-addressing hash map from byte-string keys (string
// primary keys, encoded composite keys) to row locations, built for batched
// upserts (private to table/).
//
// The string counterpart of IntLocationMap (int_location_map_internal.h):
// linear probing over a power-of-two array of {hash, location, key} slots, at
// most half full, backward-shift erase (no tombstones). A key's 64-bit hash is
// computed once (per batch, by the caller, in a tight loop) and stored in its
// slot, so probing compares hashes and touches a key's bytes only when the
// hashes are equal; rehashing and erasing never hash again. Key bytes live
// in one append-only arena (no std::string per key); keys of up to 8 bytes
// sit inside the slot. The arena is rewritten when more than half of it is
// dead (erased or replaced keys). UpsertBatch prefetches the home slots of
// rows a few positions ahead, as the integer path does.
//
// Threads: not thread-safe.
#pragma once

#include <cstdint>
#include <cstring>
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
  /// Map `key` to `location`; return the previous location or kNone.
  uint64_t Upsert(std::string_view key, uint64_t hash, uint64_t location);
  /// Remove `key` if it maps to `location`.
  void Erase(std::string_view key, uint64_t hash, uint64_t location);
  void Clear();
  size_t size() const { return size_; }

 private:
  struct Slot {
    uint64_t hash;
    uint64_t location;  // kNone = empty
    uint64_t ref;       // key bytes: inline when len <= 8, else the arena offset
    uint64_t len;
  };
  static constexpr size_t kInline = sizeof(uint64_t);

  size_t Home(uint64_t hash) const { return static_cast<size_t>(hash >> shift_); }
  const char* KeyData(const Slot& s) const {
    return s.len <= kInline ? reinterpret_cast<const char*>(&s.ref) : arena_.data() + s.ref;
  }
  bool SameKey(const Slot& s, std::string_view key) const {
    return s.len == key.size() && std::memcmp(KeyData(s), key.data(), key.size()) == 0;
  }
  uint64_t UpsertOne(std::string_view key, uint64_t hash, uint64_t location);
  void StoreKey(Slot* s, std::string_view key);
  void Rehash(size_t capacity);
  void CompactArenaIfMostlyDead();

  std::vector<Slot, HugePageAllocator<Slot>> slots_;
  std::vector<char> arena_;
  size_t dead_bytes_ = 0;  // arena bytes of keys no longer in the map
  size_t mask_ = 0;
  int shift_ = 64;
  size_t size_ = 0;
};

}  // namespace rill
