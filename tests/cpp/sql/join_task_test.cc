// ScheduledSqlTask and TableJoinTask, checked against hand-written DuckDB SQL.
#include "rill/engine/task.h"

#include <arrow/api.h>
#include <gtest/gtest.h>

#include "rill/sql/sql_engine.h"
#include "rill/table/live_table.h"
#include "sql/sql_test_util.h"

namespace rill {
namespace {

using sqltest::BatchOf;
using sqltest::SortedRows;

std::shared_ptr<arrow::Schema> OrdersSchema() {
  return arrow::schema({arrow::field("order_id", arrow::int64()),
                        arrow::field("user_id", arrow::int64()),
                        arrow::field("amount", arrow::float64()),
                        arrow::field("qty", arrow::int64())});
}

std::shared_ptr<arrow::Schema> UsersSchema() {
  return arrow::schema({arrow::field("user_id", arrow::int64()),
                        arrow::field("name", arrow::utf8()),
                        arrow::field("region", arrow::utf8()),
                        arrow::field("amount", arrow::float64())});
}

// Two live tables registered in a SqlEngine, with a settable clock.
class JoinTaskTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sql_ = SqlEngine::Make().ValueOrDie();
    TableOptions options;
    options.clock = clock_.clock();
    options.primary_key = {"order_id"};
    orders_ = LiveTable::Make("orders", OrdersSchema(), options).ValueOrDie();
    options.primary_key = {"user_id"};
    users_ = LiveTable::Make("users", UsersSchema(), options).ValueOrDie();
    ASSERT_TRUE(sql_->RegisterTable(orders_).ok());
    ASSERT_TRUE(sql_->RegisterTable(users_).ok());
    // User 4 has no orders; user 9 and the null user are unknown.
    ASSERT_OK(orders_->Write(BatchOf(
        OrdersSchema(), {"[1, 2, 3, 4, 5, 6]", "[1, 1, 2, 9, null, 3]",
                         "[10.0, 20.0, 5.5, 7.0, 1.0, null]", "[1, 2, 3, 4, 5, 6]"})));
    ASSERT_OK(users_->Write(BatchOf(
        UsersSchema(), {"[1, 2, 3, 4]", R"(["ann", "bob", "cy", "dee"])",
                        R"(["eu", "us", "eu", "us"])", "[0.5, 0.25, null, 1.0]"})));
  }

  JoinTaskOptions Options(JoinType type) {
    JoinTaskOptions o;
    o.name = "enrich";
    o.left_table = "orders";
    o.right_table = "users";
    o.keys = {"user_id"};
    o.output_table = "orders_enriched";
    o.join_type = type;
    return o;
  }

  std::shared_ptr<arrow::Table> RunTask(const JoinTaskOptions& options, bool* replace = nullptr) {
    auto task = TableJoinTask::Make(options);
    EXPECT_TRUE(task.ok()) << task.status().ToString();
    if (!task.ok()) {
      return nullptr;
    }
    auto output = (*task)->Run(*sql_, clock_.now());
    EXPECT_TRUE(output.ok()) << output.status().ToString();
    if (!output.ok()) {
      return nullptr;
    }
    if (replace != nullptr) {
      *replace = output->replace;
    }
    return output->table;
  }

  std::shared_ptr<arrow::Table> Oracle(const std::string& query) {
    auto result = sql_->Query(query);
    EXPECT_TRUE(result.ok()) << result.status().ToString();
    return result.ok() ? *result : nullptr;
  }

  sqltest::FakeClock clock_{100.0};
  std::unique_ptr<SqlEngine> sql_;
  std::shared_ptr<LiveTable> orders_;
  std::shared_ptr<LiveTable> users_;
};

std::vector<std::string> Names(const arrow::Table& table) {
  return table.schema()->field_names();
}

TEST(ScheduledSqlTask, ReturnsQueryResultToReplaceTheOutput) {
  auto sql = SqlEngine::Make().ValueOrDie();
  auto orders = LiveTable::Make("orders", OrdersSchema(), TableOptions{}).ValueOrDie();
  ASSERT_OK(sql->RegisterTable(orders));
  ASSERT_OK(orders->Write(
      BatchOf(OrdersSchema(), {"[1, 2, 3]", "[1, 1, 2]", "[1.5, 2.5, 4.0]", "[1, 1, 1]"})));
  ScheduledSqlTask task("per_user",
                        "SELECT user_id, sum(amount) AS total FROM orders GROUP BY user_id",
                        "totals", /*interval_seconds=*/1.0, /*primary_key=*/{"user_id"});
  EXPECT_EQ(task.Describe(), task.query());
  ASSERT_OK_AND_ASSIGN(auto output, task.Run(*sql, 10.0));
  EXPECT_TRUE(output.replace);
  EXPECT_EQ(SortedRows(*output.table), (std::vector<std::string>{"1|4", "2|4"}));
}

TEST(ScheduledSqlTask, ReportsTaskNameQueryAndDuckDbMessage) {
  auto sql = SqlEngine::Make().ValueOrDie();
  ScheduledSqlTask task("broken", "SELECT nope FROM missing", "out");
  auto output = task.Run(*sql, 1.0);
  ASSERT_FALSE(output.ok());
  const std::string& message = output.status().message();
  EXPECT_NE(message.find("broken"), std::string::npos) << message;
  EXPECT_NE(message.find("SELECT nope FROM missing"), std::string::npos) << message;
  EXPECT_NE(message.find("missing"), std::string::npos) << message;
}

TEST(ParseJoinType, AcceptsEverySpelling) {
  EXPECT_EQ(*ParseJoinType("inner"), JoinType::kInner);
  EXPECT_EQ(*ParseJoinType("left"), JoinType::kLeftOuter);
  EXPECT_EQ(*ParseJoinType("Left Outer"), JoinType::kLeftOuter);
  EXPECT_EQ(*ParseJoinType("left_outer"), JoinType::kLeftOuter);
  EXPECT_EQ(*ParseJoinType("right"), JoinType::kRightOuter);
  EXPECT_EQ(*ParseJoinType("right outer"), JoinType::kRightOuter);
  EXPECT_EQ(*ParseJoinType("full"), JoinType::kFullOuter);
  EXPECT_EQ(*ParseJoinType("full outer"), JoinType::kFullOuter);
  EXPECT_EQ(*ParseJoinType("outer"), JoinType::kFullOuter);
  auto bad = ParseJoinType("cross");
  ASSERT_TRUE(bad.status().IsInvalid());
  EXPECT_NE(bad.status().message().find("cross"), std::string::npos);
}

TEST(ParseAggregateFunction, AcceptsEveryFunctionAndNamesItBack) {
  for (const char* name : {"sum", "count", "avg", "min", "max", "count_distinct"}) {
    ASSERT_OK_AND_ASSIGN(auto fn, ParseAggregateFunction(name));
    EXPECT_STREQ(AggregateFunctionName(fn), name);
  }
  EXPECT_EQ(*ParseAggregateFunction("mean"), AggregateFunction::kAvg);
  EXPECT_EQ(*ParseAggregateFunction("SUM"), AggregateFunction::kSum);
  auto bad = ParseAggregateFunction("median");
  ASSERT_TRUE(bad.status().IsInvalid());
  EXPECT_NE(bad.status().message().find("median"), std::string::npos);
}

TEST_F(JoinTaskTest, MakeRejectsInconsistentOptions) {
  auto o = Options(JoinType::kInner);
  o.keys.clear();
  EXPECT_TRUE(TableJoinTask::Make(o).status().IsInvalid());

  o = Options(JoinType::kInner);
  o.right_keys = {"user_id", "name"};
  auto mismatch = TableJoinTask::Make(o);
  ASSERT_TRUE(mismatch.status().IsInvalid());
  EXPECT_NE(mismatch.status().message().find("right_keys"), std::string::npos);

  o = Options(JoinType::kInner);
  o.aggregations = {{"amount", AggregateFunction::kSum}, {"amount", AggregateFunction::kSum}};
  EXPECT_TRUE(TableJoinTask::Make(o).status().IsInvalid());

  o = Options(JoinType::kFullOuter);
  o.incremental = true;
  EXPECT_TRUE(TableJoinTask::Make(o).status().IsInvalid());

  o = Options(JoinType::kInner);
  o.output_table.clear();
  EXPECT_TRUE(TableJoinTask::Make(o).status().IsInvalid());

  ASSERT_OK_AND_ASSIGN(auto task, TableJoinTask::Make(Options(JoinType::kInner)));
  EXPECT_EQ(task->options().right_keys, (std::vector<std::string>{"user_id"}));
  EXPECT_EQ(task->output_table(), "orders_enriched");
}

// Output: every left user column, right columns minus its keys, clashes
// suffixed "_right", no system columns.
TEST_F(JoinTaskTest, InnerJoinMatchesHandWrittenSql) {
  bool replace = false;
  auto out = RunTask(Options(JoinType::kInner), &replace);
  ASSERT_NE(out, nullptr);
  EXPECT_TRUE(replace);
  EXPECT_EQ(Names(*out), (std::vector<std::string>{"order_id", "user_id", "amount", "qty",
                                                   "name", "region", "amount_right"}));
  auto expected = Oracle(
      "SELECT o.order_id, o.user_id, o.amount, o.qty, u.name, u.region, u.amount "
      "FROM orders o JOIN users u ON o.user_id = u.user_id");
  EXPECT_EQ(SortedRows(*out), SortedRows(*expected));
  EXPECT_EQ(out->num_rows(), 4);
}

TEST_F(JoinTaskTest, LeftOuterJoinMatchesHandWrittenSql) {
  auto out = RunTask(Options(JoinType::kLeftOuter));
  ASSERT_NE(out, nullptr);
  auto expected = Oracle(
      "SELECT o.order_id, o.user_id, o.amount, o.qty, u.name, u.region, u.amount "
      "FROM orders o LEFT JOIN users u ON o.user_id = u.user_id");
  EXPECT_EQ(SortedRows(*out), SortedRows(*expected));
  EXPECT_EQ(out->num_rows(), 6);
}

TEST_F(JoinTaskTest, RightOuterJoinTakesKeysFromTheRight) {
  auto out = RunTask(Options(JoinType::kRightOuter));
  ASSERT_NE(out, nullptr);
  auto expected = Oracle(
      "SELECT o.order_id, coalesce(o.user_id, u.user_id), o.amount, o.qty, u.name, u.region, "
      "u.amount FROM orders o RIGHT JOIN users u ON o.user_id = u.user_id");
  EXPECT_EQ(SortedRows(*out), SortedRows(*expected));
  // User 4 has no order but keeps its id.
  EXPECT_EQ(out->num_rows(), 5);
  auto rows = SortedRows(*out, {"user_id", "name"});
  EXPECT_NE(std::find(rows.begin(), rows.end(), "4|dee"), rows.end());
}

TEST_F(JoinTaskTest, FullOuterJoinMatchesHandWrittenSql) {
  auto out = RunTask(Options(JoinType::kFullOuter));
  ASSERT_NE(out, nullptr);
  auto expected = Oracle(
      "SELECT o.order_id, coalesce(o.user_id, u.user_id), o.amount, o.qty, u.name, u.region, "
      "u.amount FROM orders o FULL OUTER JOIN users u ON o.user_id = u.user_id");
  EXPECT_EQ(SortedRows(*out), SortedRows(*expected));
  EXPECT_EQ(out->num_rows(), 7);
}

TEST_F(JoinTaskTest, JoinsOnDifferentlyNamedAndMultipleKeys) {
  auto schema = arrow::schema({arrow::field("uid", arrow::int64()),
                               arrow::field("qty", arrow::int64()),
                               arrow::field("label", arrow::utf8())});
  auto labels = LiveTable::Make("labels", schema, TableOptions{}).ValueOrDie();
  ASSERT_OK(sql_->RegisterTable(labels));
  ASSERT_OK(labels->Write(
      BatchOf(schema, {"[1, 1, 2]", "[1, 2, 9]", R"(["one-one", "one-two", "two-nine"])"})));

  auto o = Options(JoinType::kInner);
  o.right_table = "labels";
  o.keys = {"user_id", "qty"};
  o.right_keys = {"uid", "qty"};
  auto out = RunTask(o);
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(Names(*out),
            (std::vector<std::string>{"order_id", "user_id", "amount", "qty", "label"}));
  auto expected = Oracle(
      "SELECT o.order_id, o.user_id, o.amount, o.qty, l.label FROM orders o "
      "JOIN labels l ON o.user_id = l.uid AND o.qty = l.qty");
  EXPECT_EQ(SortedRows(*out), SortedRows(*expected));
  EXPECT_EQ(SortedRows(*out, {"order_id", "label"}),
            (std::vector<std::string>{"1|one-one", "2|one-two"}));
}

TEST_F(JoinTaskTest, EveryAggregationMatchesHandWrittenSql) {
  const std::vector<std::string> fns = {"sum", "count", "avg", "min", "max", "count_distinct"};
  for (JoinType type : {JoinType::kInner, JoinType::kLeftOuter, JoinType::kRightOuter,
                        JoinType::kFullOuter}) {
    auto o = Options(type);
    o.group_by = {"region"};
    for (const auto& fn : fns) {
      o.aggregations.emplace_back("amount", ParseAggregateFunction(fn).ValueOrDie());
      o.aggregations.emplace_back("qty", ParseAggregateFunction(fn).ValueOrDie());
    }
    auto out = RunTask(o);
    ASSERT_NE(out, nullptr);
    std::vector<std::string> names = {"region"};
    for (const auto& fn : fns) {
      names.push_back("amount_" + fn);
      names.push_back("qty_" + fn);
    }
    EXPECT_EQ(Names(*out), names);
    EXPECT_TRUE(out->schema()->GetFieldByName("qty_sum")->type()->Equals(arrow::int64()));
    EXPECT_TRUE(out->schema()->GetFieldByName("amount_avg")->type()->Equals(arrow::float64()));

    const std::string join = std::string(JoinTypeName(type)) + " JOIN";
    auto expected = Oracle(
        "SELECT u.region, sum(o.amount), count(o.qty), avg(o.amount), min(o.qty), "
        "max(o.amount), count(DISTINCT o.qty), "
        "sum(o.qty)::BIGINT, count(o.amount), avg(o.qty), min(o.amount), max(o.qty), "
        "count(DISTINCT o.amount) FROM orders o " + join +
        " users u ON o.user_id = u.user_id GROUP BY u.region");
    ASSERT_NE(expected, nullptr);
    EXPECT_EQ(SortedRows(*out, {"region", "amount_sum", "qty_count", "amount_avg", "qty_min",
                                "amount_max", "qty_count_distinct", "qty_sum", "amount_count",
                                "qty_avg", "amount_min", "qty_max", "amount_count_distinct"}),
              SortedRows(*expected))
        << JoinTypeName(type);
  }
}

TEST_F(JoinTaskTest, AggregatesWithoutGroupByGiveOneRow) {
  auto o = Options(JoinType::kInner);
  o.aggregations = {{"amount", AggregateFunction::kSum}, {"order_id", AggregateFunction::kCount}};
  auto out = RunTask(o);
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(sqltest::RowStrings(*out), (std::vector<std::string>{"35.5|4"}));
}

TEST_F(JoinTaskTest, GroupsByKeyColumnsOfOuterJoins) {
  auto o = Options(JoinType::kFullOuter);
  o.group_by = {"user_id"};
  o.aggregations = {{"order_id", AggregateFunction::kCount}};
  auto out = RunTask(o);
  ASSERT_NE(out, nullptr);
  EXPECT_EQ(SortedRows(*out),
            (std::vector<std::string>{"1|2", "2|1", "3|1", "4|0", "9|1", "null|1"}));
}

TEST_F(JoinTaskTest, ReportsMissingColumnsAndTables) {
  auto o = Options(JoinType::kInner);
  o.keys = {"nope"};
  auto task = TableJoinTask::Make(o).ValueOrDie();
  auto output = task->Run(*sql_, 1.0);
  ASSERT_TRUE(output.status().IsKeyError());
  EXPECT_NE(output.status().message().find("nope"), std::string::npos);
  EXPECT_NE(output.status().message().find("enrich"), std::string::npos);

  o = Options(JoinType::kInner);
  o.group_by = {"ghost"};
  o.aggregations = {{"amount", AggregateFunction::kSum}};
  output = TableJoinTask::Make(o).ValueOrDie()->Run(*sql_, 1.0);
  ASSERT_TRUE(output.status().IsKeyError());
  EXPECT_NE(output.status().message().find("ghost"), std::string::npos);

  o = Options(JoinType::kInner);
  o.right_table = "no_such_table";
  EXPECT_TRUE(TableJoinTask::Make(o).ValueOrDie()->Run(*sql_, 1.0).status().IsKeyError());
}

TEST_F(JoinTaskTest, ReportsDuckDbErrorsWithTheQuery) {
  auto o = Options(JoinType::kInner);
  o.aggregations = {{"name", AggregateFunction::kSum}};  // sum of strings
  auto task = TableJoinTask::Make(o).ValueOrDie();
  auto output = task->Run(*sql_, 1.0);
  ASSERT_FALSE(output.ok());
  EXPECT_TRUE(output.status().IsInvalid());
  EXPECT_NE(output.status().message().find("sum("), std::string::npos)
      << output.status().message();
  EXPECT_NE(task->Describe().find("SELECT"), std::string::npos);
}

TEST_F(JoinTaskTest, IncrementalJoinsOnlyNewLeftRows) {
  auto o = Options(JoinType::kInner);
  o.incremental = true;
  o.primary_key = {"order_id"};
  auto task = TableJoinTask::Make(o).ValueOrDie();

  // First run: every row; the watermark becomes that run's now.
  ASSERT_OK_AND_ASSIGN(auto first, task->Run(*sql_, 100.0));
  EXPECT_FALSE(first.replace);
  EXPECT_EQ(SortedRows(*first.table, {"order_id"}),
            (std::vector<std::string>{"1", "2", "3", "6"}));
  EXPECT_EQ(task->watermark(), std::optional<double>(100.0));

  // Nothing new: nothing joined.
  ASSERT_OK_AND_ASSIGN(auto idle, task->Run(*sql_, 101.0));
  EXPECT_EQ(idle.table->num_rows(), 0);

  // A new order, an updated order and an order of an unknown user.
  clock_.Set(102.0);
  ASSERT_OK(orders_->Write(BatchOf(
      OrdersSchema(), {"[7, 2, 8]", "[2, 1, 42]", "[3.0, 99.0, 1.0]", "[1, 1, 1]"})));
  // Right-side changes alone do not re-emit old left rows.
  ASSERT_OK(users_->Write(BatchOf(UsersSchema(),
                                       {"[3]", R"(["cyd"])", R"(["eu"])", "[2.0]"})));
  ASSERT_OK_AND_ASSIGN(auto second, task->Run(*sql_, 102.0));
  EXPECT_EQ(SortedRows(*second.table, {"order_id", "amount", "name"}),
            (std::vector<std::string>{"2|99|ann", "7|3|bob"}));
  EXPECT_EQ(task->watermark(), std::optional<double>(102.0));
  EXPECT_NE(task->Describe().find("z_update_ts"), std::string::npos);
}

TEST_F(JoinTaskTest, BuildSqlQuotesNames) {
  auto o = Options(JoinType::kInner);
  o.left_table = "my orders";
  auto task = TableJoinTask::Make(o).ValueOrDie();
  ASSERT_OK_AND_ASSIGN(auto text,
                            task->BuildSql(*orders_->schema(), *users_->schema(), 5.0));
  EXPECT_NE(text.find("\"my orders\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"z_update_ts\" > 5::DOUBLE"), std::string::npos) << text;
}

}  // namespace
}  // namespace rill
