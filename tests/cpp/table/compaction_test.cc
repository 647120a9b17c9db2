// Compaction: rewriting chunks with many dead rows and merging small chunks.
#include <set>

#include <arrow/api.h>
#include <gtest/gtest.h>

#include "rill/table/live_table.h"
#include "table/test_util.h"

namespace rill {
namespace {

using test::BatchOf;
using test::FakeClock;
using test::RowStrings;
using test::SchemaOf;
using test::SortedRows;

std::shared_ptr<arrow::Schema> Schema() {
  return SchemaOf({arrow::field("id", arrow::int64()), arrow::field("v", arrow::int64())});
}

std::shared_ptr<arrow::RecordBatch> Rows(int from, int to, int value) {
  std::string ids = "[", values = "[";
  for (int i = from; i < to; ++i) {
    ids += (i > from ? "," : "") + std::to_string(i);
    values += (i > from ? "," : "") + std::to_string(value);
  }
  return BatchOf(Schema(), {ids + "]", values + "]"});
}

std::vector<std::string> Contents(const LiveTable& table) {
  return RowStrings(*table.snapshot()->ToTable().ValueOrDie());
}

std::shared_ptr<LiveTable> MakeTable(TableOptions options, FakeClock& clock) {
  if (options.primary_key.empty()) {
    options.primary_key = {"id"};
  }
  options.clock = clock.clock();
  auto result = LiveTable::Make("t", Schema(), options);
  EXPECT_TRUE(result.ok()) << result.status().ToString();
  return *result;
}

void ExpectDeadFractionAtMost(const TableVersion& version, double fraction) {
  for (const auto& chunk : version.chunks()) {
    const int64_t rows = chunk.batch->num_rows();
    const int64_t dead = rows - chunk.live_rows;
    EXPECT_LE(static_cast<double>(dead), fraction * rows)
        << "a chunk of " << rows << " rows keeps " << dead << " dead rows";
    if (chunk.alive == nullptr) {
      EXPECT_EQ(chunk.live_rows, rows) << "a null bitmap means every row is alive";
    }
  }
}

TEST(Compaction, RewritesAChunkWhoseDeadFractionExceedsTheLimit) {
  FakeClock clock;
  TableOptions options;
  options.compact_dead_fraction = 0.5;
  options.auto_compact_chunks = 0;
  auto table = MakeTable(options, clock);
  RILL_ASSERT_OK(table->Write(Rows(0, 10, 1)));
  RILL_ASSERT_OK(table->Write(Rows(0, 4, 2)));  // 40% of chunk 1 dead: kept as is
  EXPECT_EQ(table->num_chunks(), 2);
  ASSERT_EQ(table->snapshot()->chunks().size(), 2u);
  EXPECT_EQ(table->snapshot()->chunks()[0].batch->num_rows(), 10);
  EXPECT_EQ(table->snapshot()->chunks()[0].live_rows, 6);

  RILL_ASSERT_OK(table->Write(Rows(4, 6, 2)));  // now 60% of chunk 1 dead: rewritten
  auto version = table->snapshot();
  ExpectDeadFractionAtMost(*version, 0.5);
  EXPECT_EQ(version->num_rows(), 10);
  std::vector<std::string> expected;
  for (int i = 0; i < 10; ++i) {
    expected.push_back(std::to_string(i) + "|" + (i < 6 ? "2" : "1"));
  }
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(SortedRows(*version->ToTable().ValueOrDie(), {"id", "v"}), expected);
}

TEST(Compaction, KeepsTheKeyIndexRightAfterARewrite) {
  FakeClock clock;
  TableOptions options;
  options.compact_dead_fraction = 0.1;
  options.auto_compact_chunks = 2;
  auto table = MakeTable(options, clock);
  for (int round = 0; round < 20; ++round) {
    clock.Advance(1);
    RILL_ASSERT_OK(table->Write(Rows(round % 7, 10, round)));
    ASSERT_EQ(table->num_rows(), 10) << "round " << round;
    auto ids = test::ColumnStrings(*table->snapshot()->ToTable().ValueOrDie(), "id");
    std::set<std::string> distinct(ids.begin(), ids.end());
    ASSERT_EQ(distinct.size(), 10u) << "duplicate keys after round " << round;
  }
  RILL_ASSERT_OK(table->Compact(/*full=*/true));
  RILL_ASSERT_OK(table->Write(Rows(0, 10, 99)));
  EXPECT_EQ(table->num_rows(), 10);
  for (const auto& row : SortedRows(*table->snapshot()->ToTable().ValueOrDie(), {"v"})) {
    EXPECT_EQ(row, "99");
  }
}

TEST(Compaction, MergesSmallChunksBeyondAutoCompactChunks) {
  FakeClock clock;
  TableOptions options;
  options.auto_compact_chunks = 4;
  auto table = MakeTable(options, clock);
  for (int i = 0; i < 40; ++i) {
    clock.Advance(1);
    RILL_ASSERT_OK(table->Write(Rows(i, i + 1, i)));
    EXPECT_LE(table->num_chunks(), 4) << "after write " << i;
  }
  EXPECT_EQ(table->num_rows(), 40);
  auto rows = Contents(*table);
  ASSERT_EQ(rows.size(), 40u);
  for (int i = 0; i < 40; ++i) {
    EXPECT_EQ(rows[i].substr(0, rows[i].find('|')), std::to_string(i)) << "write order kept";
  }
}

TEST(Compaction, DoesNotMergeWhenAutoCompactChunksIsZero) {
  FakeClock clock;
  TableOptions options;
  options.auto_compact_chunks = 0;
  auto table = MakeTable(options, clock);
  for (int i = 0; i < 20; ++i) {
    RILL_ASSERT_OK(table->Write(Rows(i, i + 1, i)));
  }
  EXPECT_EQ(table->num_chunks(), 20);
}

TEST(Compaction, LeavesDataUnchangedAfterAFullCompaction) {
  FakeClock clock;
  TableOptions options;
  options.auto_compact_chunks = 0;
  options.compact_dead_fraction = 1.0;
  options.target_chunk_rows = 4;
  auto table = MakeTable(options, clock);
  for (int i = 0; i < 10; ++i) {
    clock.Advance(0.5);
    RILL_ASSERT_OK(table->Write(Rows(i, i + 3, i)));
  }
  const auto before = Contents(*table);
  const auto rows = table->num_rows();
  EXPECT_GT(table->num_chunks(), 3);
  RILL_ASSERT_OK(table->Compact(/*full=*/true));
  EXPECT_EQ(Contents(*table), before) << "same rows, same order, same timestamps";
  EXPECT_EQ(table->num_rows(), rows);
  std::string sizes;
  for (const auto& chunk : table->snapshot()->chunks()) {
    sizes += std::to_string(chunk.batch->num_rows()) + "/" + std::to_string(chunk.live_rows) + " ";
  }
  EXPECT_EQ(table->num_chunks(), (rows + 3) / 4)
      << rows << " rows in chunks of at most 4 (rows/live): " << sizes;
  ExpectDeadFractionAtMost(*table->snapshot(), 0.0);
  for (const auto& chunk : table->snapshot()->chunks()) {
    EXPECT_LE(chunk.batch->num_rows(), 4);
  }
}

TEST(Compaction, OfAnEmptyTableIsANoOp) {
  FakeClock clock;
  auto table = MakeTable({}, clock);
  RILL_ASSERT_OK(table->Compact());
  RILL_ASSERT_OK(table->Compact(/*full=*/true));
  EXPECT_EQ(table->num_rows(), 0);
  EXPECT_EQ(table->num_chunks(), 0);
}

TEST(Compaction, DropsChunksWithNoLiveRows) {
  FakeClock clock;
  TableOptions options;
  options.auto_compact_chunks = 0;
  auto table = MakeTable(options, clock);
  RILL_ASSERT_OK(table->Write(Rows(0, 5, 1)));
  RILL_ASSERT_OK(table->Write(Rows(0, 5, 2)));
  RILL_ASSERT_OK(table->Compact());
  for (const auto& chunk : table->snapshot()->chunks()) {
    EXPECT_GT(chunk.live_rows, 0);
  }
  EXPECT_EQ(table->num_rows(), 5);
}

}  // namespace
}  // namespace rill
