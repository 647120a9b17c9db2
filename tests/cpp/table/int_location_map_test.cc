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

TEST(IntLocationMap, UpsertBatchReplacedListsExactlyTheRowsThatHadALocation) {
  // From an empty map (a first load, with repeated keys) and then on a full
  // one; the sizes take the probe array past 2 MiB (a fresh mapping) and back
  // (Clear).
  std::mt19937_64 rng(7);
  IntLocationMap sparse;
  IntLocationMap dense;
  uint64_t base = 0;
  for (int round = 0; round < 12; ++round) {
    if (round == 6) {
      sparse.Clear();
      dense.Clear();
    }
    const int64_t n = round % 6 == 0 ? 300000 : 1 + static_cast<int64_t>(rng() % 5000);
    const int64_t domain = round % 6 == 0 ? 250000 : 400000;
    std::vector<int64_t> keys(n);
    std::vector<uint8_t> valid((n + 7) / 8, 0xff);
    for (int64_t i = 0; i < n; ++i) {
      keys[i] = static_cast<int64_t>(rng() % domain) - domain / 2;
      if (round % 3 == 2 && rng() % 10 == 0) valid[i / 8] &= static_cast<uint8_t>(~(1u << (i % 8)));
    }
    const uint8_t* validity = round % 3 == 2 ? valid.data() : nullptr;
    std::vector<uint64_t> prev(n);
    dense.UpsertBatch(keys.data(), n, base, prev.data(), validity, 0);
    std::vector<IntLocationMap::Replaced> replaced;
    sparse.UpsertBatchReplaced(keys.data(), n, base, &replaced, validity, 0);
    std::vector<IntLocationMap::Replaced> expected;
    for (int64_t i = 0; i < n; ++i) {
      if (prev[i] != IntLocationMap::kNone) expected.emplace_back(i, prev[i]);
    }
    ASSERT_EQ(replaced, expected) << "round " << round;
    ASSERT_EQ(sparse.size(), dense.size());
    base += static_cast<uint64_t>(n);
  }
  // Both maps hold the same locations.
  for (int64_t k = -200000; k < 200000; k += 97) {
    ASSERT_EQ(sparse.Upsert(k, 1), dense.Upsert(k, 1)) << "key " << k;
  }
}

TEST(IntLocationMap, ClearForgetsEveryKey) {
  IntLocationMap map;
  for (int64_t k = 0; k < 1000; ++k) map.Upsert(k, k);
  map.Clear();
  EXPECT_EQ(map.size(), 0u);
  EXPECT_EQ(map.Upsert(5, 1), IntLocationMap::kNone);
  // Location 0 (slot 0, row 0) is a location like any other.
  EXPECT_EQ(map.Upsert(6, 0), IntLocationMap::kNone);
  EXPECT_EQ(map.Upsert(6, 2), 0u);
  map.Erase(6, 2);
  EXPECT_EQ(map.size(), 1u);
}

}  // namespace
}  // namespace rill
