// The sink runtime (sink/sink_set.h) over an in-test writer: modes, batching,
// retries, drops, backpressure, and a writer that blocks.
#include <gtest/gtest.h>

#include <random>

#include <arrow/api.h>

#include "engine/engine_test_util.h"
#include "rill/connector/memory_connector.h"
#include "rill/engine/engine.h"
#include "rill/sink/sink_set.h"
#include "sink/sink_test_util.h"

namespace rill {
namespace {

using test::Batch;
using test::RecordingWriter;
using test::Row;
using test::Target;
using test::WaitFor;

class SinkSetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    engine_ = Engine::Make().ValueOrDie();
    TableOptions keyed;
    keyed.primary_key = {"id"};
    table_ = engine_->RegisterTable("t", test::KeyedSchema(), keyed).ValueOrDie();
    target_ = std::make_shared<Target>();
  }

  SinkOptions Options(SinkMode mode = SinkMode::kChangelog) {
    SinkOptions o;
    o.name = "s";
    o.table = "t";
    o.mode = mode;
    o.interval_seconds = 0.01;
    o.retry_initial_seconds = 0.005;
    o.retry_max_seconds = 0.02;
    return o;
  }

  std::shared_ptr<Sink> AddSink(SinkOptions o) {
    return SinkSet::For(engine_.get())
        .Add(std::move(o), std::make_unique<RecordingWriter>(target_))
        .ValueOrDie();
  }

  void Write(const std::vector<std::pair<int64_t, int64_t>>& rows) {
    ASSERT_TRUE(table_->Write(Batch(rows)).ok());
  }

  int CountEvents(Severity severity) {
    int n = 0;
    for (const auto& e : engine_->RecentEvents()) {
      if (e.component == "sink:s" && e.severity == severity) ++n;
    }
    return n;
  }

  std::unique_ptr<Engine> engine_;
  std::shared_ptr<LiveTable> table_;
  std::shared_ptr<Target> target_;
};

TEST_F(SinkSetTest, WritesEveryChangeInChangelogModeWithItsOpAndVersion) {
  auto sink = AddSink(Options());
  Write({{1, 10}, {2, 20}});
  Write({{1, 11}});
  ASSERT_TRUE(sink->Flush(10).ok());
  std::vector<Row> expected = {{"insert", 1, 10, 1}, {"insert", 2, 20, 1}, {"update", 1, 11, 2}};
  EXPECT_EQ(target_->Rows(), expected);
  auto s = sink->stats();
  EXPECT_EQ(s.rows_written, 3);
  EXPECT_GE(s.batches, 1);
  EXPECT_EQ(s.committed_version, 2u);
  EXPECT_EQ(s.lag_versions, 0);
  EXPECT_EQ(target_->progress->version, 2u);
}

TEST_F(SinkSetTest, UpsertModeWritesOnlyTheLastChangePerKey) {
  auto o = Options(SinkMode::kUpsert);
  o.interval_seconds = 3600;  // one batch, written by Flush
  auto sink = AddSink(o);
  Write({{1, 10}, {2, 20}});
  Write({{1, 11}});
  Write({{1, 12}, {3, 30}});
  ASSERT_TRUE(sink->Flush(10).ok());
  auto rows = target_->Rows();
  ASSERT_EQ(rows.size(), 3u);  // keys 2, 1, 3: each once
  std::map<int64_t, int64_t> state(target_->state.begin(), target_->state.end());
  EXPECT_EQ(state, (std::map<int64_t, int64_t>{{1, 12}, {2, 20}, {3, 30}}));
  EXPECT_EQ(target_->NumCommits(), 1u);
}

TEST_F(SinkSetTest, AppendModeOnAKeyedTableWritesOnlyInserts) {
  auto sink = AddSink(Options(SinkMode::kAppend));
  Write({{1, 10}});
  Write({{1, 11}, {2, 20}});
  ASSERT_TRUE(sink->Flush(10).ok());
  std::vector<Row> expected = {{"insert", 1, 10, 1}, {"insert", 2, 20, 2}};
  EXPECT_EQ(target_->Rows(), expected);
}

TEST_F(SinkSetTest, NoWriteHoldsMoreThanMaxBatchRows) {
  auto o = Options();
  o.max_batch_rows = 2;
  auto sink = AddSink(o);
  for (int i = 0; i < 5; ++i) Write({{i, i}});
  Write({{10, 0}, {11, 0}, {12, 0}});  // one version larger than a batch: split
  ASSERT_TRUE(sink->Flush(10).ok());
  EXPECT_EQ(target_->Rows().size(), 8u);
  for (int64_t n : target_->write_sizes) EXPECT_LE(n, 2);
  EXPECT_GE(target_->NumCommits(), 3u);  // a read may join versions up to the bound
}

TEST_F(SinkSetTest, RetriesWithBackoffAlertsOnceAndCatchesUpWithNothingLost) {
  target_->fail_commits = true;
  auto sink = AddSink(Options());
  Write({{1, 10}});
  ASSERT_TRUE(WaitFor([&] { return sink->stats().retries >= 3; }));
  Write({{2, 20}});
  Write({{1, 11}});
  EXPECT_EQ(target_->NumCommits(), 0u);
  EXPECT_EQ(CountEvents(Severity::kError), 1);  // one alert, not one per retry
  target_->fail_commits = false;
  ASSERT_TRUE(sink->Flush(10).ok());
  std::vector<Row> expected = {{"insert", 1, 10, 1}, {"insert", 2, 20, 2}, {"update", 1, 11, 3}};
  EXPECT_EQ(target_->Rows(), expected);
  EXPECT_EQ(CountEvents(Severity::kInfo), 1);  // recovered
  auto s = sink->stats();
  EXPECT_GE(s.errors, 3);
  EXPECT_EQ(s.dropped_rows, 0);
  EXPECT_GE(target_->opens, 2);  // reopened for the retries
}

TEST_F(SinkSetTest, DropPolicyDropsTheFailedBatchCountsAndAlerts) {
  auto o = Options();
  o.on_error = SinkErrorPolicy::kDrop;
  target_->fail_commits = true;
  auto sink = AddSink(o);
  Write({{1, 10}, {2, 20}});
  ASSERT_TRUE(WaitFor([&] { return sink->stats().dropped_rows == 2; }));
  target_->fail_commits = false;
  Write({{3, 30}});
  ASSERT_TRUE(sink->Flush(10).ok());
  std::vector<Row> expected = {{"insert", 3, 30, 2}};
  EXPECT_EQ(target_->Rows(), expected);
  EXPECT_EQ(sink->stats().dropped_rows, 2);
  EXPECT_EQ(CountEvents(Severity::kError), 1);
  EXPECT_EQ(CountEvents(Severity::kInfo), 1);
}

TEST_F(SinkSetTest, BackpressureHoldsTheConnectorsWhileFailingAndReleasesWhenCaughtUp) {
  auto connector = std::make_shared<MemoryConnector>("t", nullptr, BufferLimits{}, "in");
  ASSERT_TRUE(engine_->AddConnector(connector).ok());
  auto o = Options();
  o.max_backlog_rows = 3;
  target_->fail_commits = true;
  auto sink = AddSink(o);
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(connector->Push(Batch({{i, i}})).ok());
    ASSERT_TRUE(engine_->Step().ok());
  }
  ASSERT_TRUE(WaitFor([&] { return engine_->TableBackpressured("t"); }));
  EXPECT_TRUE(sink->stats().backpressure);
  const uint64_t held_version = table_->snapshot()->version();
  ASSERT_TRUE(connector->Push(Batch({{100, 1}})).ok());
  ASSERT_TRUE(engine_->Step().ok());
  EXPECT_EQ(table_->snapshot()->version(), held_version);  // not polled
  EXPECT_EQ(connector->stats().buffered_records, 1);
  target_->fail_commits = false;
  ASSERT_TRUE(WaitFor([&] { return !engine_->TableBackpressured("t"); }));
  ASSERT_TRUE(engine_->Step().ok());
  EXPECT_EQ(table_->num_rows(), 5);
  ASSERT_TRUE(sink->Flush(10).ok());
  EXPECT_EQ(target_->Rows().size(), 5u);
  EXPECT_FALSE(sink->stats().backpressure);
}

TEST_F(SinkSetTest, AWriterThatBlocksForeverDoesNotStopTheTicks) {
  auto connector = std::make_shared<MemoryConnector>("t", nullptr, BufferLimits{}, "in");
  ASSERT_TRUE(engine_->AddConnector(connector).ok());
  target_->block = true;
  auto sink = AddSink(Options());
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(connector->Push(Batch({{i, i}})).ok());
    ASSERT_TRUE(engine_->Step().ok());
  }
  EXPECT_EQ(table_->num_rows(), 20);
  EXPECT_EQ(target_->NumCommits(), 0u);
  target_->Release();
  ASSERT_TRUE(sink->Flush(10).ok());
  EXPECT_EQ(target_->Rows().size(), 20u);
}

TEST_F(SinkSetTest, FirstStartOnANonEmptyTableWritesASnapshotThenChanges) {
  Write({{1, 10}, {2, 20}});
  Write({{1, 11}});
  auto sink = AddSink(Options(SinkMode::kUpsert));
  ASSERT_TRUE(sink->Flush(10).ok());
  Write({{3, 30}});
  ASSERT_TRUE(sink->Flush(10).ok());
  EXPECT_EQ(target_->state, (std::map<int64_t, int64_t>{{1, 11}, {2, 20}, {3, 30}}));
  EXPECT_EQ(target_->Rows().size(), 3u);
}

TEST_F(SinkSetTest, ResumesAfterTheTargetsProgress) {
  auto keep = table_->OpenChangeFeed();  // the log reaches back to version 0
  Write({{1, 10}});
  Write({{2, 20}});
  target_->progress = SinkProgress{1, 0};  // the target holds version 1
  auto sink = AddSink(Options());
  ASSERT_TRUE(sink->Flush(10).ok());
  std::vector<Row> expected = {{"insert", 2, 20, 2}};
  EXPECT_EQ(target_->Rows(), expected);
}

TEST_F(SinkSetTest, RemovedSinksStopAndTheirNameCanBeUsedAgain) {
  auto& sinks = SinkSet::For(engine_.get());
  AddSink(Options());
  EXPECT_EQ(sinks.List().size(), 1u);
  EXPECT_TRUE(sinks.Remove("s"));
  EXPECT_FALSE(sinks.Remove("s"));
  EXPECT_EQ(sinks.Find("s"), nullptr);
  AddSink(Options());
  EXPECT_NE(sinks.Find("s"), nullptr);
}

TEST_F(SinkSetTest, RejectsOptionsItCannotRunAndNamesTheOption) {
  auto& sinks = SinkSet::For(engine_.get());
  auto add = [&](SinkOptions o) {
    return sinks.Add(std::move(o), std::make_unique<RecordingWriter>(target_)).status();
  };
  auto o = Options();
  o.table = "missing";
  EXPECT_NE(add(o).message().find("missing"), std::string::npos);
  o = Options();
  o.interval_seconds = 0;
  EXPECT_NE(add(o).message().find("interval_seconds"), std::string::npos);
  o = Options();
  o.max_backlog_rows = 0;
  EXPECT_NE(add(o).message().find("max_backlog_rows"), std::string::npos);
  ASSERT_TRUE(engine_->RegisterTable("plain", test::KeyedSchema()).ok());
  o = Options(SinkMode::kUpsert);
  o.table = "plain";
  EXPECT_NE(add(o).message().find("primary key"), std::string::npos);
  AddSink(Options());
  EXPECT_TRUE(add(Options()).IsInvalid());  // duplicate name
}

TEST_F(SinkSetTest, RandomWritesAndTargetFailuresLeaveTheTargetEqualToTheTable) {
  for (SinkMode mode : {SinkMode::kUpsert, SinkMode::kChangelog}) {
    SCOPED_TRACE(SinkModeName(mode));
    SetUp();
    auto o = Options(mode);
    o.max_batch_rows = 7;
    auto sink = AddSink(o);
    std::mt19937 rng(24);
    for (int step = 0; step < 150; ++step) {
      std::vector<std::pair<int64_t, int64_t>> rows;
      const int n = 1 + static_cast<int>(rng() % 5);
      for (int i = 0; i < n; ++i) rows.emplace_back(rng() % 20, step * 10 + i);
      Write(rows);
      if (rng() % 10 == 0) target_->fail_commits = !target_->fail_commits;
    }
    target_->fail_commits = false;
    ASSERT_TRUE(sink->Flush(20).ok());
    std::map<int64_t, int64_t> table;
    auto state = table_->snapshot()->ToTable().ValueOrDie();
    auto ids = state->GetColumnByName("id");
    auto vs = state->GetColumnByName("v");
    for (int c = 0; c < ids->num_chunks(); ++c) {
      auto id = std::static_pointer_cast<arrow::Int64Array>(ids->chunk(c));
      auto v = std::static_pointer_cast<arrow::Int64Array>(vs->chunk(c));
      for (int64_t i = 0; i < id->length(); ++i) table[id->Value(i)] = v->Value(i);
    }
    EXPECT_EQ(target_->state, table);
    // Every version arrives in order, none twice (the retries rewrote only the
    // rows of the uncommitted rounds).
    uint64_t last = 0;
    for (const auto& r : target_->Rows()) {
      EXPECT_GE(r.version, last);
      last = r.version;
    }
    EXPECT_EQ(last, table_->snapshot()->version());
    EXPECT_EQ(sink->stats().dropped_rows, 0);
    SinkSet::For(engine_.get()).Remove("s");
  }
}

TEST_F(SinkSetTest, SinksStopBeforeTheEngineGoes) {
  auto sink = AddSink(Options());
  Write({{1, 10}});
  engine_.reset();  // final flush, then the thread ends
  EXPECT_EQ(target_->Rows().size(), 1u);
  EXPECT_TRUE(sink->Flush(1).IsCancelled());
}

}  // namespace
}  // namespace rill
