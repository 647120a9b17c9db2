// Engine::AddTickEndHook: several owners (the Checkpointer, the cluster's
// commits) each get the end of every tick, in the order added; a removed hook
// is never called again.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include <string>
#include <vector>

#include "rill/engine/checkpoint.h"
#include "rill/engine/engine.h"
#include "table/test_util.h"

namespace rill {
namespace {

TEST(TickEndHooks, EveryHookRunsAtEachTickEndInTheOrderAdded) {
  auto engine = Engine::Make().ValueOrDie();
  std::vector<std::string> calls;
  const int64_t a = engine->AddTickEndHook([&](double) { calls.push_back("a"); });
  const int64_t b = engine->AddTickEndHook([&](double) { calls.push_back("b"); });
  EXPECT_NE(a, b);
  RILL_ASSERT_OK(engine->Step());
  RILL_ASSERT_OK(engine->Step());
  EXPECT_EQ(calls, (std::vector<std::string>{"a", "b", "a", "b"}));
  engine->RemoveTickEndHook(a);
  calls.clear();
  RILL_ASSERT_OK(engine->Step());
  EXPECT_EQ(calls, std::vector<std::string>{"b"});
  engine->RemoveTickEndHook(b);
  engine->RemoveTickEndHook(b);  // twice: nothing
  calls.clear();
  RILL_ASSERT_OK(engine->Step());
  EXPECT_TRUE(calls.empty());
}

TEST(TickEndHooks, AHookMayRemoveItself) {
  auto engine = Engine::Make().ValueOrDie();
  int calls = 0;
  int64_t id = 0;
  id = engine->AddTickEndHook([&](double) {
    ++calls;
    engine->RemoveTickEndHook(id);
  });
  RILL_ASSERT_OK(engine->Step());
  RILL_ASSERT_OK(engine->Step());
  EXPECT_EQ(calls, 1);
}

TEST(TickEndHooks, ACheckpointerAndAnotherHookBothRun) {
  auto engine = Engine::Make().ValueOrDie();
  const std::string dir = ::testing::TempDir() + "/tick_end_hooks_ckpt";
  std::filesystem::remove_all(dir);
  CheckpointOptions options;
  options.dir = dir;
  options.interval_seconds = 0.001;  // at every tick
  RILL_ASSERT_OK_AND_ASSIGN(auto checkpointer, Checkpointer::Make(engine.get(), options));
  int other = 0;
  engine->AddTickEndHook([&](double) { ++other; });
  RILL_ASSERT_OK(checkpointer->Start());
  for (int i = 0; i < 3; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    RILL_ASSERT_OK(engine->Step());
  }
  for (int i = 0; i < 500 && checkpointer->stats().written == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  checkpointer->Stop();
  EXPECT_EQ(other, 3);
  EXPECT_GE(checkpointer->stats().written, 1);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace rill
