// SqlSession: one client's warm connection with cached plans for statements
// that read no table. Its answers are SqlEngine::Query's (the oracle), a plan
// is cached only when it reads no table, and table queries follow the
// registry (a table replaced with another schema) and its versions.
#include "rill/sql/sql_session.h"

#include <random>
#include <set>
#include <string>
#include <thread>

#include <arrow/api.h>
#include <gtest/gtest.h>

#include "rill/sql/sql_engine.h"
#include "rill/table/live_table.h"
#include "sql/sql_test_util.h"

namespace rill {
namespace {

using sqltest::BatchOf;
using sqltest::RowStrings;
using sqltest::SortedRows;

std::shared_ptr<LiveTable> MakeTable(std::shared_ptr<arrow::Schema> schema) {
  TableOptions options;
  options.primary_key = {schema->field(0)->name()};
  return LiveTable::Make("events", std::move(schema), options).ValueOrDie();
}

std::shared_ptr<arrow::Schema> TwoColumns() {
  return arrow::schema({arrow::field("id", arrow::int64()), arrow::field("v", arrow::int64())});
}

TEST(SqlSession, ConstantQueriesMatchQueryAndRunFromTheirCachedPlan) {
  auto sql = SqlEngine::Make().ValueOrDie();
  SqlSession session(sql.get());
  std::mt19937 rng(29);
  const char* shapes[] = {"SELECT {a} + {b} AS s, 'x' || {a} AS t",
                          "SELECT {a} * {b} AS p WHERE {a} > {b}",
                          "SELECT CASE WHEN {a} % 2 = 0 THEN 'even' ELSE 'odd' END AS k LIMIT 1",
                          "SELECT [{a}, {b}] AS l, {a}::DOUBLE / 4 AS d"};
  for (int i = 0; i < 200; ++i) {
    std::string q = shapes[rng() % 4];
    for (const char* name : {"{a}", "{b}"}) {
      std::string value = std::to_string(static_cast<int>(rng() % 10) - 3);
      for (size_t at; (at = q.find(name)) != std::string::npos;) q.replace(at, 3, value);
    }
    const bool cached_before = session.HasConstantPlan(q);
    ASSERT_OK_AND_ASSIGN(auto got, session.Query(q, nullptr));
    ASSERT_OK_AND_ASSIGN(auto want, sql->Query(q));
    EXPECT_TRUE(got->schema()->Equals(*want->schema())) << q;
    EXPECT_EQ(RowStrings(*got), RowStrings(*want)) << q;
    // Cached from the first run on (the cache keeps 64 texts; there are fewer here).
    EXPECT_TRUE(session.HasConstantPlan(q)) << q << (cached_before ? " (was cached)" : "");
  }
  EXPECT_LE(session.cached_plans(), SqlSession::kMaxPlans);
}

TEST(SqlSession, VolatileFunctionsRunAgainFromTheCachedPlan) {
  auto sql = SqlEngine::Make().ValueOrDie();
  SqlSession session(sql.get());
  const std::string q = "SELECT random() AS r, 42 AS answer";
  std::set<std::string> seen;
  for (int i = 0; i < 5; ++i) {
    ASSERT_OK_AND_ASSIGN(auto got, session.Query(q, nullptr));
    ASSERT_EQ(got->num_rows(), 1);
    seen.insert(RowStrings(*got)[0]);
  }
  EXPECT_TRUE(session.HasConstantPlan(q));
  EXPECT_EQ(seen.size(), 5u);  // a fresh random() each time (2^-52 odds of a repeat)
  // A plan of constants only answers the same rows each time, as Query does.
  for (int i = 0; i < 3; ++i) {
    ASSERT_OK_AND_ASSIGN(auto got, session.Query("SELECT 42 AS answer, 'x' AS t", nullptr));
    EXPECT_EQ(RowStrings(*got), std::vector<std::string>{"42|x"});
  }
}

TEST(SqlSession, CachesOnlyPlansThatReadNoTable) {
  auto sql = SqlEngine::Make().ValueOrDie();
  auto events = MakeTable(TwoColumns());
  ASSERT_OK(sql->RegisterTable(events));
  ASSERT_OK(events->Write(BatchOf(TwoColumns(), {"[1, 2, 3]", "[10, 20, 30]"})));
  SqlSession session(sql.get());
  for (const std::string q :
       {"SELECT sum(v)::BIGINT AS s FROM events", "SELECT (SELECT max(v) FROM events) AS m",
        "SELECT count(*)::BIGINT AS n FROM range(5)", "SELECT * FROM (SELECT 1 AS one) AS t",
        "WITH c AS (SELECT 2 AS two) SELECT * FROM c", "EXPLAIN SELECT 1"}) {
    ASSERT_OK_AND_ASSIGN(auto got, session.Query(q, nullptr));
    ASSERT_OK_AND_ASSIGN(auto want, sql->Query(q));
    if (q.rfind("EXPLAIN", 0) != 0) {
      EXPECT_EQ(SortedRows(*got), SortedRows(*want)) << q;
    }
    EXPECT_FALSE(session.HasConstantPlan(q)) << q;
  }
  ASSERT_OK(session.Query("SELECT 1 AS one", nullptr).status());
  EXPECT_TRUE(session.HasConstantPlan("SELECT 1 AS one"));
  EXPECT_EQ(session.cached_plans(), 1u);
}

TEST(SqlSession, TableQueriesFollowNewVersionsAndAReplacedSchema) {
  auto sql = SqlEngine::Make().ValueOrDie();
  auto first = MakeTable(TwoColumns());
  ASSERT_OK(sql->RegisterTable(first));
  SqlSession session(sql.get());
  const std::string q = "SELECT * FROM events ORDER BY id";
  ASSERT_OK(first->Write(BatchOf(TwoColumns(), {"[1]", "[5]"})));
  ASSERT_OK_AND_ASSIGN(auto before, session.Query(q, nullptr));
  // SELECT * also has the system columns; the table's own are compared.
  EXPECT_EQ(RowStrings(*before, {"id", "v"}), std::vector<std::string>{"1|5"});
  ASSERT_OK(first->Write(BatchOf(TwoColumns(), {"[2]", "[6]"})));
  ASSERT_OK_AND_ASSIGN(auto newer, session.Query(q, nullptr));
  EXPECT_EQ(RowStrings(*newer, {"id", "v"}), (std::vector<std::string>{"1|5", "2|6"}));

  // The table is dropped and registered again with other columns.
  ASSERT_OK(sql->UnregisterTable("events"));
  EXPECT_EQ(SqlErrorType(session.Query(q, nullptr).status()), "Catalog");
  auto three = arrow::schema({arrow::field("id", arrow::int64()), arrow::field("tag", arrow::utf8()),
                              arrow::field("w", arrow::float64())});
  auto second = MakeTable(three);
  ASSERT_OK(sql->RegisterTable(second));
  ASSERT_OK(second->Write(BatchOf(three, {"[7]", R"(["a"])", "[0.5]"})));
  ASSERT_OK_AND_ASSIGN(auto after, session.Query(q, nullptr));
  EXPECT_EQ(after->schema()->GetFieldIndex("v"), -1) << after->schema()->ToString();
  EXPECT_EQ(RowStrings(*after, {"id", "tag", "w"}), std::vector<std::string>{"7|a|0.5"});
  EXPECT_FALSE(session.HasConstantPlan(q));
}

TEST(SqlSession, DoesNotKeepADroppedTableWhileIdle) {
  auto sql = SqlEngine::Make().ValueOrDie();
  auto events = MakeTable(TwoColumns());
  ASSERT_OK(sql->RegisterTable(events));
  SqlSession session(sql.get());
  ASSERT_OK(session.Query("SELECT count(*) FROM events", nullptr).status());
  std::weak_ptr<LiveTable> weak = events;
  events.reset();
  ASSERT_OK(sql->UnregisterTable("events"));
  EXPECT_TRUE(weak.expired());
}

TEST(SqlSession, InterruptStopsAQueryAndTheSessionGoesOn) {
  auto sql = SqlEngine::Make().ValueOrDie();
  SqlSession session(sql.get());
  ASSERT_OK(session.Query("SELECT 42 AS answer", nullptr).status());
  ASSERT_TRUE(session.HasConstantPlan("SELECT 42 AS answer"));
  QueryInterrupt interrupt;
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    interrupt.Interrupt();
  });
  // Runs for hours unless interrupted.
  auto long_query = session.Query(
      "SELECT count(*) FROM range(1000000) a, range(1000000) b WHERE a.range + b.range = 7",
      &interrupt);
  stopper.join();
  EXPECT_TRUE(long_query.status().IsCancelled()) << long_query.status().ToString();
  // Already interrupted: a cached plan does not start either.
  EXPECT_TRUE(session.Query("SELECT 42 AS answer", &interrupt).status().IsCancelled());
  interrupt.Reset();
  ASSERT_OK_AND_ASSIGN(auto answer, session.Query("SELECT 42 AS answer", &interrupt));
  EXPECT_EQ(RowStrings(*answer), std::vector<std::string>{"42"});
}

}  // namespace
}  // namespace rill
