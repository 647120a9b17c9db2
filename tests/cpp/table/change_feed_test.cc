// The change feed of LiveTable (change_feed.h): each op, the read options,
// the log's bounds and snapshots, ReplaceState and compaction.
#include "rill/common/row_ops.h"
#include "rill/table/change_feed.h"

#include <map>
#include <random>

#include <arrow/api.h>
#include <gtest/gtest.h>

#include "rill/table/live_table.h"
#include "table/test_util.h"

namespace rill {
namespace {

using test::BatchOf;
using test::FakeClock;
using test::SchemaOf;

constexpr double kT0 = 1'700'000'000.0;

std::shared_ptr<arrow::Schema> KV() {
  return SchemaOf({arrow::field("id", arrow::int64()), arrow::field("v", arrow::utf8())});
}

/// Each change row as "op@version:id=v".
std::vector<std::string> Changes(const ChangeSet& changes) {
  std::vector<std::string> out;
  for (const auto& b : changes.batches) {
    auto table = arrow::Table::FromRecordBatches({b}).ValueOrDie();
    for (const auto& r : test::RowStrings(*table, {"_op", "_version", "id", "v"})) {
      // "op|version|id|v" -> "op@version:id=v"
      auto p1 = r.find('|');
      auto p2 = r.find('|', p1 + 1);
      auto p3 = r.find('|', p2 + 1);
      out.push_back(r.substr(0, p1) + "@" + r.substr(p1 + 1, p2 - p1 - 1) + ":" +
                    r.substr(p2 + 1, p3 - p2 - 1) + "=" + r.substr(p3 + 1));
    }
  }
  return out;
}

using Strings = std::vector<std::string>;

class ChangeFeedTest : public ::testing::Test {
 protected:
  std::shared_ptr<LiveTable> Keyed() {
    TableOptions options;
    options.primary_key = {"id"};
    options.mode = TableMode::kSnapshot;
    options.clock = clock_.clock();
    return LiveTable::Make("k", KV(), options).ValueOrDie();
  }
  std::shared_ptr<LiveTable> Append(int64_t max_rows, int64_t auto_compact = 32) {
    TableOptions options;
    options.mode = TableMode::kAppend;
    options.retention = test::Retention(max_rows);
    options.clock = clock_.clock();
    options.auto_compact_chunks = auto_compact;
    return LiveTable::Make("a", KV(), options).ValueOrDie();
  }
  static std::shared_ptr<arrow::RecordBatch> Batch(const std::string& ids,
                                                  const std::string& values) {
    return BatchOf(KV(), {ids, values});
  }
  FakeClock clock_{kT0};
};

TEST_F(ChangeFeedTest, ReportsInsertsAndUpdatesWithTheVersionThatMadeThem) {
  auto table = Keyed();
  auto feed = table->OpenChangeFeed();
  RILL_ASSERT_OK(table->Write(Batch("[1, 2]", R"(["a", "b"])")));
  RILL_ASSERT_OK(table->Write(Batch("[2, 3]", R"(["B", "c"])")));
  RILL_ASSERT_OK_AND_ASSIGN(auto changes, feed->Read(0, {}));
  EXPECT_FALSE(changes.snapshot);
  EXPECT_EQ(changes.from_version, 0u);
  EXPECT_EQ(changes.to_version, 2u);
  EXPECT_EQ(changes.num_rows, 4);
  EXPECT_EQ(Changes(changes), (Strings{"insert@1:1=a", "insert@1:2=b", "update@2:2=B",
                                          "insert@2:3=c"}));
  EXPECT_TRUE(changes.batches[0]->schema()->Equals(*ChangeSchema(table->schema())));
  RILL_ASSERT_OK_AND_ASSIGN(auto none, feed->Read(2, {}));
  EXPECT_EQ(none.num_rows, 0);
  EXPECT_EQ(none.to_version, 2u);
}

TEST_F(ChangeFeedTest, ReportsOldValuesBeforeTheUpdatesOfAVersionWhenAsked) {
  auto table = Keyed();
  auto feed = table->OpenChangeFeed();
  RILL_ASSERT_OK(table->Write(Batch("[1, 2]", R"(["a", "b"])")));
  RILL_ASSERT_OK(table->Write(Batch("[2, 1, 3]", R"(["B", "A", "c"])")));
  ChangeReadOptions old_values;
  old_values.include_old_values = true;
  RILL_ASSERT_OK_AND_ASSIGN(auto changes, feed->Read(1, old_values));
  EXPECT_EQ(Changes(changes), (Strings{"update_before@2:2=b", "update_before@2:1=a",
                                       "update@2:2=B", "update@2:1=A", "insert@2:3=c"}));
  RILL_ASSERT_OK_AND_ASSIGN(auto plain, feed->Read(1, {}));
  EXPECT_EQ(Changes(plain), (Strings{"update@2:2=B", "update@2:1=A", "insert@2:3=c"}));
}

TEST_F(ChangeFeedTest, ReportsTheLastRowOfAKeyWrittenTwiceInOneVersionOnce) {
  auto table = Keyed();
  auto feed = table->OpenChangeFeed();
  RILL_ASSERT_OK(table->Write(Batch("[1]", R"(["a"])")));
  // Key 2 twice in one batch, key 1 and key 3 in two batches of one write.
  RILL_ASSERT_OK(table->Write({Batch("[2, 2, 1, 3]", R"(["x", "y", "A", "c"])"),
                               Batch("[3, 1]", R"(["C", "AA"])")}));
  ChangeReadOptions old_values;
  old_values.include_old_values = true;
  RILL_ASSERT_OK_AND_ASSIGN(auto changes, feed->Read(1, old_values));
  EXPECT_EQ(Changes(changes), (Strings{"update_before@2:1=a", "insert@2:2=y", "insert@2:3=C",
                                       "update@2:1=AA"}));
}

TEST_F(ChangeFeedTest, ReportsAppendedRowsAndRetentionDeletesOnlyWhenAsked) {
  auto table = Append(/*max_rows=*/3);
  auto feed = table->OpenChangeFeed();
  RILL_ASSERT_OK(table->Write(Batch("[1, 2]", R"(["a", "b"])")));
  RILL_ASSERT_OK(table->Write(Batch("[3, 4]", R"(["c", "d"])")));
  RILL_ASSERT_OK_AND_ASSIGN(auto plain, feed->Read(0, {}));
  EXPECT_EQ(Changes(plain), (Strings{"insert@1:1=a", "insert@1:2=b", "insert@2:3=c",
                                     "insert@2:4=d"}));
  ChangeReadOptions deletes;
  deletes.emit_retention_deletes = true;
  RILL_ASSERT_OK_AND_ASSIGN(auto with_deletes, feed->Read(0, deletes));
  EXPECT_EQ(Changes(with_deletes), (Strings{"insert@1:1=a", "insert@1:2=b", "delete@2:1=a",
                                            "insert@2:3=c", "insert@2:4=d"}));
}

TEST_F(ChangeFeedTest, LeavesOutRowsWrittenAndExpiredInTheSameVersion) {
  auto table = Append(/*max_rows=*/2);
  auto feed = table->OpenChangeFeed();
  RILL_ASSERT_OK(table->Write(Batch("[1, 2, 3]", R"(["a", "b", "c"])")));
  ChangeReadOptions deletes;
  deletes.emit_retention_deletes = true;
  RILL_ASSERT_OK_AND_ASSIGN(auto changes, feed->Read(0, deletes));
  EXPECT_EQ(Changes(changes), (Strings{"insert@1:2=b", "insert@1:3=c"}));
}

TEST_F(ChangeFeedTest, ReportsAKeyUpdatedAndExpiredInOneVersionAsDeleted) {
  TableOptions options;
  options.primary_key = {"id"};
  options.mode = TableMode::kSnapshot;
  options.clock = clock_.clock();
  options.retention = test::Retention(/*max_rows=*/1);
  auto table = LiveTable::Make("k", KV(), options).ValueOrDie();
  auto feed = table->OpenChangeFeed();
  RILL_ASSERT_OK(table->Write(Batch("[1]", R"(["a"])")));
  // 1 is updated, then retention keeps only the newest row (2): 1 is gone,
  // with the values readers last saw (the update was never shown).
  RILL_ASSERT_OK(table->Write(Batch("[1, 2]", R"(["A", "b"])")));
  ChangeReadOptions deletes;
  deletes.emit_retention_deletes = true;
  RILL_ASSERT_OK_AND_ASSIGN(auto changes, feed->Read(1, deletes));
  EXPECT_EQ(Changes(changes), (Strings{"delete@2:1=a", "insert@2:2=b"}));
  deletes.include_old_values = true;  // no update_before of an update never shown
  RILL_ASSERT_OK_AND_ASSIGN(auto with_old, feed->Read(1, deletes));
  EXPECT_EQ(Changes(with_old), (Strings{"delete@2:1=a", "insert@2:2=b"}));
}

TEST_F(ChangeFeedTest, ReportsAKeyUpdatedAndDeletedInOneVersionAsDeletedWithItsShownValues) {
  auto table = Keyed();
  auto feed = table->OpenChangeFeed();
  RILL_ASSERT_OK(table->Write(Batch("[1, 2]", R"(["a", "b"])")));
  // One version: 1 and 2 updated, then 1 deleted (an op batch: upserts then a delete).
  auto ops = SchemaOf({arrow::field("id", arrow::int64()), arrow::field("v", arrow::utf8()),
                       arrow::field(kWriteOpColumn, arrow::int8())});
  RILL_ASSERT_OK(table->Write(BatchOf(ops, {"[1, 2, 1]", R"(["A", "B", null])", "[0, 0, 1]"})));
  ChangeReadOptions old_values;
  old_values.include_old_values = true;
  RILL_ASSERT_OK_AND_ASSIGN(auto changes, feed->Read(1, old_values));
  EXPECT_EQ(Changes(changes),
            (Strings{"update_before@2:2=b", "delete@2:1=a", "update@2:2=B"}));
  RILL_ASSERT_OK_AND_ASSIGN(auto plain, feed->Read(1, {}));
  EXPECT_EQ(Changes(plain), (Strings{"delete@2:1=a", "update@2:2=B"}));
}

TEST_F(ChangeFeedTest, ReportsNoChangesForCompaction) {
  auto table = Keyed();
  auto feed = table->OpenChangeFeed();
  RILL_ASSERT_OK(table->Write(Batch("[1, 2, 3]", R"(["a", "b", "c"])")));
  RILL_ASSERT_OK(table->Write(Batch("[2]", R"(["B"])")));
  RILL_ASSERT_OK(table->Compact(/*full=*/true));
  RILL_ASSERT_OK_AND_ASSIGN(auto changes, feed->Read(2, {}));
  EXPECT_EQ(changes.to_version, 3u);
  EXPECT_EQ(changes.num_rows, 0);
  RILL_ASSERT_OK(table->Write(Batch("[3]", R"(["C"])")));
  ChangeReadOptions old_values;
  old_values.include_old_values = true;
  RILL_ASSERT_OK_AND_ASSIGN(auto after, feed->Read(3, old_values));
  // The old row of 3 now lives in the compacted chunk: still found.
  EXPECT_EQ(Changes(after), (Strings{"update_before@4:3=c", "update@4:3=C"}));
}

TEST_F(ChangeFeedTest, SplitsAReadOnlyAtVersionBoundaries) {
  auto table = Keyed();
  auto feed = table->OpenChangeFeed();
  RILL_ASSERT_OK(table->Write(Batch("[1, 2, 3]", R"(["a", "b", "c"])")));
  RILL_ASSERT_OK(table->Write(Batch("[4]", R"(["d"])")));
  RILL_ASSERT_OK(table->Write(Batch("[5, 6]", R"(["e", "f"])")));
  ChangeReadOptions bounded;
  bounded.max_rows = 2;
  RILL_ASSERT_OK_AND_ASSIGN(auto first, feed->Read(0, bounded));
  EXPECT_EQ(first.to_version, 1u);  // the whole first version, though over the bound
  EXPECT_EQ(first.num_rows, 3);
  RILL_ASSERT_OK_AND_ASSIGN(auto second, feed->Read(first.to_version, bounded));
  EXPECT_EQ(second.to_version, 3u);  // 1 row, then 2 more: reaches the bound at 3
  EXPECT_EQ(Changes(second), (Strings{"insert@2:4=d", "insert@3:5=e", "insert@3:6=f"}));
  bounded.max_rows = 1;
  RILL_ASSERT_OK_AND_ASSIGN(auto third, feed->Read(1, bounded));
  EXPECT_EQ(third.to_version, 2u);
  EXPECT_EQ(third.num_rows, 1);
}

TEST_F(ChangeFeedTest, GivesACountedSnapshotToACursorOlderThanTheLog) {
  auto table = Keyed();
  ChangeFeedOptions small;
  small.max_log_rows = 3;
  auto feed = table->OpenChangeFeed(small);
  RILL_ASSERT_OK(table->Write(Batch("[1, 2]", R"(["a", "b"])")));
  RILL_ASSERT_OK(table->Write(Batch("[3, 4]", R"(["c", "d"])")));  // 4 rows: v1 forgotten
  EXPECT_EQ(feed->stats().oldest_version, 1u);
  EXPECT_EQ(feed->stats().log_rows, 2);
  RILL_ASSERT_OK_AND_ASSIGN(auto later, feed->Read(1, {}));
  EXPECT_FALSE(later.snapshot);
  EXPECT_EQ(Changes(later), (Strings{"insert@2:3=c", "insert@2:4=d"}));
  RILL_ASSERT_OK_AND_ASSIGN(auto gap, feed->Read(0, {}));
  EXPECT_TRUE(gap.snapshot);
  EXPECT_EQ(gap.to_version, 2u);
  EXPECT_EQ(Changes(gap), (Strings{"insert@2:1=a", "insert@2:2=b", "insert@2:3=c",
                                   "insert@2:4=d"}));
  EXPECT_EQ(feed->stats().snapshots, 0);  // cursor 0: nothing seen, not a gap
  RILL_ASSERT_OK(table->Write(Batch("[5, 6, 7, 8]", R"(["e", "f", "g", "h"])")));
  RILL_ASSERT_OK_AND_ASSIGN(auto behind, feed->Read(1, {}));
  EXPECT_TRUE(behind.snapshot);
  EXPECT_EQ(behind.to_version, 3u);
  EXPECT_EQ(behind.num_rows, 8);
  EXPECT_EQ(feed->stats().snapshots, 1);
  EXPECT_EQ(feed->stats().reads, 3);
  EXPECT_EQ(feed->stats().rows_read, 2 + 4 + 8);
}

TEST_F(ChangeFeedTest, GivesCursorZeroASnapshotWhenTheLogStartedLater) {
  auto table = Keyed();
  RILL_ASSERT_OK(table->Write(Batch("[1]", R"(["a"])")));
  auto feed = table->OpenChangeFeed();
  RILL_ASSERT_OK(table->Write(Batch("[2]", R"(["b"])")));
  RILL_ASSERT_OK_AND_ASSIGN(auto changes, feed->Read(0, {}));
  EXPECT_TRUE(changes.snapshot);
  EXPECT_EQ(Changes(changes), (Strings{"insert@2:1=a", "insert@2:2=b"}));
  RILL_ASSERT_OK_AND_ASSIGN(auto from_open, feed->Read(1, {}));
  EXPECT_FALSE(from_open.snapshot);
  EXPECT_EQ(Changes(from_open), (Strings{"insert@2:2=b"}));
}

TEST_F(ChangeFeedTest, TrimsTheLogBelowTheLowestAcknowledgedVersion) {
  auto table = Keyed();
  auto fast = table->OpenChangeFeed();
  auto slow = table->OpenChangeFeed();
  for (int i = 0; i < 4; ++i) {
    RILL_ASSERT_OK(table->Write(Batch("[" + std::to_string(i) + "]", R"(["x"])")));
  }
  EXPECT_EQ(fast->stats().log_versions, 4);
  fast->Acknowledge(4);
  EXPECT_EQ(fast->stats().log_versions, 4);  // slow still needs them
  slow->Acknowledge(2);
  EXPECT_EQ(fast->stats().log_versions, 2);
  EXPECT_EQ(fast->stats().oldest_version, 2u);
  RILL_ASSERT_OK_AND_ASSIGN(auto changes, slow->Read(2, {}));
  EXPECT_EQ(Changes(changes), (Strings{"insert@3:2=x", "insert@4:3=x"}));
  slow.reset();
  EXPECT_EQ(fast->stats().log_versions, 0);
  EXPECT_EQ(fast->stats().open_feeds, 1);
}

TEST_F(ChangeFeedTest, MakesOlderCursorsReadASnapshotAfterReplaceState) {
  auto table = Keyed();
  auto feed = table->OpenChangeFeed();
  RILL_ASSERT_OK(table->Write(Batch("[1, 2]", R"(["a", "b"])")));
  auto state = arrow::Table::FromRecordBatches({Batch("[7]", R"(["z"])")}).ValueOrDie();
  RILL_ASSERT_OK(table->ReplaceState(state));
  RILL_ASSERT_OK_AND_ASSIGN(auto changes, feed->Read(1, {}));
  EXPECT_TRUE(changes.snapshot);
  EXPECT_EQ(changes.to_version, 2u);
  EXPECT_EQ(Changes(changes), (Strings{"insert@2:7=z"}));
  EXPECT_EQ(feed->stats().snapshots, 1);
  RILL_ASSERT_OK(table->Write(Batch("[7]", R"(["Z"])")));
  RILL_ASSERT_OK_AND_ASSIGN(auto after, feed->Read(2, {}));
  EXPECT_FALSE(after.snapshot);
  EXPECT_EQ(Changes(after), (Strings{"update@3:7=Z"}));
}

TEST_F(ChangeFeedTest, RestartsAtTheCurrentVersionWhenReopenedAfterTheLastFeedClosed) {
  auto table = Keyed();
  auto feed = table->OpenChangeFeed();
  RILL_ASSERT_OK(table->Write(Batch("[1]", R"(["a"])")));
  feed.reset();
  RILL_ASSERT_OK(table->Write(Batch("[2]", R"(["b"])")));  // not recorded
  feed = table->OpenChangeFeed();
  EXPECT_EQ(feed->stats().oldest_version, 2u);
  RILL_ASSERT_OK(table->Write(Batch("[3]", R"(["c"])")));
  RILL_ASSERT_OK_AND_ASSIGN(auto changes, feed->Read(2, {}));
  EXPECT_EQ(Changes(changes), (Strings{"insert@3:3=c"}));
  RILL_ASSERT_OK_AND_ASSIGN(auto old, feed->Read(1, {}));
  EXPECT_TRUE(old.snapshot);
}

TEST_F(ChangeFeedTest, RefusesACursorAheadOfTheTable) {
  auto table = Keyed();
  auto feed = table->OpenChangeFeed();
  auto result = feed->Read(5, {});
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(result.status().IsInvalid());
  EXPECT_NE(result.status().message().find("ahead"), std::string::npos);
}

TEST_F(ChangeFeedTest, KeepsReadingTheLastStateAfterTheTableIsGone) {
  auto table = Keyed();
  auto feed = table->OpenChangeFeed();
  RILL_ASSERT_OK(table->Write(Batch("[1]", R"(["a"])")));
  table.reset();
  EXPECT_EQ(feed->table_name(), "k");
  EXPECT_EQ(feed->current_version(), 1u);
  RILL_ASSERT_OK_AND_ASSIGN(auto changes, feed->Read(0, {}));
  EXPECT_EQ(Changes(changes), (Strings{"insert@1:1=a"}));
}

TEST_F(ChangeFeedTest, ReportsRowsExpiredByAgeAsDeletes) {
  TableOptions options;
  options.mode = TableMode::kAppend;
  options.retention = test::Retention(std::nullopt, /*max_age_seconds=*/10);
  options.clock = clock_.clock();
  auto table = LiveTable::Make("a", KV(), options).ValueOrDie();
  auto feed = table->OpenChangeFeed();
  RILL_ASSERT_OK(table->Write(Batch("[1, 2]", R"(["a", "b"])")));
  clock_.Advance(5);
  RILL_ASSERT_OK(table->Write(Batch("[3]", R"(["c"])")));
  clock_.Advance(6);
  RILL_ASSERT_OK_AND_ASSIGN(auto expired, table->ApplyRetention());
  EXPECT_EQ(expired, 2);
  ChangeReadOptions deletes;
  deletes.emit_retention_deletes = true;
  RILL_ASSERT_OK_AND_ASSIGN(auto changes, feed->Read(2, deletes));
  EXPECT_EQ(Changes(changes), (Strings{"delete@3:1=a", "delete@3:2=b"}));
  RILL_ASSERT_OK_AND_ASSIGN(auto plain, feed->Read(2, {}));
  EXPECT_EQ(plain.num_rows, 0);
  EXPECT_EQ(plain.to_version, 3u);
}

TEST_F(ChangeFeedTest, StartsASnapshotWithTheDeletesTheLogForgotForAFeedThatKeepsThem) {
  auto table = Keyed();
  ChangeFeedOptions small;
  small.max_log_rows = 3;
  small.keep_forgotten_deletes = true;
  auto feed = table->OpenChangeFeed(small);
  auto plain = table->OpenChangeFeed();  // keeps nothing, and trims nothing by itself
  RILL_ASSERT_OK(table->Write(Batch("[1, 2, 7]", R"(["a", "b", "g"])")));
  feed->Acknowledge(1);
  plain->Acknowledge(1);
  RILL_ASSERT_OK(table->Delete(Batch("[2, 7]", R"([null, null])")));           // v2
  RILL_ASSERT_OK(table->Write(Batch("[3, 4, 5, 7]", R"(["c", "d", "e", "G"])")));  // v3
  EXPECT_EQ(feed->stats().oldest_version, 3u);  // v2 and v3 forgotten
  EXPECT_EQ(feed->stats().forgotten_delete_rows, 2);
  ChangeReadOptions deletes;
  deletes.snapshot_deletes = true;
  RILL_ASSERT_OK_AND_ASSIGN(auto gap, feed->Read(1, deletes));
  EXPECT_TRUE(gap.snapshot);
  EXPECT_FALSE(gap.snapshot_deletes_incomplete);
  EXPECT_EQ(gap.snapshot_delete_rows, 2);
  // 7 was deleted and written again: its delete comes first, its row after.
  EXPECT_EQ(Changes(gap), (Strings{"delete@2:2=b", "delete@2:7=g", "insert@3:1=a",
                                   "insert@3:3=c", "insert@3:4=d", "insert@3:5=e",
                                   "insert@3:7=G"}));
  RILL_ASSERT_OK_AND_ASSIGN(auto without, feed->Read(1, {}));
  EXPECT_EQ(without.snapshot_delete_rows, 0);
  EXPECT_EQ(without.num_rows, 5);
  RILL_ASSERT_OK_AND_ASSIGN(auto fresh, feed->Read(0, deletes));  // nothing seen: no deletes
  EXPECT_EQ(fresh.num_rows, 5);
  // Acknowledged by the keeping feed: the kept deletes go.
  feed->Acknowledge(gap.to_version);
  RILL_ASSERT_OK(table->Write(Batch("[9]", R"(["i"])")));
  EXPECT_EQ(feed->stats().forgotten_delete_rows, 0);
}

TEST_F(ChangeFeedTest, SaysASnapshotsDeletesAreIncompleteWhenTheLogKeptTooFewOrRestarted) {
  auto table = Keyed();
  ChangeFeedOptions small;
  small.max_log_rows = 2;
  small.keep_forgotten_deletes = true;
  auto feed = table->OpenChangeFeed(small);
  RILL_ASSERT_OK(table->Write(Batch("[1, 2, 3, 4]", R"(["a", "b", "c", "d"])")));  // v1
  feed->Acknowledge(1);
  for (int id = 1; id <= 3; ++id) {  // v2..v4: one delete each, kept: the last two
    RILL_ASSERT_OK(table->Delete(Batch("[" + std::to_string(id) + "]", "[null]")));
    RILL_ASSERT_OK(table->Write(Batch("[" + std::to_string(10 + id) + ", " +
                                          std::to_string(20 + id) + "]",
                                      R"(["x", "y"])")));
  }
  EXPECT_EQ(feed->stats().forgotten_delete_rows, 2);
  ChangeReadOptions deletes;
  deletes.snapshot_deletes = true;
  RILL_ASSERT_OK_AND_ASSIGN(auto gap, feed->Read(1, deletes));
  EXPECT_TRUE(gap.snapshot);
  EXPECT_TRUE(gap.snapshot_deletes_incomplete);
  EXPECT_EQ(gap.snapshot_delete_rows, 2);
  EXPECT_EQ(feed->stats().snapshots_missing_deletes, 1);
  // From the oldest delete kept on, complete.
  RILL_ASSERT_OK_AND_ASSIGN(auto later, feed->Read(4, deletes));
  EXPECT_TRUE(later.snapshot);
  EXPECT_FALSE(later.snapshot_deletes_incomplete);
  // ReplaceState: nothing before it is known.
  RILL_ASSERT_OK(table->ReplaceState(
      arrow::Table::FromRecordBatches({Batch("[50]", R"(["z"])")}).ValueOrDie()));
  RILL_ASSERT_OK_AND_ASSIGN(auto replaced, feed->Read(later.to_version, deletes));
  EXPECT_TRUE(replaced.snapshot);
  EXPECT_TRUE(replaced.snapshot_deletes_incomplete);
  EXPECT_EQ(replaced.snapshot_delete_rows, 0);
}

// A reader that applies every read as upserts and deletes over what it holds
// (a compacted topic), never replacing it, falls behind a small log again and
// again: with snapshot_deletes it holds exactly the table's rows whenever it
// has caught up. Without the kept deletes, deleted keys would stay.
TEST_F(ChangeFeedTest, AnUpsertReaderThatFallsBehindStillEndsWithExactlyTheTablesRows) {
  std::mt19937_64 rng(20261206);
  int64_t total_snapshots = 0, total_incomplete = 0, total_with_deletes = 0;
  for (int round = 0; round < 20; ++round) {
    auto table = Keyed();
    ChangeFeedOptions options;
    options.max_log_rows = 8 + static_cast<int64_t>(rng() % 40);
    options.keep_forgotten_deletes = true;
    auto feed = table->OpenChangeFeed(options);
    auto ops = SchemaOf({arrow::field("id", arrow::int64()), arrow::field("v", arrow::utf8()),
                         arrow::field(kWriteOpColumn, arrow::int8())});
    std::map<int64_t, std::string> reference;  // the table, as written
    std::map<int64_t, std::string> target;     // what the reader applied
    uint64_t cursor = 0;
    int64_t incomplete = 0;
    int64_t snapshots = 0;
    int64_t with_deletes = 0;
    ChangeReadOptions read;
    read.snapshot_deletes = true;
    for (int step = 0; step < 200; ++step) {
      // One version: a few upserts and deletes of 30 keys, in one op batch.
      std::string ids = "[", values = "[", kinds = "[";
      const int n = 1 + static_cast<int>(rng() % 6);
      for (int i = 0; i < n; ++i) {
        const int64_t id = static_cast<int64_t>(rng() % 30);
        const bool del = rng() % 3 == 0;
        const std::string v = "v" + std::to_string(step) + "_" + std::to_string(i);
        if (i) ids += ",", values += ",", kinds += ",";
        ids += std::to_string(id);
        values += del ? std::string("null") : "\"" + v + "\"";
        kinds += del ? "1" : "0";
        if (del) {
          reference.erase(id);
        } else {
          reference[id] = v;
        }
      }
      RILL_ASSERT_OK(table->Write(BatchOf(ops, {ids + "]", values + "]", kinds + "]"})));
      if (rng() % 5 != 0) continue;  // the reader falls behind
      RILL_ASSERT_OK_AND_ASSIGN(auto changes, feed->Read(cursor, read));
      snapshots += changes.snapshot ? 1 : 0;
      incomplete += changes.snapshot_deletes_incomplete ? 1 : 0;
      with_deletes += changes.snapshot && !changes.snapshot_deletes_incomplete &&
                      changes.snapshot_delete_rows > 0;
      // Told that the deletes are incomplete, such a reader must start over.
      if (changes.snapshot_deletes_incomplete) target.clear();
      for (const auto& b : changes.batches) {
        const auto& id = static_cast<const arrow::Int64Array&>(*b->GetColumnByName("id"));
        const auto& v = static_cast<const arrow::StringArray&>(*b->GetColumnByName("v"));
        const auto& op = static_cast<const arrow::StringArray&>(*b->GetColumnByName("_op"));
        for (int64_t r = 0; r < b->num_rows(); ++r) {
          if (op.GetView(r) == "delete") {
            target.erase(id.Value(r));
          } else {
            target[id.Value(r)] = std::string(v.GetView(r));
          }
        }
      }
      cursor = changes.to_version;
      feed->Acknowledge(cursor);
      std::string dels;
      for (const auto& c : Changes(changes)) {
        if (c.rfind("delete", 0) == 0) dels += c + " ";
      }
      ASSERT_EQ(target, reference) << "round " << round << " step " << step
                                   << (changes.snapshot ? " (snapshot)" : "") << " from "
                                   << changes.from_version << " to " << changes.to_version
                                   << " deletes " << dels << " log " << options.max_log_rows;
    }
    total_snapshots += snapshots;
    total_incomplete += incomplete;
    total_with_deletes += with_deletes;
  }
  // The log overflowed, and most snapshots were applied as upserts with their deletes.
  EXPECT_GT(total_with_deletes, 20);
  EXPECT_LT(total_incomplete * 4, total_snapshots);
}

TEST(ChangeOpNames, RoundTrip) {
  for (ChangeOp op : {ChangeOp::kInsert, ChangeOp::kUpdate, ChangeOp::kDelete,
                      ChangeOp::kUpdateBefore}) {
    auto parsed = ParseChangeOp(ChangeOpName(op));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, op);
  }
  EXPECT_FALSE(ParseChangeOp("upsert").ok());
}

}  // namespace
}  // namespace rill
