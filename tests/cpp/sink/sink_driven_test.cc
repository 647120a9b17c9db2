// DrivenSinks (sink_set.h): Kafka-shaped sinks whose output an application
// instance commits in its own transactions. A fake "producer" stands in for
// the instance's transaction: WriteInto appends to its open unit, the test
// commits or aborts it as the instance would. Against a randomized sequence of
// writes, cuts, commits and aborts, the committed output must equal the
// table's change log up to the last committed cut: nothing lost, nothing twice.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include <arrow/api.h>

#include "rill/engine/engine.h"
#include "rill/sink/sink_set.h"
#include "sink/sink_test_util.h"

namespace rill {
namespace {

using test::Batch;
using test::Row;
using test::RowsOf;

/// The instance's transaction: what WriteInto produced into it.
struct FakeTransaction {
  std::vector<Row> open;
  std::vector<Row> committed;
  void Commit() {
    committed.insert(committed.end(), open.begin(), open.end());
    open.clear();
  }
  void Abort() { open.clear(); }
};

class TransactionWriter : public SinkWriter {
 public:
  explicit TransactionWriter(std::string cluster) : cluster_(std::move(cluster)) {}
  Status Open(const std::shared_ptr<arrow::Schema>&, const std::vector<std::string>&) override {
    ++opens;
    return Status::OK();
  }
  Result<std::optional<SinkProgress>> LoadProgress() override { return std::nullopt; }
  Status Write(const ChangeSet&, SinkMode) override {
    ++own_writes;
    return Status::OK();
  }
  Status Commit(const CommitPoint&) override { return Status::OK(); }
  void Abort() override {}
  void Close() override {}
  int64_t bytes_written() const override { return 0; }
  const char* type() const override { return "kafka"; }
  std::string external_transaction_cluster() const override { return cluster_; }
  Status OpenExternal(const std::shared_ptr<arrow::Schema>&,
                      const std::vector<std::string>&) override {
    ++external_opens;
    return Status::OK();
  }
  Status WriteInto(void* producer, const ChangeSet& changes, SinkMode) override {
    if (fail_next) {
      fail_next = false;
      return Status::IOError("produce failed (test)");
    }
    auto* txn = static_cast<FakeTransaction*>(producer);
    for (auto& r : RowsOf(changes)) txn->open.push_back(r);
    return Status::OK();
  }

  std::string cluster_;
  int opens = 0;
  int own_writes = 0;
  int external_opens = 0;
  bool fail_next = false;
};

class SinkDrivenTest : public ::testing::Test {
 protected:
  void SetUp() override {
    engine_ = Engine::Make().ValueOrDie();
    TableOptions keyed;
    keyed.primary_key = {"id"};
    table_ = engine_->RegisterTable("t", test::KeyedSchema(), keyed).ValueOrDie();
  }

  SinkOptions Options(const std::string& name, SinkMode mode = SinkMode::kChangelog) {
    SinkOptions o;
    o.name = name;
    o.table = "t";
    o.mode = mode;
    o.interval_seconds = 0.01;
    return o;
  }

  /// What a cut commits, as the instance does it.
  bool CommitCut(DrivenSinks& driven, FakeTransaction& txn, bool abort) {
    DrivenSinks::Cut cut = driven.Capture();
    if (!driven.HasChanges(cut)) return false;
    Status st = driven.Write(cut, &txn);
    if (!st.ok() || abort) {
      txn.Abort();
      driven.Aborted(cut, st.ok() ? Status::IOError("commit_transaction (test)") : st);
      return false;
    }
    txn.Commit();
    driven.Committed(cut);
    return true;
  }

  std::unique_ptr<Engine> engine_;
  std::shared_ptr<LiveTable> table_;
};

TEST_F(SinkDrivenTest, OnlySinksOnTheDrivenClusterAreDrivenAndTheyHaveNoThreadOfTheirOwn) {
  SinkSet& sinks = SinkSet::For(engine_.get());
  auto before = std::make_unique<TransactionWriter>("broker:9092");
  TransactionWriter* before_raw = before.get();
  ASSERT_TRUE(sinks.Add(Options("before"), std::move(before)).ok());
  auto driven = sinks.DriveKafkaSinks("broker:9092");
  auto same = std::make_unique<TransactionWriter>("broker:9092");
  auto other = std::make_unique<TransactionWriter>("elsewhere:9092");
  TransactionWriter* same_raw = same.get();
  TransactionWriter* other_raw = other.get();
  ASSERT_TRUE(sinks.Add(Options("same"), std::move(same)).ok());
  ASSERT_TRUE(sinks.Add(Options("other"), std::move(other)).ok());
  ASSERT_TRUE(table_->Write(Batch({{1, 10}})).ok());
  ASSERT_TRUE(sinks.Find("before")->Flush(10).ok());
  ASSERT_TRUE(sinks.Find("other")->Flush(10).ok());
  // The sinks added before and the one on another cluster run their own thread.
  EXPECT_GE(before_raw->own_writes, 1);
  EXPECT_GE(other_raw->own_writes, 1);
  EXPECT_EQ(other_raw->external_opens, 0);
  // The driven one only writes when the instance commits.
  EXPECT_EQ(same_raw->external_opens, 1);
  EXPECT_EQ(same_raw->opens, 0);
  EXPECT_EQ(same_raw->own_writes, 0);
  DrivenSinks::Cut cut = driven->Capture();
  ASSERT_EQ(cut.versions.size(), 1u);
  EXPECT_EQ(cut.versions[0].first->name(), "same");
  FakeTransaction txn;
  ASSERT_TRUE(CommitCut(*driven, txn, /*abort=*/false));
  EXPECT_EQ(txn.committed, (std::vector<Row>{{"insert", 1, 10, 1}}));
  ASSERT_TRUE(sinks.Find("same")->Flush(10).ok());
  EXPECT_EQ(sinks.Find("same")->stats().rows_written, 1);
  EXPECT_FALSE(CommitCut(*driven, txn, false)) << "nothing new: no transaction";
  EXPECT_TRUE(sinks.Remove("same"));
  EXPECT_TRUE(driven->Capture().versions.empty());
}

TEST_F(SinkDrivenTest, AbortedCutsAreWrittenAgainAndTheOutputIsTheChangeLogOnce) {
  SinkSet& sinks = SinkSet::For(engine_.get());
  auto driven = sinks.DriveKafkaSinks("broker:9092");
  auto writer = std::make_unique<TransactionWriter>("broker:9092");
  TransactionWriter* raw = writer.get();
  SinkOptions o = Options("out");
  o.max_batch_rows = 7;  // several feed reads per cut
  auto sink = sinks.Add(o, std::move(writer)).ValueOrDie();
  // The reference: every change row the table publishes, in order.
  auto feed = table_->OpenChangeFeed();

  std::mt19937 rng(28);
  FakeTransaction txn;
  uint64_t committed_version = 0;
  int aborts = 0;
  for (int step = 0; step < 400; ++step) {
    const int what = static_cast<int>(rng() % 10);
    if (what < 7) {
      std::vector<std::pair<int64_t, int64_t>> rows;
      const int n = 1 + static_cast<int>(rng() % 5);
      for (int i = 0; i < n; ++i) {
        rows.emplace_back(static_cast<int64_t>(rng() % 20), static_cast<int64_t>(step));
      }
      ASSERT_TRUE(table_->Write(Batch(rows)).ok());
    } else {
      const bool abort = rng() % 3 == 0;
      raw->fail_next = !abort && rng() % 5 == 0;  // a produce error aborts too
      const uint64_t cut_version = table_->snapshot()->version();
      if (CommitCut(*driven, txn, abort)) committed_version = cut_version;
      if (abort) ++aborts;
    }
  }
  // A last commit of everything.
  raw->fail_next = false;
  const uint64_t last = table_->snapshot()->version();
  if (CommitCut(*driven, txn, false)) committed_version = last;
  ASSERT_EQ(committed_version, last);
  EXPECT_GT(aborts, 10);

  ChangeSet all = feed->Read(0, {}).ValueOrDie();
  ASSERT_FALSE(all.snapshot);
  EXPECT_EQ(txn.committed, RowsOf(all)) << "the committed output is the change log, once";
  auto s = sink->stats();
  EXPECT_EQ(s.rows_written, static_cast<int64_t>(txn.committed.size()));
  EXPECT_EQ(s.committed_version, last);
  EXPECT_GT(s.errors, 0);
  EXPECT_TRUE(sink->Flush(5).ok());
}

}  // namespace
}  // namespace rill

namespace rill {
namespace {

/// (op, id) of each row: what the tests below compare.
std::vector<std::pair<std::string, int64_t>> OpsAndIds(const std::vector<test::Row>& rows) {
  std::vector<std::pair<std::string, int64_t>> out;
  for (const auto& r : rows) out.emplace_back(r.op, r.id);
  return out;
}

// A partition shard that moved (restored, or dropped) is not a change: Skip
// moves the table's driven sinks past it without writing; a row filter keeps
// the rows a sink writes (a global view's partials of owned partitions).
TEST_F(SinkDrivenTest, SkippedChangesAreNotWrittenAndARowFilterKeepsOnlyItsRows) {
  SinkSet& sinks = SinkSet::For(engine_.get());
  auto driven = sinks.DriveKafkaSinks("broker:9092");
  ASSERT_TRUE(sinks.Add(Options("out"), std::make_unique<TransactionWriter>("broker:9092")).ok());
  FakeTransaction txn;

  ASSERT_TRUE(table_->Write(Batch({{1, 10}, {2, 20}})).ok());
  ASSERT_TRUE(table_->Delete(Batch({{2, 0}})).ok());
  driven->Skip("other_table");  // another table's sinks only
  EXPECT_TRUE(driven->HasChanges(driven->Capture()));
  driven->Skip("t");
  EXPECT_FALSE(CommitCut(*driven, txn, false)) << "skipped: nothing to write";
  EXPECT_TRUE(txn.committed.empty());

  ASSERT_TRUE(table_->Write(Batch({{3, 30}, {4, 40}})).ok());
  ASSERT_TRUE(CommitCut(*driven, txn, false));
  using Ops = std::vector<std::pair<std::string, int64_t>>;
  EXPECT_EQ(OpsAndIds(txn.committed), (Ops{{"insert", 3}, {"insert", 4}}));

  // Keep the rows with an even id.
  EXPECT_FALSE(driven->SetRowFilter("nope", nullptr));
  ASSERT_TRUE(driven->SetRowFilter(
      "out", [](const std::shared_ptr<arrow::RecordBatch>& b)
                 -> Result<std::shared_ptr<arrow::RecordBatch>> {
        const auto& ids = static_cast<const arrow::Int64Array&>(*b->GetColumnByName("id"));
        std::vector<std::shared_ptr<arrow::RecordBatch>> kept;
        for (int64_t i = 0; i < ids.length(); ++i) {
          if (ids.Value(i) % 2 == 0) kept.push_back(b->Slice(i, 1));
        }
        if (kept.empty()) return b->Slice(0, 0);
        RILL_ASSIGN_OR_RAISE(auto table, arrow::Table::FromRecordBatches(b->schema(), kept));
        RILL_ASSIGN_OR_RAISE(auto combined, table->CombineChunksToBatch());
        return combined;
      }));
  ASSERT_TRUE(table_->Write(Batch({{5, 50}, {6, 60}, {7, 70}})).ok());
  ASSERT_TRUE(CommitCut(*driven, txn, false));
  EXPECT_EQ(OpsAndIds(txn.committed), (Ops{{"insert", 3}, {"insert", 4}, {"insert", 6}}));
  // A cut whose rows are all filtered out still moves on.
  ASSERT_TRUE(table_->Write(Batch({{9, 90}})).ok());
  ASSERT_TRUE(CommitCut(*driven, txn, false));
  EXPECT_FALSE(driven->HasChanges(driven->Capture()));
  EXPECT_EQ(txn.committed.size(), 3u);
}

// A driven upsert sink writes a compacted topic, which a snapshot does not
// replace: after its table's change log forgot versions it had not written
// (here: another reader's small bound), its snapshot starts with a tombstone
// for each key deleted meanwhile, so the topic's last row per key is the table.
TEST_F(SinkDrivenTest, AnUpsertSinkThatFellBehindTheLogTombstonesTheKeysDeletedMeanwhile) {
  SinkSet& sinks = SinkSet::For(engine_.get());
  auto driven = sinks.DriveKafkaSinks("broker:9092");
  ASSERT_TRUE(sinks.Add(Options("out", SinkMode::kUpsert),
                        std::make_unique<TransactionWriter>("broker:9092"))
                  .ok());
  ChangeFeedOptions tiny;
  tiny.max_log_rows = 2;
  auto bound = table_->OpenChangeFeed(tiny);  // bounds the log for every reader
  FakeTransaction txn;
  std::map<int64_t, int64_t> topic;  // key -> value, as compaction keeps it
  auto apply = [&](size_t from) {
    for (size_t i = from; i < txn.committed.size(); ++i) {
      const auto& r = txn.committed[i];
      if (r.op == "delete") {
        topic.erase(r.id);
      } else {
        topic[r.id] = r.v;
      }
    }
  };
  ASSERT_TRUE(table_->Write(Batch({{1, 10}, {2, 20}, {3, 30}, {4, 40}})).ok());
  ASSERT_TRUE(CommitCut(*driven, txn, false));
  apply(0);
  ASSERT_EQ(topic.size(), 4u);

  ASSERT_TRUE(table_->Delete(Batch({{2, 0}, {4, 0}})).ok());
  ASSERT_TRUE(table_->Write(Batch({{5, 50}, {6, 60}, {3, 31}})).ok());
  ASSERT_TRUE(table_->Delete(Batch({{5, 0}})).ok());
  const size_t before = txn.committed.size();
  ASSERT_TRUE(CommitCut(*driven, txn, false));
  apply(before);
  EXPECT_EQ(topic, (std::map<int64_t, int64_t>{{1, 10}, {3, 31}, {6, 60}}));
  EXPECT_EQ(sinks.Find("out")->stats().snapshots, 2);  // both cuts: the log holds 2 rows
}

}  // namespace
}  // namespace rill
