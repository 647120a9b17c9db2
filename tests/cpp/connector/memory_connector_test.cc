// MemoryConnector: pushes from application code, polled by the engine.
#include "rill/connector/memory_connector.h"

#include <thread>

#include <arrow/api.h>
#include <gtest/gtest.h>

#include "table/test_util.h"

namespace rill {
namespace {

using test::BatchOf;
using test::IdBatch;
using test::IdRange;
using test::IdSchema;
using test::IdValues;

TEST(MemoryConnector, IsNamedAfterItsTargetTableByDefault) {
  MemoryConnector connector("orders");
  EXPECT_EQ(connector.name(), "orders");
  EXPECT_EQ(connector.target_table(), "orders");
  EXPECT_EQ(connector.schema(), nullptr);
  MemoryConnector named("orders", IdSchema(), {}, "orders-feed");
  EXPECT_EQ(named.name(), "orders-feed");
  EXPECT_TRUE(named.schema()->Equals(*IdSchema()));
}

TEST(MemoryConnector, HandsPushedBatchesToPollInOrder) {
  MemoryConnector connector("t");
  RILL_ASSERT_OK(connector.Push(IdBatch(0, 3)));
  RILL_ASSERT_OK(connector.Push(IdBatch(3, 4)));
  RILL_ASSERT_OK_AND_ASSIGN(auto batches, connector.Poll());
  EXPECT_EQ(IdValues(batches), IdRange(0, 4));
  RILL_ASSERT_OK_AND_ASSIGN(auto again, connector.Poll());
  EXPECT_TRUE(again.empty());
  EXPECT_EQ(connector.stats().drained_records, 4);
  EXPECT_EQ(connector.stats().pushed_records, 4);
}

TEST(MemoryConnector, PushesATableOfSeveralChunksAsOnePush) {
  BufferLimits limits;
  limits.max_records = 5;
  limits.on_overflow = OverflowPolicy::kError;
  MemoryConnector connector("t", IdSchema(), limits);
  auto table = arrow::Table::FromRecordBatches(IdSchema(), {IdBatch(0, 3), IdBatch(3, 6)}).ValueOrDie();
  Status status = connector.Push(table);
  EXPECT_TRUE(status.IsCapacityError()) << status.ToString();
  EXPECT_EQ(connector.stats().buffered_records, 0) << "all or nothing";
  EXPECT_EQ(connector.stats().refused_records, 6);
  auto fits = arrow::Table::FromRecordBatches(IdSchema(), {IdBatch(0, 2), IdBatch(2, 5)}).ValueOrDie();
  RILL_ASSERT_OK(connector.Push(fits));
  RILL_ASSERT_OK_AND_ASSIGN(auto batches, connector.Poll());
  EXPECT_EQ(IdValues(batches), IdRange(0, 5));
}

TEST(MemoryConnector, DropsOldestRowsExactlyAcrossPushes) {
  BufferLimits limits;
  limits.max_records = 4;
  limits.on_overflow = OverflowPolicy::kDropOldest;
  MemoryConnector connector("t", nullptr, limits);
  RILL_ASSERT_OK(connector.Push(IdBatch(0, 3)));
  RILL_ASSERT_OK(connector.Push(IdBatch(3, 6)));
  EXPECT_EQ(connector.stats().dropped_records, 2);
  RILL_ASSERT_OK_AND_ASSIGN(auto batches, connector.Poll());
  EXPECT_EQ(IdValues(batches), IdRange(2, 6));
}

TEST(MemoryConnector, DropsNewestRowsExactlyAcrossPushes) {
  BufferLimits limits;
  limits.max_records = 4;
  limits.on_overflow = OverflowPolicy::kDropNewest;
  MemoryConnector connector("t", nullptr, limits);
  RILL_ASSERT_OK(connector.Push(IdBatch(0, 3)));
  RILL_ASSERT_OK(connector.Push(IdBatch(3, 6)));
  EXPECT_EQ(connector.stats().dropped_records, 2);
  RILL_ASSERT_OK_AND_ASSIGN(auto batches, connector.Poll());
  EXPECT_EQ(IdValues(batches), IdRange(0, 4));
}

TEST(MemoryConnector, AcceptsPushesFromManyThreads) {
  BufferLimits limits;
  limits.max_records = 0;
  MemoryConnector connector("t", IdSchema(), limits);
  constexpr int kThreads = 4, kPushes = 500;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPushes; ++i) {
        const int64_t base = (t * kPushes + i) * 2;
        EXPECT_TRUE(connector.Push(IdBatch(base, base + 2)).ok());
      }
    });
  }
  std::vector<int64_t> seen;
  for (int polls = 0; polls < 100; ++polls) {
    auto batches = connector.Poll().ValueOrDie();
    auto values = IdValues(batches);
    seen.insert(seen.end(), values.begin(), values.end());
  }
  for (auto& thread : threads) thread.join();
  auto rest = IdValues(connector.Poll().ValueOrDie());
  seen.insert(seen.end(), rest.begin(), rest.end());
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, IdRange(0, kThreads * kPushes * 2));
  EXPECT_EQ(connector.stats().drained_records, kThreads * kPushes * 2);
}

}  // namespace
}  // namespace rill
