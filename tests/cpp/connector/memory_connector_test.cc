// MemoryConnector: pushes from application code, polled by the engine.
#include "rill/connector/memory_connector.h"

#include <thread>

#include <arrow/api.h>
#include <gtest/gtest.h>

#include "table/test_util.h"

namespace rill {
namespace {

using test::BatchOf;
using test::SchemaOf;

std::shared_ptr<arrow::Schema> Schema() { return SchemaOf({arrow::field("id", arrow::int64())}); }

std::shared_ptr<arrow::RecordBatch> Ids(int64_t from, int64_t to) {
  arrow::Int64Builder builder;
  for (int64_t i = from; i < to; ++i) {
    EXPECT_TRUE(builder.Append(i).ok());
  }
  return arrow::RecordBatch::Make(Schema(), to - from, {builder.Finish().ValueOrDie()});
}

std::vector<int64_t> Values(const std::vector<std::shared_ptr<arrow::RecordBatch>>& batches) {
  std::vector<int64_t> out;
  for (const auto& batch : batches) {
    const auto& ids = static_cast<const arrow::Int64Array&>(*batch->column(0));
    for (int64_t i = 0; i < ids.length(); ++i) out.push_back(ids.Value(i));
  }
  return out;
}

std::vector<int64_t> Range(int64_t from, int64_t to) {
  std::vector<int64_t> out;
  for (int64_t i = from; i < to; ++i) out.push_back(i);
  return out;
}

TEST(MemoryConnector, IsNamedAfterItsTargetTableByDefault) {
  MemoryConnector connector("orders");
  EXPECT_EQ(connector.name(), "orders");
  EXPECT_EQ(connector.target_table(), "orders");
  EXPECT_EQ(connector.schema(), nullptr);
  MemoryConnector named("orders", Schema(), {}, "orders-feed");
  EXPECT_EQ(named.name(), "orders-feed");
  EXPECT_TRUE(named.schema()->Equals(*Schema()));
}

TEST(MemoryConnector, HandsPushedBatchesToPollInOrder) {
  MemoryConnector connector("t");
  RILL_ASSERT_OK(connector.Push(Ids(0, 3)));
  RILL_ASSERT_OK(connector.Push(Ids(3, 4)));
  RILL_ASSERT_OK_AND_ASSIGN(auto batches, connector.Poll());
  EXPECT_EQ(Values(batches), Range(0, 4));
  RILL_ASSERT_OK_AND_ASSIGN(auto again, connector.Poll());
  EXPECT_TRUE(again.empty());
  EXPECT_EQ(connector.stats().drained_records, 4);
  EXPECT_EQ(connector.stats().pushed_records, 4);
}

TEST(MemoryConnector, PushesATableOfSeveralChunksAsOnePush) {
  BufferLimits limits;
  limits.max_records = 5;
  limits.on_overflow = OverflowPolicy::kError;
  MemoryConnector connector("t", Schema(), limits);
  auto table = arrow::Table::FromRecordBatches(Schema(), {Ids(0, 3), Ids(3, 6)}).ValueOrDie();
  Status status = connector.Push(table);
  EXPECT_TRUE(status.IsCapacityError()) << status.ToString();
  EXPECT_EQ(connector.stats().buffered_records, 0) << "all or nothing";
  EXPECT_EQ(connector.stats().refused_records, 6);
  auto fits = arrow::Table::FromRecordBatches(Schema(), {Ids(0, 2), Ids(2, 5)}).ValueOrDie();
  RILL_ASSERT_OK(connector.Push(fits));
  RILL_ASSERT_OK_AND_ASSIGN(auto batches, connector.Poll());
  EXPECT_EQ(Values(batches), Range(0, 5));
}

TEST(MemoryConnector, DropsOldestRowsExactlyAcrossPushes) {
  BufferLimits limits;
  limits.max_records = 4;
  limits.on_overflow = OverflowPolicy::kDropOldest;
  MemoryConnector connector("t", nullptr, limits);
  RILL_ASSERT_OK(connector.Push(Ids(0, 3)));
  RILL_ASSERT_OK(connector.Push(Ids(3, 6)));
  EXPECT_EQ(connector.stats().dropped_records, 2);
  RILL_ASSERT_OK_AND_ASSIGN(auto batches, connector.Poll());
  EXPECT_EQ(Values(batches), Range(2, 6));
}

TEST(MemoryConnector, DropsNewestRowsExactlyAcrossPushes) {
  BufferLimits limits;
  limits.max_records = 4;
  limits.on_overflow = OverflowPolicy::kDropNewest;
  MemoryConnector connector("t", nullptr, limits);
  RILL_ASSERT_OK(connector.Push(Ids(0, 3)));
  RILL_ASSERT_OK(connector.Push(Ids(3, 6)));
  EXPECT_EQ(connector.stats().dropped_records, 2);
  RILL_ASSERT_OK_AND_ASSIGN(auto batches, connector.Poll());
  EXPECT_EQ(Values(batches), Range(0, 4));
}

TEST(MemoryConnector, AcceptsPushesFromManyThreads) {
  BufferLimits limits;
  limits.max_records = 0;
  MemoryConnector connector("t", Schema(), limits);
  constexpr int kThreads = 4, kPushes = 500;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPushes; ++i) {
        const int64_t base = (t * kPushes + i) * 2;
        EXPECT_TRUE(connector.Push(Ids(base, base + 2)).ok());
      }
    });
  }
  std::vector<int64_t> seen;
  for (int polls = 0; polls < 100; ++polls) {
    auto batches = connector.Poll().ValueOrDie();
    auto values = Values(batches);
    seen.insert(seen.end(), values.begin(), values.end());
  }
  for (auto& thread : threads) thread.join();
  auto rest = Values(connector.Poll().ValueOrDie());
  seen.insert(seen.end(), rest.begin(), rest.end());
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, Range(0, kThreads * kPushes * 2));
  EXPECT_EQ(connector.stats().drained_records, kThreads * kPushes * 2);
}

}  // namespace
}  // namespace rill
