// Snapshot upserts, append mode, versions and subscribers of LiveTable.
#include "rill/table/live_table.h"

#include <atomic>
#include <random>
#include <stdexcept>

#include <arrow/api.h>
#include <gtest/gtest.h>

#include "table/test_util.h"

namespace rill {
namespace {

using test::BatchOf;
using test::ColumnStrings;
using test::FakeClock;
using test::RowStrings;
using test::SchemaOf;
using test::SortedRows;

constexpr double kT0 = 1'700'000'000.0;

std::shared_ptr<arrow::Table> Contents(const LiveTable& table) {
  auto result = table.snapshot()->ToTable();
  EXPECT_TRUE(result.ok()) << result.status().ToString();
  return result.ok() ? *result : nullptr;
}

class SnapshotTable : public ::testing::Test {
 protected:
  std::shared_ptr<LiveTable> Make(std::shared_ptr<arrow::Schema> schema,
                                  std::vector<std::string> key) {
    TableOptions options;
    options.primary_key = std::move(key);
    options.mode = TableMode::kSnapshot;
    options.clock = clock_.clock();
    auto result = LiveTable::Make("t", std::move(schema), options);
    EXPECT_TRUE(result.ok()) << result.status().ToString();
    return result.ok() ? *result : nullptr;
  }
  FakeClock clock_{kT0};
};

std::shared_ptr<arrow::Schema> IntKeySchema() {
  return SchemaOf({arrow::field("id", arrow::int64()), arrow::field("v", arrow::utf8())});
}

TEST_F(SnapshotTable, ReplacesRowsByKey) {
  auto schema = IntKeySchema();
  auto table = Make(schema, {"id"});
  ASSERT_TRUE(table->keyed());
  RILL_ASSERT_OK(table->Write(BatchOf(schema, {"[1, 2, 3]", R"(["a", "b", "c"])"})));
  clock_.Advance(5);
  RILL_ASSERT_OK_AND_ASSIGN(auto stats,
                            table->Write(BatchOf(schema, {"[2, 4]", R"(["B", "d"])"})));
  EXPECT_EQ(stats.rows_in, 2);
  EXPECT_EQ(stats.inserted, 1);
  EXPECT_EQ(stats.updated, 1);
  EXPECT_EQ(table->num_rows(), 4);
  EXPECT_EQ(SortedRows(*Contents(*table), {"id", "v"}),
            (std::vector<std::string>{"1|a", "2|B", "3|c", "4|d"}));
}

TEST_F(SnapshotTable, KeepsInsertTimeOnUpdate) {
  auto schema = IntKeySchema();
  auto table = Make(schema, {"id"});
  RILL_ASSERT_OK(table->Write(BatchOf(schema, {"[1, 2]", R"(["a", "b"])"})));
  clock_.Advance(10);
  RILL_ASSERT_OK(table->Write(BatchOf(schema, {"[1]", R"(["a2"])"})));
  const std::string t0 = test::FormatDouble(kT0);
  const std::string t1 = test::FormatDouble(kT0 + 10);
  EXPECT_EQ(SortedRows(*Contents(*table)),
            (std::vector<std::string>{"1|a2|" + t0 + "|" + t1, "2|b|" + t0 + "|" + t0}));
}

TEST_F(SnapshotTable, SetsBothTimestampsToNowForNewKeys) {
  auto schema = IntKeySchema();
  auto table = Make(schema, {"id"});
  RILL_ASSERT_OK(table->Write(BatchOf(schema, {"[7]", R"(["x"])"})));
  const std::string t0 = test::FormatDouble(kT0);
  EXPECT_EQ(RowStrings(*Contents(*table)), (std::vector<std::string>{"7|x|" + t0 + "|" + t0}));
}

TEST_F(SnapshotTable, UsesAnExplicitNowOverTheClock) {
  auto schema = IntKeySchema();
  auto table = Make(schema, {"id"});
  RILL_ASSERT_OK(table->Write(BatchOf(schema, {"[7]", R"(["x"])"}), kT0 + 42));
  EXPECT_EQ(ColumnStrings(*Contents(*table), "z_update_ts"),
            (std::vector<std::string>{test::FormatDouble(kT0 + 42)}));
}

TEST_F(SnapshotTable, LetsTheLastRowOfABatchWin) {
  auto schema = IntKeySchema();
  auto table = Make(schema, {"id"});
  RILL_ASSERT_OK_AND_ASSIGN(
      auto stats,
      table->Write(BatchOf(schema, {"[1, 2, 1, 1, 2]", R"(["a", "b", "c", "d", "e"])"})));
  EXPECT_EQ(stats.rows_in, 5);
  EXPECT_EQ(stats.inserted, 2);
  EXPECT_EQ(table->num_rows(), 2);
  EXPECT_EQ(SortedRows(*Contents(*table), {"id", "v"}), (std::vector<std::string>{"1|d", "2|e"}));
}

TEST_F(SnapshotTable, LetsTheLastBatchOfAWriteWin) {
  auto schema = IntKeySchema();
  auto table = Make(schema, {"id"});
  RILL_ASSERT_OK(table->Write(std::vector<std::shared_ptr<arrow::RecordBatch>>{
      BatchOf(schema, {"[1, 2]", R"(["a", "b"])"}), BatchOf(schema, {"[2, 1]", R"(["B", "A"])"}),
      BatchOf(schema, {"[1]", R"(["AA"])"})}));
  EXPECT_EQ(SortedRows(*Contents(*table), {"id", "v"}), (std::vector<std::string>{"1|AA", "2|B"}));
  EXPECT_EQ(table->snapshot()->version(), 1u) << "one Write publishes one version";
}

TEST_F(SnapshotTable, KeepsInsertTimeWhenAKeyRepeatsWithinALaterBatch) {
  auto schema = IntKeySchema();
  auto table = Make(schema, {"id"});
  RILL_ASSERT_OK(table->Write(BatchOf(schema, {"[1]", R"(["a"])"})));
  clock_.Advance(3);
  RILL_ASSERT_OK(table->Write(BatchOf(schema, {"[1, 1]", R"(["b", "c"])"})));
  EXPECT_EQ(RowStrings(*Contents(*table)),
            (std::vector<std::string>{"1|c|" + test::FormatDouble(kT0) + "|" +
                                      test::FormatDouble(kT0 + 3)}));
}

TEST_F(SnapshotTable, UpsertsByDictionaryStringKeyAcrossDifferentDictionaries) {
  auto dict_type = arrow::dictionary(arrow::int32(), arrow::utf8());
  auto schema = SchemaOf({arrow::field("k", dict_type), arrow::field("v", arrow::int64())});
  auto table = Make(schema, {"k"});
  // Same strings, different dictionaries and indices: keys compare by value.
  auto k1 = test::ArrayOf(dict_type, R"(["x", "y", "z"])");
  auto dict2 = test::ArrayOf(arrow::utf8(), R"(["q", "z", "x"])");
  auto idx2 = test::ArrayOf(arrow::int32(), "[2, 1, 0]");
  auto k2 = arrow::DictionaryArray::FromArrays(dict_type, idx2, dict2).ValueOrDie();
  RILL_ASSERT_OK(table->Write(
      arrow::RecordBatch::Make(schema, 3, {k1, test::ArrayOf(arrow::int64(), "[1, 2, 3]")})));
  RILL_ASSERT_OK(table->Write(
      arrow::RecordBatch::Make(schema, 3, {k2, test::ArrayOf(arrow::int64(), "[10, 30, 40]")})));
  EXPECT_EQ(SortedRows(*Contents(*table), {"k", "v"}),
            (std::vector<std::string>{"q|40", "x|10", "y|2", "z|30"}));
}

TEST_F(SnapshotTable, MatchesDictionaryAndPlainStringKeysByValue) {
  auto dict_type = arrow::dictionary(arrow::int32(), arrow::utf8());
  auto schema = SchemaOf({arrow::field("k", dict_type), arrow::field("v", arrow::int64())});
  auto table = Make(schema, {"k"});
  RILL_ASSERT_OK(table->Write(arrow::RecordBatch::Make(
      schema, 2, {test::ArrayOf(dict_type, R"(["x", "y"])"), test::ArrayOf(arrow::int64(), "[1, 2]")})));
  // A plain utf8 batch is cast to the dictionary column.
  auto plain = SchemaOf({arrow::field("k", arrow::utf8()), arrow::field("v", arrow::int64())});
  RILL_ASSERT_OK(table->Write(BatchOf(plain, {R"(["y"])", "[20]"})));
  EXPECT_EQ(SortedRows(*Contents(*table), {"k", "v"}), (std::vector<std::string>{"x|1", "y|20"}));
}

TEST_F(SnapshotTable, UpsertsByCompositeKey) {
  auto schema = SchemaOf({arrow::field("a", arrow::int64()), arrow::field("b", arrow::utf8()),
                          arrow::field("v", arrow::int64())});
  auto table = Make(schema, {"a", "b"});
  RILL_ASSERT_OK(table->Write(
      BatchOf(schema, {"[1, 1, 2, 2]", R"(["x", "y", "x", "y"])", "[1, 2, 3, 4]"})));
  RILL_ASSERT_OK_AND_ASSIGN(
      auto stats, table->Write(BatchOf(schema, {"[1, 2, 3]", R"(["y", "x", "y"])", "[20, 30, 50]"})));
  EXPECT_EQ(stats.updated, 2);
  EXPECT_EQ(stats.inserted, 1);
  EXPECT_EQ(SortedRows(*Contents(*table), {"a", "b", "v"}),
            (std::vector<std::string>{"1|x|1", "1|y|20", "2|x|30", "2|y|4", "3|y|50"}));
}

TEST_F(SnapshotTable, TreatsNullKeysAsOneValue) {
  auto schema = IntKeySchema();
  auto table = Make(schema, {"id"});
  RILL_ASSERT_OK(table->Write(BatchOf(schema, {"[null, 1, null]", R"(["a", "b", "c"])"})));
  EXPECT_EQ(SortedRows(*Contents(*table), {"id", "v"}),
            (std::vector<std::string>{"1|b", "null|c"}));
  clock_.Advance(1);
  RILL_ASSERT_OK_AND_ASSIGN(auto stats, table->Write(BatchOf(schema, {"[null]", R"(["d"])"})));
  EXPECT_EQ(stats.updated, 1);
  EXPECT_EQ(SortedRows(*Contents(*table), {"id", "v", "z_insert_ts"}),
            (std::vector<std::string>{"1|b|" + test::FormatDouble(kT0),
                                      "null|d|" + test::FormatDouble(kT0)}));
}

TEST_F(SnapshotTable, AppendsWithoutAKey) {
  auto schema = IntKeySchema();
  auto table = Make(schema, {});
  EXPECT_FALSE(table->keyed());
  RILL_ASSERT_OK(table->Write(BatchOf(schema, {"[1, 1]", R"(["a", "a"])"})));
  RILL_ASSERT_OK(table->Write(BatchOf(schema, {"[1]", R"(["a"])"})));
  EXPECT_EQ(table->num_rows(), 3);
}

TEST_F(SnapshotTable, IgnoresEmptyBatches) {
  auto schema = IntKeySchema();
  auto table = Make(schema, {"id"});
  RILL_ASSERT_OK(table->Write(BatchOf(schema, {"[1]", R"(["a"])"})));
  RILL_ASSERT_OK_AND_ASSIGN(auto stats, table->Write(BatchOf(schema, {"[]", "[]"})));
  EXPECT_EQ(stats.rows_in, 0);
  EXPECT_EQ(table->num_rows(), 1);
}

TEST_F(SnapshotTable, WritesArrowTablesOfSeveralChunks) {
  auto schema = IntKeySchema();
  auto table = Make(schema, {"id"});
  auto input = arrow::Table::FromRecordBatches(
                   schema, {BatchOf(schema, {"[1, 2]", R"(["a", "b"])"}),
                            BatchOf(schema, {"[2, 3]", R"(["B", "c"])"})})
                   .ValueOrDie();
  RILL_ASSERT_OK(table->Write(input));
  EXPECT_EQ(SortedRows(*Contents(*table), {"id", "v"}),
            (std::vector<std::string>{"1|a", "2|B", "3|c"}));
}

TEST_F(SnapshotTable, ReturnsRowsInWriteOrder) {
  auto schema = IntKeySchema();
  auto table = Make(schema, {"id"});
  RILL_ASSERT_OK(table->Write(BatchOf(schema, {"[1, 2, 3]", R"(["a", "b", "c"])"})));
  RILL_ASSERT_OK(table->Write(BatchOf(schema, {"[1]", R"(["A"])"})));
  EXPECT_EQ(RowStrings(*Contents(*table), {"id", "v"}),
            (std::vector<std::string>{"2|b", "3|c", "1|A"}));
}

TEST(AppendTable, RequiresARetentionPolicy) {
  auto schema = IntKeySchema();
  TableOptions options;
  options.mode = TableMode::kAppend;
  auto result = LiveTable::Make("events", schema, options);
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(result.status().IsInvalid()) << result.status().ToString();
  const std::string message = result.status().message();
  EXPECT_NE(message.find("Retention policy (TTL)"), std::string::npos) << message;
  EXPECT_NE(message.find("mandatory for append-only tables"), std::string::npos) << message;
}

TEST(AppendTable, RequiresARetentionPolicyThatLimitsSomething) {
  TableOptions options;
  options.mode = TableMode::kAppend;
  options.retention = RetentionPolicy{};
  auto result = LiveTable::Make("events", IntKeySchema(), options);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().message().find("mandatory for append-only tables"),
            std::string::npos)
      << result.status().ToString();
}

TEST(AppendTable, RequiresRetentionWhenTheModeComesFromMetadata) {
  auto schema = WithTableMetadata(IntKeySchema(), {}, TableMode::kAppend).ValueOrDie();
  auto result = LiveTable::Make("events", schema);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().message().find("Retention policy (TTL)"), std::string::npos)
      << result.status().ToString();
}

TEST(AppendTable, AppendsEvenWithAKey) {
  auto schema = IntKeySchema();
  FakeClock clock(kT0);
  TableOptions options;
  options.mode = TableMode::kAppend;
  options.primary_key = {"id"};
  options.retention = test::Retention(100);
  options.clock = clock.clock();
  RILL_ASSERT_OK_AND_ASSIGN(auto table, LiveTable::Make("events", schema, options));
  EXPECT_FALSE(table->keyed());
  RILL_ASSERT_OK(table->Write(BatchOf(schema, {"[1, 1]", R"(["a", "b"])"})));
  clock.Advance(1);
  RILL_ASSERT_OK_AND_ASSIGN(auto stats, table->Write(BatchOf(schema, {"[1]", R"(["c"])"})));
  EXPECT_EQ(stats.inserted, 1);
  EXPECT_EQ(stats.updated, 0);
  const std::string t0 = test::FormatDouble(kT0), t1 = test::FormatDouble(kT0 + 1);
  EXPECT_EQ(RowStrings(*Contents(*table)),
            (std::vector<std::string>{"1|a|" + t0 + "|" + t0, "1|b|" + t0 + "|" + t0,
                                      "1|c|" + t1 + "|" + t1}));
}

// The rows of Kafka partitions that moved away leave an append table by
// partition (randomized against a reference; retention goes on after).
TEST(AppendTable, DeletesTheRowsWhoseColumnHoldsOneOfTheValues) {
  auto schema = SchemaOf({arrow::field("_partition", arrow::int32()),
                          arrow::field("seq", arrow::int64())});
  FakeClock clock(kT0);
  TableOptions options;
  options.mode = TableMode::kAppend;
  options.retention = test::Retention(400);
  options.clock = clock.clock();
  RILL_ASSERT_OK_AND_ASSIGN(auto table, LiveTable::Make("events", schema, options));
  auto feed = table->OpenChangeFeed();
  std::mt19937_64 rng(7);
  std::vector<std::pair<int32_t, int64_t>> reference;  // in write order
  int64_t seq = 0;
  uint64_t cursor = 0;
  for (int step = 0; step < 60; ++step) {
    std::string parts = "[", seqs = "[";
    const int n = 1 + static_cast<int>(rng() % 20);
    for (int i = 0; i < n; ++i) {
      const int32_t p = static_cast<int32_t>(rng() % 6);
      parts += (i ? "," : "") + std::to_string(p);
      seqs += (i ? "," : "") + std::to_string(seq);
      reference.emplace_back(p, seq++);
    }
    RILL_ASSERT_OK(table->Write(BatchOf(schema, {parts + "]", seqs + "]"})));
    while (reference.size() > 400) reference.erase(reference.begin());  // max_rows
    if (step % 7 == 3) {
      const std::vector<int64_t> gone = {static_cast<int64_t>(rng() % 6),
                                         static_cast<int64_t>(rng() % 6)};
      const auto before = reference.size();
      std::erase_if(reference, [&](const auto& r) {
        return r.first == gone[0] || r.first == gone[1];
      });
      RILL_ASSERT_OK_AND_ASSIGN(auto stats, table->DeleteWhereIn("_partition", gone));
      EXPECT_EQ(stats.deleted, static_cast<int64_t>(before - reference.size()));
      RILL_ASSERT_OK_AND_ASSIGN(auto changes, feed->Read(cursor, {}));
      int64_t deletes = 0;
      for (const auto& b : changes.batches) {
        const auto& ops = static_cast<const arrow::StringArray&>(*b->GetColumnByName("_op"));
        for (int64_t r = 0; r < b->num_rows(); ++r) deletes += ops.GetView(r) == "delete";
      }
      EXPECT_EQ(deletes, stats.deleted);
    }
    cursor = feed->current_version();
    feed->Acknowledge(cursor);
    std::vector<std::string> expected;
    for (const auto& [p, s] : reference) expected.push_back(std::to_string(s));
    ASSERT_EQ(ColumnStrings(*Contents(*table), "seq"), expected) << "step " << step;
  }
  // Nothing matches: no new version.
  const uint64_t version = table->snapshot()->version();
  RILL_ASSERT_OK_AND_ASSIGN(auto none, table->DeleteWhereIn("_partition", {99}));
  EXPECT_EQ(none.deleted, 0);
  EXPECT_EQ(table->snapshot()->version(), version);
  EXPECT_FALSE(table->DeleteWhereIn("nope", {1}).ok());
  EXPECT_TRUE(table->DeleteWhereIn("_partition", {}).ok());
  TableOptions keyed;
  keyed.primary_key = {"seq"};
  RILL_ASSERT_OK_AND_ASSIGN(auto k, LiveTable::Make("k", schema, keyed));
  EXPECT_FALSE(k->DeleteWhereIn("_partition", {1}).ok());
}

TEST(UpsertTable, ReplacesByKeyAndMovesReplacedRowsToTheEnd) {
  auto schema = IntKeySchema();
  auto old_rows = arrow::Table::FromRecordBatches(
                      schema, {BatchOf(schema, {"[1, 2, 3]", R"(["a", "b", "c"])"})})
                      .ValueOrDie();
  auto new_rows = arrow::Table::FromRecordBatches(
                      schema, {BatchOf(schema, {"[2, 4, 2]", R"(["x", "d", "B"])"})})
                      .ValueOrDie();
  RILL_ASSERT_OK_AND_ASSIGN(auto result, UpsertTable(old_rows, new_rows, {"id"}));
  EXPECT_EQ(RowStrings(*result, {"id", "v"}),
            (std::vector<std::string>{"1|a", "3|c", "4|d", "2|B"}));
}

TEST(TableVersions, StayUnchangedWhileWritersGoOn) {
  auto schema = IntKeySchema();
  FakeClock clock(kT0);
  TableOptions options;
  options.primary_key = {"id"};
  options.clock = clock.clock();
  RILL_ASSERT_OK_AND_ASSIGN(auto table, LiveTable::Make("t", schema, options));
  auto empty = table->snapshot();
  RILL_ASSERT_OK(table->Write(BatchOf(schema, {"[1, 2]", R"(["a", "b"])"})));
  auto v1 = table->snapshot();
  RILL_ASSERT_OK_AND_ASSIGN(auto v1_rows_before, v1->ToTable());
  const auto expected = RowStrings(*v1_rows_before);

  for (int i = 0; i < 50; ++i) {
    clock.Advance(1);
    RILL_ASSERT_OK(table->Write(BatchOf(schema, {"[1, 3]", R"(["z", "c"])"})));
  }
  RILL_ASSERT_OK(table->Compact(/*full=*/true));

  EXPECT_EQ(empty->num_rows(), 0);
  EXPECT_EQ(empty->version(), 0u);
  EXPECT_EQ(v1->num_rows(), 2);
  EXPECT_EQ(v1->version(), 1u);
  RILL_ASSERT_OK_AND_ASSIGN(auto v1_rows_after, v1->ToTable());
  EXPECT_EQ(RowStrings(*v1_rows_after), expected);
  EXPECT_EQ(v1->published_at(), kT0);
  auto latest = table->snapshot();
  EXPECT_GT(latest->version(), v1->version());
  EXPECT_EQ(SortedRows(*Contents(*table), {"id", "v"}),
            (std::vector<std::string>{"1|z", "2|b", "3|c"}));
}

TEST(TableVersions, ReadersOfAnOldVersionSeeItsRowsThroughMakeReader) {
  auto schema = IntKeySchema();
  TableOptions options;
  options.primary_key = {"id"};
  RILL_ASSERT_OK_AND_ASSIGN(auto table, LiveTable::Make("t", schema, options));
  RILL_ASSERT_OK(table->Write(BatchOf(schema, {"[1, 2]", R"(["a", "b"])"})));
  RILL_ASSERT_OK_AND_ASSIGN(auto reader, table->snapshot()->MakeReader());
  RILL_ASSERT_OK(table->Write(BatchOf(schema, {"[1, 2]", R"(["x", "y"])"})));
  RILL_ASSERT_OK(table->Compact(/*full=*/true));
  RILL_ASSERT_OK_AND_ASSIGN(auto read, reader->ToTable());
  EXPECT_EQ(SortedRows(*read, {"id", "v"}), (std::vector<std::string>{"1|a", "2|b"}));
}

TEST(TableVersions, CountsOnlyWritesThatChangedTheTable) {
  auto schema = IntKeySchema();
  TableOptions options;
  options.primary_key = {"id"};
  RILL_ASSERT_OK_AND_ASSIGN(auto table, LiveTable::Make("t", schema, options));
  RILL_ASSERT_OK(table->Write(BatchOf(schema, {"[1]", R"(["a"])"})));
  RILL_ASSERT_OK(table->Write(BatchOf(schema, {"[2]", R"(["b"])"})));
  EXPECT_EQ(table->snapshot()->version(), 2u);
  RILL_ASSERT_OK(table->Write(BatchOf(schema, {"[]", "[]"})));
  EXPECT_EQ(table->snapshot()->version(), 2u);
}

TEST(TableVersions, LiveBatchIsZeroCopyWhenAllRowsAreAlive) {
  auto schema = IntKeySchema();
  TableOptions options;
  options.primary_key = {"id"};
  options.compact_dead_fraction = 1.0;  // keep dead rows in place
  RILL_ASSERT_OK_AND_ASSIGN(auto table, LiveTable::Make("t", schema, options));
  RILL_ASSERT_OK(table->Write(BatchOf(schema, {"[1, 2, 3, 4]", R"(["a", "b", "c", "d"])"})));
  auto v = table->snapshot();
  ASSERT_EQ(v->chunks().size(), 1u);
  RILL_ASSERT_OK_AND_ASSIGN(auto live, TableVersion::LiveBatch(v->chunks()[0]));
  EXPECT_EQ(live.get(), v->chunks()[0].batch.get());

  RILL_ASSERT_OK(table->Write(BatchOf(schema, {"[2]", R"(["B"])"})));
  auto v2 = table->snapshot();
  int64_t total_live = 0;
  for (const auto& chunk : v2->chunks()) {
    RILL_ASSERT_OK_AND_ASSIGN(auto batch, TableVersion::LiveBatch(chunk));
    EXPECT_EQ(batch->num_rows(), chunk.live_rows);
    total_live += chunk.live_rows;
  }
  EXPECT_EQ(total_live, 4);
  EXPECT_EQ(v2->num_rows(), 4);
  EXPECT_GT(v2->nbytes(), 0);
}

TEST(Subscribers, ReceiveEveryNewVersionUntilUnsubscribed) {
  auto schema = IntKeySchema();
  TableOptions options;
  options.primary_key = {"id"};
  RILL_ASSERT_OK_AND_ASSIGN(auto table, LiveTable::Make("t", schema, options));
  std::vector<std::pair<uint64_t, int64_t>> seen;
  auto id = table->Subscribe([&](const std::shared_ptr<const TableVersion>& v) {
    seen.emplace_back(v->version(), v->num_rows());
  });
  RILL_ASSERT_OK(table->Write(BatchOf(schema, {"[1]", R"(["a"])"})));
  RILL_ASSERT_OK(table->Write(BatchOf(schema, {"[2, 3]", R"(["b", "c"])"})));
  EXPECT_EQ(seen, (std::vector<std::pair<uint64_t, int64_t>>{{1, 1}, {2, 3}}));
  EXPECT_TRUE(table->Unsubscribe(id));
  RILL_ASSERT_OK(table->Write(BatchOf(schema, {"[4]", R"(["d"])"})));
  EXPECT_EQ(seen.size(), 2u);
  EXPECT_FALSE(table->Unsubscribe(id));
  EXPECT_FALSE(table->Unsubscribe(12345));
}

TEST(Subscribers, MayUnsubscribeThemselvesFromTheCallback) {
  auto schema = IntKeySchema();
  RILL_ASSERT_OK_AND_ASSIGN(auto table, LiveTable::Make("t", schema));
  int calls = 0;
  LiveTable::SubscriptionId id = 0;
  id = table->Subscribe([&](const std::shared_ptr<const TableVersion>&) {
    ++calls;
    table->Unsubscribe(id);
  });
  RILL_ASSERT_OK(table->Write(BatchOf(schema, {"[1]", R"(["a"])"})));
  RILL_ASSERT_OK(table->Write(BatchOf(schema, {"[2]", R"(["b"])"})));
  EXPECT_EQ(calls, 1);
}

TEST(Subscribers, MayReadTheTableFromTheCallback) {
  auto schema = IntKeySchema();
  RILL_ASSERT_OK_AND_ASSIGN(auto table, LiveTable::Make("t", schema));
  int64_t rows_seen = -1;
  table->Subscribe([&](const std::shared_ptr<const TableVersion>& v) {
    rows_seen = table->num_rows();
    EXPECT_EQ(table->snapshot()->version(), v->version());
  });
  RILL_ASSERT_OK(table->Write(BatchOf(schema, {"[1, 2]", R"(["a", "b"])"})));
  EXPECT_EQ(rows_seen, 2);
}

TEST(Subscribers, ThatThrowAreReportedAndDoNotFailTheWrite) {
  auto schema = IntKeySchema();
  RILL_ASSERT_OK_AND_ASSIGN(auto table, LiveTable::Make("orders", schema));
  std::string reported_table, reported_what;
  table->SetErrorHandler([&](const std::string& t, const std::string& what) {
    reported_table = t;
    reported_what = what;
  });
  int later_calls = 0;
  table->Subscribe([](const std::shared_ptr<const TableVersion>&) {
    throw std::runtime_error("subscriber exploded");
  });
  table->Subscribe([&](const std::shared_ptr<const TableVersion>&) { ++later_calls; });
  RILL_ASSERT_OK(table->Write(BatchOf(schema, {"[1]", R"(["a"])"})));
  EXPECT_EQ(table->num_rows(), 1);
  EXPECT_EQ(reported_table, "orders");
  EXPECT_NE(reported_what.find("subscriber exploded"), std::string::npos);
  EXPECT_EQ(later_calls, 1);
}

}  // namespace
}  // namespace rill
