// Concurrency of declared tables: threads subscribe to, unsubscribe from and
// write to a table declared without a schema while the background loop
// creates it from a connector's first batch. Every subscription handed out
// must end up on the table exactly once (or be removed), whichever side wins.
//
// Runs under ThreadSanitizer too (label "threads"); keep it short.
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <arrow/api.h>
#include <gtest/gtest.h>

#include "rill/connector/memory_connector.h"
#include "rill/engine/engine.h"
#include "table/test_util.h"

namespace rill {
namespace {

using test::BatchOf;
using test::SchemaOf;

std::shared_ptr<arrow::Schema> IdSchema() {
  return SchemaOf({arrow::field("id", arrow::int64())});
}

TEST(EngineDeclaredConcurrency, SubscriptionsRacingTheFirstBatchAreKeptOrRemovedExactlyOnce) {
  constexpr int kRounds = 20;
  constexpr int kSubscribers = 4;
  for (int round = 0; round < kRounds; ++round) {
    EngineOptions options;
    options.trigger_interval_ms = 1;
    RILL_ASSERT_OK_AND_ASSIGN(auto engine, Engine::Make(std::move(options)));
    TableOptions keyed;
    keyed.primary_key = {"id"};
    RILL_ASSERT_OK(engine->DeclareTable("t", keyed));
    auto connector = std::make_shared<MemoryConnector>("t", nullptr, BufferLimits{}, "feed");
    RILL_ASSERT_OK(engine->AddConnector(connector));
    RILL_ASSERT_OK(engine->Start());

    // Subscriber i counts its calls; odd ones unsubscribe again right away.
    std::vector<std::atomic<int>> calls(kSubscribers);
    std::vector<std::thread> threads;
    std::atomic<bool> go{false};
    for (int i = 0; i < kSubscribers; ++i) {
      threads.emplace_back([&, i] {
        while (!go.load()) {
          std::this_thread::yield();
        }
        auto id = engine->Subscribe("t", [&calls, i](const auto&) { calls[i]++; });
        ASSERT_TRUE(id.ok()) << id.status().ToString();
        if (i % 2 == 1) {
          auto st = engine->Unsubscribe("t", *id);
          ASSERT_TRUE(st.ok()) << st.ToString();
        }
      });
    }
    threads.emplace_back([&] {
      while (!go.load()) {
        std::this_thread::yield();
      }
      ASSERT_TRUE(connector->Push(BatchOf(IdSchema(), {"[1, 2]"})).ok());
    });
    go = true;
    for (auto& t : threads) {
      t.join();
    }

    // One more version after every subscription settled: even subscribers see it.
    RILL_ASSERT_OK_AND_ASSIGN(auto table, engine->TableForWrite("t", IdSchema()));
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (table->num_rows() < 2) {  // the loop ingested the pushed batch
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "round " << round;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    engine->Stop();
    const int64_t version_before = table->snapshot()->version();
    std::vector<int> before(kSubscribers);
    for (int i = 0; i < kSubscribers; ++i) {
      before[i] = calls[i].load();
    }
    RILL_ASSERT_OK(table->Write(BatchOf(IdSchema(), {"[3]"})));
    ASSERT_EQ(table->snapshot()->version(), version_before + 1);
    for (int i = 0; i < kSubscribers; ++i) {
      if (i % 2 == 0) {
        EXPECT_EQ(calls[i].load(), before[i] + 1) << "subscriber " << i << ", round " << round;
      } else {
        EXPECT_EQ(calls[i].load(), before[i]) << "subscriber " << i << ", round " << round;
      }
    }
    EXPECT_EQ(table->primary_key(), (std::vector<std::string>{"id"}));
    EXPECT_TRUE(engine->DeclaredTableNames().empty());
  }
}

}  // namespace
}  // namespace rill
