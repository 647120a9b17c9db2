// JsonStreamConnector: raw JSON pushes, decoded into a bounded buffer.
#include "rill/connector/json_stream_connector.h"

#include <thread>

#include <arrow/api.h>
#include <gtest/gtest.h>

#include "table/test_util.h"

namespace rill {
namespace {

std::shared_ptr<arrow::Schema> IdOnly() { return arrow::schema({arrow::field("id", arrow::int64())}); }

std::shared_ptr<JsonStreamConnector> Make(BufferLimits limits, bool with_schema = true) {
  JsonStreamOptions options;
  options.limits = limits;
  if (with_schema) options.decode.schema = IdOnly();
  auto c = JsonStreamConnector::Make("t", options);
  EXPECT_TRUE(c.ok()) << c.status();
  return *c;
}

std::string Lines(int from, int to) {
  std::string s;
  for (int i = from; i < to; ++i) s += "{\"id\":" + std::to_string(i) + "}\n";
  return s;
}

std::vector<int64_t> Ids(const std::vector<std::shared_ptr<arrow::RecordBatch>>& batches) {
  std::vector<int64_t> out;
  for (const auto& b : batches) {
    auto ids = std::static_pointer_cast<arrow::Int64Array>(b->GetColumnByName("id"));
    for (int64_t i = 0; i < ids->length(); ++i) out.push_back(ids->Value(i));
  }
  return out;
}

std::vector<int64_t> Range(int from, int to) {
  std::vector<int64_t> v;
  for (int i = from; i < to; ++i) v.push_back(i);
  return v;
}

TEST(JsonStreamConnector, BuffersGoodRecordsAndHandsOverRejectsWithItsName) {
  auto c = Make({});
  RILL_ASSERT_OK(c->PushBytes("{\"id\":1}\n{\"id\":true}\n{\"id\":2}\n"));
  RILL_ASSERT_OK_AND_ASSIGN(auto batches, c->Poll());
  EXPECT_EQ(Ids(batches), (std::vector<int64_t>{1, 2}));
  auto rejects = c->TakeRejects();
  ASSERT_EQ(rejects.size(), 1u);
  EXPECT_EQ(rejects[0].connector, "t");
  EXPECT_EQ(rejects[0].position, "line 2, byte 9");
  EXPECT_TRUE(c->TakeRejects().empty());
  auto s = c->stats();
  EXPECT_EQ(s.received_records, 3);
  EXPECT_EQ(s.parsed_records, 2);
  EXPECT_EQ(s.rejected_records, 1);
  EXPECT_EQ(s.drained_records, 2);
}

TEST(JsonStreamConnector, DropOldestDropsEarlierPushesFirst) {
  auto c = Make({/*max_records=*/5, /*max_bytes=*/0, OverflowPolicy::kDropOldest});
  RILL_ASSERT_OK(c->PushBytes(Lines(0, 4)));
  RILL_ASSERT_OK(c->PushBytes(Lines(4, 8)));
  RILL_ASSERT_OK_AND_ASSIGN(auto batches, c->Poll());
  EXPECT_EQ(Ids(batches), Range(3, 8));
  EXPECT_EQ(c->stats().dropped_records, 3);
}

TEST(JsonStreamConnector, DropOldestWithAByteLimitDropsWholeEarlierPushes) {
  auto probe = Make({});
  RILL_ASSERT_OK(probe->PushBytes(Lines(0, 100)));
  const int64_t push_bytes = probe->stats().buffered_bytes;
  auto c = Make({/*max_records=*/0, /*max_bytes=*/push_bytes * 2, OverflowPolicy::kDropOldest});
  for (int p = 0; p < 5; ++p) RILL_ASSERT_OK(c->PushBytes(Lines(p * 100, p * 100 + 100)));
  RILL_ASSERT_OK_AND_ASSIGN(auto batches, c->Poll());
  EXPECT_EQ(Ids(batches), Range(300, 500));
  EXPECT_EQ(c->stats().dropped_records, 300);
}

TEST(JsonStreamConnector, DropNewestKeepsWhatIsBuffered) {
  auto c = Make({/*max_records=*/5, /*max_bytes=*/0, OverflowPolicy::kDropNewest});
  RILL_ASSERT_OK(c->PushBytes(Lines(0, 4)));
  RILL_ASSERT_OK(c->PushBytes(Lines(4, 8)));
  RILL_ASSERT_OK_AND_ASSIGN(auto batches, c->Poll());
  EXPECT_EQ(Ids(batches), Range(0, 5));
  EXPECT_EQ(c->stats().dropped_records, 3);
}

TEST(JsonStreamConnector, ErrorRefusesTheWholePushButKeepsItsRejects) {
  auto c = Make({/*max_records=*/5, /*max_bytes=*/0, OverflowPolicy::kError});
  RILL_ASSERT_OK(c->PushBytes(Lines(0, 4)));
  auto st = c->PushBytes(Lines(4, 6) + "oops\n");
  EXPECT_TRUE(st.IsCapacityError()) << st;
  EXPECT_EQ(c->TakeRejects().size(), 1u);
  RILL_ASSERT_OK_AND_ASSIGN(auto batches, c->Poll());
  EXPECT_EQ(Ids(batches), Range(0, 4));
  EXPECT_EQ(c->stats().refused_records, 2);
}

TEST(JsonStreamConnector, ProducersFasterThanTheConsumerLoseNothingUncounted) {
  auto c = Make({/*max_records=*/1000, /*max_bytes=*/0, OverflowPolicy::kDropOldest});
  std::vector<std::thread> producers;
  for (int t = 0; t < 4; ++t) {
    producers.emplace_back([&, t] {
      for (int p = 0; p < 50; ++p) {
        ASSERT_TRUE(c->PushBytes(Lines(t * 100000 + p * 100, t * 100000 + p * 100 + 100)).ok());
      }
    });
  }
  int64_t drained = 0;
  for (int i = 0; i < 20; ++i) {
    auto batches = c->Poll();
    drained += static_cast<int64_t>(Ids(*batches).size());
  }
  for (auto& p : producers) p.join();
  drained += static_cast<int64_t>(Ids(*c->Poll()).size());
  EXPECT_EQ(drained + c->stats().dropped_records, 4 * 50 * 100);
  EXPECT_GT(c->stats().dropped_records, 0);
}

TEST(JsonStreamConnector, RefusesPushesWhenStoppedAndAdoptsTheTargetSchema) {
  auto c = Make({}, /*with_schema=*/false);
  c->SetTargetSchema(arrow::schema({arrow::field("id", arrow::int32())}));
  RILL_ASSERT_OK(c->PushBytes("{\"id\":7,\"x\":1}"));
  EXPECT_TRUE(c->decode_schema()->Equals(*arrow::schema({arrow::field("id", arrow::int32())})));
  EXPECT_EQ(c->stats().unknown_fields, 1);
  c->Stop();
  EXPECT_TRUE(c->PushBytes("{\"id\":8}").IsInvalid());
}

}  // namespace
}  // namespace rill
