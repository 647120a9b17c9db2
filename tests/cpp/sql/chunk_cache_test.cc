// The per-chunk cache of summaries and dictionary encodings: it never keeps
// chunks alive, stays bounded while chunks come and go, and gives one encoding
// object per live chunk and column.
#include "rill/sql/chunk_cache_internal.h"

#include <set>

#include <arrow/api.h>
#include <arrow/json/from_string.h>
#include <gtest/gtest.h>

#include "rill/sql/arrow_scan_internal.h"
#include "rill/table/live_table.h"
#include "sql/sql_test_util.h"

namespace rill::sql_internal {
namespace {

std::shared_ptr<arrow::Array> JsonArray(const std::shared_ptr<arrow::DataType>& type,
                                        const std::string& json) {
  return arrow::json::ArrayFromJSONString(type, json).ValueOrDie();
}

using sqltest::BatchOf;

std::shared_ptr<arrow::Schema> KvSchema() {
  return arrow::schema({arrow::field("k", arrow::int64()), arrow::field("v", arrow::int64()),
                        arrow::field("s", arrow::utf8())});
}

std::shared_ptr<arrow::RecordBatch> Row(int64_t k, int64_t v, const std::string& s) {
  return BatchOf(KvSchema(), {"[" + std::to_string(k) + "]", "[" + std::to_string(v) + "]",
                              "[\"" + s + "\"]"});
}

TEST(ChunkCache, DoesNotKeepBatchesAlive) {
  ChunkCache cache;
  auto batch = Row(1, 10, "a");
  ASSERT_TRUE(cache.Summary(batch, 1).has_value());
  ASSERT_NE(cache.Dictionary(batch, 2), nullptr);
  EXPECT_EQ(cache.size(), 1u);
  std::weak_ptr<arrow::RecordBatch> weak = batch;
  batch.reset();
  EXPECT_TRUE(weak.expired());
  cache.Prune();
  EXPECT_EQ(cache.size(), 0u);
}

TEST(ChunkCache, StaysBoundedWhileBatchesComeAndGo) {
  ChunkCache cache;
  auto kept = Row(0, 0, "kept");
  ASSERT_TRUE(cache.Summary(kept, 1).has_value());
  auto kept_dictionary = cache.Dictionary(kept, 2);
  for (int i = 0; i < 10000; ++i) {
    auto batch = Row(1, i, "s" + std::to_string(i));
    auto summary = cache.Summary(batch, 1);
    ASSERT_TRUE(summary.has_value());
    // A new batch at a destroyed batch's address must not see its entry.
    ASSERT_EQ(summary->max_signed, i);
    auto dictionary = cache.Dictionary(batch, 2);
    ASSERT_NE(dictionary, nullptr);
    ASSERT_EQ(static_cast<const arrow::DictionaryArray&>(*dictionary).dictionary()->ToString(),
              JsonArray(arrow::utf8(), "[\"s" + std::to_string(i) + "\"]")
                  ->ToString());
    ASSERT_LE(cache.size(), 2u);
  }
  EXPECT_EQ(cache.Dictionary(kept, 2), kept_dictionary);  // the same object
  EXPECT_EQ(cache.Summary(kept, 1)->max_signed, 0);
}

TEST(ChunkCache, EncodesOnlyStringColumnsWorthEncoding) {
  ChunkCache cache;
  auto batch = Row(1, 2, "x");
  EXPECT_EQ(cache.Dictionary(batch, 0), nullptr);  // int64
  std::string values = "[";
  for (int i = 0; i < 1000; ++i) {
    values += (i ? ",\"" : "\"") + std::to_string(i) + "\"";
  }
  auto unique = BatchOf(arrow::schema({arrow::field("s", arrow::utf8())}), {values + "]"});
  EXPECT_EQ(cache.Dictionary(unique, 0), nullptr);  // as many values as rows
  EXPECT_EQ(cache.Dictionary(unique, 0), nullptr);  // and remembered so
}

// Through a live table: summaries follow the pinned version across many
// versions, and chunks dropped by compaction are freed.
TEST(ChunkCache, ForgetsChunksALiveTableDropped) {
  TableOptions options;
  options.primary_key = {"k"};
  options.auto_compact_chunks = 4;
  auto table = LiveTable::Make("kv", KvSchema(), options).ValueOrDie();
  auto cache = std::make_shared<ChunkCache>();
  LiveTableSource source(table, cache);
  EXPECT_FALSE(source.FixedColumnSummary(1).has_value());  // not pinned

  std::vector<std::weak_ptr<arrow::RecordBatch>> seen;
  for (int64_t i = 0; i < 500; ++i) {
    ASSERT_OK(table->Write(Row(i % 7, i, i % 2 ? "odd" : "even")));
    source.Pin();
    auto summary = source.FixedColumnSummary(1);
    EXPECT_EQ(source.FixedNumRows(), std::min<int64_t>(i + 1, 7));
    // Reading through the source encodes `s` in every chunk.
    ASSERT_OK_AND_ASSIGN(auto reader, source.Open({"s", "v"}));
    ASSERT_OK_AND_ASSIGN(auto rows, reader->ToTable());
    EXPECT_EQ(rows->num_rows(), std::min<int64_t>(i + 1, 7));
    EXPECT_EQ(rows->schema()->field(0)->type()->id(), arrow::Type::DICTIONARY);
    source.Unpin();
    ASSERT_TRUE(summary.has_value());
    // Dead rows may widen the bounds but never narrow them.
    EXPECT_LE(summary->min_signed, std::max<int64_t>(0, i - 6));
    EXPECT_EQ(summary->max_signed, i);
    for (const auto& chunk : table->snapshot()->chunks()) {
      seen.push_back(chunk.batch);
    }
    ASSERT_LE(cache->size(), 2 * static_cast<size_t>(table->num_chunks()) + 1);
  }
  EXPECT_FALSE(source.FixedColumnSummary(1).has_value());  // unpinned again
  // Of all chunks ever summarized, only the current version's are alive.
  std::set<const arrow::RecordBatch*> alive;
  for (const auto& weak : seen) {
    if (auto batch = weak.lock()) {
      alive.insert(batch.get());
    }
  }
  EXPECT_EQ(alive.size(), static_cast<size_t>(table->num_chunks()));
  cache->Prune();
  EXPECT_LE(cache->size(), static_cast<size_t>(table->num_chunks()));
}

}  // namespace
}  // namespace rill::sql_internal
