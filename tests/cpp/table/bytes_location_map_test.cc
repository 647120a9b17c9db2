// BytesLocationMap against std::unordered_map on random operation sequences,
// including keys whose hashes collide (the bytes decide) and batched upserts.
#include <random>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <gtest/gtest.h>

#include "rill/table/bytes_location_map_internal.h"

namespace rill {
namespace {

std::string KeyOf(uint64_t k, uint64_t seed) {
  // Short (inline) and long (arena) keys, some sharing long prefixes.
  switch (seed % 3) {
    case 0: return std::to_string(k);
    case 1: return "ord-" + std::string(12 - std::to_string(k).size(), '0') + std::to_string(k);
    default: return std::string(40, 'x') + std::to_string(k);
  }
}

// Forces every hash into a few values: probing must compare bytes.
uint64_t HashFor(std::string_view key, uint64_t seed) {
  const uint64_t h = BytesLocationMap::Hash(key);
  return seed % 4 == 3 ? (h & 0x3) << 62 : h;
}

TEST(BytesLocationMap, MatchesAReferenceMapOverRandomUpsertsAndErases) {
  for (uint64_t seed = 1; seed <= 16; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    BytesLocationMap map;
    std::unordered_map<std::string, uint64_t> ref;
    const uint64_t domain = seed % 2 ? 64 : 3000;
    uint64_t next_location = 0;
    for (int step = 0; step < 12000; ++step) {
      const std::string key = KeyOf(rng() % domain, seed);
      const uint64_t hash = HashFor(key, seed);
      if (rng() % 3 != 2) {
        const uint64_t loc = next_location++;
        auto it = ref.find(key);
        const uint64_t expected = it == ref.end() ? BytesLocationMap::kNone : it->second;
        ASSERT_EQ(map.Upsert(key, hash, loc), expected) << "step " << step;
        ref[key] = loc;
      } else {
        auto it = ref.find(key);
        const uint64_t loc = it != ref.end() && rng() % 4 ? it->second : next_location + 7;
        map.Erase(key, hash, loc);
        if (it != ref.end() && it->second == loc) ref.erase(it);
      }
      ASSERT_EQ(map.size(), ref.size());
    }
    for (const auto& [key, loc] : ref) {
      // Upserting the same location again returns it: every key is still found.
      ASSERT_EQ(map.Upsert(key, HashFor(key, seed), loc), loc) << key;
    }
  }
}

TEST(BytesLocationMap, BatchUpsertKeepsTheLastRowPerKeyAndSkipsMarkedRows) {
  BytesLocationMap map;
  std::vector<std::string> owned = {"a", "long key number one", "a", "", "long key number one",
                                    "b"};
  std::vector<std::string_view> keys(owned.begin(), owned.end());
  std::vector<uint64_t> hashes;
  for (auto k : keys) hashes.push_back(BytesLocationMap::Hash(k));
  std::vector<uint8_t> skip = {0, 0, 0, 0, 0, 1};
  std::vector<uint64_t> prev(keys.size(), 99);
  map.UpsertBatch(keys.data(), hashes.data(), keys.size(), /*base=*/100, prev.data(),
                  skip.data());
  EXPECT_EQ(prev, (std::vector<uint64_t>{BytesLocationMap::kNone, BytesLocationMap::kNone, 100,
                                         BytesLocationMap::kNone, 101, 99}));
  EXPECT_EQ(map.size(), 3u);
}

// Keys of every length around the inline limit (16 bytes), sharing prefixes
// and suffixes so that the overlapping-load comparison must look at every byte.
std::string VariedKey(uint64_t k) {
  const size_t len = k % 41;
  uint64_t h = k / 41 * 0x9E3779B97F4A7C15ull;  // two letters per position, mixed
  h ^= h >> 29;
  std::string key(len, 'k');
  for (size_t i = 0; i < len; ++i) key[i] = static_cast<char>('a' + ((h >> (i + 7)) & 1));
  return key;
}

TEST(BytesLocationMap, BatchUpsertAndRelocateMatchAReferenceMapForKeysOfEveryLength) {
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    BytesLocationMap map;
    std::unordered_map<std::string, uint64_t> ref;
    const uint64_t domain = seed % 4 == 3 ? 3000 : (seed % 2 ? 200 : 20000);
    uint64_t base = 0;
    for (int round = 0; round < 60; ++round) {
      const int64_t n = static_cast<int64_t>(rng() % 700);
      std::vector<std::string> owned(n);
      for (auto& key : owned) key = VariedKey(rng() % domain);
      std::vector<std::string_view> keys(owned.begin(), owned.end());
      std::vector<uint64_t> hashes;
      for (auto k : keys) hashes.push_back(HashFor(k, seed));
      const int op = static_cast<int>(rng() % 3);
      if (op == 0) {
        // A batch upsert: previous locations as a reference map gives them.
        std::vector<uint64_t> prev(n), expected(n);
        for (int64_t i = 0; i < n; ++i) {
          auto it = ref.find(owned[i]);
          expected[i] = it == ref.end() ? BytesLocationMap::kNone : it->second;
          ref[owned[i]] = base + i;
        }
        map.UpsertBatch(keys.data(), hashes.data(), n, base, prev.data());
        ASSERT_EQ(prev, expected) << "round " << round;
      } else if (op == 1) {
        // Relocate known keys (as compaction does): one row per key, moved to base + i.
        std::vector<std::string> moved;
        for (const auto& [key, loc] : ref) {
          if (rng() % 3 == 0) moved.push_back(key);
        }
        std::vector<std::string_view> mkeys(moved.begin(), moved.end());
        std::vector<uint64_t> mhashes, old;
        for (const auto& key : moved) {
          mhashes.push_back(HashFor(key, seed));
          old.push_back(ref[key]);
        }
        map.RelocateBatch(mkeys.data(), mhashes.data(), old.data(),
                          static_cast<int64_t>(moved.size()), base);
        for (size_t i = 0; i < moved.size(); ++i) ref[moved[i]] = base + i;
      } else {
        // Erase some keys, with their location or a stale one.
        for (int64_t i = 0; i < n; ++i) {
          auto it = ref.find(owned[i]);
          const uint64_t loc = it != ref.end() && rng() % 4 ? it->second : base + 1000000;
          map.Erase(keys[i], hashes[i], loc);
          if (it != ref.end() && it->second == loc) ref.erase(it);
        }
      }
      base += 1000;
      ASSERT_EQ(map.size(), ref.size()) << "round " << round;
    }
    for (const auto& [key, loc] : ref) {
      ASSERT_EQ(map.Upsert(key, HashFor(key, seed), loc), loc) << key;
    }
    // Keys never inserted (same lengths, other bytes) are not found.
    for (uint64_t k = domain; k < domain + 300; ++k) {
      const std::string key = VariedKey(k) + "!";
      if (ref.count(key)) continue;
      ASSERT_EQ(map.Upsert(key, HashFor(key, seed), 7), BytesLocationMap::kNone) << key;
      map.Erase(key, HashFor(key, seed), 7);
    }
    ASSERT_EQ(map.size(), ref.size());
  }
}

TEST(BytesLocationMap, RelocateOfAKeyNotAtItsOldLocationUpsertsIt) {
  BytesLocationMap map;
  const std::string a = "a key longer than sixteen bytes";
  const std::string b = "short";
  map.Upsert(a, BytesLocationMap::Hash(a), 1);
  std::vector<std::string_view> keys = {a, b};
  std::vector<uint64_t> hashes = {BytesLocationMap::Hash(a), BytesLocationMap::Hash(b)};
  std::vector<uint64_t> old = {5, 6};  // neither key maps there
  map.RelocateBatch(keys.data(), hashes.data(), old.data(), 2, /*base=*/10);
  EXPECT_EQ(map.size(), 2u);
  EXPECT_EQ(map.Upsert(a, hashes[0], 20), 10u);
  EXPECT_EQ(map.Upsert(b, hashes[1], 21), 11u);
}

TEST(BytesLocationMap, KeepsLongKeysAcrossArenaBlocksAndArenaRewrites) {
  // 40,000 keys of 100 bytes (4 MB: several 1 MiB blocks) and one of 3 MB (a
  // block of its own); erasing most of them rewrites the arena.
  BytesLocationMap map;
  auto key_of = [](int k) { return std::string(90, 'p') + std::to_string(1000000000 + k); };
  const std::string huge(3 << 20, 'h');
  map.Upsert(huge, BytesLocationMap::Hash(huge), 999999);
  for (int k = 0; k < 40000; ++k) {
    const std::string key = key_of(k);
    ASSERT_EQ(map.Upsert(key, BytesLocationMap::Hash(key), k), BytesLocationMap::kNone);
  }
  for (int k = 0; k < 40000; ++k) {
    if (k % 10 == 0) continue;
    const std::string key = key_of(k);
    map.Erase(key, BytesLocationMap::Hash(key), k);
  }
  EXPECT_EQ(map.size(), 4001u);
  for (int k = 0; k < 40000; k += 10) {
    const std::string key = key_of(k);
    ASSERT_EQ(map.Upsert(key, BytesLocationMap::Hash(key), k), static_cast<uint64_t>(k));
  }
  EXPECT_EQ(map.Upsert(huge, BytesLocationMap::Hash(huge), 1), 999999u);
  EXPECT_EQ(map.Upsert(key_of(1), BytesLocationMap::Hash(key_of(1)), 1), BytesLocationMap::kNone);
  map.Clear();
  EXPECT_EQ(map.size(), 0u);
  EXPECT_EQ(map.Upsert(huge, BytesLocationMap::Hash(huge), 2), BytesLocationMap::kNone);
}

}  // namespace
}  // namespace rill
