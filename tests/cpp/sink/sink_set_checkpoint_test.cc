// The exactly-once protocol of sink/sink.h with a Checkpointer: commits only
// after complete checkpoints, one per checkpoint; a restore writes exactly the
// changes the target lacks.
#include <unistd.h>

#include <filesystem>

#include <gtest/gtest.h>

#include <arrow/api.h>

#include "engine/engine_test_util.h"
#include "rill/connector/kafka_connector.h"
#include "rill/engine/checkpoint.h"
#include "rill/engine/engine.h"
#include "rill/sink/sink_set.h"
#include "sink/sink_test_util.h"

namespace rill {
namespace {

namespace fs = std::filesystem;
using test::Batch;
using test::RecordingWriter;
using test::Row;
using test::Target;
using test::WaitFor;

class SinkCheckpointTest : public ::testing::Test {
 public:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("rill_sink_ckpt_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    target_ = std::make_shared<Target>();
  }
  void TearDown() override { fs::remove_all(dir_); }

  struct Node {
    std::unique_ptr<Engine> engine;
    std::unique_ptr<Checkpointer> checkpointer;
    std::shared_ptr<LiveTable> table;
    std::shared_ptr<Sink> sink;
    ~Node() {
      checkpointer.reset();  // before the engine
      engine.reset();
    }
  };

  /// An engine with table t, a checkpointer over dir_ and sink s writing to `target`.
  std::unique_ptr<Node> Start(std::shared_ptr<Target> target, bool restore,
                              SinkMode mode = SinkMode::kChangelog) {
    auto node = std::make_unique<Node>();
    node->engine = Engine::Make().ValueOrDie();
    TableOptions keyed;
    keyed.primary_key = {"id"};
    node->table = node->engine->RegisterTable("t", test::KeyedSchema(), keyed).ValueOrDie();
    CheckpointOptions co;
    co.dir = dir_.string();
    co.sync = false;
    co.interval_seconds = 3600;  // checkpoints by Save() only
    node->checkpointer = Checkpointer::Make(node->engine.get(), co).ValueOrDie();
    SinkOptions so;
    so.name = "s";
    so.table = "t";
    so.mode = mode;
    so.interval_seconds = 0.01;
    so.retry_initial_seconds = 0.005;
    so.retry_max_seconds = 0.02;
    node->sink = SinkSet::For(node->engine.get())
                     .Add(so, std::make_unique<RecordingWriter>(std::move(target)))
                     .ValueOrDie();
    if (restore) {
      EXPECT_TRUE(node->checkpointer->Restore().ValueOrDie().has_value());
    }
    return node;
  }

  fs::path dir_;
  std::shared_ptr<Target> target_;
};

TEST_F(SinkCheckpointTest, CommitsOnlyWhatACompleteCheckpointHoldsOncePerCheckpoint) {
  auto node = Start(target_, /*restore=*/false);
  ASSERT_TRUE(node->table->Write(Batch({{1, 10}, {2, 20}})).ok());
  ASSERT_TRUE(node->table->Write(Batch({{1, 11}})).ok());
  ASSERT_TRUE(node->sink->Flush(10).ok());  // no checkpoint yet: nothing to commit
  EXPECT_EQ(target_->NumCommits(), 0u);
  auto first = node->checkpointer->Save().ValueOrDie();
  ASSERT_TRUE(WaitFor([&] { return target_->NumCommits() == 1; }));
  EXPECT_EQ(target_->commits[0].epoch, first.id);
  EXPECT_EQ(target_->commits[0].version, 2u);
  EXPECT_EQ(target_->Rows().size(), 3u);
  ASSERT_TRUE(node->table->Write(Batch({{3, 30}})).ok());
  ASSERT_TRUE(node->sink->Flush(10).ok());
  EXPECT_EQ(target_->NumCommits(), 1u);  // version 3 is in no checkpoint yet
  auto second = node->checkpointer->Save().ValueOrDie();
  ASSERT_TRUE(node->sink->Flush(10).ok());
  ASSERT_EQ(target_->NumCommits(), 2u);
  EXPECT_EQ(target_->commits[1].epoch, second.id);
  EXPECT_EQ(target_->commits[1].version, 3u);
  EXPECT_TRUE(fs::exists(fs::path(second.path) / "sinks" / "s.arrow"));
}

TEST_F(SinkCheckpointTest, AFailingTargetHoldsTheConnectorsBackUntilTheEpochIsCommitted) {
  auto node = Start(target_, /*restore=*/false);
  SinkSet::For(node->engine.get()).Remove("s");
  SinkOptions so;
  so.name = "s";
  so.table = "t";
  so.max_backlog_rows = 2;
  so.retry_initial_seconds = 0.005;
  so.retry_max_seconds = 0.02;
  auto sink = SinkSet::For(node->engine.get())
                  .Add(so, std::make_unique<RecordingWriter>(target_))
                  .ValueOrDie();
  target_->fail_commits = true;
  ASSERT_TRUE(node->table->Write(Batch({{1, 10}, {2, 20}, {3, 30}})).ok());
  (void)node->checkpointer->Save().ValueOrDie();
  ASSERT_TRUE(WaitFor([&] { return node->engine->TableBackpressured("t"); }));
  target_->fail_commits = false;
  ASSERT_TRUE(WaitFor([&] { return !node->engine->TableBackpressured("t"); }));
  EXPECT_EQ(target_->NumCommits(), 1u);
  EXPECT_EQ(target_->Rows().size(), 3u);
}

/// Engine A commits checkpoint 1, then "crashes" after checkpoint 2 is
/// complete but before the sink's commit of it.
void RunUntilCrash(SinkCheckpointTest* test, const std::function<std::unique_ptr<
                       SinkCheckpointTest::Node>()>& start,
                   const std::shared_ptr<Target>& target) {
  auto a = start();
  ASSERT_TRUE(a->table->Write(Batch({{1, 10}, {2, 20}})).ok());
  ASSERT_TRUE(a->table->Write(Batch({{1, 11}})).ok());
  ASSERT_TRUE(a->table->Write(Batch({{3, 30}})).ok());
  (void)a->checkpointer->Save().ValueOrDie();
  ASSERT_TRUE(a->sink->Flush(10).ok());
  ASSERT_EQ(target->NumCommits(), 1u);
  ASSERT_TRUE(a->table->Write(Batch({{2, 21}, {4, 40}})).ok());
  ASSERT_TRUE(a->table->Write(Batch({{5, 50}})).ok());
  target->fail_commits = true;  // the commit of checkpoint 2 never happens
  (void)a->checkpointer->Save().ValueOrDie();
  ASSERT_TRUE(WaitFor([&] { return a->sink->stats().errors > 0; }));
  a.reset();  // the crash: the engine goes without the final commit
  target->fail_commits = false;
  ASSERT_EQ(target->NumCommits(), 1u);
  ASSERT_EQ(target->progress->version, 3u);
  (void)test;
}

TEST_F(SinkCheckpointTest, RestoreWritesExactlyTheChangesTheTargetHasNot) {
  RunUntilCrash(this, [&] { return Start(target_, false); }, target_);
  auto b = Start(target_, /*restore=*/true);
  ASSERT_TRUE(WaitFor([&] { return target_->NumCommits() == 2; }));
  std::vector<Row> expected = {{"insert", 1, 10, 1}, {"insert", 2, 20, 1},
                               {"update", 1, 11, 2}, {"insert", 3, 30, 3},
                               {"update", 2, 21, 4}, {"insert", 4, 40, 4},
                               {"insert", 5, 50, 5}};
  EXPECT_EQ(target_->Rows(), expected);  // every change once
  EXPECT_EQ(target_->commits[1].epoch, 2u);
  EXPECT_EQ(target_->commits[1].version, 5u);
  EXPECT_EQ(b->sink->stats().snapshots, 0);
  // Versions go on after the checkpoint's in the target's numbering.
  ASSERT_TRUE(b->table->Write(Batch({{6, 60}})).ok());
  auto third = b->checkpointer->Save().ValueOrDie();
  ASSERT_TRUE(WaitFor([&] { return target_->NumCommits() == 3; }));
  EXPECT_EQ(target_->commits[2].epoch, third.id);
  EXPECT_EQ(target_->commits[2].version, 6u);
  EXPECT_EQ(target_->Rows().back(), (Row{"insert", 6, 60, 6}));
}

// The restored engine keeps ticking and checkpointing before its sink has read
// its target (Kafka: seconds): that checkpoint must hold the restored one's
// numbering and uncommitted rows, or a second crash loses them (and numbers
// the target's versions anew).
TEST_F(SinkCheckpointTest, ACheckpointTakenBeforeTheRestoredSinkReadItsTargetSurvivesASecondCrash) {
  RunUntilCrash(this, [&] { return Start(target_, false); }, target_);
  target_->fail_progress = true;  // engine B's sink cannot read its target yet
  {
    auto b = Start(target_, /*restore=*/true);
    ASSERT_TRUE(b->table->Write(Batch({{6, 60}})).ok());
    (void)b->checkpointer->Save().ValueOrDie();
    ASSERT_TRUE(WaitFor([&] { return b->sink->stats().errors > 0; }));
  }  // the second crash, before B's sink committed anything
  ASSERT_EQ(target_->NumCommits(), 1u);
  target_->fail_progress = false;
  auto c = Start(target_, /*restore=*/true);
  ASSERT_TRUE(WaitFor([&] { return target_->NumCommits() == 2; }));
  std::vector<Row> expected = {{"insert", 1, 10, 1}, {"insert", 2, 20, 1},
                               {"update", 1, 11, 2}, {"insert", 3, 30, 3},
                               {"update", 2, 21, 4}, {"insert", 4, 40, 4},
                               {"insert", 5, 50, 5}, {"insert", 6, 60, 6}};
  EXPECT_EQ(target_->Rows(), expected);  // every change once, numbered on
  EXPECT_EQ(target_->commits[1].epoch, 3u);
  EXPECT_EQ(target_->commits[1].version, 6u);
  EXPECT_EQ(c->sink->stats().snapshots, 0);
  EXPECT_EQ(c->sink->stats().committed_version, 6u);
}

// The same, without the second crash: once the target answers, the sink
// commits the newest checkpoint (not the restored one's older epoch).
TEST_F(SinkCheckpointTest, ARestoredSinkThatReadsItsTargetLateCommitsTheNewestCheckpoint) {
  RunUntilCrash(this, [&] { return Start(target_, false); }, target_);
  target_->fail_progress = true;
  auto b = Start(target_, /*restore=*/true);
  ASSERT_TRUE(b->table->Write(Batch({{6, 60}})).ok());
  auto third = b->checkpointer->Save().ValueOrDie();
  ASSERT_TRUE(WaitFor([&] { return b->sink->stats().errors > 0; }));
  target_->fail_progress = false;
  ASSERT_TRUE(b->sink->Flush(10).ok());
  ASSERT_EQ(target_->NumCommits(), 2u);
  EXPECT_EQ(target_->commits[1].epoch, third.id);
  EXPECT_EQ(target_->commits[1].version, 6u);
  EXPECT_EQ(target_->Rows().size(), 8u);
  EXPECT_EQ(target_->Rows().back(), (Row{"insert", 6, 60, 6}));
  EXPECT_EQ(b->sink->stats().snapshots, 0);
}

TEST_F(SinkCheckpointTest, RestoreWritesNothingWhenTheTargetCommittedTheCheckpoint) {
  RunUntilCrash(this, [&] { return Start(target_, false); }, target_);
  target_->progress = SinkProgress{5, 2};  // as if the commit had happened after all
  auto b = Start(target_, /*restore=*/true);
  ASSERT_TRUE(b->sink->Flush(10).ok());
  EXPECT_EQ(target_->NumCommits(), 1u);
  EXPECT_EQ(target_->Rows().size(), 4u);
}

TEST_F(SinkCheckpointTest, ATargetBehindTheCheckpointsChangesGetsASnapshotCounted) {
  RunUntilCrash(this, [&] { return Start(target_, false); }, target_);
  auto behind = std::make_shared<Target>();  // holds nothing of this sink
  behind->progress = SinkProgress{1, 0};     // older than the section's base (3)
  auto b = Start(behind, /*restore=*/true, SinkMode::kUpsert);
  ASSERT_TRUE(WaitFor([&] { return behind->NumCommits() == 1; }));
  EXPECT_EQ(behind->snapshots, 1);
  EXPECT_EQ(behind->state,
            (std::map<int64_t, int64_t>{{1, 11}, {2, 21}, {3, 30}, {4, 40}, {5, 50}}));
  EXPECT_EQ(b->sink->stats().snapshots, 1);
  EXPECT_EQ(behind->commits[0].version, 5u);
}

TEST_F(SinkCheckpointTest, ACommitCarriesTheKafkaInputOffsetsAndGroupOfItsCheckpoint) {
  auto cluster = KafkaMockCluster::Make(1).ValueOrDie();
  ASSERT_TRUE(cluster->CreateTopic("in", 1).ok());
  ASSERT_TRUE(cluster->ProduceMany("in", {R"({"id":1,"v":10})", R"({"id":2,"v":20})",
                                          R"({"id":1,"v":11})"})
                  .ok());
  auto node = Start(target_, /*restore=*/false);
  KafkaOptions ko;
  ko.topics = {"in"};
  ko.config = {{"bootstrap.servers", cluster->bootstrap_servers()},
               {"topic.metadata.refresh.interval.ms", "500"},
               // Short sessions, as in kafka_connector_test: with the default 45 s
               // the mock coordinator can hold the join past the wait below.
               {"session.timeout.ms", "6000"},
               {"heartbeat.interval.ms", "500"},
               {"group.id", "input-group"}};
  ko.start = KafkaStart::kEarliest;
  ko.poll_timeout_ms = 20;
  auto kafka = KafkaConnector::Make("t", ko).ValueOrDie();
  ASSERT_TRUE(node->engine->AddConnector(kafka).ok());
  ASSERT_TRUE(WaitFor([&] {
    EXPECT_TRUE(node->engine->Step().ok());
    return node->table->snapshot()->version() >= 1 && kafka->positions().size() == 1 &&
           kafka->positions().begin()->second == 3 && kafka->stats().buffered_records == 0;
  }));
  auto info = node->checkpointer->Save().ValueOrDie();
  ASSERT_TRUE(WaitFor([&] { return target_->NumCommits() == 1; }));
  const CommitPoint& point = target_->commits[0];
  EXPECT_EQ(point.epoch, info.id);
  EXPECT_EQ(point.source_group, "input-group");
  ASSERT_EQ(point.source_offsets.count("in"), 1u);
  EXPECT_EQ(point.source_offsets.at("in").at(0), 3);
  EXPECT_EQ(target_->state, (std::map<int64_t, int64_t>{{1, 11}, {2, 20}}));
  node->engine->Stop();
  ASSERT_TRUE(node->engine->RemoveConnector(kafka->name()).ok());
}

}  // namespace
}  // namespace rill
