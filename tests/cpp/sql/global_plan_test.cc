// PlanGlobal (sql/global_plan.h): an aggregate query split into per-partition
// partials and a final merge. DuckDB is the oracle: on random rows spread over
// partitions, final(partials) equals the query itself, also when the partials
// come from several instances each owning some partitions (the fan-out's
// merge); queries that do not decompose are refused, naming the part.
#include <gtest/gtest.h>

#include <random>

#include <duckdb.hpp>

#include "rill/sql/global_plan.h"

namespace rill {
namespace {

class GlobalPlanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = std::make_unique<duckdb::DuckDB>(nullptr);
    con_ = std::make_unique<duckdb::Connection>(*db_);
    Run("CREATE TABLE orders (region VARCHAR, price DOUBLE, qty BIGINT, _partition INTEGER)");
    std::mt19937 rng(28);
    duckdb::Appender appender(*con_, "orders");
    const char* regions[] = {"eu", "us", "apac", "latam"};
    for (int i = 0; i < 5000; ++i) {
      appender.BeginRow();
      appender.Append<duckdb::string_t>(regions[rng() % 4]);
      if (rng() % 10 == 0) {
        appender.Append<std::nullptr_t>(nullptr);  // nulls: count(x) and avg skip them
      } else {
        appender.Append<double>(static_cast<double>(rng() % 10000) / 100.0);
      }
      appender.Append<int64_t>(static_cast<int64_t>(rng() % 50));
      appender.Append<int32_t>(static_cast<int32_t>(rng() % 12));
      appender.EndRow();
    }
    appender.Close();
  }

  std::unique_ptr<duckdb::MaterializedQueryResult> Run(const std::string& sql) {
    auto r = con_->Query(sql);
    EXPECT_FALSE(r->HasError()) << sql << ": " << r->GetError();
    return r;
  }

  /// The rows of `sql` as sorted text, doubles rounded (sums in another order).
  std::vector<std::string> Rows(const std::string& sql) {
    auto r = Run(sql);
    std::vector<std::string> out;
    for (size_t i = 0; i < r->RowCount(); ++i) {
      std::string row;
      for (size_t c = 0; c < r->ColumnCount(); ++c) {
        duckdb::Value v = r->GetValue(c, i);
        if (!v.IsNull() && (v.type().id() == duckdb::LogicalTypeId::DOUBLE)) {
          char buf[64];
          std::snprintf(buf, sizeof(buf), "%.6f", v.GetValue<double>());
          row += buf;
        } else {
          row += v.ToString();
        }
        row += "|";
      }
      out.push_back(row);
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  std::unique_ptr<duckdb::DuckDB> db_;
  std::unique_ptr<duckdb::Connection> con_;
};

const char* kQueries[] = {
    "SELECT region, sum(price) AS revenue, count(*) AS n FROM orders GROUP BY region",
    "SELECT region, avg(price) AS mean, min(price) AS lo, max(qty) AS hi, count(price) AS priced "
    "FROM orders WHERE qty > 10 GROUP BY region",
    "SELECT sum(qty) AS total, count(*) AS n, avg(qty) FROM orders",
    "SELECT qty, region, count(*) FROM orders WHERE price IS NOT NULL GROUP BY region, qty",
};

TEST_F(GlobalPlanTest, TheFinalOfThePartialsIsTheQuery) {
  for (const char* query : kQueries) {
    SCOPED_TRACE(query);
    auto plan = PlanGlobal(query);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    EXPECT_EQ(plan->table, "orders");
    EXPECT_EQ(plan->partial_key.back(), "_partition");
    Run("DROP TABLE IF EXISTS partials");
    Run("CREATE TABLE partials AS " + plan->partial_sql);
    // One partial row per group and partition.
    EXPECT_EQ(Rows("SELECT count(*) FROM partials"),
              Rows("SELECT count(*) FROM (SELECT DISTINCT * FROM (SELECT " +
                   [&] {
                     std::string cols;
                     for (const auto& k : plan->partial_key) cols += "\"" + k + "\", ";
                     return cols.substr(0, cols.size() - 2);
                   }() + " FROM partials))"));
    EXPECT_EQ(Rows(FinalSqlOver(*plan, "partials")), Rows(query));
  }
}

TEST_F(GlobalPlanTest, PartialsOfInstancesOwningSomePartitionsMergeToTheQuery) {
  for (const char* query : kQueries) {
    SCOPED_TRACE(query);
    auto plan = PlanGlobal(query);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    // Three instances: partitions 0-3, 4-7, 8-11.
    Run("DROP TABLE IF EXISTS fanned");
    std::string parts[3] = {"0,1,2,3", "4,5,6,7", "8,9,10,11"};
    for (int i = 0; i < 3; ++i) {
      std::string sql = plan->partial_sql_for_partitions;
      sql.replace(sql.find("{partitions}"), 12, parts[i]);
      Run(i == 0 ? "CREATE TABLE fanned AS " + sql : "INSERT INTO fanned " + sql);
    }
    EXPECT_EQ(Rows(FinalSqlOver(*plan, "fanned")), Rows(query));
  }
}

// An append table's rows split between contributors (instances, or lives of
// one) by row: each contributor's partials of its own rows, keyed by
// contributor too, merge to the query over all rows (cluster/global_view.h).
TEST_F(GlobalPlanTest, PartialsOfContributorsSplittingTheRowsAddUpToTheQuery) {
  Run("CREATE TABLE shares AS SELECT *, row_number() OVER () % 3 AS who FROM orders");
  for (const char* query : kQueries) {
    SCOPED_TRACE(query);
    Run("DROP TABLE IF EXISTS contributed");
    for (int who = 0; who < 3; ++who) {
      auto plan = PlanGlobal(query, "_partition", "node-" + std::to_string(who) + "@'1'");
      ASSERT_TRUE(plan.ok()) << plan.status().ToString();
      EXPECT_EQ(plan->partial_key.back(), kContributorColumn);
      EXPECT_EQ(plan->partial_key[plan->partial_key.size() - 2], "_partition");
      // The partial query over this contributor's rows only.
      Run("CREATE OR REPLACE VIEW orders_of AS SELECT * EXCLUDE (who) FROM shares WHERE who = " +
          std::to_string(who));
      std::string sql = plan->partial_sql;
      sql.replace(sql.find("FROM orders"), 11, "FROM orders_of");
      Run(who == 0 ? "CREATE TABLE contributed AS " + sql : "INSERT INTO contributed " + sql);
      if (who == 2) {
        EXPECT_EQ(Rows("SELECT DISTINCT \"_contributor\" FROM contributed"),
                  (std::vector<std::string>{"node-0@'1'|", "node-1@'1'|", "node-2@'1'|"}));
        EXPECT_EQ(Rows(FinalSqlOver(*plan, "contributed")), Rows(query));
      }
    }
  }
  // A query with an output column of that name is refused.
  auto clash = PlanGlobal("SELECT count(*) AS _contributor FROM orders", "_partition", "n");
  ASSERT_FALSE(clash.ok());
  EXPECT_NE(clash.status().message().find("_contributor"), std::string::npos);
}

TEST_F(GlobalPlanTest, QueriesThatDoNotDecomposeAreRefusedNamingThePart) {
  const std::pair<const char*, const char*> refused[] = {
      {"SELECT region, median(price) FROM orders GROUP BY region", "median"},
      {"SELECT region, sum(price) / count(*) AS r FROM orders GROUP BY region", "expression"},
      {"SELECT region, sum(price) FROM orders GROUP BY region ORDER BY region", "ORDER BY"},
      {"SELECT region, sum(price) FROM orders GROUP BY region HAVING sum(price) > 1", "HAVING"},
      {"SELECT o.region, count(*) FROM orders o JOIN orders p ON o.qty = p.qty GROUP BY o.region",
       "FROM"},
      {"SELECT region, count(DISTINCT qty) FROM orders GROUP BY region", "DISTINCT"},
      {"SELECT region, price FROM orders GROUP BY region", "price"},
      {"SELECT lower(region), count(*) FROM orders GROUP BY lower(region)", "GROUP BY"},
      {"SELECT region, count(*) FROM orders GROUP BY region, _partition", "_partition"},
  };
  for (const auto& [query, part] : refused) {
    auto plan = PlanGlobal(query);
    ASSERT_FALSE(plan.ok()) << query;
    EXPECT_NE(plan.status().message().find(part), std::string::npos)
        << query << " -> " << plan.status().ToString();
  }
}

}  // namespace
}  // namespace rill
