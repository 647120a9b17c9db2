// KafkaConnector's message keys and tombstones (key_columns, key_format) and
// format=debezium, through librdkafka's mock cluster (127.0.0.1, in process).
#include <chrono>
#include <thread>

#include <arrow/api.h>
#include <gtest/gtest.h>

#include "rill/connector/kafka_connector.h"
#include "table/test_util.h"

namespace rill {
namespace {

std::shared_ptr<arrow::Schema> Users() {
  return arrow::schema({arrow::field("id", arrow::int64()), arrow::field("name", arrow::utf8())});
}

KafkaOptions Options(const KafkaMockCluster& cluster, const std::string& topic) {
  KafkaOptions o;
  o.topics = {topic};
  o.config = {{"bootstrap.servers", cluster.bootstrap_servers()},
              {"topic.metadata.refresh.interval.ms", "500"},
              {"session.timeout.ms", "6000"},
              {"heartbeat.interval.ms", "500"},
              {"group.id", std::string("g-") + topic + "-" +
                               ::testing::UnitTest::GetInstance()->current_test_info()->name()}};
  o.start = KafkaStart::kEarliest;
  o.decode.schema = Users();
  o.poll_timeout_ms = 20;
  return o;
}

/// One polled row: its operation (0 upsert when the batch has no _rill_op),
/// id (-1: null) and name ("<null>").
struct Row {
  int op;
  int64_t id;
  std::string name;
  bool operator==(const Row& o) const { return op == o.op && id == o.id && name == o.name; }
};

std::ostream& operator<<(std::ostream& os, const Row& r) {
  return os << "{" << r.op << ", " << r.id << ", " << r.name << "}";
}

/// Poll until `n` rows and `rejects` rejects arrived (or about 60 s passed).
std::vector<Row> PollRows(KafkaConnector& c, size_t n, size_t rejects,
                          std::vector<RejectedRecord>* out_rejects) {
  std::vector<Row> rows;
  for (int i = 0; i < 3000 && (rows.size() < n || out_rejects->size() < rejects); ++i) {
    auto polled = c.Poll();
    for (auto& r : c.TakeRejects()) out_rejects->push_back(std::move(r));
    if (!polled.ok()) continue;
    for (const auto& b : *polled) {
      auto ops = b->GetColumnByName("_rill_op");
      auto ids = std::static_pointer_cast<arrow::Int64Array>(b->GetColumnByName("id"));
      auto names = std::static_pointer_cast<arrow::StringArray>(b->GetColumnByName("name"));
      for (int64_t r = 0; r < b->num_rows(); ++r) {
        Row row;
        row.op = ops ? static_cast<const arrow::Int8Array&>(*ops).Value(r) : 0;
        row.id = ids->IsNull(r) ? -1 : ids->Value(r);
        row.name = names->IsNull(r) ? "<null>" : names->GetString(r);
        rows.push_back(row);
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return rows;
}

TEST(KafkaKeys, TombstonesDeleteTheirKeysInOrderAndKeysFillMissingKeyColumns) {
  RILL_ASSERT_OK_AND_ASSIGN(auto cluster, KafkaMockCluster::Make(1));
  RILL_ASSERT_OK(cluster->CreateTopic("users", 1));
  const std::string_view null_value;  // data() == nullptr: a tombstone
  RILL_ASSERT_OK(cluster->Produce("users", 0, R"({"id":1,"name":"a"})", R"({"id":1})"));
  RILL_ASSERT_OK(cluster->Produce("users", 0, R"({"name":"b"})", "2"));  // id from the key
  RILL_ASSERT_OK(cluster->Produce("users", 0, null_value, R"({"id":1})"));
  RILL_ASSERT_OK(cluster->Produce("users", 0, null_value, " 2 "));
  RILL_ASSERT_OK(cluster->Produce("users", 0, R"({"id":1,"name":"c"})", R"({"id":1})"));
  // Debezium's key with the schema/payload wrapper.
  RILL_ASSERT_OK(cluster->Produce(
      "users", 0, null_value,
      R"({"schema":{"type":"struct","fields":[{"type":"int64","field":"id"}]},"payload":{"id":1}})"));
  RILL_ASSERT_OK(cluster->Produce("users", 0, null_value, "not json"));
  RILL_ASSERT_OK(cluster->Produce("users", 0, null_value, ""));  // no key
  RILL_ASSERT_OK(cluster->Produce("users", 0, null_value, R"({"other":3})"));
  KafkaOptions o = Options(*cluster, "users");
  o.key_columns = {"id"};
  o.metadata_columns = true;
  RILL_ASSERT_OK_AND_ASSIGN(auto c, KafkaConnector::Make("t", o));
  RILL_ASSERT_OK(c->Start());
  std::vector<RejectedRecord> rejects;
  auto rows = PollRows(*c, 6, 3, &rejects);
  const std::vector<Row> expected = {{0, 1, "a"}, {0, 2, "b"},      {1, 1, "<null>"},
                                     {1, 2, "<null>"}, {0, 1, "c"}, {1, 1, "<null>"}};
  EXPECT_EQ(rows, expected);
  ASSERT_EQ(rejects.size(), 3u);
  EXPECT_NE(rejects[0].error.find("tombstone (a null value): the message key: "),
            std::string::npos) << rejects[0].error;
  EXPECT_EQ(rejects[0].raw, "not json");
  EXPECT_EQ(rejects[0].position, "topic users, partition 0, offset 6");
  EXPECT_NE(rejects[1].error.find("the message has no key"), std::string::npos);
  EXPECT_NE(rejects[2].error.find("no value for key column 'id'"), std::string::npos)
      << rejects[2].error;
  const ConnectorStats s = c->stats();
  EXPECT_EQ(s.tombstones, 6);
  EXPECT_EQ(s.rejected_records, 3);
  c->Stop();
}

TEST(KafkaKeys, StringKeysDeleteTheOneKeyColumn) {
  RILL_ASSERT_OK_AND_ASSIGN(auto cluster, KafkaMockCluster::Make(1));
  RILL_ASSERT_OK(cluster->CreateTopic("names", 1));
  RILL_ASSERT_OK(cluster->Produce("names", 0, R"({"id":7})", "Zoë \"q\""));
  RILL_ASSERT_OK(cluster->Produce("names", 0, std::string_view(), "Zoë \"q\""));
  KafkaOptions o = Options(*cluster, "names");
  o.key_format = KafkaKeyFormat::kString;
  o.key_columns = {"name"};
  RILL_ASSERT_OK_AND_ASSIGN(auto c, KafkaConnector::Make("t", o));
  RILL_ASSERT_OK(c->Start());
  std::vector<RejectedRecord> rejects;
  auto rows = PollRows(*c, 2, 0, &rejects);
  EXPECT_TRUE(rejects.empty()) << (rejects.empty() ? "" : rejects[0].error);
  EXPECT_EQ(rows, (std::vector<Row>{{0, 7, "Zoë \"q\""}, {1, -1, "Zoë \"q\""}}));
  c->Stop();
  // More than one column cannot be one string.
  o.key_columns = {"id", "name"};
  auto bad = KafkaConnector::Make("t", o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("key_format 'string'"), std::string::npos);
}

TEST(KafkaKeys, TombstonesWithoutKeyColumnsAreRejectsOrSkippedUnderDebezium) {
  RILL_ASSERT_OK_AND_ASSIGN(auto cluster, KafkaMockCluster::Make(1));
  RILL_ASSERT_OK(cluster->CreateTopic("plain", 1));
  RILL_ASSERT_OK(cluster->CreateTopic("cdc", 1));
  for (const char* topic : {"plain", "cdc"}) {
    RILL_ASSERT_OK(cluster->Produce(topic, 0, std::string_view(), R"({"id":1})"));
  }
  RILL_ASSERT_OK(cluster->Produce("plain", 0, R"({"id":2})", ""));
  RILL_ASSERT_OK(cluster->Produce("cdc", 0, R"({"op":"c","after":{"id":2}})", ""));
  RILL_ASSERT_OK(cluster->Produce("cdc", 0, R"({"op":"d","before":{"id":2}})", R"({"id":2})"));
  RILL_ASSERT_OK(cluster->Produce("cdc", 0, std::string_view(), R"({"id":2})"));

  RILL_ASSERT_OK_AND_ASSIGN(auto plain, KafkaConnector::Make("t", Options(*cluster, "plain")));
  RILL_ASSERT_OK(plain->Start());
  std::vector<RejectedRecord> rejects;
  auto rows = PollRows(*plain, 1, 1, &rejects);
  EXPECT_EQ(rows, (std::vector<Row>{{0, 2, "<null>"}}));
  ASSERT_EQ(rejects.size(), 1u);
  EXPECT_NE(rejects[0].error.find("key_columns=[...]"), std::string::npos) << rejects[0].error;
  EXPECT_NE(rejects[0].error.find("key_format='string'"), std::string::npos);
  EXPECT_EQ(rejects[0].raw, R"({"id":1})");
  EXPECT_EQ(plain->stats().tombstones, 1);
  plain->Stop();

  KafkaOptions o = Options(*cluster, "cdc");
  o.decode.format = JsonFormat::kDebezium;
  RILL_ASSERT_OK_AND_ASSIGN(auto cdc, KafkaConnector::Make("t", o));
  RILL_ASSERT_OK(cdc->Start());
  rejects.clear();
  rows = PollRows(*cdc, 2, 0, &rejects);
  EXPECT_EQ(rows, (std::vector<Row>{{0, 2, "<null>"}, {1, 2, "<null>"}}));
  EXPECT_TRUE(rejects.empty());
  for (int i = 0; i < 500 && cdc->stats().tombstones < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(cdc->stats().tombstones, 2);
  EXPECT_EQ(cdc->stats().rejected_records, 0);
  cdc->Stop();
}

}  // namespace
}  // namespace rill
