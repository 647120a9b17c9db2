// The change feed read on other threads while the table is written (run
// again under ThreadSanitizer): readers applying the changes they read end
// with exactly the table.
#include <atomic>
#include <map>
#include <thread>

#include <arrow/api.h>
#include <gtest/gtest.h>

#include "rill/table/change_feed.h"
#include "rill/table/live_table.h"
#include "table/test_util.h"

namespace rill {
namespace {

std::shared_ptr<arrow::Schema> KV() {
  return test::SchemaOf({arrow::field("id", arrow::int64()), arrow::field("v", arrow::int64())});
}

/// id -> v, applied from change sets.
struct Copy {
  std::map<int64_t, int64_t> rows;
  Status Apply(const ChangeSet& changes) {
    if (changes.snapshot) rows.clear();
    for (const auto& b : changes.batches) {
      const auto& ids = static_cast<const arrow::Int64Array&>(*b->column(0));
      const auto& vs = static_cast<const arrow::Int64Array&>(*b->column(1));
      const auto& ops = static_cast<const arrow::StringArray&>(*b->column(b->num_columns() - 2));
      for (int64_t r = 0; r < b->num_rows(); ++r) {
        if (ops.GetView(r) == "delete") {
          rows.erase(ids.Value(r));
        } else {
          rows[ids.Value(r)] = vs.Value(r);
        }
      }
    }
    return Status::OK();
  }
};

TEST(ChangeFeedConcurrency, ReadersOnOtherThreadsEndWithTheTableWhileItIsWritten) {
  TableOptions options;
  options.primary_key = {"id"};
  options.mode = TableMode::kSnapshot;
  options.retention = test::Retention(/*max_rows=*/300);
  auto table = LiveTable::Make("t", KV(), options).ValueOrDie();
  constexpr int kWrites = 400;
  std::atomic<bool> done{false};
  auto reader = [&](int64_t max_log_rows, int64_t max_rows, Copy* copy, uint64_t* cursor) {
    ChangeFeedOptions bounds;
    bounds.max_log_rows = max_log_rows;
    auto feed = table->OpenChangeFeed(bounds);
    ChangeReadOptions read;
    read.max_rows = max_rows;
    read.emit_retention_deletes = true;
    for (;;) {
      const bool last = done.load();
      auto changes = feed->Read(*cursor, read);
      ASSERT_TRUE(changes.ok()) << changes.status().ToString();
      ASSERT_TRUE(copy->Apply(*changes).ok());
      *cursor = changes->to_version;
      feed->Acknowledge(*cursor);
      if (last && *cursor == feed->current_version()) return;
    }
  };
  Copy fast_copy, slow_copy;
  uint64_t fast_cursor = 0, slow_cursor = 0;
  std::thread fast(reader, int64_t{1} << 20, 0, &fast_copy, &fast_cursor);
  std::thread slow(reader, 64, 5, &slow_copy, &slow_cursor);
  for (int i = 0; i < kWrites; ++i) {
    arrow::Int64Builder ids, vs;
    for (int k = 0; k < 8; ++k) {
      ASSERT_TRUE(ids.Append((i * 7 + k * 13) % 500).ok());
      ASSERT_TRUE(vs.Append(i * 100 + k).ok());
    }
    auto batch = arrow::RecordBatch::Make(KV(), 8, {*ids.Finish(), *vs.Finish()});
    ASSERT_TRUE(table->Write(batch).ok());
    if (i % 50 == 0) {
      ASSERT_TRUE(table->Compact(/*full=*/i % 100 == 0).ok());
    }
  }
  done.store(true);
  fast.join();
  slow.join();
  std::map<int64_t, int64_t> want;
  auto current = table->snapshot()->ToTable().ValueOrDie()->CombineChunks().ValueOrDie();
  const auto& ids = static_cast<const arrow::Int64Array&>(*current->column(0)->chunk(0));
  const auto& vs = static_cast<const arrow::Int64Array&>(*current->column(1)->chunk(0));
  for (int64_t r = 0; r < current->num_rows(); ++r) want[ids.Value(r)] = vs.Value(r);
  EXPECT_EQ(fast_copy.rows, want);
  EXPECT_EQ(slow_copy.rows, want);
}

}  // namespace
}  // namespace rill
