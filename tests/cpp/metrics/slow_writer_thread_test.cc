// A slow metrics disk must not slow the tick: the writer is slowed on purpose
// (SetWriterDelayForTesting) while the engine ticks and fails every tick; tick
// latency must stay where it is without the store, the collector must keep its
// cadence, and what the writer cannot take must be dropped and counted.
#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include <arrow/api.h>
#include <gtest/gtest.h>

#include "metrics/metrics_test_util.h"
#include "rill/connector/memory_connector.h"
#include "rill/engine/engine.h"
#include "rill/engine/task.h"
#include "rill/metrics/metrics_store.h"

namespace rill {
namespace {

using testing_metrics::Count;
using testing_metrics::Orders;
using testing_metrics::OrdersSchema;

double P99(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[static_cast<size_t>(0.99 * static_cast<double>(values.size() - 1))];
}

struct Pipeline {
  std::unique_ptr<Engine> engine;
  std::shared_ptr<MemoryConnector> connector;
  int64_t next_id = 0;

  Pipeline() {
    auto made = Engine::Make({});
    EXPECT_TRUE(made.ok()) << made.status();
    engine = std::move(*made);
    EXPECT_TRUE(
        engine->RegisterTable("orders", OrdersSchema(), {.primary_key = {"order_id"}}).ok());
    connector = std::make_shared<MemoryConnector>("orders");
    EXPECT_TRUE(engine->AddConnector(connector).ok());
    // A task failing every tick produces one engine event per tick.
    EXPECT_TRUE(engine->AddSqlTask(std::make_shared<ScheduledSqlTask>(
                    "failing", "SELECT * FROM nowhere", "out", /*interval_seconds=*/0.001))
                    .ok());
  }

  /// Run `ticks` ticks ~5 ms apart, each ingesting 100 rows; return their latencies.
  std::vector<double> Run(int ticks) {
    std::vector<double> latencies;
    for (int i = 0; i < ticks; ++i) {
      std::vector<int64_t> ids(100);
      std::vector<std::string> tiers(100, "Gold");
      std::vector<double> amounts(100, 1.0);
      for (auto& id : ids) id = next_id++ % 5000;
      EXPECT_TRUE(connector->Push(Orders(ids, tiers, amounts)).ok());
      auto latency = engine->Step();
      EXPECT_TRUE(latency.ok()) << latency.status();
      latencies.push_back(*latency);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return latencies;
  }
};

TEST(SlowMetricsWriter, DoesNotSlowTheTickAndCountsWhatItDrops) {
  constexpr int kTicks = 300;
  Pipeline pipeline;
  pipeline.Run(50);  // warm up
  const double baseline_p99 = P99(pipeline.Run(kTicks));

  MetricsOptions options;
  options.path = ":memory:";
  options.flush_interval_seconds = 0.02;
  options.write_queue_capacity = 4;
  auto made = MetricsStore::Make(pipeline.engine.get(), options);
  ASSERT_TRUE(made.ok()) << made.status();
  auto store = std::move(*made);
  store->SetWriterDelayForTesting(0.5);  // a disk 25x slower than the flush rate
  ASSERT_TRUE(store->Start().ok());

  const auto started = std::chrono::steady_clock::now();
  const double slowed_p99 = P99(pipeline.Run(kTicks));
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  const MetricsStoreStats during = store->stats();

  // The tick does not wait for the writer. Generous bounds: CI machines are noisy.
  EXPECT_LT(slowed_p99, baseline_p99 * 3 + 0.010)
      << "baseline p99 " << baseline_p99 << " s, with slow writer " << slowed_p99 << " s";
  // The collector keeps its cadence although the writer is far behind.
  EXPECT_GE(during.flushes, static_cast<int64_t>(elapsed / options.flush_interval_seconds / 3));
  EXPECT_LE(during.batches_written, static_cast<int64_t>(elapsed / 0.5) + 1);
  EXPECT_GT(during.batches_dropped, 0);
  EXPECT_GT(during.rows_dropped, 0);
  EXPECT_LE(during.write_queue_depth, options.write_queue_capacity);
  EXPECT_EQ(during.events_dropped, 0);  // the event queue itself kept up

  // Once the disk is fast again, the loss is reported as an alert.
  store->SetWriterDelayForTesting(0);
  ASSERT_TRUE(store->Flush().ok());
  ASSERT_TRUE(store->Flush().ok());
  EXPECT_GE(Count(*store, "SELECT count(*) FROM rill_alerts WHERE component = 'metrics' "
                          "AND message LIKE 'metrics writer fell behind%'"),
            1);
  EXPECT_GT(Count(*store, "SELECT max(metrics_rows_dropped) FROM rill_telemetry"), 0);
  store->Stop();
}

TEST(SlowMetricsWriter, DropsAndCountsEventsBeyondTheEventQueue) {
  auto made = Engine::Make({});
  ASSERT_TRUE(made.ok());
  auto engine = std::move(*made);
  MetricsOptions options;
  options.path = ":memory:";
  options.event_queue_capacity = 10;
  auto store = MetricsStore::Make(engine.get(), options);
  ASSERT_TRUE(store.ok());
  for (int i = 0; i < 25; ++i) {
    engine->RecordEvent(EngineEvent{0, Severity::kInfo, "engine", "test",
                                    "event " + std::to_string(i), "", ""});
  }
  const auto stats = (*store)->stats();
  EXPECT_EQ(stats.events_received, 25);
  EXPECT_EQ(stats.events_dropped, 15);
  ASSERT_TRUE((*store)->Flush().ok());
  EXPECT_EQ(Count(**store, "SELECT count(*) FROM rill_alerts WHERE component = 'test'"), 10);
  EXPECT_EQ(Count(**store, "SELECT metrics_events_dropped FROM rill_telemetry"), 15);
}

}  // namespace
}  // namespace rill
