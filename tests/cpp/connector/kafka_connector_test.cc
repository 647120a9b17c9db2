// KafkaConnector through librdkafka's mock cluster (127.0.0.1, in process).
#include "rill/connector/kafka_connector.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include <arrow/api.h>
#include <arrow/json/from_string.h>
#include <gtest/gtest.h>

#include "table/test_util.h"

namespace rill {
namespace {

// Poll loops end as soon as their condition holds; their bounds (about 60 s)
// are generous because the sanitizer builds run on loaded 2-core machines.

std::shared_ptr<arrow::Schema> IdSchema() {
  return arrow::schema({arrow::field("id", arrow::int64())});
}

KafkaOptions Options(const KafkaMockCluster& cluster, const std::string& topic) {
  KafkaOptions o;
  o.topics = {topic};
  // Short sessions: the mock coordinator waits out members that went away.
  o.config = {{"bootstrap.servers", cluster.bootstrap_servers()},
              {"topic.metadata.refresh.interval.ms", "500"},
              {"session.timeout.ms", "6000"},
              {"heartbeat.interval.ms", "500"},
              {"group.id", "g-" + topic + "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name()}};
  o.start = KafkaStart::kEarliest;
  o.decode.schema = IdSchema();
  o.poll_timeout_ms = 20;
  return o;
}

/// Poll once; return the number of rows.
int64_t PollOnce(KafkaConnector& c) {
  auto polled = c.Poll();
  int64_t n = 0;
  if (polled.ok()) {
    for (const auto& b : *polled) n += b->num_rows();
  }
  return n;
}

/// Poll until `n` rows arrived or 20 s passed; return the ids.
std::vector<int64_t> PollIds(KafkaConnector& c, size_t n, std::vector<Status>* errors = nullptr) {
  std::vector<int64_t> ids;
  for (int i = 0; i < 6000 && ids.size() < n; ++i) {
    auto polled = c.Poll();
    if (!polled.ok()) {
      if (errors) errors->push_back(polled.status());
      continue;
    }
    for (const auto& b : *polled) {
      auto a = std::static_pointer_cast<arrow::Int64Array>(b->GetColumnByName("id"));
      for (int64_t r = 0; r < a->length(); ++r) ids.push_back(a->Value(r));
    }
    if (ids.size() < n) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

std::vector<int64_t> Range(int64_t a, int64_t b) {
  std::vector<int64_t> v;
  for (int64_t i = a; i < b; ++i) v.push_back(i);
  return v;
}

TEST(KafkaConnector, ReadsNdjsonMessagesOfAllPartitionsAndRejectsBadLines) {
  RILL_ASSERT_OK_AND_ASSIGN(auto cluster, KafkaMockCluster::Make(1));
  RILL_ASSERT_OK(cluster->CreateTopic("events", 3));
  std::vector<std::string> values;
  for (int i = 0; i < 300; i += 2) {
    values.push_back("{\"id\":" + std::to_string(i) + "}\n{\"id\":" + std::to_string(i + 1) + "}");
  }
  values.push_back("{\"id\":\"bad\"}");
  RILL_ASSERT_OK(cluster->ProduceMany("events", values));
  RILL_ASSERT_OK_AND_ASSIGN(auto c, KafkaConnector::Make("t", Options(*cluster, "events")));
  RILL_ASSERT_OK(c->Start());
  EXPECT_EQ(PollIds(*c, 300), Range(0, 300));
  auto rejects = c->TakeRejects();  // those of the messages Poll passed
  for (int i = 0; i < 3000 && rejects.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_EQ(PollOnce(*c), 0);
    rejects = c->TakeRejects();
  }
  ASSERT_EQ(rejects.size(), 1u);
  EXPECT_NE(rejects[0].position.find("topic events, partition "), std::string::npos);
  EXPECT_NE(rejects[0].position.find(", offset "), std::string::npos);
  EXPECT_EQ(rejects[0].raw, "{\"id\":\"bad\"}");
  int64_t total = 0;
  for (const auto& [tp, pos] : c->positions()) total += pos;
  EXPECT_EQ(total, static_cast<int64_t>(values.size()));  // offsets start at 0
  for (int i = 0; i < 1200 && (c->lags().size() < 3 || c->stats().lag != 0); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(c->lags().size(), 3u);
  EXPECT_EQ(c->stats().lag, 0);
  EXPECT_EQ(c->stats().errors, 0);  // partition EOF is not an error
  c->Stop();
}

TEST(KafkaConnector, AddsMetadataColumns) {
  RILL_ASSERT_OK_AND_ASSIGN(auto cluster, KafkaMockCluster::Make(1));
  RILL_ASSERT_OK(cluster->CreateTopic("m", 1));
  RILL_ASSERT_OK(cluster->Produce("m", 0, "{\"id\":1}\n{\"id\":2}", "k1", 1700000000000));
  RILL_ASSERT_OK(cluster->Produce("m", 0, "{\"id\":3}", "", 1700000001000));
  auto o = Options(*cluster, "m");
  o.metadata_columns = true;
  RILL_ASSERT_OK_AND_ASSIGN(auto c, KafkaConnector::Make("t", o));
  RILL_ASSERT_OK(c->Start());
  std::vector<std::shared_ptr<arrow::RecordBatch>> got;
  int64_t rows = 0;
  for (int i = 0; i < 3000 && rows < 3; ++i) {
    for (auto& b : *c->Poll()) {
      rows += b->num_rows();
      got.push_back(b);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  c->Stop();
  RILL_ASSERT_OK_AND_ASSIGN(auto table, arrow::Table::FromRecordBatches(got));
  RILL_ASSERT_OK_AND_ASSIGN(auto combined, table->CombineChunksToBatch());
  EXPECT_EQ(combined->schema()->ToString(),
            "id: int64\n_topic: string\n_partition: int32\n_offset: int64\n_key: binary\n"
            "_timestamp: timestamp[ms]");
  EXPECT_EQ(combined->GetColumnByName("_offset")->ToString(),
            arrow::json::ArrayFromJSONString(arrow::int64(), "[0,0,1]").ValueOrDie()->ToString());
  auto keys = std::static_pointer_cast<arrow::BinaryArray>(combined->GetColumnByName("_key"));
  EXPECT_EQ(keys->GetView(1), "k1");
  EXPECT_TRUE(keys->IsNull(2));
  auto ts = std::static_pointer_cast<arrow::TimestampArray>(combined->GetColumnByName("_timestamp"));
  EXPECT_EQ(ts->Value(2), 1700000001000);
}

// Disabled: librdkafka 2.0.2's mock cluster answers ListOffsets by timestamp
// with no offset, so the consumer starts at the end; needs the real broker
// (covered there: tests/python/test_kafka_broker.py, test_start_at_timestamp_and_latest).
TEST(KafkaConnector, DISABLED_StartsFromATimestamp) {
  RILL_ASSERT_OK_AND_ASSIGN(auto cluster, KafkaMockCluster::Make(1));
  RILL_ASSERT_OK(cluster->CreateTopic("s", 1));
  for (int i = 0; i < 5; ++i) {
    RILL_ASSERT_OK(cluster->Produce("s", 0, "{\"id\":" + std::to_string(i) + "}", "",
                                    1000000 + i * 1000));
  }
  auto by_time = Options(*cluster, "s");
  by_time.start = KafkaStart::kTimestamp;
  by_time.start_timestamp_ms = 1002000;
  by_time.config["group.id"] = "by-time";
  RILL_ASSERT_OK_AND_ASSIGN(auto t, KafkaConnector::Make("t", by_time));
  RILL_ASSERT_OK(t->Start());
  EXPECT_EQ(PollIds(*t, 3), Range(2, 5));
  t->Stop();
}

TEST(KafkaConnector, StartsFromTheCommittedOffsets) {
  RILL_ASSERT_OK_AND_ASSIGN(auto cluster, KafkaMockCluster::Make(1));
  RILL_ASSERT_OK(cluster->CreateTopic("s", 1));
  for (int i = 0; i < 5; ++i) {
    RILL_ASSERT_OK(cluster->Produce("s", 0, "{\"id\":" + std::to_string(i) + "}"));
  }
  auto committed = Options(*cluster, "s");
  committed.start = KafkaStart::kCommitted;
  committed.config["group.id"] = "g";
  {
    RILL_ASSERT_OK_AND_ASSIGN(auto first, KafkaConnector::Make("t", committed));
    RILL_ASSERT_OK(first->Start());
    EXPECT_EQ(PollIds(*first, 5), Range(0, 5));
    first->CommitApplied();  // as the engine does once a tick applied the rows
    first->Stop();           // commits them synchronously
  }
  RILL_ASSERT_OK(cluster->Produce("s", 0, "{\"id\":5}"));
  RILL_ASSERT_OK_AND_ASSIGN(auto second, KafkaConnector::Make("t", committed));
  RILL_ASSERT_OK(second->Start());
  EXPECT_EQ(PollIds(*second, 1), Range(5, 6));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(PollOnce(*second), 0);  // nothing older came back
  second->Stop();
}

TEST(KafkaConnector, SurvivesABrokerOutageAndReportsItOnce) {
  RILL_ASSERT_OK_AND_ASSIGN(auto cluster, KafkaMockCluster::Make(1));
  RILL_ASSERT_OK(cluster->CreateTopic("o", 1));
  RILL_ASSERT_OK(cluster->Produce("o", 0, "{\"id\":1}"));
  auto o = Options(*cluster, "o");
  o.config["reconnect.backoff.max.ms"] = "200";
  RILL_ASSERT_OK_AND_ASSIGN(auto c, KafkaConnector::Make("t", o));
  RILL_ASSERT_OK(c->Start());
  EXPECT_EQ(PollIds(*c, 1), Range(1, 2));
  RILL_ASSERT_OK(cluster->SetBrokerDown(1, true));
  std::vector<Status> errors;
  for (int i = 0; i < 3000 && errors.empty(); ++i) {
    auto polled = c->Poll();
    if (!polled.ok()) errors.push_back(polled.status());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_TRUE(errors[0].IsIOError()) << errors[0];
  EXPECT_TRUE(c->Poll().ok());  // once per outage
  RILL_ASSERT_OK(cluster->SetBrokerDown(1, false));
  RILL_ASSERT_OK(cluster->Produce("o", 0, "{\"id\":2}"));
  EXPECT_EQ(PollIds(*c, 1, &errors), Range(2, 3));
  c->Stop();
}

TEST(KafkaConnector, DropOldestCountsWhatAFullBufferDrops) {
  RILL_ASSERT_OK_AND_ASSIGN(auto cluster, KafkaMockCluster::Make(1));
  RILL_ASSERT_OK(cluster->CreateTopic("bp", 2));
  std::vector<std::string> values;
  for (int i = 0; i < 2000; ++i) values.push_back("{\"id\":" + std::to_string(i) + "}");
  RILL_ASSERT_OK(cluster->ProduceMany("bp", values));
  auto o = Options(*cluster, "bp");
  o.limits.max_records = 100;
  o.limits.on_overflow = OverflowPolicy::kDropOldest;
  RILL_ASSERT_OK_AND_ASSIGN(auto c, KafkaConnector::Make("t", o));
  RILL_ASSERT_OK(c->Start());
  // Let the consumer overrun the 100-record buffer before draining (joining the
  // group can take seconds on a loaded machine), then drain until every
  // message is either drained or counted as dropped.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(90);
  while (c->stats().dropped_records == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  int64_t drained = 0;
  while (drained + c->stats().dropped_records < 2000 &&
         std::chrono::steady_clock::now() < deadline) {
    drained += PollOnce(*c);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  drained += PollOnce(*c);
  c->CommitApplied();  // as a tick does after applying what it polled
  c->Stop();
  EXPECT_EQ(drained + c->stats().dropped_records, 2000);
  EXPECT_GT(c->stats().dropped_records, 0);
  // Dropped rows are counted, and their offsets committed with the rest: the
  // user chose drop_oldest (docs/connectors.md).
  auto committed = cluster->CommittedOffsets(o.config["group.id"], "bp", 2).ValueOrDie();
  int64_t total = 0;
  for (int64_t offset : committed) total += std::max<int64_t>(0, offset);  // -1001: none
  EXPECT_EQ(total, 2000);
}

// librdkafka's mock cluster keeps at most 5 MiB per partition and discards the
// oldest message sets beyond that (rdkafka_mock.c: max_size, no API to change
// it), like retention on a real broker. A consumer from the earliest offset then
// starts at the new log start: the connector reads every message still held,
// in order and without a gap, up to the end, and waits for nothing discarded.
// (Why nexmark_bench --kafka mock read fewer events than it produced at 50k+
// events: bench/nexmark/kafka_run.h.)
TEST(KafkaConnector, ReadsWhatTheMockKeepsAfterItDiscardedAPartitionsHead) {
  RILL_ASSERT_OK_AND_ASSIGN(auto cluster, KafkaMockCluster::Make(1));
  RILL_ASSERT_OK(cluster->CreateTopic("big", 1));
  constexpr int kMessages = 1000;  // 8 KB each: 8 MB > 5 MiB
  const std::string pad(8000, 'x');
  std::vector<std::string> values;
  for (int i = 0; i < kMessages; ++i) {
    values.push_back("{\"id\":" + std::to_string(i) + ",\"pad\":\"" + pad + "\"}");
  }
  RILL_ASSERT_OK(cluster->ProduceMany("big", values));
  auto o = Options(*cluster, "big");
  o.metadata_columns = true;
  RILL_ASSERT_OK_AND_ASSIGN(auto c, KafkaConnector::Make("t", o));
  RILL_ASSERT_OK(c->Start());
  std::vector<int64_t> ids, offsets;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while ((ids.empty() || ids.back() < kMessages - 1) &&
         std::chrono::steady_clock::now() < deadline) {
    auto polled = c->Poll();
    if (polled.ok()) {
      for (const auto& b : *polled) {
        auto id = std::static_pointer_cast<arrow::Int64Array>(b->GetColumnByName("id"));
        auto off = std::static_pointer_cast<arrow::Int64Array>(b->GetColumnByName("_offset"));
        for (int64_t r = 0; r < b->num_rows(); ++r) {
          ids.push_back(id->Value(r));
          offsets.push_back(off->Value(r));
        }
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_FALSE(ids.empty());
  // The head is gone (the log starts later), the rest arrives whole.
  EXPECT_GT(offsets.front(), 0);
  EXPECT_GE(ids.size(), 500u);  // 5 MiB less at most one ~1 MB message set
  EXPECT_EQ(ids, Range(offsets.front(), kMessages));
  EXPECT_EQ(offsets, ids);  // one message per row, one partition: offset = id
  EXPECT_EQ(c->positions()[KafkaConnector::TopicPartition("big", 0)], kMessages);
  EXPECT_EQ(c->stats().errors, 0);
  c->Stop();
}

}  // namespace
}  // namespace rill
