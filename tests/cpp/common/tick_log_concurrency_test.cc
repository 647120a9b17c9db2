// TickLog: lock-free tick durations, one writer and concurrent readers.
#include "rill/common/tick_log.h"

#include <atomic>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace rill {
namespace {

TEST(TickLog, ReadsEachTickOnceInOrderAndCountsOverwrittenOnes) {
  TickLog log;
  uint64_t cursor = 0;
  std::vector<double> seen;
  auto collect = [&](double v) { seen.push_back(v); };
  EXPECT_EQ(log.ReadSince(&cursor, collect), 0);
  EXPECT_TRUE(seen.empty());
  for (int i = 1; i <= 3; ++i) log.Record(i);
  EXPECT_EQ(log.ReadSince(&cursor, collect), 0);
  EXPECT_EQ(seen, (std::vector<double>{1, 2, 3}));
  EXPECT_EQ(log.ReadSince(&cursor, collect), 0);  // nothing new
  EXPECT_EQ(seen.size(), 3u);
  // A reader that falls kCapacity - 1 or more ticks behind loses the oldest.
  const int extra = static_cast<int>(TickLog::kCapacity) + 10;
  for (int i = 0; i < extra; ++i) log.Record(100 + i);
  seen.clear();
  EXPECT_EQ(log.ReadSince(&cursor, collect), 11);
  ASSERT_EQ(seen.size(), TickLog::kCapacity - 1);
  EXPECT_EQ(seen.front(), 111);
  EXPECT_EQ(seen.back(), 100 + extra - 1);
  EXPECT_EQ(log.recorded(), 3u + static_cast<uint64_t>(extra));
}

TEST(TickLog, ConcurrentReadersSeeAnIncreasingSequenceAndAccountForEveryTick) {
  TickLog log;
  constexpr int kTicks = 200000;
  std::atomic<bool> done{false};
  struct Reader {
    uint64_t cursor = 0;
    int64_t read = 0;
    int64_t lost = 0;
    double last = 0;
    bool ordered = true;
  };
  std::vector<Reader> readers(2);
  std::vector<std::thread> threads;
  for (auto& r : readers) {
    threads.emplace_back([&log, &done, &r] {
      auto take = [&r](double v) {
        if (v <= r.last) r.ordered = false;
        r.last = v;
        ++r.read;
      };
      while (!done.load()) r.lost += log.ReadSince(&r.cursor, take);
      r.lost += log.ReadSince(&r.cursor, take);
    });
  }
  for (int i = 1; i <= kTicks; ++i) log.Record(i);
  done.store(true);
  for (auto& t : threads) t.join();
  for (const auto& r : readers) {
    EXPECT_TRUE(r.ordered);
    EXPECT_EQ(r.read + r.lost, kTicks);
    EXPECT_EQ(r.last, kTicks);
  }
}

}  // namespace
}  // namespace rill
