// The log queue (common/logging.h): records of every rill logger, existing and
// future, go to a bounded queue instead of stderr while it is enabled.
#include "rill/common/logging.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <thread>

#include <gtest/gtest.h>

namespace rill {
namespace {

TEST(LogQueue, CollectsRecordsOfOldAndNewLoggersAndDropsTheOldest) {
  auto early = Logger("queue_test.early");
  SetLogLevel(spdlog::level::debug);
  EnableLogQueue(/*capacity=*/3);
  early->warn("first {}", 1);
  Logger("queue_test.late")->debug("second");
  Logger("queue_test.late")->trace("below the level");
  auto records = TakeLogRecords(0);
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].logger, "rill.queue_test.early");
  EXPECT_EQ(records[0].level, spdlog::level::warn);
  EXPECT_EQ(records[0].message, "first 1");
  EXPECT_GT(records[0].time, 1.6e9);
  EXPECT_EQ(records[1].logger, "rill.queue_test.late");
  EXPECT_EQ(records[1].level, spdlog::level::debug);

  const int64_t dropped = DroppedLogRecords();
  for (int i = 0; i < 5; ++i) early->error("e{}", i);
  records = TakeLogRecords(0);
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[0].message, "e2");
  EXPECT_EQ(DroppedLogRecords(), dropped + 2);
  DisableLogQueue();
  early->error("to stderr");
  EXPECT_TRUE(TakeLogRecords(0).empty());
}

TEST(LogQueue, WaitingTakerWakesOnARecordFromAnotherThread) {
  EnableLogQueue(/*capacity=*/100);
  SetLogLevel(spdlog::level::info);
  std::thread writer([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    Logger("queue_test.thread")->info("from a thread");
  });
  auto records = TakeLogRecords(/*wait_seconds=*/10);
  writer.join();
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].message, "from a thread");
  // WakeLogWaiters ends a wait early, empty-handed: the wait is an hour long, so
  // only a wake-up returns it in time (the waker repeats it until the waiter is
  // back, so a wake-up before the wait began does not matter).
  std::atomic<bool> returned{false};
  std::thread waker([&] {
    while (!returned.load()) {
      WakeLogWaiters();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  auto waiter = std::async(std::launch::async, [&] {
    auto taken = TakeLogRecords(/*wait_seconds=*/3600);
    returned = true;
    return taken;
  });
  if (waiter.wait_for(std::chrono::seconds(120)) != std::future_status::ready) {
    std::fprintf(stderr, "WakeLogWaiters did not end TakeLogRecords' wait\n");
    std::_Exit(3);  // the waiter would block the test for an hour
  }
  EXPECT_TRUE(waiter.get().empty());
  waker.join();
  DisableLogQueue();
}

}  // namespace
}  // namespace rill
