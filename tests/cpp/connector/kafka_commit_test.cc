// KafkaConnector's commits and losses (issue 23) through librdkafka's mock
// cluster: group offsets are committed only for rows an engine tick applied
// (or a complete checkpoint holds), a stop without a drain loses nothing, an
// undecodable message is a reject with its offset and bytes, and a failed
// metadata step is an error that loses no row.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <thread>

#include <arrow/api.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "rill/connector/kafka_connector.h"
#include "rill/engine/checkpoint.h"
#include "rill/engine/engine.h"
#include "table/test_util.h"

namespace rill {
namespace {

constexpr int64_t kNoOffset = -1001;  // RD_KAFKA_OFFSET_INVALID: nothing committed

std::string TestName() {
  return ::testing::UnitTest::GetInstance()->current_test_info()->name();
}

KafkaOptions Options(const KafkaMockCluster& cluster, const std::string& topic,
                     const std::string& group) {
  KafkaOptions o;
  o.topics = {topic};
  o.config = {{"bootstrap.servers", cluster.bootstrap_servers()},
              {"topic.metadata.refresh.interval.ms", "500"},
              {"session.timeout.ms", "6000"},
              {"heartbeat.interval.ms", "500"},
              {"group.id", group}};
  o.start = KafkaStart::kCommitted;
  o.decode.schema = arrow::schema({arrow::field("id", arrow::int64())});
  o.poll_timeout_ms = 20;
  o.commit_interval_ms = 0;
  return o;
}

std::string Row(int64_t id) { return "{\"id\":" + std::to_string(id) + "}"; }

/// Wait until `done()` or 30 s passed; return done().
template <typename F>
bool WaitFor(F done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!done() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return done();
}

int64_t Buffered(const KafkaConnector& c) {
  int64_t total = 0;
  for (const auto& [tp, pos] : c.positions()) total += pos;
  return total;
}

/// Committed messages over all partitions (kNoOffset counts as none).
int64_t Sum(const std::vector<int64_t>& committed) {
  int64_t total = 0;
  for (int64_t offset : committed) total += std::max<int64_t>(0, offset);
  return total;
}

std::vector<int64_t> Ids(Engine& engine, const std::string& table = "t") {
  auto result = engine.Query("SELECT id FROM \"" + table + "\" ORDER BY id");
  std::vector<int64_t> ids;
  if (!result.ok()) return ids;
  for (const auto& chunk : (*result)->GetColumnByName("id")->chunks()) {
    auto a = std::static_pointer_cast<arrow::Int64Array>(chunk);
    for (int64_t i = 0; i < a->length(); ++i) ids.push_back(a->Value(i));
  }
  return ids;
}

std::vector<int64_t> Range(int64_t a, int64_t b) {
  std::vector<int64_t> v;
  for (int64_t i = a; i < b; ++i) v.push_back(i);
  return v;
}

std::unique_ptr<Engine> AppendEngine() {
  auto engine = Engine::Make().ValueOrDie();
  TableOptions t;
  t.mode = TableMode::kAppend;
  t.retention = RetentionPolicy{};
  t.retention->max_rows = 1000000;
  EXPECT_TRUE(
      engine->RegisterTable("t", arrow::schema({arrow::field("id", arrow::int64())}), t).ok());
  return engine;
}

/// Step `engine` until table t has `n` rows (or 30 s passed).
void StepUntilRows(Engine& engine, size_t n) {
  WaitFor([&] {
    EXPECT_TRUE(engine.Step().ok());
    return Ids(engine).size() >= n;
  });
}

TEST(KafkaCommits, BufferedRowsAreNotCommittedUntilTheEngineAppliedThem) {
  RILL_ASSERT_OK_AND_ASSIGN(auto cluster, KafkaMockCluster::Make(1));
  RILL_ASSERT_OK(cluster->CreateTopic("a", 1));
  std::vector<std::string> values;
  for (int i = 0; i < 10; ++i) values.push_back(Row(i));
  RILL_ASSERT_OK(cluster->ProduceMany("a", values));
  RILL_ASSERT_OK_AND_ASSIGN(auto c, KafkaConnector::Make("t", Options(*cluster, "a", "ga")));
  RILL_ASSERT_OK(c->Start());
  ASSERT_TRUE(WaitFor([&] { return Buffered(*c) == 10; }));
  c->Stop();  // commits synchronously what it may commit: nothing was applied
  RILL_ASSERT_OK_AND_ASSIGN(auto committed, cluster->CommittedOffsets("ga", "a", 1));
  EXPECT_EQ(committed, std::vector<int64_t>{kNoOffset});
  // The tick takes the rows and says it applied them: exactly those are committed.
  RILL_ASSERT_OK_AND_ASSIGN(auto polled, c->Poll());
  int64_t rows = 0;
  for (const auto& b : polled) rows += b->num_rows();
  EXPECT_EQ(rows, 10);
  c->CommitApplied();  // stopped: synchronous
  RILL_ASSERT_OK_AND_ASSIGN(committed, cluster->CommittedOffsets("ga", "a", 1));
  EXPECT_EQ(committed, std::vector<int64_t>{10});
}

TEST(KafkaCommits, AnEngineStoppedWithoutADrainLosesNothingOnRestartFromCommitted) {
  RILL_ASSERT_OK_AND_ASSIGN(auto cluster, KafkaMockCluster::Make(1));
  RILL_ASSERT_OK(cluster->CreateTopic("b", 2));
  const KafkaOptions options = Options(*cluster, "b", "gb");
  std::vector<std::string> values;
  for (int i = 0; i < 20; ++i) values.push_back(Row(i));
  RILL_ASSERT_OK(cluster->ProduceMany("b", values));
  {
    auto first = AppendEngine();
    RILL_ASSERT_OK_AND_ASSIGN(auto c, KafkaConnector::Make("t", options));
    RILL_ASSERT_OK(first->AddConnector(c));
    StepUntilRows(*first, 20);
    ASSERT_EQ(Ids(*first), Range(0, 20));
    // Applied: committed (asynchronously) up to what the ticks took.
    ASSERT_TRUE(WaitFor([&] {
      auto committed = cluster->CommittedOffsets("gb", "b", 2).ValueOr({});
      return Sum(committed) == 20;
    }));
    // Buffered, never applied: the engine goes away without another tick.
    std::vector<std::string> more;
    for (int i = 20; i < 30; ++i) more.push_back(Row(i));
    RILL_ASSERT_OK(cluster->ProduceMany("b", more));
    ASSERT_TRUE(WaitFor([&] { return Buffered(*c) == 30; }));
  }
  RILL_ASSERT_OK_AND_ASSIGN(auto committed, cluster->CommittedOffsets("gb", "b", 2));
  EXPECT_EQ(Sum(committed), 20);  // not past the applied rows
  auto second = AppendEngine();
  RILL_ASSERT_OK_AND_ASSIGN(auto c, KafkaConnector::Make("t", options));
  RILL_ASSERT_OK(second->AddConnector(c));
  StepUntilRows(*second, 10);
  EXPECT_EQ(Ids(*second), Range(20, 30));  // none missing, none read twice
  ASSERT_TRUE(WaitFor([&] {
    auto now = cluster->CommittedOffsets("gb", "b", 2).ValueOr({});
    return Sum(now) == 30;
  }));
}

TEST(KafkaCommits, AnUndecodableMessageIsRejectedWithItsOffsetAndBytesAndNeighboursAreKept) {
  RILL_ASSERT_OK_AND_ASSIGN(auto cluster, KafkaMockCluster::Make(1));
  RILL_ASSERT_OK(cluster->CreateTopic("c", 1));
  // Produced before the consumer starts, so they are decoded as one batch.
  RILL_ASSERT_OK(cluster->Produce("c", 0, "[{\"id\":1},{\"id\":2}]"));  // a JSON array
  RILL_ASSERT_OK(cluster->Produce("c", 0, Row(3)));
  RILL_ASSERT_OK(cluster->Produce("c", 0, "{\"id\":\"not a number\"}"));
  RILL_ASSERT_OK(cluster->Produce("c", 0, "[{\"id\":4}]"));
  RILL_ASSERT_OK(cluster->Produce("c", 0, Row(5)));
  auto engine = AppendEngine();
  RILL_ASSERT_OK_AND_ASSIGN(auto c, KafkaConnector::Make("t", Options(*cluster, "c", "gc")));
  RILL_ASSERT_OK(engine->AddConnector(c));
  StepUntilRows(*engine, 5);
  ASSERT_TRUE(WaitFor([&] {
    EXPECT_TRUE(engine->Step().ok());
    return Buffered(*c) == 5;
  }));
  RILL_ASSERT_OK(engine->Step());
  EXPECT_EQ(Ids(*engine), (std::vector<int64_t>{1, 2, 3, 4, 5}));
  RILL_ASSERT_OK_AND_ASSIGN(
      auto rejects, engine->Query("SELECT position, raw FROM rill_rejects WHERE source = '" +
                                  c->name() + "'"));
  ASSERT_EQ(rejects->num_rows(), 1);
  auto position = std::static_pointer_cast<arrow::StringArray>(
      rejects->GetColumnByName("position")->chunk(0));
  auto raw = std::static_pointer_cast<arrow::BinaryArray>(rejects->GetColumnByName("raw")->chunk(0));
  EXPECT_EQ(position->GetView(0), "topic c, partition 0, offset 2");
  EXPECT_EQ(raw->GetView(0), "{\"id\":\"not a number\"}");
  // The reject counts as applied: the group's offset passes it.
  EXPECT_TRUE(WaitFor([&] {
    return cluster->CommittedOffsets("gc", "c", 1).ValueOr({}) == std::vector<int64_t>{5};
  }));
}

/// Fails the next `failures` allocations, then allocates from Arrow's default pool.
class FailingPool : public arrow::MemoryPool {
 public:
  explicit FailingPool(int failures) : failures_(failures) {}
  arrow::Status Allocate(int64_t size, int64_t alignment, uint8_t** out) override {
    if (failures_.fetch_sub(1) > 0) return arrow::Status::OutOfMemory("test pool: no memory");
    return base_->Allocate(size, alignment, out);
  }
  arrow::Status Reallocate(int64_t old_size, int64_t new_size, int64_t alignment,
                           uint8_t** ptr) override {
    return base_->Reallocate(old_size, new_size, alignment, ptr);
  }
  void Free(uint8_t* buffer, int64_t size, int64_t alignment) override {
    base_->Free(buffer, size, alignment);
  }
  int64_t bytes_allocated() const override { return base_->bytes_allocated(); }
  int64_t total_bytes_allocated() const override { return base_->total_bytes_allocated(); }
  int64_t num_allocations() const override { return base_->num_allocations(); }
  std::string backend_name() const override { return "failing"; }

 private:
  std::atomic<int> failures_;
  arrow::MemoryPool* base_ = arrow::default_memory_pool();
};

TEST(KafkaCommits, AFailedMetadataStepIsCountedAsAnErrorAndLosesNoRow) {
  RILL_ASSERT_OK_AND_ASSIGN(auto cluster, KafkaMockCluster::Make(1));
  RILL_ASSERT_OK(cluster->CreateTopic("d", 1));
  for (int i = 0; i < 3; ++i) RILL_ASSERT_OK(cluster->Produce("d", 0, Row(i)));
  FailingPool pool(/*failures=*/1);
  auto o = Options(*cluster, "d", "gd");
  o.metadata_columns = true;
  o.pool = &pool;
  RILL_ASSERT_OK_AND_ASSIGN(auto c, KafkaConnector::Make("t", o));
  RILL_ASSERT_OK(c->Start());
  std::vector<int64_t> ids;
  std::vector<Status> errors;
  WaitFor([&] {
    auto polled = c->Poll();
    if (!polled.ok()) {
      errors.push_back(polled.status());
      return false;
    }
    for (const auto& b : *polled) {
      auto id = std::static_pointer_cast<arrow::Int64Array>(b->GetColumnByName("id"));
      auto offset = std::static_pointer_cast<arrow::Int64Array>(b->GetColumnByName("_offset"));
      for (int64_t r = 0; r < b->num_rows(); ++r) {
        ids.push_back(id->Value(r));
        EXPECT_EQ(offset->Value(r), id->Value(r));
      }
    }
    return ids.size() >= 3;
  });
  c->Stop();
  EXPECT_EQ(ids, Range(0, 3));  // each row once, none lost
  ASSERT_EQ(errors.size(), 1u);  // the engine records it as a failed read
  EXPECT_TRUE(errors[0].IsIOError());
  EXPECT_NE(errors[0].message().find("metadata columns"), std::string::npos) << errors[0];
  EXPECT_EQ(c->stats().errors, 1);
  EXPECT_EQ(c->positions()[KafkaConnector::TopicPartition("d", 0)], 3);
}

TEST(KafkaCommits, WithACheckpointerOffsetsAreCommittedOnlyToACompleteCheckpoint) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() /
                       ("rill_kafka_ckpt_" + std::to_string(::getpid()) + "_" + TestName());
  fs::remove_all(dir);
  RILL_ASSERT_OK_AND_ASSIGN(auto cluster, KafkaMockCluster::Make(1));
  RILL_ASSERT_OK(cluster->CreateTopic("e", 1));
  std::vector<std::string> values;
  for (int i = 0; i < 10; ++i) values.push_back(Row(i));
  RILL_ASSERT_OK(cluster->ProduceMany("e", values));
  {
    auto engine = AppendEngine();
    CheckpointOptions co;
    co.dir = dir.string();
    co.sync = false;
    RILL_ASSERT_OK_AND_ASSIGN(auto checkpointer, Checkpointer::Make(engine.get(), co));
    RILL_ASSERT_OK_AND_ASSIGN(auto c, KafkaConnector::Make("t", Options(*cluster, "e", "ge")));
    RILL_ASSERT_OK(engine->AddConnector(c));
    StepUntilRows(*engine, 10);
    RILL_ASSERT_OK(checkpointer->Save());  // holds all 10
    ASSERT_TRUE(WaitFor([&] {
      return cluster->CommittedOffsets("ge", "e", 1).ValueOr({}) == std::vector<int64_t>{10};
    }));
    values.clear();
    for (int i = 10; i < 15; ++i) values.push_back(Row(i));
    RILL_ASSERT_OK(cluster->ProduceMany("e", values));
    StepUntilRows(*engine, 15);  // applied, but no checkpoint holds them
    EXPECT_EQ(c->commit_target(), (std::map<KafkaConnector::TopicPartition, int64_t>{
                                       {{"e", 0}, 10}}));
  }  // checkpointer, then engine: the connector's last commit (synchronous) is the checkpoint's
  EXPECT_EQ(cluster->CommittedOffsets("ge", "e", 1).ValueOr({}), std::vector<int64_t>{10});
  fs::remove_all(dir);
}

}  // namespace
}  // namespace rill
