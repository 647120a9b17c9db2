// The catalog (src/rill/pipeline/catalog.h): SQL DDL applied to a real
// engine, the refusals with their SQLSTATEs (nothing half-created), DROP with
// dependents, SHOW, and the SQL dump that recreates the same catalog.
#include "rill/pipeline/catalog.h"

#include <filesystem>
#include <map>
#include <string>
#include <thread>

#include <arrow/api.h>
#include <gtest/gtest.h>

#include "rill/connector/memory_connector.h"
#include "rill/engine/engine.h"
#include "rill/metrics/metrics_store.h"
#include "rill/sink/sink_set.h"

namespace rill::pipeline {
namespace {

class CatalogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    engine_ = Engine::Make().ValueOrDie();
    MetricsOptions m;
    m.path = ":memory:";
    metrics_ = MetricsStore::Make(engine_.get(), m).ValueOrDie();
    catalog().SetMetricsStore(metrics_.get());
  }
  void TearDown() override {
    // The store reads the engine (it must go first); the sinks stop with the engine.
    if (metrics_) metrics_->Stop();
    metrics_.reset();
    engine_.reset();
  }

  Catalog& catalog() { return Catalog::For(engine_.get()); }

  DdlResult Ok(const std::string& sql) {
    auto r = catalog().Execute(sql);
    EXPECT_TRUE(r.ok()) << sql << ": " << r.status().ToString();
    return r.ok() ? *r : DdlResult{};
  }

  /// Run `sql`, expect a refusal with `sqlstate`, and that the catalog is as before.
  void Refused(const std::string& sql, const std::string& sqlstate) {
    std::string before = catalog().DumpSql();
    auto r = catalog().Execute(sql);
    ASSERT_FALSE(r.ok()) << sql;
    EXPECT_EQ(SqlStateOf(r.status()), sqlstate) << sql << ": " << r.status().ToString();
    EXPECT_EQ(catalog().DumpSql(), before) << "half-created by: " << sql;
  }

  void Push(const std::string& source, const std::shared_ptr<arrow::RecordBatch>& batch) {
    for (const auto& c : engine_->Connectors()) {
      if (c->name() == source) {
        ASSERT_TRUE(std::dynamic_pointer_cast<MemoryConnector>(c)->Push(batch).ok());
        return;
      }
    }
    FAIL() << "no connector " << source;
  }

  std::shared_ptr<arrow::Table> Query(const std::string& sql) {
    return engine_->Query(sql).ValueOrDie();
  }

  std::unique_ptr<Engine> engine_;
  std::unique_ptr<MetricsStore> metrics_;
};

std::shared_ptr<arrow::RecordBatch> Orders(std::vector<int64_t> ids, std::vector<std::string> regions,
                                           std::vector<double> prices) {
  arrow::Int64Builder id;
  arrow::StringBuilder region;
  arrow::DoubleBuilder price;
  EXPECT_TRUE(id.AppendValues(ids).ok());
  EXPECT_TRUE(region.AppendValues(regions).ok());
  EXPECT_TRUE(price.AppendValues(prices).ok());
  auto schema = arrow::schema({arrow::field("order_id", arrow::int64(), false),
                               arrow::field("region", arrow::utf8()),
                               arrow::field("price", arrow::float64())});
  return arrow::RecordBatch::Make(schema, static_cast<int64_t>(ids.size()),
                                  {id.Finish().ValueOrDie(), region.Finish().ValueOrDie(),
                                   price.Finish().ValueOrDie()});
}

constexpr char kOrders[] =
    "CREATE TABLE orders (order_id BIGINT NOT NULL, region TEXT, price DOUBLE, "
    "PRIMARY KEY (order_id)) WITH (mode = 'snapshot', max_rows = 1000000)";

TEST_F(CatalogTest, CreatedObjectsRunOnTheEngine) {
  EXPECT_EQ(Ok(kOrders).tag, "CREATE TABLE");
  EXPECT_EQ(Ok("CREATE SOURCE orders_in INTO orders WITH (connector = 'memory')").tag,
            "CREATE SOURCE");
  EXPECT_EQ(Ok("CREATE MATERIALIZED VIEW revenue_by_region WITH (interval_seconds = 0.01, "
                "primary_key = 'region') AS SELECT region, sum(price) AS revenue, count(*) AS n "
                "FROM orders GROUP BY region")
                .tag,
            "CREATE MATERIALIZED VIEW");
  Ok("CREATE STREAM VIEW big_orders WITH (source = 'orders', max_rows = 1000) AS "
     "SELECT * FROM orders WHERE price > 100");
  Push("orders_in", Orders({1, 2, 3, 1}, {"eu", "us", "eu", "eu"}, {10, 200, 30, 150}));
  ASSERT_TRUE(engine_->Step().ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_TRUE(engine_->Step().ok());
  auto revenue = Query("SELECT region, revenue, n FROM revenue_by_region ORDER BY region");
  ASSERT_EQ(revenue->num_rows(), 2);
  EXPECT_EQ(revenue->column(0)->GetScalar(0).ValueOrDie()->ToString(), "eu");
  EXPECT_DOUBLE_EQ(
      std::static_pointer_cast<arrow::DoubleScalar>(revenue->column(1)->GetScalar(0).ValueOrDie())
          ->value,
      180.0);  // order 1 upserted to 150, plus 30
  auto big = Query("SELECT order_id FROM big_orders ORDER BY order_id");
  EXPECT_EQ(big->num_rows(), 2);  // orders 2 (200) and 1 (150)
}

TEST_F(CatalogTest, RefusalsCarryTheirSqlStateAndChangeNothing) {
  Ok(kOrders);
  Refused(kOrders, "42710");  // the name exists
  Refused("CREATE TABLE t (a BIGINT) WITH (colour = 'red')", "42601");  // unknown option
  Refused("CREATE TABLE t (a BIGINT) WITH (max_rows = 'many')", "22023");  // wrong type
  Refused("CREATE TABLE t (a BIGINT) WITH (mode = 'append')", "22023");  // append, no retention
  Refused("CREATE TABLE t (a BIGINT, PRIMARY KEY (b))", "42703");
  Refused("CREATE TABLE t (a BIGINT, a TEXT)", "42701");
  Refused("CREATE SOURCE s INTO missing WITH (connector = 'memory')", "42704");
  Refused("CREATE SOURCE s INTO orders WITH (connector = 'carrier_pigeon')", "22023");
  Refused("CREATE SOURCE s INTO orders", "42601");  // no connector
  Refused("CREATE SOURCE s INTO orders WITH (connector = 'kafka')", "42601");  // no topics
  Refused("CREATE MATERIALIZED VIEW v AS SELECT * FROM missing", "42704");
  Refused("CREATE MATERIALIZED VIEW v AS SELECT nonsense FROM orders", "42703");
  Refused("CREATE STREAM VIEW v WITH (source = 'missing', max_rows = 10) AS SELECT 1", "42704");
  Refused("CREATE STREAM VIEW v WITH (max_rows = 10) AS SELECT 1", "42601");  // no source
  Refused("CREATE SINK s FROM missing WITH (connector = 'file', path = '/tmp/x')", "42704");
  Refused("CREATE KPI k AS SELECT * FROM missing", "42704");
  Refused("CREATE ALERT RULE r WITH (op = '>', threshold = 1)", "42601");  // no metric
  Refused("CREATE ALERT RULE r WITH (metric = 'm', op = '~', threshold = 1)", "22023");
  Refused("DROP SINK nothing", "42704");
  Refused("CREATE TABLES t (a BIGINT)", "42601");
  EXPECT_EQ(Ok("CREATE TABLE IF NOT EXISTS orders (a BIGINT)").notice,
            "table \"orders\" already exists, skipping");
  EXPECT_EQ(Ok("DROP SINK IF EXISTS nothing").notice, "sink \"nothing\" does not exist, skipping");
}

TEST_F(CatalogTest, DropOfAnObjectOthersReadNeedsCascade) {
  Ok(kOrders);
  Ok("CREATE SOURCE orders_in INTO orders WITH (connector = 'memory')");
  Ok("CREATE MATERIALIZED VIEW per_region AS SELECT region, count(*) AS n FROM orders GROUP BY "
     "region");
  Ok("CREATE MATERIALIZED VIEW top_region AS SELECT * FROM per_region ORDER BY n DESC LIMIT 1");
  Ok("CREATE KPI order_count AS SELECT count(*) AS n FROM orders");
  Refused("DROP TABLE orders", "2BP01");
  Refused("DROP MATERIALIZED VIEW per_region", "2BP01");
  Refused("DROP SOURCE per_region", "42704");
  Refused("DROP STREAM VIEW per_region", "42809");  // a materialized view
  DdlResult dropped = Ok("DROP MATERIALIZED VIEW per_region CASCADE");
  EXPECT_EQ(dropped.notice, "drop cascades to 1 other object");
  EXPECT_FALSE(engine_->GetTable("per_region").ok());
  EXPECT_FALSE(engine_->GetTable("top_region").ok());
  Ok("DROP TABLE orders CASCADE");  // the source and the KPI go with it
  EXPECT_TRUE(engine_->Connectors().empty());
  EXPECT_TRUE(metrics_->LatestKpis().empty());
  EXPECT_EQ(catalog().DumpSql(), "");
}

TEST_F(CatalogTest, IncrementalTrueRefusesAQueryThatCannotBeMaintained) {
  Ok(kOrders);
  const std::string refused =
      "CREATE MATERIALIZED VIEW v WITH (incremental = true) AS SELECT * FROM orders "
      "ORDER BY order_id";
  Refused(refused, "0A000");  // feature_not_supported; nothing created
  auto r = catalog().Execute(refused);
  ASSERT_FALSE(r.ok());
  for (const char* part :
       {"\"v\": incremental = true", "ORDER BY", "incremental = auto"}) {
    EXPECT_NE(r.status().message().find(part), std::string::npos)
        << "missing '" << part << "' in: " << r.status().message();
  }
  EXPECT_FALSE(engine_->GetTable("v").ok());
  EXPECT_EQ(engine_->TaskStatistics().count("v"), 0u);

  // false (here as 'off') and auto take the same query: it is re-run.
  Ok("CREATE MATERIALIZED VIEW sorted WITH (incremental = 'off') AS SELECT * FROM orders "
     "ORDER BY order_id");
  Ok("CREATE MATERIALIZED VIEW per_region WITH (incremental = true) AS SELECT region, "
     "count(*) AS n FROM orders GROUP BY region");
  // One spelling of the option in the dump and SHOW's options.
  const std::string dump = catalog().DumpSql();
  EXPECT_NE(dump.find("CREATE MATERIALIZED VIEW sorted WITH (incremental = 'false') AS"),
            std::string::npos)
      << dump;
  EXPECT_NE(catalog().DumpYaml().find("\"incremental\": \"true\""), std::string::npos)
      << catalog().DumpYaml();
  DdlResult views = Ok("SHOW MATERIALIZED VIEWS");
  ASSERT_EQ(views.rows->num_rows(), 2);
  std::map<std::string, std::pair<std::string, std::string>> shown;  // options, counters
  for (int64_t i = 0; i < views.rows->num_rows(); ++i) {
    shown[views.rows->column(0)->GetScalar(i).ValueOrDie()->ToString()] = {
        views.rows->column(2)->GetScalar(i).ValueOrDie()->ToString(),
        views.rows->column(4)->GetScalar(i).ValueOrDie()->ToString()};
  }
  EXPECT_EQ(shown["sorted"].first, "incremental = 'false'");
  EXPECT_NE(shown["sorted"].second.find("\"maintenance\":\"recompute"), std::string::npos)
      << shown["sorted"].second;
  EXPECT_EQ(shown["per_region"].first, "incremental = 'true'");
  EXPECT_NE(shown["per_region"].second.find("\"maintenance\":\"incremental\""),
            std::string::npos)
      << shown["per_region"].second;
  EXPECT_NE(shown["per_region"].second.find("\"state_bytes\":"), std::string::npos);
}

TEST_F(CatalogTest, ShowListsNameKindOptionsStatusAndCounters) {
  Ok(kOrders);
  Ok("CREATE SOURCE orders_in INTO orders WITH (connector = 'memory', max_buffer_records = 500)");
  Push("orders_in", Orders({1, 2}, {"eu", "us"}, {1, 2}));
  ASSERT_TRUE(engine_->Step().ok());
  DdlResult tables = Ok("SHOW TABLES");
  ASSERT_NE(tables.rows, nullptr);
  EXPECT_EQ(tables.rows->schema()->field_names(),
            (std::vector<std::string>{"name", "kind", "options", "status", "counters"}));
  ASSERT_EQ(tables.rows->num_rows(), 1);
  EXPECT_EQ(tables.rows->column(0)->GetScalar(0).ValueOrDie()->ToString(), "orders");
  EXPECT_NE(tables.rows->column(4)->GetScalar(0).ValueOrDie()->ToString().find("\"rows\":2"),
            std::string::npos);
  DdlResult sources = Ok("SHOW SOURCES");
  ASSERT_EQ(sources.rows->num_rows(), 1);
  EXPECT_EQ(sources.rows->column(1)->GetScalar(0).ValueOrDie()->ToString(), "source");
  EXPECT_EQ(sources.rows->column(2)->GetScalar(0).ValueOrDie()->ToString(),
            "connector = 'memory', max_buffer_records = '500'");
  EXPECT_NE(sources.rows->column(4)->GetScalar(0).ValueOrDie()->ToString().find("\"records\":2"),
            std::string::npos);
  EXPECT_EQ(Ok("SHOW SINKS").rows->num_rows(), 0);
}

TEST_F(CatalogTest, SqlDumpRecreatesTheSameCatalog) {
  auto dir = std::filesystem::temp_directory_path() /
             ("rill_catalog_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  const std::string script = std::string(kOrders) + ";\n" +
      "CREATE SOURCE \"Orders In\" INTO orders WITH (connector = 'memory', on_overflow = 'error');\n"
      "CREATE MATERIALIZED VIEW revenue WITH (interval_seconds = 1) AS SELECT region, "
      "sum(price) AS revenue FROM orders GROUP BY region;\n"
      "CREATE WINDOW per_minute WITH (source = 'orders', window = 'tumbling', size_seconds = 60, "
      "group_by = 'region', aggregations = 'n=count(*),revenue=sum(price)');\n"
      "CREATE SINK revenue_files FROM revenue WITH (connector = 'file', path = '" +
      dir.string() + "', format = 'ndjson', mode = 'changelog');\n"
      "CREATE KPI total WITH (interval_seconds = 2, chart_type = 'bar') AS SELECT sum(price) AS "
      "revenue FROM orders;\n"
      "CREATE ALERT RULE pricey WITH (metric = 'total', op = '>', threshold = 1000, "
      "severity = 'error');\n";
  auto results = catalog().ExecuteScript(script);
  ASSERT_TRUE(results.ok()) << results.status().ToString();
  EXPECT_EQ(results->size(), 7u);
  const std::string dump = catalog().DumpSql();
  EXPECT_NE(dump.find("CREATE SOURCE \"Orders In\" INTO orders WITH (connector = 'memory', "
                      "on_overflow = 'error');"),
            std::string::npos)
      << dump;

  auto other = Engine::Make().ValueOrDie();
  MetricsOptions m;
  m.path = ":memory:";
  auto other_metrics = MetricsStore::Make(other.get(), m).ValueOrDie();
  Catalog::For(other.get()).SetMetricsStore(other_metrics.get());
  auto again = Catalog::For(other.get()).ExecuteScript(dump);
  ASSERT_TRUE(again.ok()) << again.status().ToString() << "\n" << dump;
  EXPECT_EQ(Catalog::For(other.get()).DumpSql(), dump);
  other_metrics.reset();
  other.reset();
  metrics_.reset();
  engine_.reset();
  std::filesystem::remove_all(dir);
}

TEST_F(CatalogTest, ReplayAdoptsRestoredTablesAndSkipsWhatExists) {
  Ok(kOrders);
  Ok("CREATE MATERIALIZED VIEW n AS SELECT count(*) AS n FROM orders");
  const std::string saved = catalog().DumpSql();
  auto other = Engine::Make().ValueOrDie();
  // A checkpoint restore made the table already.
  ASSERT_TRUE(other->RegisterTable("orders", Orders({1}, {"eu"}, {1})->schema()).ok());
  ASSERT_TRUE(Catalog::For(other.get()).Replay(saved).ok());
  ASSERT_TRUE(Catalog::For(other.get()).Replay(saved).ok());  // twice: nothing new
  EXPECT_EQ(Catalog::For(other.get()).Entries().size(), 2u);
  EXPECT_TRUE(other->GetTable("n").ok());
}

TEST_F(CatalogTest, SplitStatementsKeepsSemicolonsInsideQuotesAndComments) {
  auto parts = SplitStatements(
      "CREATE KPI k AS SELECT ';' AS x; -- a; comment\nSHOW TABLES;; /* ; */ DROP KPI \"a;b\"");
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[0], "CREATE KPI k AS SELECT ';' AS x");
  EXPECT_EQ(parts[1], "SHOW TABLES");
  EXPECT_EQ(parts[2], "DROP KPI \"a;b\"");
}

}  // namespace
}  // namespace rill::pipeline
