// KafkaSinkWriter (sink/kafka_sink.h) on hand-built ChangeSets: message keys,
// JSON values, tombstones, the progress group and failed deliveries through
// librdkafka's mock cluster; transactions (commit, abort, a writer that dies
// mid-transaction, fencing) against a real broker only, because the 2.0.2
// mock cluster does not hide aborted transactions from read_committed
// consumers (MockClusterShowsAbortedTransactions pins that). The real-broker
// tests run when RILL_TEST_KAFKA_BOOTSTRAP names one
// (tests/python/test_kafka_sink.py runs them on the suite's broker).
#include <librdkafka/rdkafka.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <arrow/api.h>
#include <gtest/gtest.h>

#include "rill/connector/kafka_connector.h"
#include "rill/sink/kafka_sink.h"
#include "table/test_util.h"

namespace rill {
namespace {

using test::ArrayOf;

std::string TestName() {
  return ::testing::UnitTest::GetInstance()->current_test_info()->name();
}

/// A message as a consumer sees it.
struct Message {
  std::optional<std::string> key;
  std::optional<std::string> value;  ///< nullopt: a tombstone
  int32_t partition = 0;
};

/// Every message of `topic` (partitions 0..n-1), in offset order per
/// partition, partitions one after another, read by a consumer of its own.
std::vector<Message> ReadTopic(const std::string& servers, const std::string& topic,
                               int partitions, bool read_committed = true) {
  char err[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  rd_kafka_conf_set(conf, "bootstrap.servers", servers.c_str(), err, sizeof(err));
  rd_kafka_conf_set(conf, "group.id", ("reader-" + topic).c_str(), err, sizeof(err));
  rd_kafka_conf_set(conf, "enable.partition.eof", "true", err, sizeof(err));
  rd_kafka_conf_set(conf, "enable.auto.commit", "false", err, sizeof(err));
  rd_kafka_conf_set(conf, "isolation.level",
                    read_committed ? "read_committed" : "read_uncommitted", err, sizeof(err));
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof(err));
  EXPECT_NE(rk, nullptr) << err;
  if (!rk) return {};
  rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(partitions);
  for (int p = 0; p < partitions; ++p) {
    rd_kafka_topic_partition_list_add(list, topic.c_str(), p)->offset = RD_KAFKA_OFFSET_BEGINNING;
  }
  rd_kafka_assign(rk, list);
  rd_kafka_topic_partition_list_destroy(list);
  std::map<int32_t, std::vector<Message>> by_partition;
  int eofs = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (eofs < partitions && std::chrono::steady_clock::now() < deadline) {
    rd_kafka_message_t* m = rd_kafka_consumer_poll(rk, 100);
    if (!m) continue;
    if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
      ++eofs;
    } else if (!m->err) {
      Message out;
      out.partition = m->partition;
      if (m->key) out.key = std::string(static_cast<const char*>(m->key), m->key_len);
      if (m->payload) out.value = std::string(static_cast<const char*>(m->payload), m->len);
      by_partition[m->partition].push_back(std::move(out));
    }
    rd_kafka_message_destroy(m);
  }
  EXPECT_EQ(eofs, partitions) << "the topic was not read to its end within 30 s";
  rd_kafka_destroy_flags(rk, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE);
  std::vector<Message> out;
  for (auto& [p, messages] : by_partition) {
    for (auto& m : messages) out.push_back(std::move(m));
  }
  return out;
}

/// Wait until a read_uncommitted consumer sees `n` messages of partition 0 of
/// `topic` (written, not necessarily committed); false after 30 s.
bool WaitForMessages(const std::string& servers, const std::string& topic, size_t n) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    if (ReadTopic(servers, topic, 1, /*read_committed=*/false).size() >= n) return true;
  }
  return false;
}

/// (offset, metadata) that `group` committed for `topic` partitions 0..n-1.
std::vector<std::pair<int64_t, std::string>> Committed(const std::string& servers,
                                                       const std::string& group,
                                                       const std::string& topic,
                                                       int partitions) {
  char err[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  rd_kafka_conf_set(conf, "bootstrap.servers", servers.c_str(), err, sizeof(err));
  rd_kafka_conf_set(conf, "group.id", group.c_str(), err, sizeof(err));
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof(err));
  rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(partitions);
  for (int p = 0; p < partitions; ++p) rd_kafka_topic_partition_list_add(list, topic.c_str(), p);
  EXPECT_EQ(rd_kafka_committed(rk, list, 10000), RD_KAFKA_RESP_ERR_NO_ERROR);
  std::vector<std::pair<int64_t, std::string>> out;
  for (int p = 0; p < partitions; ++p) {
    const auto& e = list->elems[p];
    out.emplace_back(e.offset, std::string(static_cast<const char*>(e.metadata),
                                           e.metadata ? e.metadata_size : 0));
  }
  rd_kafka_topic_partition_list_destroy(list);
  rd_kafka_destroy_flags(rk, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE);
  return out;
}

/// Commit (non-transactionally, as a plain consumer would) `offset` with
/// `metadata` for partition 0 of `topic` in `group`.
void CommitForeign(const std::string& servers, const std::string& group,
                   const std::string& topic, int64_t offset, const std::string& metadata) {
  char err[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  rd_kafka_conf_set(conf, "bootstrap.servers", servers.c_str(), err, sizeof(err));
  rd_kafka_conf_set(conf, "group.id", group.c_str(), err, sizeof(err));
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof(err));
  rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(1);
  auto* p = rd_kafka_topic_partition_list_add(list, topic.c_str(), 0);
  p->offset = offset;
  p->metadata = strdup(metadata.c_str());
  p->metadata_size = metadata.size();
  EXPECT_EQ(rd_kafka_commit(rk, list, 0), RD_KAFKA_RESP_ERR_NO_ERROR);
  rd_kafka_topic_partition_list_destroy(list);
  rd_kafka_destroy_flags(rk, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE);
}

/// The table of these tests: key "id", and two value columns.
std::shared_ptr<arrow::Schema> TableSchema() {
  return arrow::schema({arrow::field("id", arrow::int64()), arrow::field("name", arrow::utf8()),
                        arrow::field("amount", arrow::float64())});
}

/// One change batch (ChangeSchema of TableSchema) from JSON columns.
std::shared_ptr<arrow::RecordBatch> Changes(const std::string& ids, const std::string& names,
                                            const std::string& amounts, const std::string& ops,
                                            const std::string& versions) {
  auto schema = ChangeSchema(TableSchema());
  std::vector<std::shared_ptr<arrow::Array>> columns = {
      ArrayOf(arrow::int64(), ids), ArrayOf(arrow::utf8(), names),
      ArrayOf(arrow::float64(), amounts), ArrayOf(arrow::utf8(), ops),
      ArrayOf(arrow::uint64(), versions)};
  return arrow::RecordBatch::Make(schema, columns[0]->length(), columns);
}

ChangeSet SetOf(std::vector<std::shared_ptr<arrow::RecordBatch>> batches, uint64_t from,
                uint64_t to) {
  ChangeSet set;
  set.from_version = from;
  set.to_version = to;
  for (const auto& b : batches) set.num_rows += b->num_rows();
  set.batches = std::move(batches);
  return set;
}

/// Insert 1 and 2, update 1, delete 2: versions 1..3.
ChangeSet MixedChanges() {
  return SetOf({Changes("[1, 2]", R"(["a", "b"])", "[1.5, 2]", R"(["insert", "insert"])",
                        "[1, 1]"),
                Changes("[1]", R"(["a2"])", "[3.25]", R"(["update"])", "[2]"),
                Changes("[2]", R"(["b"])", "[2]", R"(["delete"])", "[3]")},
               0, 3);
}

class KafkaSinkWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto cluster = KafkaMockCluster::Make();
    ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
    cluster_ = std::move(*cluster);
    topic_ = "sink-" + TestName();
    RILL_ASSERT_OK(cluster_->CreateTopic(topic_, /*partitions=*/1));
  }

  KafkaSinkOptions Options() const {
    KafkaSinkOptions o;
    o.topic = topic_;
    o.kafka_config = {{"bootstrap.servers", cluster_->bootstrap_servers()},
                      {"linger.ms", "1"}};
    o.transactional_id = "rill-test-" + TestName();
    o.timeout_ms = 10000;
    return o;
  }

  std::unique_ptr<SinkWriter> Opened(KafkaSinkOptions options,
                                     std::vector<std::string> primary_key = {"id"}) {
    auto writer = MakeKafkaSinkWriter(std::move(options));
    EXPECT_TRUE(writer.ok()) << writer.status().ToString();
    if (!writer.ok()) return nullptr;
    Status st = (*writer)->Open(TableSchema(), primary_key);
    EXPECT_TRUE(st.ok()) << st.ToString();
    return std::move(*writer);
  }

  std::vector<Message> Read() { return ReadTopic(cluster_->bootstrap_servers(), topic_, 1); }

  std::unique_ptr<KafkaMockCluster> cluster_;
  std::string topic_;
};

TEST_F(KafkaSinkWriterTest, RefusesBadOptionsNamingTheOption) {
  auto with = [&](auto change) {
    KafkaSinkOptions o = Options();
    change(o);
    return MakeKafkaSinkWriter(std::move(o)).status();
  };
  Status st = with([](KafkaSinkOptions& o) { o.topic.clear(); });
  EXPECT_TRUE(st.IsInvalid());
  EXPECT_NE(st.message().find("topic"), std::string::npos) << st.ToString();
  st = with([](KafkaSinkOptions& o) { o.format = "xml"; });
  EXPECT_TRUE(st.IsInvalid());
  EXPECT_NE(st.message().find("format 'xml'"), std::string::npos) << st.ToString();
  st = with([](KafkaSinkOptions& o) { o.format = "avro"; });
  EXPECT_TRUE(st.IsInvalid()) << st.ToString();
  EXPECT_NE(st.message().find("needs schema_registry_url"), std::string::npos) << st.ToString();
  st = with([](KafkaSinkOptions& o) {
    o.format = "avro";
    o.schema_registry_url = "ftp://registry";
  });
  EXPECT_NE(st.message().find("expected http(s)://"), std::string::npos) << st.ToString();
  st = with([](KafkaSinkOptions& o) { o.key_format = "bytes"; });
  EXPECT_NE(st.message().find("key_format 'bytes'"), std::string::npos) << st.ToString();
  st = with([](KafkaSinkOptions& o) {
    o.key_format = "string";
    o.key_columns = {"id", "name"};
  });
  EXPECT_NE(st.message().find("key_format=\"string\""), std::string::npos) << st.ToString();
  st = with([](KafkaSinkOptions& o) {
    o.exactly_once = true;
    o.transactional_id.clear();
  });
  EXPECT_NE(st.message().find("transactional"), std::string::npos) << st.ToString();
  st = with([](KafkaSinkOptions& o) { o.kafka_config["no.such.property"] = "1"; });
  EXPECT_NE(st.message().find("no.such.property"), std::string::npos) << st.ToString();

  // Checked against the table in Open.
  KafkaSinkOptions o = Options();
  o.key_columns = {"missing"};
  auto writer = MakeKafkaSinkWriter(o);
  RILL_ASSERT_OK(writer);
  st = (*writer)->Open(TableSchema(), {"id"});
  EXPECT_TRUE(st.IsKeyError()) << st.ToString();
  EXPECT_NE(st.message().find("'missing'"), std::string::npos) << st.ToString();
  o = Options();
  o.key_format = "string";
  writer = MakeKafkaSinkWriter(o);
  RILL_ASSERT_OK(writer);
  st = (*writer)->Open(TableSchema(), {"id", "name"});
  EXPECT_TRUE(st.IsInvalid()) << st.ToString();
}

TEST_F(KafkaSinkWriterTest, WritesThePrimaryKeyAsAJsonObjectAndTheRowAsAJsonValue) {
  auto writer = Opened(Options());
  ASSERT_NE(writer, nullptr);
  RILL_ASSERT_OK(writer->Write(
      SetOf({Changes("[1, 2]", R"(["a", "say \"hi\"\n"])", "[1.5, null]",
                     R"(["insert", "insert"])", "[1, 1]")},
            0, 1),
      SinkMode::kUpsert));
  RILL_ASSERT_OK(writer->Commit({/*version=*/1}));
  auto messages = Read();
  ASSERT_EQ(messages.size(), 2u);
  EXPECT_EQ(messages[0].key, R"({"id":1})");
  EXPECT_EQ(messages[0].value, R"({"id":1,"name":"a","amount":1.5})");
  EXPECT_EQ(messages[1].key, R"({"id":2})");
  EXPECT_EQ(messages[1].value, R"({"id":2,"name":"say \"hi\"\n","amount":null})");
}

// An application's changelog: each row goes to the partition its int32
// column names (its input partition), not the key's hash.
TEST_F(KafkaSinkWriterTest, WritesEachRowToThePartitionItsPartitionColumnNames) {
  const std::string topic = topic_ + "-by-column";
  RILL_ASSERT_OK(cluster_->CreateTopic(topic, /*partitions=*/3));
  auto table = arrow::schema({arrow::field("id", arrow::int64()),
                              arrow::field("_partition", arrow::int32())});
  auto schema = ChangeSchema(table);
  std::vector<std::shared_ptr<arrow::Array>> columns = {
      ArrayOf(arrow::int64(), "[10, 11, 12, 13]"), ArrayOf(arrow::int32(), "[2, 0, 2, 1]"),
      ArrayOf(arrow::utf8(), R"(["insert", "insert", "insert", "delete"])"),
      ArrayOf(arrow::uint64(), "[1, 1, 1, 1]")};
  auto batch = arrow::RecordBatch::Make(schema, 4, columns);
  KafkaSinkOptions o = Options();
  o.topic = topic;
  o.partition_column = "_partition";
  RILL_ASSERT_OK_AND_ASSIGN(auto writer, MakeKafkaSinkWriter(o));
  RILL_ASSERT_OK(writer->Open(table, {"id"}));
  RILL_ASSERT_OK(writer->Write(SetOf({batch}, 0, 1), SinkMode::kUpsert));
  RILL_ASSERT_OK(writer->Commit({/*version=*/1}));
  std::map<std::string, std::pair<int32_t, bool>> got;  // key -> (partition, tombstone)
  for (const auto& m : ReadTopic(cluster_->bootstrap_servers(), topic, 3)) {
    got[*m.key] = {m.partition, !m.value.has_value()};
  }
  EXPECT_EQ(got, (std::map<std::string, std::pair<int32_t, bool>>{
                     {R"({"id":10})", {2, false}},
                     {R"({"id":11})", {0, false}},
                     {R"({"id":12})", {2, false}},
                     {R"({"id":13})", {1, true}}}));
  // A table without that int32 column is refused, naming it.
  o.partition_column = "id";
  RILL_ASSERT_OK_AND_ASSIGN(auto wrong, MakeKafkaSinkWriter(o));
  RILL_ASSERT_OK(wrong->Open(table, {"id"}));
  Status st = wrong->Write(SetOf({batch}, 1, 2), SinkMode::kUpsert);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("partition column 'id'"), std::string::npos) << st.ToString();
}

TEST_F(KafkaSinkWriterTest, WritesEveryChangeWithOpAndVersionInChangelogMode) {
  auto writer = Opened(Options());
  ASSERT_NE(writer, nullptr);
  RILL_ASSERT_OK(writer->Write(MixedChanges(), SinkMode::kChangelog));
  RILL_ASSERT_OK(writer->Commit({/*version=*/3}));
  auto messages = Read();
  ASSERT_EQ(messages.size(), 4u);
  EXPECT_EQ(messages[0].value,
            R"({"id":1,"name":"a","amount":1.5,"_op":"insert","_version":1})");
  EXPECT_EQ(messages[2].value,
            R"({"id":1,"name":"a2","amount":3.25,"_op":"update","_version":2})");
  // A delete is a row too in changelog mode (its last values), not a tombstone.
  EXPECT_EQ(messages[3].key, R"({"id":2})");
  EXPECT_EQ(messages[3].value, R"({"id":2,"name":"b","amount":2,"_op":"delete","_version":3})");
}

TEST_F(KafkaSinkWriterTest, WritesADeleteAsATombstoneInUpsertMode) {
  auto writer = Opened(Options());
  ASSERT_NE(writer, nullptr);
  RILL_ASSERT_OK(writer->Write(MixedChanges(), SinkMode::kUpsert));
  RILL_ASSERT_OK(writer->Commit({/*version=*/3}));
  auto messages = Read();
  ASSERT_EQ(messages.size(), 4u);
  EXPECT_EQ(messages[2].value, R"({"id":1,"name":"a2","amount":3.25})");
  EXPECT_EQ(messages[3].key, R"({"id":2})");
  EXPECT_FALSE(messages[3].value.has_value()) << "a delete must be a tombstone (null value)";
  // The last value per key is the table: {1: a2}, 2 deleted.
  std::map<std::string, std::optional<std::string>> last;
  for (const auto& m : messages) last[*m.key] = m.value;
  EXPECT_EQ(last[R"({"id":1})"], R"({"id":1,"name":"a2","amount":3.25})");
  EXPECT_FALSE(last[R"({"id":2})"].has_value());
}

TEST_F(KafkaSinkWriterTest, ASnapshotInUpsertModeTombstonesTheKeysItNoLongerHas) {
  auto writer = Opened(Options());
  ASSERT_NE(writer, nullptr);
  RILL_ASSERT_OK(writer->Write(
      SetOf({Changes("[1, 2, 3]", R"(["a", "b", "c"])", "[1, 2, 3]",
                     R"(["insert", "insert", "insert"])", "[1, 1, 1]")},
            0, 1),
      SinkMode::kUpsert));
  RILL_ASSERT_OK(writer->Commit({/*version=*/1}));
  // The sink fell behind the log: the table is now {1: a9, 4: d} (2 and 3
  // were deleted in versions the log no longer has).
  ChangeSet snapshot = SetOf({Changes("[1, 4]", R"(["a9", "d"])", "[9, 4]",
                                      R"(["insert", "insert"])", "[7, 7]")},
                             0, 7);
  snapshot.snapshot = true;
  RILL_ASSERT_OK(writer->Write(snapshot, SinkMode::kUpsert));
  RILL_ASSERT_OK(writer->Commit({/*version=*/7}));
  std::map<std::string, std::optional<std::string>> last;
  for (const auto& m : Read()) last[*m.key] = m.value;
  ASSERT_EQ(last.size(), 4u);
  EXPECT_EQ(last[R"({"id":1})"], R"({"id":1,"name":"a9","amount":9})");
  EXPECT_FALSE(last[R"({"id":2})"].has_value()) << "a key the snapshot lacks is tombstoned";
  EXPECT_FALSE(last[R"({"id":3})"].has_value());
  EXPECT_EQ(last[R"({"id":4})"], R"({"id":4,"name":"d","amount":4})");
}

TEST_F(KafkaSinkWriterTest, WritesOneKeyColumnAsAStringWithKeyFormatString) {
  KafkaSinkOptions options = Options();
  options.key_format = "string";
  options.key_columns = {"name"};
  auto writer = Opened(options);
  ASSERT_NE(writer, nullptr);
  RILL_ASSERT_OK(writer->Write(MixedChanges(), SinkMode::kUpsert));
  options = Options();
  options.key_format = "string";  // the primary key, an int64
  auto by_id = Opened(options);
  ASSERT_NE(by_id, nullptr);
  RILL_ASSERT_OK(by_id->Write(MixedChanges(), SinkMode::kUpsert));
  RILL_ASSERT_OK(writer->Commit({/*version=*/3}));
  RILL_ASSERT_OK(by_id->Commit({/*version=*/3}));
  auto messages = Read();
  ASSERT_EQ(messages.size(), 8u);
  std::vector<std::string> keys;
  for (const auto& m : messages) keys.push_back(m.key.value_or("<none>"));
  std::vector<std::string> expected = {"a", "b", "a2", "b", "1", "2", "1", "2"};
  EXPECT_EQ(keys, expected);
}

TEST_F(KafkaSinkWriterTest, WritesOnlyInsertsWithoutKeyInAppendModeOfATableWithoutKey) {
  auto writer = Opened(Options(), /*primary_key=*/{});
  ASSERT_NE(writer, nullptr);
  RILL_ASSERT_OK(writer->Write(MixedChanges(), SinkMode::kAppend));
  RILL_ASSERT_OK(writer->Commit({/*version=*/3}));
  auto messages = Read();
  ASSERT_EQ(messages.size(), 2u);
  EXPECT_FALSE(messages[0].key.has_value());
  EXPECT_EQ(messages[1].value, R"({"id":2,"name":"b","amount":2})");
}

TEST_F(KafkaSinkWriterTest, LoadsTheProgressThatCommitStoredAfterARestart) {
  {
    auto writer = Opened(Options());
    ASSERT_NE(writer, nullptr);
    auto progress = writer->LoadProgress();
    RILL_ASSERT_OK(progress);
    EXPECT_FALSE(progress->has_value()) << "nothing committed yet";
    RILL_ASSERT_OK(writer->Write(MixedChanges(), SinkMode::kUpsert));
    RILL_ASSERT_OK(writer->Commit({/*version=*/3, /*epoch=*/7}));
    writer->Close();
  }
  auto writer = Opened(Options());  // a restart: a writer of its own
  ASSERT_NE(writer, nullptr);
  auto progress = writer->LoadProgress();
  RILL_ASSERT_OK(progress);
  ASSERT_TRUE(progress->has_value());
  EXPECT_EQ((*progress)->version, 3u);
  EXPECT_EQ((*progress)->epoch, 7u);
  RILL_ASSERT_OK(writer->Commit({/*version=*/12, /*epoch=*/8}));
  progress = writer->LoadProgress();
  RILL_ASSERT_OK(progress);
  ASSERT_TRUE(progress->has_value());
  EXPECT_EQ((*progress)->version, 12u);
  EXPECT_EQ((*progress)->epoch, 8u);
  // Stored as documented: the progress group's offset of partition 0 is the
  // version, its metadata the version and epoch.
  auto committed =
      Committed(cluster_->bootstrap_servers(), Options().transactional_id + "-progress", topic_, 1);
  EXPECT_EQ(committed[0].first, 12);
  EXPECT_EQ(committed[0].second, "rill:v=12;e=8");
}

TEST_F(KafkaSinkWriterTest, RefusesAProgressGroupThatSomethingElseCommittedTo) {
  KafkaSinkOptions options = Options();
  options.progress_group = "shared-" + TestName();
  CommitForeign(cluster_->bootstrap_servers(), options.progress_group, topic_, 42, "");
  auto writer = Opened(options);
  ASSERT_NE(writer, nullptr);
  auto progress = writer->LoadProgress();
  EXPECT_TRUE(progress.status().IsInvalid()) << progress.status().ToString();
  EXPECT_NE(progress.status().message().find(options.progress_group), std::string::npos);
}

TEST_F(KafkaSinkWriterTest, FailsTheCommitWhenADeliveryFails) {
  KafkaSinkOptions options = Options();
  options.kafka_config["message.timeout.ms"] = "300";
  auto writer = Opened(options);
  ASSERT_NE(writer, nullptr);
  RILL_ASSERT_OK(writer->Commit({/*version=*/1, /*epoch=*/1}));
  RILL_ASSERT_OK(cluster_->SetBrokerDown(1, true));
  Status st = writer->Write(MixedChanges(), SinkMode::kUpsert);
  if (st.ok()) st = writer->Commit({/*version=*/3, /*epoch=*/2});
  ASSERT_FALSE(st.ok()) << "messages that were never delivered must fail the commit";
  EXPECT_NE(st.message().find("topic '" + topic_ + "'"), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find("not delivered"), std::string::npos) << st.ToString();
  writer->Abort();
  RILL_ASSERT_OK(cluster_->SetBrokerDown(1, false));
  // The progress stayed where the last good commit put it; a retry succeeds.
  auto progress = writer->LoadProgress();
  RILL_ASSERT_OK(progress);
  ASSERT_TRUE(progress->has_value());
  EXPECT_EQ((*progress)->version, 1u);
  RILL_ASSERT_OK(writer->Open(TableSchema(), {"id"}));
  RILL_ASSERT_OK(writer->Write(MixedChanges(), SinkMode::kUpsert));
  RILL_ASSERT_OK(writer->Commit({/*version=*/3, /*epoch=*/2}));
  EXPECT_EQ(Read().size(), 4u);
}

TEST_F(KafkaSinkWriterTest, CountsTheBytesOfDeliveredMessages) {
  auto writer = Opened(Options());
  ASSERT_NE(writer, nullptr);
  EXPECT_EQ(writer->bytes_written(), 0);
  RILL_ASSERT_OK(writer->Write(MixedChanges(), SinkMode::kChangelog));
  RILL_ASSERT_OK(writer->Commit({/*version=*/3}));
  int64_t expected = 0;
  for (const auto& m : Read()) {
    expected += static_cast<int64_t>(m.key.value_or("").size() + m.value.value_or("").size());
  }
  EXPECT_GT(expected, 0);
  EXPECT_EQ(writer->bytes_written(), expected);
}

TEST_F(KafkaSinkWriterTest, AnOpenThatCannotStartTransactionsFailsNamingTheTopic) {
  KafkaSinkOptions options = Options();
  options.exactly_once = true;
  options.timeout_ms = 500;
  RILL_ASSERT_OK(cluster_->SetBrokerDown(1, true));
  auto writer = MakeKafkaSinkWriter(options);
  RILL_ASSERT_OK(writer);
  Status st = (*writer)->Open(TableSchema(), {"id"});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("topic '" + topic_ + "'"), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find("init_transactions"), std::string::npos) << st.ToString();
  EXPECT_TRUE((*writer)->Write(MixedChanges(), SinkMode::kUpsert).IsInvalid())
      << "a writer whose Open failed is not open";
  RILL_ASSERT_OK(cluster_->SetBrokerDown(1, false));
  (*writer)->Close();
}

TEST_F(KafkaSinkWriterTest, WritesNothingBeforeOpen) {
  auto writer = MakeKafkaSinkWriter(Options());
  RILL_ASSERT_OK(writer);
  EXPECT_TRUE((*writer)->Write(MixedChanges(), SinkMode::kUpsert).IsInvalid());
  EXPECT_TRUE((*writer)->Commit({}).IsInvalid());
  (*writer)->Abort();
  (*writer)->Close();
  (*writer)->Close();
}

// librdkafka 2.0.2's mock cluster runs transactions (init, begin, send
// offsets, commit, abort) but keeps no transaction state in its logs: an
// aborted transaction's messages reach read_committed consumers. This pins
// why the transaction tests below need a real broker; when a librdkafka
// upgrade makes it fail, move those tests onto the mock.
TEST_F(KafkaSinkWriterTest, MockClusterShowsAbortedTransactions) {
  KafkaSinkOptions options = Options();
  options.exactly_once = true;
  auto writer = Opened(options);
  ASSERT_NE(writer, nullptr);
  RILL_ASSERT_OK(writer->Write(MixedChanges(), SinkMode::kUpsert));
  // Abort only once the messages are on the cluster (else the abort purges
  // them before they are sent, and nothing is shown).
  ASSERT_TRUE(WaitForMessages(cluster_->bootstrap_servers(), topic_, 4));
  writer->Abort();
  RILL_ASSERT_OK(writer->Write(MixedChanges(), SinkMode::kUpsert));
  RILL_ASSERT_OK(writer->Commit({/*version=*/3, /*epoch=*/1}));
  EXPECT_EQ(Read().size(), 8u) << "the mock now hides aborted transactions";
}

// ---- Transactions: a real broker (RILL_TEST_KAFKA_BOOTSTRAP) ----------------------------

class KafkaSinkTransactionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* servers = std::getenv("RILL_TEST_KAFKA_BOOTSTRAP");
    if (!servers || !*servers) {
      GTEST_SKIP() << "RILL_TEST_KAFKA_BOOTSTRAP is not set (tests/python/test_kafka_sink.py "
                      "runs these on the suite's broker)";
    }
    servers_ = servers;
    // Unique per run: the broker outlives a test binary.
    run_ = std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
    topic_ = "sink-txn-" + TestName() + "-" + run_;
    CreateTopic();
  }

  KafkaSinkOptions Options() const {
    KafkaSinkOptions o;
    o.topic = topic_;
    o.kafka_config = {{"bootstrap.servers", servers_}, {"linger.ms", "1"}};
    o.exactly_once = true;
    o.transactional_id = "rill-txn-" + TestName() + "-" + run_;
    o.timeout_ms = 20000;
    return o;
  }

  std::unique_ptr<SinkWriter> Opened(const KafkaSinkOptions& options) {
    auto writer = MakeKafkaSinkWriter(options);
    EXPECT_TRUE(writer.ok()) << writer.status().ToString();
    if (!writer.ok()) return nullptr;
    Status st = (*writer)->Open(TableSchema(), {"id"});
    EXPECT_TRUE(st.ok()) << st.ToString();
    return st.ok() ? std::move(*writer) : nullptr;
  }

  /// Create the topic (the suite's broker does not auto-create topics).
  void CreateTopic() {
    char err[512];
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "bootstrap.servers", servers_.c_str(), err, sizeof(err));
    rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
    ASSERT_NE(rk, nullptr) << err;
    rd_kafka_NewTopic_t* topic = rd_kafka_NewTopic_new(topic_.c_str(), 1, 1, err, sizeof(err));
    rd_kafka_queue_t* queue = rd_kafka_queue_new(rk);
    rd_kafka_CreateTopics(rk, &topic, 1, nullptr, queue);
    rd_kafka_event_t* event = rd_kafka_queue_poll(queue, 30000);
    ASSERT_NE(event, nullptr) << "CreateTopics timed out";
    size_t n = 0;
    const rd_kafka_topic_result_t** results =
        rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(event), &n);
    ASSERT_EQ(n, 1u);
    EXPECT_EQ(rd_kafka_topic_result_error(results[0]), RD_KAFKA_RESP_ERR_NO_ERROR)
        << rd_kafka_topic_result_error_string(results[0]);
    rd_kafka_event_destroy(event);
    rd_kafka_queue_destroy(queue);
    rd_kafka_NewTopic_destroy(topic);
    rd_kafka_destroy(rk);
  }

  std::string servers_;
  std::string run_;
  std::string topic_;
};

TEST_F(KafkaSinkTransactionTest, CommitsChangesWithTheProgressAndTheSourceOffsets) {
  auto writer = Opened(Options());
  ASSERT_NE(writer, nullptr);
  RILL_ASSERT_OK(writer->Write(MixedChanges(), SinkMode::kUpsert));
  CommitPoint point{/*version=*/3, /*epoch=*/5};
  point.source_group = "source-" + topic_;
  point.source_offsets[topic_] = {{0, 17}};
  RILL_ASSERT_OK(writer->Commit(point));
  auto messages = ReadTopic(servers_, topic_, 1);
  ASSERT_EQ(messages.size(), 4u);
  EXPECT_FALSE(messages[3].value.has_value());
  auto progress = writer->LoadProgress();
  RILL_ASSERT_OK(progress);
  ASSERT_TRUE(progress->has_value());
  EXPECT_EQ((*progress)->version, 3u);
  EXPECT_EQ((*progress)->epoch, 5u);
  EXPECT_EQ(Committed(servers_, point.source_group, topic_, 1)[0].first, 17);
  // A commit without new rows still moves the progress.
  RILL_ASSERT_OK(writer->Commit({/*version=*/4, /*epoch=*/6}));
  progress = writer->LoadProgress();
  RILL_ASSERT_OK(progress);
  EXPECT_EQ((*progress)->epoch, 6u);
}

TEST_F(KafkaSinkTransactionTest, AnAbortedTransactionLeavesNothingVisibleToReadCommitted) {
  auto writer = Opened(Options());
  ASSERT_NE(writer, nullptr);
  RILL_ASSERT_OK(writer->Commit({/*version=*/0, /*epoch=*/1}));
  RILL_ASSERT_OK(writer->Write(MixedChanges(), SinkMode::kUpsert));
  // On the broker, inside the open transaction (an abort before sending would
  // only purge them).
  ASSERT_TRUE(WaitForMessages(servers_, topic_, 4));
  writer->Abort();
  RILL_ASSERT_OK(writer->Write(
      SetOf({Changes("[9]", R"(["z"])", "[9]", R"(["insert"])", "[4]")}, 3, 4),
      SinkMode::kUpsert));
  RILL_ASSERT_OK(writer->Commit({/*version=*/4, /*epoch=*/2}));
  auto messages = ReadTopic(servers_, topic_, 1);
  ASSERT_EQ(messages.size(), 1u) << "the aborted transaction's 4 messages must stay invisible";
  EXPECT_EQ(messages[0].key, R"({"id":9})");
  // A read_uncommitted consumer does see them: the test can tell.
  EXPECT_EQ(ReadTopic(servers_, topic_, 1, /*read_committed=*/false).size(), 5u);
  auto progress = writer->LoadProgress();
  RILL_ASSERT_OK(progress);
  EXPECT_EQ((*progress)->version, 4u);
}

TEST_F(KafkaSinkTransactionTest, AWriterThatDiesMidTransactionIsFencedAndLeavesNothing) {
  auto zombie = Opened(Options());
  ASSERT_NE(zombie, nullptr);
  RILL_ASSERT_OK(zombie->Write(MixedChanges(), SinkMode::kUpsert));
  RILL_ASSERT_OK(zombie->Commit({/*version=*/3, /*epoch=*/1}));
  // Mid-transaction: written, never committed (the engine "crashes" here).
  RILL_ASSERT_OK(zombie->Write(
      SetOf({Changes("[5]", R"(["e"])", "[5]", R"(["insert"])", "[4]")}, 3, 4),
      SinkMode::kUpsert));
  ASSERT_TRUE(WaitForMessages(servers_, topic_, 5));  // on the broker, uncommitted
  // The restarted engine: same transactional.id. Its Open aborts the open
  // transaction; its progress is the last commit.
  auto restarted = Opened(Options());
  ASSERT_NE(restarted, nullptr);
  auto progress = restarted->LoadProgress();
  RILL_ASSERT_OK(progress);
  ASSERT_TRUE(progress->has_value());
  EXPECT_EQ((*progress)->version, 3u);
  EXPECT_EQ((*progress)->epoch, 1u);
  EXPECT_EQ(ReadTopic(servers_, topic_, 1).size(), 4u) << "the uncommitted message is visible";
  // The zombie cannot commit, says why, and stays closed.
  Status st = zombie->Commit({/*version=*/4, /*epoch=*/2});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("topic '" + topic_ + "'"), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find("fenced"), std::string::npos) << st.ToString();
  zombie->Abort();
  st = zombie->Open(TableSchema(), {"id"});
  EXPECT_FALSE(st.ok()) << "a fenced writer must not fence its successor back";
  EXPECT_NE(st.message().find("fenced"), std::string::npos) << st.ToString();
  // The successor writes on.
  RILL_ASSERT_OK(restarted->Write(
      SetOf({Changes("[5]", R"(["e"])", "[5]", R"(["insert"])", "[4]")}, 3, 4),
      SinkMode::kUpsert));
  RILL_ASSERT_OK(restarted->Commit({/*version=*/4, /*epoch=*/2}));
  EXPECT_EQ(ReadTopic(servers_, topic_, 1).size(), 5u);
}

// The input's group has a member (a running KafkaConnector joined to it): the
// sink's memberless (generation -1) transactional offset commit into it is
// still taken (the broker accepts it as from a client that sends no member),
// so the connector's own group can receive the input offsets.
TEST_F(KafkaSinkTransactionTest, CommitsSourceOffsetsIntoAGroupThatHasAMember) {
  const std::string group = "joined-" + topic_;
  char err[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  rd_kafka_conf_set(conf, "bootstrap.servers", servers_.c_str(), err, sizeof(err));
  rd_kafka_conf_set(conf, "group.id", group.c_str(), err, sizeof(err));
  rd_kafka_conf_set(conf, "enable.auto.commit", "false", err, sizeof(err));
  rd_kafka_t* member = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof(err));
  ASSERT_NE(member, nullptr) << err;
  rd_kafka_poll_set_consumer(member);
  rd_kafka_topic_partition_list_t* topics = rd_kafka_topic_partition_list_new(1);
  rd_kafka_topic_partition_list_add(topics, topic_.c_str(), RD_KAFKA_PARTITION_UA);
  rd_kafka_subscribe(member, topics);
  rd_kafka_topic_partition_list_destroy(topics);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  bool joined = false;
  while (!joined && std::chrono::steady_clock::now() < deadline) {
    if (rd_kafka_message_t* m = rd_kafka_consumer_poll(member, 100)) rd_kafka_message_destroy(m);
    rd_kafka_topic_partition_list_t* assigned = nullptr;
    if (rd_kafka_assignment(member, &assigned) == RD_KAFKA_RESP_ERR_NO_ERROR && assigned) {
      joined = assigned->cnt > 0;
      rd_kafka_topic_partition_list_destroy(assigned);
    }
  }
  ASSERT_TRUE(joined) << "the member did not join its group";

  auto writer = Opened(Options());
  ASSERT_NE(writer, nullptr);
  CommitPoint point{/*version=*/3, /*epoch=*/1};
  point.source_group = group;
  point.source_offsets[topic_] = {{0, 17}};
  RILL_ASSERT_OK(writer->Write(MixedChanges(), SinkMode::kUpsert));
  RILL_ASSERT_OK(writer->Commit(point));
  EXPECT_EQ(ReadTopic(servers_, topic_, 1).size(), 4u);
  EXPECT_EQ(Committed(servers_, group, topic_, 1)[0].first, 17);
  rd_kafka_consumer_close(member);
  rd_kafka_destroy(member);
}

}  // namespace
}  // namespace rill
