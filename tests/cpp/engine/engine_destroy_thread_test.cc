// Destroying and stopping an Engine from its own threads: a subscriber or the
// tick-end hook dropping the last owner on the loop thread, a subscriber doing
// so inside Step() on the caller's thread, and Stop() from inside a tick.
// Before the reaper (common/reaper.h), the first ones ran ~Engine on the loop
// thread, which detached itself and finished the tick over freed members
// (AddressSanitizer: heap-use-after-free); Stop() from a Step() callback while
// the loop ran could wait forever for the loop, itself waiting for the tick.
//
// Runs under AddressSanitizer and ThreadSanitizer too (label "threads").
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <arrow/api.h>
#include <gtest/gtest.h>

#include "rill/common/reaper.h"
#include "rill/connector/memory_connector.h"
#include "rill/engine/engine.h"
#include "engine/engine_test_util.h"
#include "table/test_util.h"

namespace rill {
namespace {

using test::IdBatch;
using test::IdSchema;

using test::Watchdog;
using test::WaitFor;

pid_t ThisThreadTid() { return static_cast<pid_t>(::syscall(SYS_gettid)); }

/// True while the kernel still lists thread `tid` of this process.
bool ThreadExists(pid_t tid) {
  return ::access(("/proc/self/task/" + std::to_string(tid)).c_str(), F_OK) == 0;
}

/// The one owner of an engine, which a callback takes away.
class EngineSlot {
 public:
  explicit EngineSlot(std::shared_ptr<Engine> engine) : engine_(std::move(engine)) {}
  Engine* get() {
    std::lock_guard<std::mutex> lock(mu_);
    return engine_.get();
  }
  /// Drop the owner here, on the calling thread.
  void Drop() {
    std::shared_ptr<Engine> doomed;
    {
      std::lock_guard<std::mutex> lock(mu_);
      doomed.swap(engine_);
    }
    doomed.reset();  // the last reference: destroys (or hands over) the engine
  }

 private:
  std::mutex mu_;
  std::shared_ptr<Engine> engine_;
};

std::shared_ptr<Engine> MakeEngine(int64_t trigger_interval_ms = 5) {
  EngineOptions options;
  options.trigger_interval_ms = trigger_interval_ms;
  auto made = Engine::Make(options);
  EXPECT_TRUE(made.ok()) << made.status().ToString();
  return made.ok() ? std::shared_ptr<Engine>(std::move(*made)) : nullptr;
}

/// Register an append table "ids" fed by a MemoryConnector holding `rows` rows.
std::shared_ptr<LiveTable> AddIdsTable(Engine& engine, int64_t rows) {
  TableOptions options;
  options.mode = TableMode::kAppend;
  options.retention = test::Retention(int64_t{1} << 30);
  auto table = engine.RegisterTable("ids", IdSchema(), options);
  EXPECT_TRUE(table.ok()) << table.status().ToString();
  auto connector = std::make_shared<MemoryConnector>("ids", IdSchema());
  EXPECT_TRUE(connector->Push(IdBatch(0, rows)).ok());
  EXPECT_TRUE(engine.AddConnector(connector).ok());
  return table.ok() ? *table : nullptr;
}

TEST(EngineDestruction, BySubscriberOnTheLoopThreadHappensAfterTheTickEnds) {
  Watchdog watchdog(60, "destruction from a subscriber on the loop thread");
  std::shared_ptr<Engine> engine = MakeEngine();
  ASSERT_NE(engine, nullptr);
  std::weak_ptr<Engine> watch = engine;
  auto table = AddIdsTable(*engine, 100);
  ASSERT_NE(table, nullptr);
  EngineSlot slot(std::move(engine));
  std::promise<pid_t> dropped;
  std::atomic<int> calls{0};
  RILL_ASSERT_OK(slot.get()->Subscribe("ids", [&](const auto&) {
    if (++calls > 1) return;
    slot.Drop();  // the rest of this tick runs after this line
    dropped.set_value(ThisThreadTid());
  }));
  RILL_ASSERT_OK(slot.get()->Start());

  const pid_t loop_tid = dropped.get_future().get();
  WaitForDeferredDestructions();
  EXPECT_TRUE(watch.expired());
  EXPECT_EQ(calls.load(), 1);
  EXPECT_TRUE(WaitFor([&] { return !ThreadExists(loop_tid); }))
      << "the loop thread still runs after the engine was destroyed";
  // The table outlives its engine and holds what the tick wrote.
  EXPECT_EQ(table->snapshot()->num_rows(), 100);
}

TEST(EngineDestruction, ByTheTickEndHookOnTheLoopThreadHappensAfterTheTickEnds) {
  Watchdog watchdog(60, "destruction from the tick-end hook");
  std::shared_ptr<Engine> engine = MakeEngine();
  ASSERT_NE(engine, nullptr);
  std::weak_ptr<Engine> watch = engine;
  auto table = AddIdsTable(*engine, 10);
  EngineSlot slot(std::move(engine));
  std::promise<pid_t> dropped;
  std::atomic<int> calls{0};
  slot.get()->AddTickEndHook([&](double) {
    if (++calls > 1) return;
    slot.Drop();
    dropped.set_value(ThisThreadTid());
  });
  RILL_ASSERT_OK(slot.get()->Start());

  const pid_t loop_tid = dropped.get_future().get();
  EXPECT_NE(loop_tid, ThisThreadTid());
  WaitForDeferredDestructions();
  EXPECT_TRUE(watch.expired());
  EXPECT_EQ(calls.load(), 1);
  EXPECT_TRUE(WaitFor([&] { return !ThreadExists(loop_tid); }));
  EXPECT_EQ(table->snapshot()->num_rows(), 10);
}

TEST(EngineDestruction, BySubscriberInsideStepHappensAfterStepReturns) {
  Watchdog watchdog(60, "destruction from a subscriber inside Step()");
  std::shared_ptr<Engine> engine = MakeEngine();
  ASSERT_NE(engine, nullptr);
  std::weak_ptr<Engine> watch = engine;
  auto table = AddIdsTable(*engine, 7);
  EngineSlot slot(std::move(engine));
  bool dropped_here = false;
  RILL_ASSERT_OK(slot.get()->Subscribe("ids", [&](const auto&) {
    slot.Drop();
    dropped_here = true;
  }));
  Engine* raw = slot.get();
  auto latency = raw->Step();  // `raw` must not be used after this returns
  EXPECT_TRUE(latency.ok()) << latency.status().ToString();
  EXPECT_TRUE(dropped_here);
  WaitForDeferredDestructions();
  EXPECT_TRUE(watch.expired());
  EXPECT_EQ(table->snapshot()->num_rows(), 7);
}

TEST(EngineDestruction, FromAnotherThreadWhileRunningJoinsTheLoop) {
  std::shared_ptr<Engine> engine = MakeEngine(/*trigger_interval_ms=*/1);
  ASSERT_NE(engine, nullptr);
  std::atomic<pid_t> loop_tid{0};
  engine->AddTickEndHook([&](double) { loop_tid = ThisThreadTid(); });
  RILL_ASSERT_OK(engine->Start());
  ASSERT_TRUE(WaitFor([&] { return loop_tid.load() != 0; }));
  std::thread([doomed = std::move(engine)]() mutable { doomed.reset(); }).join();
  EXPECT_TRUE(WaitFor([&] { return !ThreadExists(loop_tid.load()); }));
}

TEST(EngineStop, FromASubscriberOnTheLoopThreadEndsTheLoopAfterThatTick) {
  Watchdog watchdog(60, "Stop() from a subscriber on the loop thread");
  std::shared_ptr<Engine> engine = MakeEngine(/*trigger_interval_ms=*/1);
  ASSERT_NE(engine, nullptr);
  AddIdsTable(*engine, 3);
  std::atomic<int> hooks{0};
  std::atomic<int> hooks_before_stop{-1};
  engine->AddTickEndHook([&](double) { ++hooks; });
  RILL_ASSERT_OK(engine->Subscribe("ids", [&](const auto&) {
    if (hooks_before_stop.load() >= 0) return;
    hooks_before_stop = hooks.load();
    engine->Stop();  // returns at once: this thread is the loop
  }));
  RILL_ASSERT_OK(engine->Start());
  ASSERT_TRUE(WaitFor([&] { return hooks_before_stop.load() >= 0 && !engine->running(); }));
  // The tick that called Stop() ran to its end (its hook ran), and no tick after it.
  EXPECT_EQ(hooks.load(), hooks_before_stop.load() + 1);

  // The loop starts again (Start joins the thread that ended).
  const int stopped_at = hooks.load();
  RILL_ASSERT_OK(engine->Start());
  EXPECT_TRUE(WaitFor([&] { return hooks.load() > stopped_at; }));
  engine->Stop();
  EXPECT_FALSE(engine->running());
}

TEST(EngineStop, FromASubscriberInsideStepWhileTheLoopRunsReturns) {
  Watchdog watchdog(60, "Stop() from a subscriber inside Step() while the loop runs");
  std::shared_ptr<Engine> engine = MakeEngine(/*trigger_interval_ms=*/1);
  ASSERT_NE(engine, nullptr);
  auto connector = std::make_shared<MemoryConnector>("ids", IdSchema());
  TableOptions options;
  options.mode = TableMode::kAppend;
  options.retention = test::Retention(int64_t{1} << 30);
  RILL_ASSERT_OK(engine->RegisterTable("ids", IdSchema(), options));
  RILL_ASSERT_OK(engine->AddConnector(connector));
  const auto caller = std::this_thread::get_id();
  std::atomic<bool> stop_returned{false};
  RILL_ASSERT_OK(engine->Subscribe("ids", [&](const auto&) {
    if (std::this_thread::get_id() != caller || stop_returned.load()) return;
    // Give the loop (1 ms interval) time to block on the tick this Step() holds:
    // joining it from here would then never return.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    engine->Stop();
    stop_returned = true;
  }));
  RILL_ASSERT_OK(engine->Start());
  // Rows pushed here are taken by whichever tick comes first: push until the
  // caller's own Step() is the one that gets them.
  for (int64_t i = 0; !stop_returned.load() && i < 1000; ++i) {
    RILL_ASSERT_OK(connector->Push(IdBatch(i, i + 1)));
    RILL_ASSERT_OK(engine->Step());
  }
  EXPECT_TRUE(stop_returned.load());
  EXPECT_TRUE(WaitFor([&] { return !engine->running(); }));
}

}  // namespace
}  // namespace rill
