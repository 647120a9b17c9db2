// IntLocationMap against std::unordered_map on random operation sequences.
#include <random>
#include <unordered_map>
#include <vector>

#include <gtest/gtest.h>

#include "rill/table/int_location_map_internal.h"

namespace rill {
namespace {

TEST(IntLocationMap, MatchesAReferenceMapOverRandomUpsertsAndErases) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    IntLocationMap map;
    std::unordered_map<int64_t, uint64_t> ref;
    // Small key domains force long probe runs and many backward shifts.
    const int64_t domain = seed % 2 ? 64 : 5000;
    uint64_t next_location = 0;
    for (int step = 0; step < 20000; ++step) {
      const int64_t key = static_cast<int64_t>(rng() % domain) * (seed % 3 ? 1 : 1024);
      switch (rng() % 3) {
        case 0:
        case 1: {
          const uint64_t loc = next_location++;
          auto it = ref.find(key);
          const uint64_t expected = it == ref.end() ? IntLocationMap::kNone : it->second;
          ASSERT_EQ(map.Upsert(key, loc), expected) << "step " << step;
          ref[key] = loc;
          break;
        }
        default: {
          auto it = ref.find(key);
          // Erase only removes the key when the location matches.
          const uint64_t loc = it != ref.end() && rng() % 4 ? it->second : next_location + 7;
          map.Erase(key, loc);
          if (it != ref.end() && it->second == loc) ref.erase(it);
          break;
        }
      }
      ASSERT_EQ(map.size(), ref.size()) << "step " << step;
    }
    for (const auto& [key, loc] : ref) {
      // Upserting the same location returns what was stored.
      ASSERT_EQ(map.Upsert(key, loc), loc);
    }
  }
}

TEST(IntLocationMap, UpsertBatchGivesTheSamePreviousLocationsAsOneByOne) {
  std::mt19937_64 rng(42);
  IntLocationMap batched;
  IntLocationMap single;
  uint64_t base = 0;
  for (int round = 0; round < 50; ++round) {
    const int64_t n = 1 + static_cast<int64_t>(rng() % 3000);
    std::vector<int64_t> keys(n);
    std::vector<uint8_t> valid((n + 7) / 8, 0xff);
    for (int64_t i = 0; i < n; ++i) {
      keys[i] = static_cast<int64_t>(rng() % 4000) - 2000;
      if (rng() % 10 == 0) valid[i / 8] &= static_cast<uint8_t>(~(1u << (i % 8)));
    }
    std::vector<uint64_t> prev(n);
    batched.UpsertBatch(keys.data(), n, base, prev.data(), valid.data(), 0);
    for (int64_t i = 0; i < n; ++i) {
      const bool is_valid = valid[i / 8] & (1u << (i % 8));
      if (!is_valid) {
        ASSERT_EQ(prev[i], IntLocationMap::kNone);
        continue;
      }
      ASSERT_EQ(prev[i], single.Upsert(keys[i], base + i)) << "round " << round << " row " << i;
    }
    ASSERT_EQ(batched.size(), single.size());
    base += n;
  }
}

TEST(IntLocationMap, ClearForgetsEveryKey) {
  IntLocationMap map;
  for (int64_t k = 0; k < 1000; ++k) map.Upsert(k, k);
  map.Clear();
  EXPECT_EQ(map.size(), 0u);
  EXPECT_EQ(map.Upsert(5, 1), IntLocationMap::kNone);
}

}  // namespace
}  // namespace rill
