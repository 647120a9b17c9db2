// SqlEngine under concurrency: queries from many threads while tables change.
// (Runs again under ThreadSanitizer: the file name carries the "threads" label.)
#include "rill/sql/sql_engine.h"

#include <atomic>
#include <thread>

#include <arrow/api.h>
#include <gtest/gtest.h>

#include "rill/table/live_table.h"
#include "sql/sql_test_util.h"

namespace rill {
namespace {

using sqltest::BatchOf;

std::shared_ptr<arrow::Schema> OrdersSchema() {
  return arrow::schema({arrow::field("order_id", arrow::int64()),
                        arrow::field("user_tier", arrow::utf8()),
                        arrow::field("amount", arrow::float64())});
}

std::shared_ptr<LiveTable> MakeOrders() {
  TableOptions options;
  options.primary_key = {"order_id"};
  return LiveTable::Make("orders", OrdersSchema(), options).ValueOrDie();
}

std::unique_ptr<SqlEngine> MakeEngine() { return SqlEngine::Make().ValueOrDie(); }

// A query pins one version of every table, so two scans of the same table in
// one query agree even while the table is being written.
TEST(SqlEngine, ReadsOneVersionPerQueryWhileTablesChange) {
  auto sql = MakeEngine();
  auto orders = MakeOrders();
  ASSERT_OK(sql->RegisterTable(orders));

  std::atomic<bool> stop{false};
  std::thread writer([&] {
    int64_t id = 0;
    while (!stop.load()) {
      auto batch = BatchOf(OrdersSchema(), {"[" + std::to_string(id) + "]", R"(["x"])", "[1.0]"});
      ++id;
      if (!orders->Write(batch).ok()) {
        return;
      }
    }
  });
  int64_t last = 0;
  for (int i = 0; i < 200; ++i) {
    auto result = sql->Query(
        "SELECT (SELECT count(*) FROM orders)::BIGINT - (SELECT count(*) FROM orders "
        "WHERE order_id >= 0)::BIGINT, (SELECT count(*) FROM orders)::BIGINT");
    ASSERT_TRUE(result.ok()) << result.status().ToString();
    auto diff = std::static_pointer_cast<arrow::Int64Scalar>(
        (*result)->column(0)->GetScalar(0).ValueOrDie());
    auto count = std::static_pointer_cast<arrow::Int64Scalar>(
        (*result)->column(1)->GetScalar(0).ValueOrDie());
    EXPECT_EQ(diff->value, 0) << "scans of one query saw different versions";
    EXPECT_GE(count->value, last) << "a later query saw an older version";
    last = count->value;
  }
  stop.store(true);
  writer.join();
  EXPECT_GT(last, 0);
}

TEST(SqlEngine, RunsQueriesFromManyThreads) {
  auto sql = MakeEngine();
  auto orders = MakeOrders();
  ASSERT_OK(sql->RegisterTable(orders));
  ASSERT_OK(orders->Write(BatchOf(OrdersSchema(), {"[1, 2, 3]", R"(["a", "b", "a"])",
                                                        "[1.0, 2.0, 3.0]"})));
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 40; ++i) {
        auto result = sql->Query(
            "SELECT user_tier, sum(amount) AS total FROM orders GROUP BY user_tier ORDER BY 1");
        if (!result.ok() ||
            sqltest::RowStrings(**result) != std::vector<std::string>{"a|4", "b|2"}) {
          failures.fetch_add(1);
        }
      }
    });
  }
  for (auto& thread : threads) {
    thread.join();
  }
  EXPECT_EQ(failures.load(), 0);
}

TEST(SqlEngine, RegistersTablesWhileOtherThreadsQuery) {
  auto sql = MakeEngine();
  auto orders = MakeOrders();
  ASSERT_OK(sql->RegisterTable(orders));
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 3; ++t) {
    readers.emplace_back([&] {
      while (!stop.load()) {
        if (!sql->Query("SELECT count(*) FROM orders").ok()) {
          failures.fetch_add(1);
        }
      }
    });
  }
  for (int i = 0; i < 30; ++i) {
    auto extra = LiveTable::Make("extra_" + std::to_string(i % 3), OrdersSchema(),
                                 TableOptions{})
                     .ValueOrDie();
    ASSERT_OK(sql->RegisterTable(extra));
    ASSERT_OK(sql->RegisterTable(MakeOrders()));  // replaces the view under readers
    if (i % 2 == 1) {
      ASSERT_OK(sql->UnregisterTable("extra_" + std::to_string(i % 3)));
    }
  }
  stop.store(true);
  for (auto& reader : readers) {
    reader.join();
  }
  EXPECT_EQ(failures.load(), 0);
}

}  // namespace
}  // namespace rill
