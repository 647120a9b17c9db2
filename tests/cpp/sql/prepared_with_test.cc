// SqlEngine::QueryPreparedWith (StreamSqlTask's new rows): a kept plan over
// substituted rows, its result built as Arrow while DuckDB runs, fixed-width
// columns DuckDB only passed on shared with the input. Oracle: QueryWith
// (planned per call, result converted by DuckDB's own collector and
// ResultToArrowTable) over the same rows.
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

using sqltest::SortedRows;

// Every type the collector builds itself, and some it leaves to DuckDB's
// appender (strings, booleans, decimals), with nulls; `salt` varies values.
std::string RowsSql(int64_t n, int salt) {
  const std::string s = std::to_string(salt);
  auto maybe_null = [&](int column, const std::string& value) {
    return "CASE WHEN hash(i, " + std::to_string(column) + ", " + s +
           ") % 7 = 0 THEN NULL ELSE " + value + " END";
  };
  auto h = [&](int column) {
    return "hash(i, " + std::to_string(column) + ", " + s + ", 'v')";
  };
  return "SELECT " + maybe_null(1, "(" + h(1) + " % 200)::INTEGER - 100") + "::TINYINT AS i8, " +
         maybe_null(2, "(" + h(2) + " % 60000)::INTEGER - 30000") + "::SMALLINT AS i16, " +
         "(" + h(3) + " % 1000)::INTEGER - 500 AS i32, " +
         maybe_null(4, "(" + h(4) + " % 1000000)::BIGINT - 500000") + " AS i64, " +
         "(" + h(5) + " % 250)::UTINYINT AS u8, " +
         maybe_null(6, "(" + h(6) + " % 60000)::USMALLINT") + " AS u16, " +
         "(" + h(7) + " % 100000)::UINTEGER AS u32, " + h(8) + "::UBIGINT AS u64, " +
         maybe_null(9, "(" + h(9) + " % 1000)::FLOAT / 8") + " AS f32, " +
         "(" + h(10) + " % 100000)::DOUBLE / 16 AS f64, " +
         maybe_null(11, "DATE '2020-01-01' + (" + h(11) + " % 3000)::INTEGER") + " AS dt, " +
         maybe_null(12, "make_time(0, 0, 0) + to_microseconds((" + h(12) +
                            " % 86000000000)::BIGINT)") +
         " AS tm, " +
         maybe_null(13, "(TIMESTAMP '2024-01-01' + to_milliseconds((" + h(13) +
                            " % 100000000)::BIGINT))::TIMESTAMP_MS") +
         " AS ts_ms, " +
         "TIMESTAMP '2024-01-01' + to_microseconds((" + h(14) + " % 100000000000)::BIGINT) AS ts_us, " +
         maybe_null(15, "(TIMESTAMP '2024-01-01' + to_microseconds((" + h(15) +
                            " % 100000000000)::BIGINT))::TIMESTAMP_NS") +
         " AS ts_ns, " +
         "(TIMESTAMP '2024-01-01' + to_seconds((" + h(16) + " % 1000000)::BIGINT))::TIMESTAMP_S AS ts_s, " +
         maybe_null(17, "(TIMESTAMP '2024-01-01' + to_microseconds((" + h(17) +
                            " % 100000000000)::BIGINT))::TIMESTAMPTZ") +
         " AS ts_tz, " +
         maybe_null(18, "'s' || (" + h(18) + " % 50)::VARCHAR || repeat('x', (" + h(18) +
                            " % 20)::INTEGER)") +
         " AS s, " +
         maybe_null(19, h(19) + " % 2 = 0") + " AS b, " +
         maybe_null(20, "((" + h(20) + " % 100000)::DECIMAL(12, 2) / 100)::DECIMAL(12, 2)") +
         " AS dec FROM range(" + std::to_string(n) + ") t(i)";
}

// Rows of the registered table `src`'s columns (system columns too), as one
// to three random slices of `n` generated rows (unless not `sliced`: one chunk).
std::shared_ptr<arrow::Table> RandomRows(SqlEngine& scratch, LiveTable& src, int64_t n,
                                         int salt, std::mt19937& rng, bool sliced = true) {
  auto generated = scratch.Query(RowsSql(n, salt)).ValueOrDie();
  auto fresh = LiveTable::Make("fresh", generated->schema(),
                               [] {
                                 TableOptions o;
                                 o.mode = TableMode::kAppend;
                                 o.retention = RetentionPolicy{};
                                 o.retention->max_rows = 1 << 30;
                                 return o;
                               }())
                   .ValueOrDie();
  EXPECT_TRUE(fresh->Write(generated, 1000.0 + salt).ok());
  auto whole = fresh->snapshot()->ToTable().ValueOrDie();
  EXPECT_TRUE(whole->schema()->Equals(*src.schema())) << whole->schema()->ToString() << "\n"
                                                      << src.schema()->ToString();
  if (n < 2 || !sliced) return whole;
  // One to three slices of one set of buffers, anywhere, in any order: chunks
  // that do not continue each other in memory.
  std::vector<std::shared_ptr<arrow::Table>> parts;
  const int count = 1 + static_cast<int>(rng() % 3);
  for (int c = 0; c < count; ++c) {
    const int64_t at = static_cast<int64_t>(rng() % static_cast<uint64_t>(n));
    parts.push_back(whole->Slice(at, static_cast<int64_t>(rng() % static_cast<uint64_t>(n))));
  }
  return arrow::ConcatenateTables(parts).ValueOrDie();
}

struct Fixture {
  std::unique_ptr<SqlEngine> sql = SqlEngine::Make().ValueOrDie();
  std::unique_ptr<SqlEngine> scratch = SqlEngine::Make().ValueOrDie();
  std::shared_ptr<LiveTable> src;
  Fixture() {
    auto schema = scratch->Query(RowsSql(0, 0)).ValueOrDie()->schema();
    TableOptions o;
    o.mode = TableMode::kAppend;
    o.retention = RetentionPolicy{};
    o.retention->max_rows = 1000;
    src = LiveTable::Make("src", schema, o).ValueOrDie();
    EXPECT_TRUE(sql->RegisterTable(src).ok());
  }
};

// True if some value buffer of `column` lies inside a value buffer of `input`.
bool SharesValues(const arrow::ChunkedArray& column, const arrow::ChunkedArray& input) {
  for (const auto& out : column.chunks()) {
    const auto& values = out->data()->buffers[1];
    for (const auto& in : input.chunks()) {
      const auto& buffer = in->data()->buffers[1];
      if (values->data() >= buffer->data() &&
          values->data() + values->size() <= buffer->data() + buffer->size()) {
        return true;
      }
    }
  }
  return false;
}

TEST(QueryPreparedWith, MatchesQueryWithOnRandomRowsOfEveryType) {
  Fixture f;
  const std::string queries[] = {
      "SELECT * EXCLUDE (z_insert_ts, z_update_ts) FROM src",
      "SELECT i64, ts_ms, s, i64 AS again, f64 FROM src",
      "SELECT i64 + 1 AS a, f64 * 2 AS b, ts_us, dt FROM src WHERE i32 % 3 = 0",
      "SELECT u8, u16, u32, u64, tm, ts_ns, ts_s, ts_tz FROM src WHERE b",
      "SELECT COALESCE(i16, 0::SMALLINT) AS c, CAST(i8 AS DOUBLE) AS d, f32, dec FROM src",
      "SELECT s, count(*)::BIGINT AS n, sum(i64) AS t FROM src GROUP BY s",
      "SELECT i32, ts_ms FROM src ORDER BY i32 DESC, ts_ms NULLS FIRST",
      "SELECT i64, dt FROM src UNION ALL SELECT i64 * 2, dt FROM src WHERE i8 > 0",
      "SELECT i64, s FROM src LIMIT 3",
      // The same buffer twice: the second scan does not continue the first.
      "SELECT i64, ts_ms FROM src UNION ALL SELECT i64, ts_ms FROM src",
      "SELECT i64, u32 FROM src LIMIT 2000 OFFSET 1500",
  };
  std::mt19937 rng(29);
  // Earlier results with what they held: they must not change while the
  // inputs they share go away and their memory is reused.
  std::vector<std::pair<std::shared_ptr<arrow::Table>, std::vector<std::string>>> kept;
  for (int step = 0; step < 25; ++step) {
    const int64_t n = step == 3 ? 0 : static_cast<int64_t>(rng() % 6000);
    auto rows = RandomRows(*f.scratch, *f.src, n, step, rng);
    for (const auto& q : queries) {
      ASSERT_OK_AND_ASSIGN(auto prepared, f.sql->QueryPreparedWith(q, {{"src", rows}}));
      ASSERT_OK_AND_ASSIGN(auto planned, f.sql->QueryWith(q, {{"src", rows}}));
      ASSERT_TRUE(prepared->schema()->Equals(*planned->schema()))
          << q << "\n" << prepared->schema()->ToString() << "\nvs\n"
          << planned->schema()->ToString();
      const auto expected = SortedRows(*planned);
      EXPECT_EQ(SortedRows(*prepared), expected) << "step " << step << ": " << q;
      if (q.find("ORDER BY") != std::string::npos) {
        EXPECT_EQ(sqltest::RowStrings(*prepared), sqltest::RowStrings(*planned)) << q;
      }
      kept.emplace_back(prepared, expected);
    }
    if (n > 0) {
      // Projected fixed-width columns of one chunk share its buffers, nulls or not.
      auto one = RandomRows(*f.scratch, *f.src, n, 1000 + step, rng, /*sliced=*/false);
      ASSERT_OK_AND_ASSIGN(auto projected,
                           f.sql->QueryPreparedWith(queries[1], {{"src", one}}));
      EXPECT_TRUE(SharesValues(*projected->GetColumnByName("i64"), *one->GetColumnByName("i64")));
      EXPECT_TRUE(
          SharesValues(*projected->GetColumnByName("ts_ms"), *one->GetColumnByName("ts_ms")));
      EXPECT_TRUE(SharesValues(*projected->GetColumnByName("again"),
                               *one->GetColumnByName("i64")));
      EXPECT_EQ(SortedRows(*projected),
                SortedRows(*f.sql->QueryWith(queries[1], {{"src", one}}).ValueOrDie()));
      if (n >= 100) {
        // Three rows do not keep the whole input buffer alive.
        ASSERT_OK_AND_ASSIGN(auto few, f.sql->QueryPreparedWith("SELECT i64 FROM src LIMIT 3",
                                                                {{"src", one}}));
        EXPECT_FALSE(SharesValues(*few->GetColumnByName("i64"), *one->GetColumnByName("i64")));
      }
    }
  }
  for (const auto& [table, rows] : kept) EXPECT_EQ(SortedRows(*table), rows);
  // The live table itself was never touched.
  EXPECT_EQ(f.src->num_rows(), 0);
  ASSERT_OK_AND_ASSIGN(auto live, f.sql->Query("SELECT count(*)::BIGINT AS n FROM src"));
  EXPECT_EQ(sqltest::RowStrings(*live), std::vector<std::string>{"0"});
}

TEST(QueryPreparedWith, StaysRightOverManyExecutions) {
  // Past the executions after which the statement is prepared again.
  Fixture f;
  std::mt19937 rng(7);
  auto rows = RandomRows(*f.scratch, *f.src, 100, 1, rng);
  ASSERT_OK_AND_ASSIGN(auto expected,
                       f.sql->QueryWith("SELECT sum(i32)::BIGINT AS t, max(ts_ms) AS m FROM src",
                                        {{"src", rows}}));
  for (int i = 0; i < 2100; ++i) {
    ASSERT_OK_AND_ASSIGN(auto result,
                         f.sql->QueryPreparedWith(
                             "SELECT sum(i32)::BIGINT AS t, max(ts_ms) AS m FROM src",
                             {{"src", rows}}));
    ASSERT_EQ(sqltest::RowStrings(*result), sqltest::RowStrings(*expected)) << i;
  }
}

TEST(QueryPreparedWith, FallsBackForOtherTablesAndOtherColumns) {
  Fixture f;
  std::mt19937 rng(3);
  auto rows = RandomRows(*f.scratch, *f.src, 500, 2, rng);
  // A second registered table with the same columns, joined: planned per call.
  auto other = LiveTable::Make("other", f.src->schema(), f.src->options()).ValueOrDie();
  ASSERT_OK(f.sql->RegisterTable(other));
  ASSERT_OK(other->Write(RandomRows(*f.scratch, *f.src, 300, 3, rng)));
  const std::string join =
      "SELECT s.i32, o.i64 FROM src s JOIN other o ON s.i32 = o.i32";
  for (int round = 0; round < 2; ++round) {
    ASSERT_OK_AND_ASSIGN(auto prepared, f.sql->QueryPreparedWith(join, {{"src", rows}}));
    ASSERT_OK_AND_ASSIGN(auto planned, f.sql->QueryWith(join, {{"src", rows}}));
    EXPECT_EQ(SortedRows(*prepared), SortedRows(*planned));
    EXPECT_GT(prepared->num_rows(), 0);
  }
  // Rows whose columns are not the registered table's: a view of their own.
  auto narrow = rows->SelectColumns({0, 3}).ValueOrDie();
  ASSERT_OK_AND_ASSIGN(auto narrowed,
                       f.sql->QueryPreparedWith("SELECT count(*)::BIGINT AS n FROM src",
                                                {{"src", narrow}}));
  const std::vector<std::string> count{std::to_string(rows->num_rows())};
  EXPECT_EQ(sqltest::RowStrings(*narrowed), count);
  // Errors come back with DuckDB's class, and the next call works.
  auto bad = f.sql->QueryPreparedWith("SELECT no_such_column FROM src", {{"src", rows}});
  EXPECT_EQ(SqlErrorType(bad.status()), "Binder");
  EXPECT_FALSE(f.sql->QueryPreparedWith("SELECT 1 FROM src", {{"src", nullptr}}).ok());
  ASSERT_OK_AND_ASSIGN(auto again,
                       f.sql->QueryPreparedWith("SELECT count(*)::BIGINT AS n FROM src",
                                                {{"src", rows}}));
  EXPECT_EQ(sqltest::RowStrings(*again), count);
}

}  // namespace
}  // namespace rill
