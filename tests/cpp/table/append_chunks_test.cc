// Chunks of unkeyed (append) tables written in many small pieces, the Nexmark
// latency path (issue 15): a write's small batches become one chunk, merging
// copies a bounded number of rows per write and never re-copies a merged
// chunk, and max_rows expiry slices the oldest chunk instead of copying it.
#include <map>
#include <set>

#include <arrow/api.h>
#include <gtest/gtest.h>

#include "rill/table/live_table.h"
#include "table/test_util.h"

namespace rill {
namespace {

using test::FakeClock;

std::shared_ptr<arrow::Schema> Schema() {
  return arrow::schema({arrow::field("id", arrow::int64()), arrow::field("s", arrow::utf8())});
}

/// Rows [from, to): id i and s "s<i>" (nulls every 7th row).
std::shared_ptr<arrow::RecordBatch> Rows(int64_t from, int64_t to) {
  arrow::Int64Builder ids;
  arrow::StringBuilder strings;
  for (int64_t i = from; i < to; ++i) {
    EXPECT_TRUE(ids.Append(i).ok());
    EXPECT_TRUE((i % 7 == 0 ? strings.AppendNull() : strings.Append("s" + std::to_string(i))).ok());
  }
  return arrow::RecordBatch::Make(Schema(), to - from,
                                  {ids.Finish().ValueOrDie(), strings.Finish().ValueOrDie()});
}

std::shared_ptr<LiveTable> AppendTable(int64_t max_rows, FakeClock& clock) {
  TableOptions options;
  options.mode = TableMode::kAppend;
  options.retention = RetentionPolicy{};
  options.retention->max_rows = max_rows;
  options.clock = clock.clock();
  return LiveTable::Make("t", Schema(), options).ValueOrDie();
}

/// Every row of the table's current version: ids in order, and "id:s" cells.
std::vector<std::string> Contents(const LiveTable& table) {
  auto t = table.snapshot()->ToTable().ValueOrDie()->CombineChunks().ValueOrDie();
  const auto& ids = static_cast<const arrow::Int64Array&>(*t->GetColumnByName("id")->chunk(0));
  const auto& s = static_cast<const arrow::StringArray&>(*t->GetColumnByName("s")->chunk(0));
  std::vector<std::string> out;
  for (int64_t i = 0; i < t->num_rows(); ++i) {
    out.push_back(std::to_string(ids.Value(i)) + ":" + (s.IsNull(i) ? "null" : s.GetString(i)));
  }
  return out;
}

std::vector<std::string> Expected(int64_t from, int64_t to) {
  std::vector<std::string> out;
  for (int64_t i = from; i < to; ++i) {
    out.push_back(std::to_string(i) + ":" + (i % 7 == 0 ? "null" : "s" + std::to_string(i)));
  }
  return out;
}

TEST(AppendChunks, OneWriteOfManySmallBatchesIsOneChunk) {
  FakeClock clock;
  auto table = AppendTable(1'000'000, clock);
  std::vector<std::shared_ptr<arrow::RecordBatch>> batches;
  // 20 batches: below auto_compact_chunks (32), so no merge would join them.
  for (int64_t b = 0; b < 20; ++b) batches.push_back(Rows(b * 500, (b + 1) * 500));
  RILL_ASSERT_OK_AND_ASSIGN(auto stats, table->Write(batches));
  EXPECT_EQ(stats.rows_in, 10'000);
  EXPECT_EQ(table->snapshot()->chunks().size(), 1u);
  EXPECT_EQ(Contents(*table), Expected(0, 10'000));
}

TEST(AppendChunks, LargeBatchesOfAWriteAreKeptWithoutACopy) {
  FakeClock clock;
  auto table = AppendTable(1'000'000, clock);
  auto large = Rows(0, 70'000);  // over half of target_chunk_rows (128k)
  RILL_ASSERT_OK(table->Write({large, Rows(70'000, 70'100), Rows(70'100, 70'200)}));
  const auto& chunks = table->snapshot()->chunks();
  ASSERT_EQ(chunks.size(), 2u);  // the large batch, then the two small ones together
  EXPECT_EQ(chunks[0].batch->column(0)->data()->buffers[1]->data(),
            large->column(0)->data()->buffers[1]->data());
  EXPECT_EQ(chunks[1].batch->num_rows(), 200);
  EXPECT_EQ(Contents(*table), Expected(0, 70'200));
}

// One write per "tick" of a few hundred rows: the table stays within its chunk
// budget, each write copies at most one merge group (2 × 8192 rows) besides
// its own rows, and a chunk of 8192 rows or more is never copied again.
TEST(AppendChunks, MergingCopiesABoundedNumberOfRowsPerWrite) {
  FakeClock clock;
  auto table = AppendTable(1'000'000, clock);
  std::set<const arrow::RecordBatch*> settled;  // chunks of >= 8192 rows seen
  std::set<const arrow::RecordBatch*> before;
  int64_t written = 0;
  for (int w = 0; w < 400; ++w) {
    clock.Advance(0.01);
    const int64_t n = 300 + (w * 37) % 500;
    RILL_ASSERT_OK(table->Write(Rows(written, written + n)));
    written += n;
    auto version = table->snapshot();
    const auto& chunks = version->chunks();
    const int64_t max_chunks = std::max<int64_t>(32, written / 8192);
    ASSERT_LE(static_cast<int64_t>(chunks.size()), max_chunks) << "write " << w;
    int64_t copied = 0;
    std::set<const arrow::RecordBatch*> now;
    for (const auto& c : chunks) {
      now.insert(c.batch.get());
      EXPECT_LE(c.batch->num_rows(), 2 * 8192) << "write " << w;
      if (before.count(c.batch.get()) == 0) copied += c.batch->num_rows();
    }
    for (const auto* s : settled) {
      ASSERT_EQ(now.count(s), 1u) << "a chunk of 8192+ rows was rewritten at write " << w;
    }
    for (const auto& c : chunks) {
      if (c.batch->num_rows() >= 8192) settled.insert(c.batch.get());
    }
    EXPECT_LE(copied, 2 * 8192 + n) << "write " << w;
    before = std::move(now);
  }
  EXPECT_EQ(Contents(*table), Expected(0, written));
}

TEST(AppendChunks, MaxRowsSlicesTheOldestChunkWithoutCopying) {
  FakeClock clock;
  auto table = AppendTable(1'500, clock);
  auto first = Rows(0, 1'000);
  RILL_ASSERT_OK(table->Write(first));
  clock.Advance(1);
  RILL_ASSERT_OK_AND_ASSIGN(auto stats, table->Write(Rows(1'000, 2'000)));
  EXPECT_EQ(stats.expired, 500);
  auto version = table->snapshot();
  ASSERT_EQ(version->chunks().size(), 2u);
  const auto& oldest = version->chunks()[0];
  EXPECT_EQ(oldest.batch->num_rows(), 500);
  EXPECT_EQ(oldest.live_rows, 500);
  EXPECT_EQ(oldest.alive, nullptr) << "no dead rows kept";
  // The same value buffer as the written batch, 500 rows in.
  const auto& data = *oldest.batch->column(0)->data();
  EXPECT_EQ(data.buffers[1]->data(), first->column(0)->data()->buffers[1]->data());
  EXPECT_EQ(data.offset, 500);
  EXPECT_EQ(version->num_rows(), 1'500);
  EXPECT_EQ(Contents(*table), Expected(500, 2'000));
  // Further expiry keeps slicing, then drops whole chunks.
  clock.Advance(1);
  RILL_ASSERT_OK(table->Write(Rows(2'000, 2'700)));
  EXPECT_EQ(Contents(*table), Expected(1'200, 2'700));
  EXPECT_EQ(table->snapshot()->chunks().size(), 2u);
}

// A keyed table's write keeps its batches apart: a key repeated in a later
// batch is an update, as before.
TEST(AppendChunks, KeyedWritesAreNotCoalesced) {
  FakeClock clock;
  TableOptions options;
  options.primary_key = {"id"};
  options.clock = clock.clock();
  auto table = LiveTable::Make("k", Schema(), options).ValueOrDie();
  RILL_ASSERT_OK_AND_ASSIGN(auto stats, table->Write({Rows(0, 10), Rows(5, 15)}));
  EXPECT_EQ(stats.inserted, 15);
  EXPECT_EQ(stats.updated, 5);
  EXPECT_EQ(table->num_rows(), 15);
}

}  // namespace
}  // namespace rill
