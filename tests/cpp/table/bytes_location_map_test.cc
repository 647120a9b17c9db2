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

}  // namespace
}  // namespace rill
