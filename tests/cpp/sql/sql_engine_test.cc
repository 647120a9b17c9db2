// SqlEngine: views over live tables, snapshots, zero copy, errors, safety.
#include "rill/common/arrow_init.h"
#include "rill/sql/sql_engine.h"

#include <atomic>
#include <string>
#include <thread>

#include <arrow/api.h>
#include <gtest/gtest.h>

#include "rill/table/live_table.h"
#include "sql/sql_test_util.h"

namespace rill {
namespace {

using sqltest::BatchOf;
using sqltest::SortedRows;

std::shared_ptr<arrow::Schema> OrdersSchema() {
  return arrow::schema({arrow::field("order_id", arrow::int64()),
                        arrow::field("user_tier", arrow::utf8()),
                        arrow::field("amount", arrow::float64())});
}

std::shared_ptr<LiveTable> MakeOrders(const std::string& name = "orders") {
  TableOptions options;
  options.primary_key = {"order_id"};
  return LiveTable::Make(name, OrdersSchema(), options).ValueOrDie();
}

std::unique_ptr<SqlEngine> MakeEngine(SqlOptions options = {}) {
  return SqlEngine::Make(options).ValueOrDie();
}

int64_t ScalarInt(const arrow::Table& table) {
  auto scalar = table.column(0)->GetScalar(0).ValueOrDie();
  return std::static_pointer_cast<arrow::Int64Scalar>(scalar)->value;
}

int64_t CountRows(SqlEngine& sql, const std::string& from) {
  auto result = sql.Query("SELECT count(*)::BIGINT FROM " + from);
  EXPECT_TRUE(result.ok()) << result.status().ToString();
  return result.ok() ? ScalarInt(**result) : -1;
}

TEST(SqlEngine, SeesRowsWrittenAfterViewCreated) {
  auto sql = MakeEngine();
  auto orders = MakeOrders();
  ASSERT_OK(sql->RegisterTable(orders));
  EXPECT_EQ(CountRows(*sql, "orders"), 0);

  ASSERT_OK(orders->Write(BatchOf(OrdersSchema(), {"[1, 2, 3]", R"(["Gold", "Silver", "Gold"])",
                                                        "[100.5, 45.0, 250.0]"})));
  EXPECT_EQ(CountRows(*sql, "orders"), 3);

  ASSERT_OK(orders->Write(BatchOf(OrdersSchema(), {"[4]", R"(["Bronze"])", "[1.0]"})));
  EXPECT_EQ(CountRows(*sql, "orders"), 4);
}

TEST(SqlEngine, ReturnsTypedColumnsWithVarcharAsUtf8) {
  auto sql = MakeEngine();
  auto orders = MakeOrders();
  ASSERT_OK(sql->RegisterTable(orders));
  ASSERT_OK(orders->Write(
      BatchOf(OrdersSchema(), {"[1, 2]", R"(["Gold", null])", "[100.5, 45.0]"})));

  ASSERT_OK_AND_ASSIGN(
      auto result, sql->Query("SELECT order_id, user_tier, amount FROM orders ORDER BY 1"));
  ASSERT_EQ(result->num_columns(), 3);
  EXPECT_TRUE(result->schema()->field(0)->type()->Equals(arrow::int64()));
  EXPECT_TRUE(result->schema()->field(1)->type()->Equals(arrow::utf8()));
  EXPECT_TRUE(result->schema()->field(2)->type()->Equals(arrow::float64()));
  EXPECT_EQ(sqltest::RowStrings(*result),
            (std::vector<std::string>{"1|Gold|100.5", "2|null|45"}));
}

TEST(SqlEngine, ExposesSystemColumns) {
  sqltest::FakeClock clock(1000.0);
  TableOptions options;
  options.primary_key = {"order_id"};
  options.clock = clock.clock();
  auto orders = LiveTable::Make("orders", OrdersSchema(), options).ValueOrDie();
  auto sql = MakeEngine();
  ASSERT_OK(sql->RegisterTable(orders));
  ASSERT_OK(orders->Write(BatchOf(OrdersSchema(), {"[1]", R"(["Gold"])", "[1.0]"})));
  clock.Set(1005.0);
  ASSERT_OK(orders->Write(BatchOf(OrdersSchema(), {"[1]", R"(["Gold"])", "[2.0]"})));

  ASSERT_OK_AND_ASSIGN(auto result,
                            sql->Query("SELECT amount, z_insert_ts, z_update_ts FROM orders"));
  EXPECT_EQ(sqltest::RowStrings(*result), (std::vector<std::string>{"2|1000|1005"}));
}

// arrow_scan leaves pushed-down filters to the stream; ours must not lose them.
TEST(SqlEngine, AppliesFiltersAndProjectionsOverLiveTables) {
  auto sql = MakeEngine();
  auto orders = MakeOrders();
  ASSERT_OK(sql->RegisterTable(orders));
  ASSERT_OK(orders->Write(BatchOf(OrdersSchema(), {"[1, 2, 3, 4]",
                                                        R"(["Gold", "Silver", "Gold", null])",
                                                        "[10.0, 20.0, 30.0, 40.0]"})));

  ASSERT_OK_AND_ASSIGN(
      auto result,
      sql->Query("SELECT amount FROM orders WHERE user_tier = 'Gold' AND order_id > 1"));
  EXPECT_EQ(SortedRows(*result), (std::vector<std::string>{"30"}));

  ASSERT_OK_AND_ASSIGN(result, sql->Query("SELECT order_id FROM orders WHERE user_tier "
                                               "IS NULL OR amount < 15 ORDER BY order_id"));
  EXPECT_EQ(sqltest::RowStrings(*result), (std::vector<std::string>{"1", "4"}));

  ASSERT_OK_AND_ASSIGN(
      result, sql->Query("SELECT amount, order_id FROM orders WHERE order_id IN (2, 3)"));
  EXPECT_EQ(SortedRows(*result), (std::vector<std::string>{"20|2", "30|3"}));
}

TEST(SqlEngine, HidesRowsReplacedByUpserts) {
  auto sql = MakeEngine();
  auto orders = MakeOrders();
  ASSERT_OK(sql->RegisterTable(orders));
  ASSERT_OK(orders->Write(BatchOf(OrdersSchema(), {"[1, 2, 3]", R"(["a", "b", "c"])",
                                                        "[1.0, 2.0, 3.0]"})));
  ASSERT_OK(orders->Write(BatchOf(OrdersSchema(), {"[2]", R"(["B"])", "[20.0]"})));

  ASSERT_OK_AND_ASSIGN(auto result,
                            sql->Query("SELECT order_id, user_tier, amount FROM orders"));
  EXPECT_EQ(SortedRows(*result), (std::vector<std::string>{"1|a|1", "2|B|20", "3|c|3"}));
}

TEST(SqlEngine, ScansWithoutCopyingTheTable) {
  auto sql = MakeEngine();
  auto schema = arrow::schema({arrow::field("x", arrow::int64())});
  TableOptions options;
  auto table = LiveTable::Make("numbers", schema, options).ValueOrDie();
  constexpr int64_t kRows = 1 << 20;
  arrow::Int64Builder builder;
  ASSERT_TRUE(builder.Reserve(kRows).ok());
  for (int64_t i = 0; i < kRows; ++i) {
    builder.UnsafeAppend(i);
  }
  auto values = builder.Finish().ValueOrDie();
  ASSERT_OK(table->Write(arrow::RecordBatch::Make(schema, kRows, {values})));
  ASSERT_OK(sql->RegisterTable(table));
  ASSERT_EQ(CountRows(*sql, "numbers"), kRows);  // warm up

  // Both pools a scan could copy into: Arrow's default and the live tables' pool.
  auto total = [] {
    int64_t bytes = arrow::default_memory_pool()->total_bytes_allocated();
    if (TableMemoryPool() != arrow::default_memory_pool()) {
      bytes += TableMemoryPool()->total_bytes_allocated();
    }
    return bytes;
  };
  const int64_t allocated_before = total();
  ASSERT_OK_AND_ASSIGN(
      auto result, sql->Query("SELECT sum(x)::BIGINT, sum(z_update_ts) FROM numbers"));
  const int64_t allocated = total() - allocated_before;
  EXPECT_EQ(ScalarInt(*result), kRows * (kRows - 1) / 2);
  // The table holds 24 MiB (x and the two timestamps); a copy would show here.
  EXPECT_LT(allocated, 1 << 20) << "the scan allocated " << allocated << " bytes";
  EXPECT_LT(sql->MemoryUsage(), 8 << 20);
}

TEST(SqlEngine, KeepsDuckDbMessageAndQueryInErrors) {
  auto sql = MakeEngine();
  auto result = sql->Query("SELECT * FROM no_such_table");
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(result.status().IsInvalid());
  EXPECT_NE(result.status().message().find("Catalog Error"), std::string::npos)
      << result.status().message();
  EXPECT_NE(result.status().message().find("no_such_table"), std::string::npos);
  EXPECT_NE(result.status().message().find("SELECT * FROM no_such_table"), std::string::npos);

  result = sql->Query("SELEC 1");
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().message().find("Parser Error"), std::string::npos)
      << result.status().message();
}

TEST(SqlEngine, RefusesStatementsThatWriteOrReconfigure) {
  auto sql = MakeEngine();
  auto orders = MakeOrders();
  ASSERT_OK(sql->RegisterTable(orders));
  for (const char* statement :
       {"DROP VIEW orders", "CREATE VIEW orders AS SELECT 1 AS x",
        "CREATE TABLE t AS SELECT 1 AS x", "SET threads = 1", "ATTACH ':memory:' AS other",
        "EXPLAIN ANALYZE CREATE TABLE t AS SELECT 1", "SELECT 1; DROP VIEW orders"}) {
    auto result = sql->Query(statement);
    EXPECT_FALSE(result.ok()) << statement;
  }
  EXPECT_EQ(CountRows(*sql, "orders"), 0);
  ASSERT_OK(sql->Query("EXPLAIN SELECT * FROM orders"));
}

TEST(SqlEngine, CannotReadFilesByDefault) {
  auto sql = MakeEngine();
  auto result = sql->Query("SELECT * FROM read_csv('/etc/hostname')");
  ASSERT_FALSE(result.ok());
  // Refused for lack of permission (enable_external_access=false), not for any other reason.
  EXPECT_EQ(SqlErrorType(result.status()), "Permission") << result.status();
  EXPECT_NE(result.status().message().find("file system operations are disabled"),
            std::string::npos)
      << result.status();
}

TEST(SqlEngine, QuotesOddTableNames) {
  auto sql = MakeEngine();
  for (const std::string name : {"select", "my \"odd\" table-1", "Orders Archive"}) {
    auto table = MakeOrders(name);
    ASSERT_OK(sql->RegisterTable(table));
    ASSERT_OK(table->Write(BatchOf(OrdersSchema(), {"[7]", R"(["a"])", "[1.0]"})));
    EXPECT_EQ(CountRows(*sql, QuoteIdentifier(name)), 1) << name;
  }
  EXPECT_EQ(QuoteIdentifier("a\"b"), "\"a\"\"b\"");
  EXPECT_EQ(sql->TableNames(),
            (std::vector<std::string>{"Orders Archive", "my \"odd\" table-1", "select"}));
}

TEST(SqlEngine, UnregisterRemovesTheView) {
  auto sql = MakeEngine();
  auto orders = MakeOrders();
  ASSERT_OK(sql->RegisterTable(orders));
  EXPECT_EQ(CountRows(*sql, "orders"), 0);
  ASSERT_OK(sql->UnregisterTable("orders"));
  EXPECT_FALSE(sql->Query("SELECT * FROM orders").ok());
  EXPECT_TRUE(sql->UnregisterTable("orders").IsKeyError());
  // The engine no longer holds the table.
  EXPECT_EQ(orders.use_count(), 1);
}

TEST(SqlEngine, RegisteringAgainReplacesTheTable) {
  auto sql = MakeEngine();
  auto first = MakeOrders();
  ASSERT_OK(first->Write(BatchOf(OrdersSchema(), {"[1]", R"(["a"])", "[1.0]"})));
  ASSERT_OK(sql->RegisterTable(first));
  EXPECT_EQ(CountRows(*sql, "orders"), 1);

  auto second = LiveTable::Make("orders", arrow::schema({arrow::field("v", arrow::utf8())}),
                                TableOptions{})
                    .ValueOrDie();
  ASSERT_OK(sql->RegisterTable(second));
  EXPECT_EQ(CountRows(*sql, "orders"), 0);
  ASSERT_OK(sql->Query("SELECT v FROM orders"));
  EXPECT_EQ(first.use_count(), 1);
}

TEST(SqlEngine, QueryWithShowsTablesToThatQueryOnly) {
  auto sql = MakeEngine();
  auto orders = MakeOrders();
  ASSERT_OK(sql->RegisterTable(orders));
  auto batch = BatchOf(OrdersSchema(), {"[1, 2]", R"(["a", "b"])", "[1.0, 2.0]"});
  auto table = arrow::Table::FromRecordBatches({batch}).ValueOrDie();

  ASSERT_OK_AND_ASSIGN(
      auto result, sql->QueryWith("SELECT sum(amount) FROM batch", {{"batch", table}}));
  EXPECT_EQ(sqltest::RowStrings(*result), (std::vector<std::string>{"3"}));
  EXPECT_FALSE(sql->Query("SELECT * FROM batch").ok());

  // A temporary view hides a registered table of the same name, then goes away.
  ASSERT_OK_AND_ASSIGN(result, sql->QueryWith("SELECT count(*)::BIGINT FROM orders",
                                                   {{"orders", table}}));
  EXPECT_EQ(ScalarInt(*result), 2);
  EXPECT_EQ(CountRows(*sql, "orders"), 0);
}

// Rows with a registered table's very columns (a StreamSqlTask's new rows)
// are shown through that table's own view for the one query, without a view
// of their own; the view reads the live table again afterwards, also after a
// failed query, and other tables stay visible (a join of new rows with them).
TEST(SqlEngine, QueryWithRowsOfARegisteredTablesColumnsReadsThemForThatQueryOnly) {
  auto sql = MakeEngine();
  auto orders = MakeOrders();
  ASSERT_OK(sql->RegisterTable(orders));
  ASSERT_OK(orders->Write(BatchOf(OrdersSchema(), {"[1, 2, 3]", R"(["a", "b", "c"])",
                                                   "[1.0, 2.0, 3.0]"})));
  auto fresh = MakeOrders("fresh");
  ASSERT_OK(fresh->Write(BatchOf(OrdersSchema(), {"[10, 20]", R"(["a", "z"])", "[5.5, 7.0]"})));
  auto rows = fresh->snapshot()->ToTable().ValueOrDie();
  ASSERT_TRUE(rows->schema()->Equals(*orders->schema()));

  for (int round = 0; round < 3; ++round) {
    ASSERT_OK_AND_ASSIGN(auto result,
                         sql->QueryWith("SELECT count(*)::BIGINT, sum(amount) FROM orders",
                                        {{"orders", rows}}));
    EXPECT_EQ(sqltest::RowStrings(*result), (std::vector<std::string>{"2|12.5"}));
    EXPECT_EQ(CountRows(*sql, "orders"), 3);
    // A failing query clears the substitution too.
    EXPECT_FALSE(sql->QueryWith("SELECT no_such_column FROM orders", {{"orders", rows}}).ok());
    EXPECT_EQ(CountRows(*sql, "orders"), 3);
  }
  // The new rows joined with the live table of another name.
  auto tiers = MakeOrders("tiers");
  ASSERT_OK(sql->RegisterTable(tiers));
  ASSERT_OK(tiers->Write(BatchOf(OrdersSchema(), {"[7]", R"(["a"])", "[0.0]"})));
  ASSERT_OK_AND_ASSIGN(
      auto joined,
      sql->QueryWith("SELECT o.order_id FROM orders o JOIN tiers t USING (user_tier)",
                     {{"orders", rows}}));
  EXPECT_EQ(sqltest::RowStrings(*joined), (std::vector<std::string>{"10"}));
}

/// `rows` orders with distinct ids, 24-character tiers and amounts.
std::shared_ptr<arrow::RecordBatch> ManyOrders(int64_t rows) {
  arrow::Int64Builder ids;
  arrow::StringBuilder tiers;
  arrow::DoubleBuilder amounts;
  for (int64_t i = 0; i < rows; ++i) {
    EXPECT_TRUE(ids.Append(i).ok());
    EXPECT_TRUE(tiers.Append("tier-" + std::to_string(1000000000000000000 + i)).ok());
    EXPECT_TRUE(amounts.Append(static_cast<double>(i % 977)).ok());
  }
  return arrow::RecordBatch::Make(OrdersSchema(), rows,
                                  {ids.Finish().ValueOrDie(), tiers.Finish().ValueOrDie(),
                                   amounts.Finish().ValueOrDie()});
}

TEST(SqlEngine, ReportsMemoryUsage) {
  auto sql = MakeEngine();
  const int64_t idle = sql->MemoryUsage();
  EXPECT_GE(idle, 0);
  EXPECT_LT(idle, int64_t{64} << 20) << "an engine without data holds next to nothing";

  // Live tables are Arrow memory, not DuckDB's: loading one changes nothing.
  auto orders = MakeOrders();
  ASSERT_OK(sql->RegisterTable(orders));
  constexpr int64_t kRows = 1000000;
  ASSERT_OK(orders->Write(ManyOrders(kRows)));
  const int64_t table_bytes = orders->snapshot()->nbytes();
  EXPECT_LT(sql->MemoryUsage(), idle + (int64_t{16} << 20));

  // A hash aggregate over 1M distinct keys (and their 24-byte strings) makes
  // DuckDB hold the groups in its buffer manager while the query runs: watch
  // MemoryUsage from another thread.
  std::atomic<bool> done{false};
  std::atomic<int64_t> peak{0};
  std::thread sampler([&] {
    while (!done.load()) {
      const int64_t now = sql->MemoryUsage();
      if (now > peak.load()) peak.store(now);
    }
  });
  auto result = sql->Query(
      "SELECT count(*)::BIGINT FROM (SELECT order_id, any_value(user_tier) AS t, "
      "sum(amount) FROM orders GROUP BY order_id)");
  done.store(true);
  sampler.join();
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(ScalarInt(**result), kRows);
  // The groups hold at least the 8-byte keys of every row; a plausible hash
  // table stays within a few times the table's own bytes.
  EXPECT_GE(peak.load() - idle, kRows * 8)
      << "peak " << peak.load() << " bytes, idle " << idle << " bytes";
  EXPECT_LE(peak.load(), idle + 8 * table_bytes)
      << "peak " << peak.load() << " bytes for a table of " << table_bytes << " bytes";
}

}  // namespace
}  // namespace rill
