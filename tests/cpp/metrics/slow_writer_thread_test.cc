// A slow metrics disk must not slow the tick: the writer is slowed on purpose
// (SetWriterDelayForTesting) while the engine ticks and fails every tick; tick
// latency must stay where it is without the store, the collector must keep its
// cadence, and what the writer cannot take must be dropped and counted.
#include <algorithm>
#include <chrono>
#include <iostream>
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

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

TEST(SlowMetricsWriter, DoesNotSlowTheTickAndCountsWhatItDrops) {
  constexpr int kRounds = 6;
  constexpr int kTicksPerPhase = 40;
  constexpr double kSlowWriteSeconds = 0.5;
  Pipeline pipeline;
  pipeline.Run(50);  // warm up
  const std::vector<double> without_store = pipeline.Run(kTicksPerPhase * 2);

  MetricsOptions options;
  options.path = ":memory:";
  options.flush_interval_seconds = 0.02;  // 25 batches per slow write
  options.write_queue_capacity = 4;
  auto made = MetricsStore::Make(pipeline.engine.get(), options);
  ASSERT_TRUE(made.ok()) << made.status();
  auto store = std::move(*made);
  ASSERT_TRUE(store->Start().ok());

  // Alternate a fast and a slowed writer so that machine noise hits both alike.
  std::vector<double> fast, slow;
  int64_t flushes_before_slow = 0;
  double slow_seconds = 0;
  for (int round = 0; round < kRounds; ++round) {
    store->SetWriterDelayForTesting(0);
    for (double l : pipeline.Run(kTicksPerPhase)) fast.push_back(l);
    store->SetWriterDelayForTesting(kSlowWriteSeconds);
    flushes_before_slow = store->stats().flushes;
    const auto started = std::chrono::steady_clock::now();
    for (double l : pipeline.Run(kTicksPerPhase)) slow.push_back(l);
    slow_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started)
                       .count();
  }
  const MetricsStoreStats during = store->stats();
  std::cout << "tick latency (median / p99, ms): without store " << Median(without_store) * 1e3
            << " / " << P99(without_store) * 1e3 << ", fast writer " << Median(fast) * 1e3
            << " / " << P99(fast) * 1e3 << ", writer slowed to " << kSlowWriteSeconds
            << " s per batch " << Median(slow) * 1e3 << " / " << P99(slow) * 1e3 << "; "
            << during.flushes << " flushes, " << during.batches_written << " written, "
            << during.batches_dropped << " dropped (" << during.rows_dropped << " rows)\n";

  // The tick does not wait for the writer. Generous bounds: CI machines are noisy.
  EXPECT_LT(Median(slow), Median(fast) * 1.5 + 0.001);
  EXPECT_LT(P99(slow), P99(fast) * 2 + 0.005);
  EXPECT_LT(P99(slow), P99(without_store) * 3 + 0.010);
  // The collector keeps its cadence while the writer is far behind.
  EXPECT_GE(during.flushes - flushes_before_slow,
            static_cast<int64_t>(slow_seconds / options.flush_interval_seconds / 3));
  EXPECT_GT(during.batches_dropped, 0);
  EXPECT_GT(during.rows_dropped, 0);
  EXPECT_LE(during.write_queue_depth, options.write_queue_capacity);
  EXPECT_EQ(during.events_dropped, 0);  // the event queue itself kept up

  // Once the disk is fast again, the loss is reported as an alert.
  store->SetWriterDelayForTesting(0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (store->stats().write_queue_depth > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
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
    engine->RecordEvent(
        EngineEvent::Engine(Severity::kInfo, "test", "event " + std::to_string(i)));
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
