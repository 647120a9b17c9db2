// SqlEngine::QueryPrepared (prepared SQL tasks) and SqlErrorType: a prepared
// plan is reused across versions and must give what Query gives on each one,
// including where a plan optimized with one version's statistics would not.
#include "rill/common/arrow_init.h"
#include "rill/sql/sql_engine.h"

#include <random>
#include <string>

#include <arrow/api.h>
#include <gtest/gtest.h>

#include "rill/table/live_table.h"
#include "sql/sql_test_util.h"

namespace rill {
namespace {

using sqltest::BatchOf;
using sqltest::SortedRows;

std::shared_ptr<arrow::Schema> EventsSchema() {
  return arrow::schema({arrow::field("id", arrow::int64()), arrow::field("tag", arrow::utf8()),
                        arrow::field("v", arrow::int64())});
}

std::shared_ptr<LiveTable> MakeEvents() {
  TableOptions options;
  options.primary_key = {"id"};
  return LiveTable::Make("events", EventsSchema(), options).ValueOrDie();
}

TEST(PreparedQuery, MatchesQueryOnEveryVersion) {
  auto sql = SqlEngine::Make().ValueOrDie();
  auto events = MakeEvents();
  ASSERT_OK(sql->RegisterTable(events));
  // A filter beyond the first versions' max of v: a plan that trusted the
  // statistics of the version it was prepared on would prune it forever.
  const std::string queries[] = {
      "SELECT tag, count(*)::BIGINT AS n, sum(v)::BIGINT AS s FROM events WHERE v > 500 "
      "GROUP BY tag",
      "SELECT tag, max(v) AS m FROM events GROUP BY tag",
      "SELECT count(*)::BIGINT FROM events e JOIN events f ON e.id = f.v",
  };
  std::mt19937 rng(14);
  for (int step = 0; step < 30; ++step) {
    std::string ids = "[", tags = "[", values = "[";
    for (int i = 0; i < 20; ++i) {
      const char* sep = i ? "," : "";
      ids += sep + std::to_string(rng() % 200);
      tags += std::string(sep) + "\"t" + std::to_string(rng() % 4) + "\"";
      values += sep + std::to_string(rng() % (50 * (step + 1)));
    }
    ASSERT_OK(events->Write(BatchOf(EventsSchema(), {ids + "]", tags + "]", values + "]"})));
    for (const auto& q : queries) {
      ASSERT_OK_AND_ASSIGN(auto prepared, sql->QueryPrepared(q));
      ASSERT_OK_AND_ASSIGN(auto direct, sql->Query(q));
      EXPECT_EQ(SortedRows(*prepared), SortedRows(*direct)) << "step " << step << ": " << q;
    }
  }
}

TEST(PreparedQuery, PreparesAgainWhenTheTableIsReplaced) {
  auto sql = SqlEngine::Make().ValueOrDie();
  auto first = MakeEvents();
  ASSERT_OK(sql->RegisterTable(first));
  ASSERT_OK(first->Write(BatchOf(EventsSchema(), {"[1]", R"(["a"])", "[5]"})));
  const std::string q = "SELECT sum(v)::BIGINT AS s FROM events";
  ASSERT_OK_AND_ASSIGN(auto before, sql->QueryPrepared(q));
  EXPECT_EQ(SortedRows(*before), std::vector<std::string>{"5"});
  ASSERT_OK(sql->UnregisterTable("events"));
  EXPECT_EQ(SqlErrorType(sql->QueryPrepared(q).status()), "Catalog");
  auto second = MakeEvents();
  ASSERT_OK(sql->RegisterTable(second));
  ASSERT_OK(second->Write(BatchOf(EventsSchema(), {"[1, 2]", R"(["a", "b"])", "[7, 8]"})));
  ASSERT_OK_AND_ASSIGN(auto after, sql->QueryPrepared(q));
  EXPECT_EQ(SortedRows(*after), std::vector<std::string>{"15"});
  sql->ForgetPrepared(q);
  ASSERT_OK_AND_ASSIGN(auto again, sql->QueryPrepared(q));
  EXPECT_EQ(SortedRows(*again), std::vector<std::string>{"15"});
}

TEST(PreparedQuery, RefusesWritesLikeQuery) {
  auto sql = SqlEngine::Make().ValueOrDie();
  EXPECT_TRUE(sql->QueryPrepared("CREATE TABLE x (a INT)").status().IsInvalid());
  EXPECT_TRUE(sql->QueryPrepared("SELECT 1; SELECT 2").status().IsInvalid());
}

TEST(SqlErrorType, NamesDuckDbsErrorClass) {
  auto sql = SqlEngine::Make().ValueOrDie();
  ASSERT_OK(sql->RegisterTable(MakeEvents()));
  EXPECT_EQ(SqlErrorType(sql->Query("SELECT * FROM missing").status()), "Catalog");
  EXPECT_EQ(SqlErrorType(sql->Query("SELEC 1").status()), "Parser");
  EXPECT_EQ(SqlErrorType(sql->Query("SELECT nope FROM events").status()), "Binder");
  EXPECT_EQ(SqlErrorType(sql->Query("SELECT 'x'::INTEGER").status()), "Conversion");
  // Not DuckDB's refusal: no class.
  EXPECT_EQ(SqlErrorType(sql->Query("CREATE TABLE y (a INT)").status()), "");
  EXPECT_EQ(SqlErrorType(Status::OK()), "");
}

}  // namespace
}  // namespace rill
