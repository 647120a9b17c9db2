// Point queries of keyed tables (sql/point_lookup_internal.h): answered
// through the key index, they must give exactly what DuckDB's scan of the
// same version gives. The oracle is the same statement over a copy of the
// version's rows under another name (SqlEngine::QueryWith: a view DuckDB
// scans and filters), after random upserts, deletes and expiries.
#include <random>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include <arrow/api.h>
#include <gtest/gtest.h>

#include "rill/sql/sql_engine.h"
#include "rill/sql/sql_session.h"
#include "rill/table/live_table.h"
#include "sql/sql_test_util.h"

namespace rill {
namespace {

using sqltest::BatchOf;
using sqltest::FakeClock;
using sqltest::RowStrings;
using sqltest::SortedRows;

std::string Replace(std::string text, const std::string& from, const std::string& to) {
  for (size_t at; (at = text.find(from)) != std::string::npos;) text.replace(at, from.size(), to);
  return text;
}

// Run `shape` ({t} = the table) on the live table through `run`, and over a
// copy of its current rows through QueryWith; expect the same outcome.
template <typename Run>
void ExpectSameAsScan(SqlEngine& sql, const LiveTable& table, const std::string& shape,
                      Run run) {
  const std::string live_sql = Replace(shape, "{t}", table.name());
  const std::string oracle_sql = Replace(shape, "{t}", "oracle_rows");
  auto rows = table.snapshot()->ToTable().ValueOrDie();
  auto got = run(live_sql);
  auto want = sql.QueryWith(oracle_sql, {{"oracle_rows", rows}});
  ASSERT_EQ(got.ok(), want.ok()) << live_sql << "\n got: " << got.status().ToString()
                                 << "\n want: " << want.status().ToString();
  if (!got.ok()) return;
  EXPECT_TRUE((*got)->schema()->Equals(*(*want)->schema()))
      << live_sql << "\n got: " << (*got)->schema()->ToString()
      << "\n want: " << (*want)->schema()->ToString();
  EXPECT_EQ(SortedRows(**got), SortedRows(**want)) << live_sql;
}

TEST(PointLookup, RandomPointQueriesMatchTheScanAfterUpsertsDeletesAndExpiries) {
  FakeClock clock;
  auto schema = arrow::schema({arrow::field("id", arrow::int64()),
                               arrow::field("name", arrow::utf8()),
                               arrow::field("amount", arrow::float64()),
                               arrow::field("qty", arrow::int32())});
  TableOptions options;
  options.primary_key = {"id"};
  options.clock = clock.clock();
  RetentionPolicy retention;
  retention.max_age_seconds = 30;
  options.retention = retention;
  options.auto_compact_chunks = 4;  // compaction moves rows now and then
  auto table = LiveTable::Make("orders", schema, options).ValueOrDie();
  auto sql = SqlEngine::Make().ValueOrDie();
  ASSERT_OK(sql->RegisterTable(table));
  SqlSession session(sql.get());

  const char* shapes[] = {
      "SELECT * FROM {t} WHERE id = {k}",
      "SELECT name, amount FROM {t} WHERE id = {k}",
      "SELECT name AS n, id FROM {t} WHERE {k} = id",
      "SELECT * FROM {t} WHERE id = '{k}'",
      "SELECT * FROM {t} WHERE id = '{k}'::BIGINT",
      "SELECT qty FROM {t} WHERE id = {k}::INTEGER",
      "SELECT * FROM {t} WHERE id = NULL",
      "SELECT * FROM {t} WHERE id = NULL::BIGINT",
      "SELECT id, name FROM {t} WHERE id IN ({k}, {k2}, {k})",
      "SELECT id FROM {t} WHERE id IN ('{k}', '{k2}')",
      "SELECT count(*) AS c, sum(amount) AS s FROM {t} WHERE id = {k}",
      "SELECT name FROM {t} WHERE id = {k} AND amount > 3",
      "SELECT * FROM {t} WHERE id = {k} AND id = {k2}",
      "SELECT id + 1 AS x FROM {t} WHERE id = {k} ORDER BY 1 LIMIT 1",
      "SELECT * FROM {t} WHERE id = -{k}",
      "SELECT * FROM {t} WHERE id = {k}.0",
      "SELECT * FROM {t} WHERE id = 'x{k}'",
      "SELECT {t}.name FROM {t} WHERE {t}.id = {k}",
      "SELECT o.name FROM {t} AS o WHERE o.id = {k}",
      "SELECT ID, Name FROM {t} WHERE Id = {k}",
      "SELECT z_insert_ts, z_update_ts, id FROM {t} WHERE id = {k}",
      "SELECT DISTINCT name FROM {t} WHERE id = {k}",
      "SELECT id, name, id FROM {t} WHERE id = {k}",
      "SELECT * FROM {t} WHERE id = {k} OR id = {k2}",
      "SELECT * FROM {t} WHERE id = 99999999999999999999",
  };
  std::mt19937 rng(2929);
  auto key = [&] { return std::to_string(rng() % 40); };
  int64_t next_value = 0;
  for (int step = 0; step < 120; ++step) {
    const int action = static_cast<int>(rng() % 10);
    if (action < 6) {
      std::string ids, names, amounts, qtys;
      const int n = 1 + static_cast<int>(rng() % 8);
      for (int i = 0; i < n; ++i) {
        const char* sep = i == 0 ? "" : ",";
        ids += sep + key();
        names += std::string(sep) + (rng() % 5 == 0 ? "null" : "\"n" + std::to_string(next_value) + "\"");
        amounts += std::string(sep) + (rng() % 5 == 0 ? "null" : std::to_string(next_value % 7) + ".5");
        qtys += sep + std::to_string(next_value++ % 11);
      }
      ASSERT_OK(table->Write(BatchOf(schema, {"[" + ids + "]", "[" + names + "]",
                                              "[" + amounts + "]", "[" + qtys + "]"}))
                    .status());
    } else if (action < 8) {
      auto keys = BatchOf(arrow::schema({arrow::field("id", arrow::int64())}),
                          {"[" + key() + "," + key() + "]"});
      ASSERT_OK(table->Delete(keys).status());
    } else {
      clock.Advance(7);
      if (rng() % 2 == 0) ASSERT_OK(table->ApplyRetention().status());
    }
    for (int q = 0; q < 12; ++q) {
      std::string shape = shapes[rng() % (sizeof(shapes) / sizeof(shapes[0]))];
      shape = Replace(Replace(shape, "{k2}", key()), "{k}", key());
      ExpectSameAsScan(*sql, *table, shape, [&](const std::string& s) { return sql->Query(s); });
      ExpectSameAsScan(*sql, *table, shape,
                       [&](const std::string& s) { return session.Query(s, nullptr); });
    }
  }
  // Most shapes go through the index (the others are there to be refused).
  EXPECT_GT(sql->point_lookups().looked_up, 1000);
  EXPECT_GT(sql->point_lookups().answered, 400);
}

// Which statements take the key index, and which of them skip DuckDB.
TEST(PointLookup, KeyPredicatesUseTheIndexAndPlainProjectionsSkipDuckDB) {
  auto schema = arrow::schema({arrow::field("id", arrow::int64()),
                               arrow::field("name", arrow::utf8())});
  TableOptions options;
  options.primary_key = {"id"};
  auto table = LiveTable::Make("t", schema, options).ValueOrDie();
  ASSERT_OK(table->Write(BatchOf(schema, {"[1, 2, 3]", "[\"a\", null, \"c\"]"})).status());
  auto sql = SqlEngine::Make().ValueOrDie();
  ASSERT_OK(sql->RegisterTable(table));
  struct Case {
    const char* sql;
    int64_t looked_up;  // 0 or 1
    int64_t answered;
    std::vector<std::string> rows;
  };
  const Case cases[] = {
      {"SELECT id, name FROM t WHERE id = 2", 1, 1, {"2|null"}},
      {"SELECT * EXCLUDE (z_insert_ts, z_update_ts) FROM t WHERE id = 2", 1, 0, {"2|null"}},
      {"SELECT name FROM t WHERE id = '3'", 1, 1, {"c"}},
      {"SELECT name AS n FROM t WHERE id = '3'::BIGINT", 1, 1, {"c"}},
      {"SELECT id FROM t WHERE id IN (3, 1, 9)", 1, 1, {"1", "3"}},
      {"SELECT id FROM t WHERE id = 9", 1, 1, {}},
      {"SELECT id FROM t WHERE id = NULL", 1, 1, {}},
      {"SELECT count(*) FROM t WHERE id = 1", 1, 0, {"1"}},
      {"SELECT name FROM t WHERE id = 1 AND name = 'a'", 1, 0, {"a"}},
      {"SELECT id FROM t WHERE id = 1 OR id = 2", 0, 0, {"1", "2"}},
      {"SELECT id FROM t WHERE id > 2", 0, 0, {"3"}},
      {"SELECT id FROM t WHERE id = 1.5", 0, 0, {}},
      {"SELECT id FROM t WHERE id = (SELECT max(id) FROM t)", 0, 0, {"3"}},
  };
  for (const auto& c : cases) {
    const auto before = sql->point_lookups();
    ASSERT_OK_AND_ASSIGN(auto result, sql->Query(c.sql));
    const auto after = sql->point_lookups();
    EXPECT_EQ(after.looked_up - before.looked_up, c.looked_up) << c.sql;
    EXPECT_EQ(after.answered - before.answered, c.answered) << c.sql;
    EXPECT_EQ(SortedRows(*result), c.rows) << c.sql;
  }
}

// Lookups while another thread writes see whole versions: every write sets
// all keys to one value, so a point query of several keys sees one value.
TEST(PointLookup, LookupsDuringWritesSeeWholeVersions) {
  auto schema = arrow::schema({arrow::field("id", arrow::int64()),
                               arrow::field("v", arrow::int64())});
  TableOptions options;
  options.primary_key = {"id"};
  options.auto_compact_chunks = 2;
  auto table = LiveTable::Make("w", schema, options).ValueOrDie();
  auto sql = SqlEngine::Make().ValueOrDie();
  ASSERT_OK(sql->RegisterTable(table));
  ASSERT_OK(table->Write(BatchOf(schema, {"[1, 2, 3, 4]", "[0, 0, 0, 0]"})).status());
  std::atomic<bool> done{false};
  std::thread writer([&] {
    for (int v = 1; v <= 1500; ++v) {
      const std::string x = std::to_string(v);
      auto written = table->Write(BatchOf(schema, {"[4, 3, 2, 1]", "[" + x + "," + x + "," + x +
                                                                       "," + x + "]"}));
      if (!written.ok()) break;
      if (v % 50 == 0) (void)table->Compact(/*full=*/true);
    }
    done = true;
  });
  SqlSession session(sql.get());
  int64_t last = 0;
  int queries = 0;
  while (!done || queries < 10) {
    ASSERT_OK_AND_ASSIGN(auto result,
                         session.Query("SELECT v FROM w WHERE id IN (1, 2, 3, 4)", nullptr));
    ASSERT_EQ(result->num_rows(), 4);
    auto rows = SortedRows(*result);
    EXPECT_EQ(rows.front(), rows.back()) << "a torn version";
    const int64_t v = std::stoll(rows.front());
    EXPECT_GE(v, last) << "an older version after a newer one";
    last = v;
    ++queries;
  }
  writer.join();
  EXPECT_GT(sql->point_lookups().answered, 0);
}

TEST(PointLookup, CompositeAndStringKeysMatchTheScan) {
  auto composite = arrow::schema({arrow::field("region", arrow::utf8()),
                                  arrow::field("n", arrow::int32()),
                                  arrow::field("v", arrow::int64())});
  TableOptions options;
  options.primary_key = {"region", "n"};
  auto pairs = LiveTable::Make("pairs", composite, options).ValueOrDie();
  auto codes_schema = arrow::schema({arrow::field("code", arrow::utf8()),
                                     arrow::field("v", arrow::int64())});
  options.primary_key = {"code"};
  auto codes = LiveTable::Make("codes", codes_schema, options).ValueOrDie();
  auto sql = SqlEngine::Make().ValueOrDie();
  ASSERT_OK(sql->RegisterTable(pairs));
  ASSERT_OK(sql->RegisterTable(codes));
  std::mt19937 rng(77);
  const char* regions[] = {"eu", "us", "", "ap"};
  for (int step = 0; step < 60; ++step) {
    std::string rs, ns, vs, cs;
    for (int i = 0; i < 5; ++i) {
      const char* sep = i == 0 ? "" : ",";
      rs += std::string(sep) + "\"" + regions[rng() % 4] + "\"";
      ns += sep + std::to_string(rng() % 6);
      vs += sep + std::to_string(rng() % 100);
      cs += std::string(sep) + (rng() % 6 == 0 ? "null" : "\"" + std::to_string(rng() % 12) + "\"");
    }
    ASSERT_OK(pairs->Write(BatchOf(composite, {"[" + rs + "]", "[" + ns + "]", "[" + vs + "]"}))
                  .status());
    ASSERT_OK(codes->Write(BatchOf(codes_schema, {"[" + cs + "]", "[" + vs + "]"})).status());
    if (rng() % 3 == 0) {
      ASSERT_OK(pairs->Delete(BatchOf(arrow::schema({composite->field(0), composite->field(1)}),
                                      {"[\"eu\"]", "[" + std::to_string(rng() % 6) + "]"}))
                    .status());
    }
    const std::string r = regions[rng() % 4];
    const std::string n = std::to_string(rng() % 7);
    const std::string c = std::to_string(rng() % 13);
    for (const std::string& shape :
         {"SELECT * FROM {t} WHERE region = '" + r + "' AND n = " + n,
          "SELECT v FROM {t} WHERE n = '" + n + "' AND region = '" + r + "'",
          "SELECT v FROM {t} WHERE n = " + n + " AND region = '" + r + "' AND v > 50",
          "SELECT v FROM {t} WHERE region = '" + r + "'"}) {
      ExpectSameAsScan(*sql, *pairs, shape, [&](const std::string& s) { return sql->Query(s); });
    }
    for (const std::string& shape :
         {"SELECT * FROM {t} WHERE code = '" + c + "'", "SELECT v FROM {t} WHERE code = " + c,
          "SELECT * FROM {t} WHERE code IN ('" + c + "', '1', NULL)",
          std::string("SELECT * FROM {t} WHERE code = NULL"), "SELECT v FROM {t} WHERE '" + c + "' = code"}) {
      ExpectSameAsScan(*sql, *codes, shape, [&](const std::string& s) { return sql->Query(s); });
    }
  }
}

}  // namespace
}  // namespace rill
