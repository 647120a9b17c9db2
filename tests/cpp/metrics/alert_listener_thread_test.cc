// Alert listeners run with no store lock held: they may call back into the
// store (add rules, push alerts, read state, even Flush) without deadlock,
// whether the store runs its own threads or not.
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>

#include "metrics/metrics_test_util.h"
#include "rill/metrics/metrics_store.h"

namespace rill {
namespace {

using testing_metrics::Count;

/// Ends the process if not destroyed within `seconds`: a deadlock must fail
/// the run, not hang it.
class Watchdog {
 public:
  explicit Watchdog(double seconds) {
    thread_ = std::thread([this, seconds] {
      std::unique_lock<std::mutex> lock(mu_);
      if (!cv_.wait_for(lock, std::chrono::duration<double>(seconds), [this] { return done_; })) {
        std::fprintf(stderr, "WATCHDOG: deadlock in an alert listener test\n");
        std::fflush(stderr);
        std::_Exit(3);
      }
    });
  }
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

std::unique_ptr<MetricsStore> MakeStore(MetricsOptions options = {}) {
  options.path = ":memory:";
  auto store = MetricsStore::Make(nullptr, std::move(options));
  EXPECT_TRUE(store.ok()) << store.status();
  return std::move(*store);
}

TEST(AlertListener, MayCallBackIntoAStoreThatIsNotRunning) {
  Watchdog watchdog(60);
  auto store = MakeStore();
  int calls = 0;
  bool nested_flush_ok = false;
  store->AddAlertListener([&](const AlertRecord& alert) {
    ++calls;
    // Every kind of call a listener might make, while the cycle that called it
    // is still on the stack.
    EXPECT_TRUE(store->AddAlertRule("from_listener_" + std::to_string(calls), "cpu_usage", ">",
                                    1000)
                    .ok());
    (void)store->stats();
    (void)store->AlertRules();
    (void)store->CurrentValues();
    (void)store->LatestKpis();
    EXPECT_TRUE(store->QueryMetrics("SELECT count(*) FROM rill_alerts").ok());
    if (alert.message == "first") {
      EXPECT_TRUE(store->Warn("raised by the listener").ok());
      nested_flush_ok = store->Flush().ok();  // runs a nested cycle
    }
  });
  ASSERT_TRUE(store->Warn("first").ok());
  ASSERT_TRUE(store->Flush().ok());
  EXPECT_TRUE(nested_flush_ok);
  EXPECT_EQ(calls, 2);  // "first", then the listener's own alert in the nested flush
  EXPECT_EQ(Count(*store, "SELECT count(*) FROM rill_alerts"), 2);
  EXPECT_EQ(store->AlertRules().size(), 2u);
}

TEST(AlertListener, MayFlushARunningStoreFromTheCollectorThread) {
  Watchdog watchdog(60);
  MetricsOptions options;
  options.flush_interval_seconds = 0.02;
  auto store = MakeStore(options);
  std::atomic<int> calls{0};
  std::atomic<bool> nested_flush_ok{false};
  store->AddAlertListener([&](const AlertRecord& alert) {
    ++calls;
    if (alert.message == "first") {
      EXPECT_TRUE(store->Warn("raised by the listener").ok());
      nested_flush_ok = store->Flush().ok();  // on the collector thread: runs inline
    }
  });
  ASSERT_TRUE(store->Start().ok());
  ASSERT_TRUE(store->Warn("first").ok());
  ASSERT_TRUE(store->Flush().ok());
  ASSERT_TRUE(store->Flush().ok());
  EXPECT_TRUE(nested_flush_ok.load());
  EXPECT_EQ(calls.load(), 2);
  EXPECT_EQ(Count(*store, "SELECT count(*) FROM rill_alerts"), 2);
  store->Stop();
  EXPECT_EQ(store->stats().write_errors, 0) << store->stats().last_write_error;
}

}  // namespace
}  // namespace rill
