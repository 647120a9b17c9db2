#include "rill/metrics/metrics_store.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <arrow/api.h>
#include <duckdb.hpp>
#include <gtest/gtest.h>

#include "metrics/metrics_test_util.h"
#include "rill/connector/memory_connector.h"
#include "rill/common/host_stats.h"
#include "rill/common/thread_priority.h"
#include "rill/engine/engine.h"

namespace rill {
namespace {

using testing_metrics::Count;
using testing_metrics::FakeClock;
using testing_metrics::Orders;
using testing_metrics::OrdersSchema;
using testing_metrics::Query;
using testing_metrics::TempDbPath;
using testing_metrics::Text;
using testing_metrics::Value;

MetricsOptions InMemory(const FakeClock* clock = nullptr) {
  MetricsOptions options;
  options.path = ":memory:";
  if (clock != nullptr) options.clock = clock->clock();
  return options;
}

std::unique_ptr<MetricsStore> MakeStore(Engine* engine, MetricsOptions options) {
  auto store = MetricsStore::Make(engine, std::move(options));
  EXPECT_TRUE(store.ok()) << store.status();
  return store.ok() ? std::move(*store) : nullptr;
}

std::unique_ptr<Engine> MakeEngine(const FakeClock& clock) {
  EngineOptions options;
  options.clock = clock.clock();
  auto engine = Engine::Make(std::move(options));
  EXPECT_TRUE(engine.ok()) << engine.status();
  return std::move(*engine);
}

TEST(MetricsStore, RejectsBadOptionsAndUnopenablePaths) {
  MetricsOptions bad = InMemory();
  bad.flush_interval_seconds = 0;
  EXPECT_TRUE(MetricsStore::Make(nullptr, bad).status().IsInvalid());
  bad = InMemory();
  bad.write_queue_capacity = 0;
  EXPECT_TRUE(MetricsStore::Make(nullptr, bad).status().IsInvalid());
  MetricsOptions missing_dir;
  missing_dir.path = "/nonexistent-dir/rill_metrics.db";
  EXPECT_TRUE(MetricsStore::Make(nullptr, missing_dir).status().IsIOError());
}

TEST(MetricsStore, DefaultsMatchTheSeed) {
  MetricsOptions options;
  EXPECT_EQ(options.path, "rill_metrics.db");
  EXPECT_EQ(options.flush_interval_seconds, 1.0);
  EXPECT_EQ(options.telemetry_retention_seconds, 86400.0);
  EXPECT_EQ(options.alert_retention_seconds, 3600.0);
}

TEST(MetricsStore, RecordsUserAlertsWithSeverityAndDetail) {
  FakeClock clock;
  auto store = MakeStore(nullptr, InMemory(&clock));
  ASSERT_TRUE(store->Alert("Engine started successfully").ok());
  ASSERT_TRUE(store->Warn("Order queue backlog exceeds threshold").ok());
  ASSERT_TRUE(store->Error("Payment processing failed", "Traceback ...").ok());
  ASSERT_TRUE(store->PushAlert("Revenue dropped below $1,000", "warning",
                               "Current daily revenue: $847.23").ok());
  ASSERT_TRUE(store->PushAlert("default severity").ok());
  ASSERT_TRUE(store->Flush().ok());

  auto table = Query(*store, "SELECT severity, source, message, detail FROM rill_alerts "
                             "ORDER BY rowid");
  ASSERT_EQ(table->num_rows(), 5);
  EXPECT_EQ(Count(*store, "SELECT count(*) FROM rill_alerts WHERE source = 'user'"), 5);
  EXPECT_EQ(Text(*store, "SELECT severity FROM rill_alerts WHERE message = "
                         "'Engine started successfully'"),
            "info");
  EXPECT_EQ(Text(*store, "SELECT severity FROM rill_alerts WHERE message LIKE 'Order%'"),
            "warning");
  EXPECT_EQ(Text(*store, "SELECT detail FROM rill_alerts WHERE severity = 'error'"),
            "Traceback ...");
  EXPECT_EQ(Text(*store, "SELECT detail FROM rill_alerts WHERE message LIKE 'Order%'"),
            "<null>");
  EXPECT_EQ(Text(*store, "SELECT severity FROM rill_alerts WHERE message = "
                         "'default severity'"),
            "warning");
  EXPECT_EQ(Value(*store, "SELECT max(ts) FROM rill_alerts"), 1000.0);
}

TEST(MetricsStore, RejectsAnInvalidSeverity) {
  auto store = MakeStore(nullptr, InMemory());
  Status status = store->PushAlert("x", "critical");
  EXPECT_TRUE(status.IsInvalid()) << status;
  EXPECT_NE(status.message().find("critical"), std::string::npos);
}

TEST(MetricsStore, AnswersTheSeedsQueryMetricsExample) {
  auto store = MakeStore(nullptr, InMemory());
  ASSERT_TRUE(store->Warn("w").ok());
  ASSERT_TRUE(store->Flush().ok());
  auto table = Query(*store, "SELECT * FROM rill_alerts LIMIT 5");
  ASSERT_NE(table, nullptr);
  EXPECT_EQ(table->num_rows(), 1);
  for (const char* column :
       {"ts", "severity", "source", "component", "message", "detail", "rule"}) {
    EXPECT_NE(table->schema()->GetFieldByName(column), nullptr) << column;
  }
  auto seed = Query(*store,
                    "SELECT ts, severity, source, message FROM rill_alerts "
                    "WHERE severity = 'error' ORDER BY ts DESC LIMIT 10");
  EXPECT_EQ(seed->num_rows(), 0);
}

TEST(MetricsStore, QueryMetricsIsReadOnly) {
  auto store = MakeStore(nullptr, InMemory());
  ASSERT_TRUE(store->Warn("keep me").ok());
  ASSERT_TRUE(store->Flush().ok());
  for (const char* sql :
       {"DELETE FROM rill_alerts", "INSERT INTO rill_alerts (ts, severity, source, message) "
                                   "VALUES (1, 'info', 'user', 'x')",
        "DROP TABLE rill_alerts", "CREATE TABLE t (x INT)", "UPDATE rill_alerts SET count = 5",
        "COPY rill_alerts TO '/tmp/x.csv'", "ATTACH '/tmp/other.db'", "CHECKPOINT",
        "SELECT 1; DELETE FROM rill_alerts", "SET threads = 1"}) {
    auto result = store->QueryMetrics(sql);
    EXPECT_TRUE(result.status().IsInvalid()) << sql << ": " << result.status();
  }
  auto file = store->QueryMetrics("SELECT * FROM read_csv('/etc/passwd')");
  ASSERT_FALSE(file.ok());
  EXPECT_NE(file.status().message().find("Permission Error"), std::string::npos)
      << file.status();  // refused for lack of permission, not for any other reason
  EXPECT_TRUE(store->QueryMetrics("SELEC nonsense").status().IsInvalid());
  EXPECT_TRUE(store->QueryMetrics("SELECT * FROM no_such_table").status().IsInvalid());
  EXPECT_EQ(Count(*store, "SELECT count(*) FROM rill_alerts"), 1);
  EXPECT_TRUE(store->QueryMetrics("SHOW TABLES").ok());
  EXPECT_TRUE(store->QueryMetrics("DESCRIBE rill_telemetry").ok());
}

TEST(MetricsStore, PrunesTelemetryAndAlertsByAge) {
  FakeClock clock;
  MetricsOptions options = InMemory(&clock);
  options.telemetry_retention_seconds = 100;
  options.alert_retention_seconds = 10;
  auto store = MakeStore(nullptr, options);

  clock.Set(1000);
  ASSERT_TRUE(store->Warn("old").ok());
  ASSERT_TRUE(store->Flush().ok());
  clock.Set(1005);
  ASSERT_TRUE(store->Warn("newer").ok());
  ASSERT_TRUE(store->Flush().ok());
  EXPECT_EQ(Count(*store, "SELECT count(*) FROM rill_alerts"), 2);
  EXPECT_EQ(Count(*store, "SELECT count(*) FROM rill_telemetry"), 2);

  clock.Set(1011);  // "old" is now 11 s old
  ASSERT_TRUE(store->Flush().ok());
  EXPECT_EQ(Text(*store, "SELECT string_agg(message) FROM rill_alerts"), "newer");
  EXPECT_EQ(Count(*store, "SELECT count(*) FROM rill_telemetry"), 3);

  clock.Set(1101);  // telemetry of 1000 is 101 s old; alerts all expired
  ASSERT_TRUE(store->Flush().ok());
  EXPECT_EQ(Count(*store, "SELECT count(*) FROM rill_alerts"), 0);
  EXPECT_EQ(Count(*store, "SELECT min(ts) FROM rill_telemetry"), 1005);
  EXPECT_EQ(Count(*store, "SELECT count(*) FROM rill_telemetry"), 3);
  EXPECT_GE(store->stats().rows_pruned, 3);
}

TEST(MetricsStore, WritesTelemetryForHostAndEngine) {
  FakeClock clock;
  auto engine = MakeEngine(clock);
  auto orders = engine->RegisterTable("orders", OrdersSchema(), {.primary_key = {"order_id"}});
  ASSERT_TRUE(orders.ok()) << orders.status();
  auto connector = std::make_shared<MemoryConnector>("orders");
  ASSERT_TRUE(engine->AddConnector(connector).ok());
  ASSERT_TRUE(connector->Push(Orders({1, 2, 3}, {"Gold", "Silver", "Gold"},
                                     {100.5, 45, 250})).ok());
  ASSERT_TRUE(engine->Step().ok());
  auto store = MakeStore(engine.get(), InMemory());
  ASSERT_TRUE(store->Flush().ok());

  EXPECT_EQ(Count(*store, "SELECT count(*) FROM rill_telemetry"), 1);
  EXPECT_GT(Count(*store, "SELECT process_rss_bytes FROM rill_telemetry"), 0);
  EXPECT_GT(Count(*store, "SELECT total_memory FROM rill_telemetry"), 0);
  EXPECT_EQ(Count(*store, "SELECT total_records_processed FROM rill_telemetry"), 3);
  EXPECT_EQ(Count(*store, "SELECT ticks FROM rill_telemetry"), 1);
  EXPECT_EQ(Count(*store, "SELECT table_rows FROM rill_telemetry"), 3);
  EXPECT_GT(Value(*store, "SELECT window_p99_batch_latency_ms FROM rill_telemetry"), 0);  // one tick
  EXPECT_FALSE(std::isnan(Value(*store, "SELECT cpu_usage FROM rill_telemetry")));
  EXPECT_EQ(Count(*store, "SELECT num_rows FROM rill_table_stats WHERE table_name = 'orders'"),
            3);
  EXPECT_GT(Count(*store, "SELECT nbytes FROM rill_table_stats WHERE table_name = 'orders'"),
            0);
  EXPECT_EQ(Count(*store, "SELECT drained_records FROM rill_connector_stats "
                          "WHERE connector = 'orders'"),
            3);
  auto values = store->CurrentValues();
  EXPECT_EQ(values.at("table.orders.rows"), 3);
  EXPECT_EQ(values.at("total_records_processed"), 3);
  EXPECT_TRUE(values.count("cpu_usage"));
}

TEST(MetricsStore, ReadsHostFiguresFromTheEnginesSamplerLikeRillMetrics) {
  FakeClock clock;
  auto engine = MakeEngine(clock);
  ASSERT_TRUE(engine->Step().ok());  // samples the host, fills rill_metrics
  auto store = MakeStore(engine.get(), InMemory());
  ASSERT_TRUE(store->Flush().ok());  // reuses that reading, or takes the sampler's next
  // What the store wrote is the engine's sampler's reading, the one behind
  // rill_metrics (no second sampler anywhere).
  const HostSample latest = engine->host_sampler()->Latest();
  EXPECT_EQ(Count(*store, "SELECT used_memory FROM rill_telemetry"), latest.used_memory_bytes);
  EXPECT_EQ(Count(*store, "SELECT total_memory FROM rill_telemetry"), latest.total_memory_bytes);
  EXPECT_EQ(Count(*store, "SELECT process_rss_bytes FROM rill_telemetry"),
            latest.process_rss_bytes);
  EXPECT_DOUBLE_EQ(Value(*store, "SELECT cpu_usage FROM rill_telemetry"),
                   latest.cpu_usage_percent);
  auto live = engine->Query("SELECT total_memory FROM rill_metrics");
  ASSERT_TRUE(live.ok()) << live.status();
  EXPECT_EQ(std::static_pointer_cast<arrow::Int64Array>(
                (*live)->GetColumnByName("total_memory")->chunk(0))
                ->Value(0),
            latest.total_memory_bytes);
}

TEST(MetricsStore, KeepsTelemetryOfAnOlderSchemaUnderAnotherName) {
  TempDbPath path("old_telemetry");
  {
    MetricsOptions options;
    options.path = path.path;
    auto store = MakeStore(nullptr, options);
    ASSERT_TRUE(store->Flush().ok());
  }
  {
    // Pretend an older version wrote it: a column named as it used to be.
    duckdb::DuckDB db(path.path);
    duckdb::Connection con(db);
    auto renamed = con.Query("ALTER TABLE rill_telemetry RENAME COLUMN cpu_usage TO cpu_percent");
    ASSERT_FALSE(renamed->HasError()) << renamed->GetError();
  }
  MetricsOptions options;
  options.path = path.path;
  auto store = MakeStore(nullptr, options);
  ASSERT_TRUE(store->Flush().ok());
  EXPECT_EQ(Count(*store, "SELECT count(*) FROM rill_telemetry"), 1);
  EXPECT_EQ(Count(*store, "SELECT count(*) FROM information_schema.tables "
                          "WHERE table_name LIKE 'rill_telemetry_before_%'"),
            1);
  EXPECT_EQ(Count(*store, "SELECT count(*) FROM information_schema.columns "
                          "WHERE table_name LIKE 'rill_telemetry_before_%' "
                          "AND column_name = 'cpu_percent'"),
            1);
}

TEST(MetricsStore, WritesBusinessMetricsAsALongTable) {
  FakeClock clock;
  auto engine = MakeEngine(clock);
  ASSERT_TRUE(engine->RegisterBusinessMetric("revenue", [] { return Result<double>(42.5); })
                  .ok());
  ASSERT_TRUE(engine->Step().ok());
  auto store = MakeStore(engine.get(), InMemory());
  ASSERT_TRUE(store->Flush().ok());
  clock.Advance(1);
  ASSERT_TRUE(store->Flush().ok());
  EXPECT_EQ(Count(*store, "SELECT count(*) FROM rill_business_metrics WHERE name = 'revenue'"),
            2);
  EXPECT_EQ(Value(*store, "SELECT max(value) FROM rill_business_metrics"), 42.5);
}

TEST(MetricsStore, RunsKpiQueriesWhenDueAndKeepsHistoryAndLatestValue) {
  FakeClock clock;
  auto engine = MakeEngine(clock);
  auto orders = engine->RegisterTable("orders", OrdersSchema(), {.primary_key = {"order_id"}});
  ASSERT_TRUE(orders.ok());
  ASSERT_TRUE((*orders)->Write(Orders({1, 2, 3}, {"Gold", "Silver", "Gold"},
                                      {100.5, 45, 250})).ok());
  auto store = MakeStore(engine.get(), InMemory());
  ASSERT_TRUE(store->AddKpiQuery("Max Order Amount",
                                 "SELECT MAX(amount) as max_amount FROM orders",
                                 /*interval_seconds=*/1.0, "bar", "ts", "max_amount")
                  .ok());
  ASSERT_TRUE(store->AddKpiQuery("by_tier",
                                 "SELECT user_tier, SUM(amount) AS revenue FROM orders "
                                 "GROUP BY user_tier ORDER BY user_tier",
                                 2.0, "bar", "user_tier", "revenue")
                  .ok());
  EXPECT_TRUE(store->AddKpiQuery("x", "SELECT 1", 1.0, "pie").IsInvalid());
  EXPECT_TRUE(store->AddKpiQuery("x", "SELECT 1", 0).IsInvalid());

  ASSERT_TRUE(store->Flush().ok());
  EXPECT_EQ(Value(*store, "SELECT value FROM rill_kpi_history WHERE query = 'Max Order Amount' "
                          "AND column_name = 'max_amount'"),
            250);
  EXPECT_EQ(Count(*store, "SELECT count(*) FROM rill_kpi_history WHERE query = 'by_tier'"), 4);
  EXPECT_EQ(Text(*store, "SELECT text FROM rill_kpi_history WHERE query = 'by_tier' "
                         "AND row_index = 0 AND column_name = 'user_tier'"),
            "Gold");
  EXPECT_EQ(Text(*store, "SELECT chart_type FROM rill_kpi_queries "
                         "WHERE name = 'Max Order Amount'"),
            "bar");
  EXPECT_EQ(Value(*store, "SELECT last_value FROM rill_kpi_queries WHERE name = 'by_tier'"),
            350.5);

  ASSERT_TRUE((*orders)->Write(Orders({4}, {"Gold"}, {500})).ok());
  clock.Advance(0.5);  // not due yet
  ASSERT_TRUE(store->Flush().ok());
  clock.Advance(0.5);  // Max Order Amount due, by_tier not
  ASSERT_TRUE(store->Flush().ok());
  EXPECT_EQ(Count(*store, "SELECT count(DISTINCT ts) FROM rill_kpi_history "
                          "WHERE query = 'Max Order Amount'"),
            2);
  EXPECT_EQ(Count(*store, "SELECT count(DISTINCT ts) FROM rill_kpi_history "
                          "WHERE query = 'by_tier'"),
            1);
  auto latest = store->LatestKpis();
  ASSERT_EQ(latest.size(), 2u);
  EXPECT_EQ(latest[0].query.name, "Max Order Amount");
  EXPECT_EQ(*latest[0].value, 500);
  EXPECT_EQ(latest[0].runs, 2);
  EXPECT_EQ(latest[0].result->num_rows(), 1);
  EXPECT_EQ(store->CurrentValues().at("Max Order Amount"), 500);

  ASSERT_TRUE(store->RemoveKpiQuery("by_tier").ok());
  EXPECT_TRUE(store->RemoveKpiQuery("by_tier").IsKeyError());
  ASSERT_TRUE(store->Flush().ok());
  EXPECT_EQ(Count(*store, "SELECT count(*) FROM rill_kpi_queries"), 1);
}

TEST(MetricsStore, KeepsMaintainableKpisIncrementallyAndSaysWhichAreReRun) {
  FakeClock clock;
  auto engine = MakeEngine(clock);
  auto orders = engine->RegisterTable("orders", OrdersSchema(), {.primary_key = {"order_id"}});
  ASSERT_TRUE(orders.ok());
  ASSERT_TRUE((*orders)->Write(Orders({1, 2, 3}, {"Gold", "Silver", "Gold"},
                                      {100.5, 45, 250})).ok());
  auto store = MakeStore(engine.get(), InMemory());
  ASSERT_TRUE(store->AddKpiQuery("revenue", "SELECT sum(amount) AS total FROM orders", 1.0,
                                 "line", "ts", "total").ok());
  ASSERT_TRUE(store->AddKpiQuery("sorted", "SELECT user_tier FROM orders ORDER BY user_tier",
                                 1.0, "line").ok());
  ASSERT_TRUE(store->Flush().ok());  // decides: a view task for revenue
  auto kpi = [&](const std::string& name) {
    for (const auto& k : store->LatestKpis()) {
      if (k.query.name == name) return k;
    }
    return KpiSnapshot{};
  };
  EXPECT_EQ(kpi("revenue").maintenance, "incremental");
  EXPECT_EQ(kpi("sorted").maintenance.rfind("recompute (ORDER BY", 0), 0u)
      << kpi("sorted").maintenance;
  EXPECT_EQ(kpi("revenue").value, 395.5);
  for (int round = 0; round < 3; ++round) {
    ASSERT_TRUE((*orders)->Write(Orders({10 + round}, {"Gold"}, {10})).ok());
    ASSERT_TRUE((*orders)->Delete(Orders({1 + round}, {"Gold"}, {0})).ok());
    clock.Advance(1);
    ASSERT_TRUE(engine->Step().ok());  // the view task runs
    ASSERT_TRUE(store->Flush().ok());
    auto expected = engine->Query("SELECT sum(amount) FROM orders").ValueOrDie();
    EXPECT_EQ(kpi("revenue").value,
              std::static_pointer_cast<arrow::DoubleScalar>(
                  expected->column(0)->GetScalar(0).ValueOrDie())->value);
  }
  auto stats = engine->TaskStatistics();
  ASSERT_EQ(stats.count("__rill_kpi_revenue"), 1u);
  EXPECT_EQ(stats["__rill_kpi_revenue"].maintenance, "incremental");
  EXPECT_EQ(stats["__rill_kpi_revenue"].rebuilds, 1);
  EXPECT_GT(stats["__rill_kpi_revenue"].changes_read, 0);
  EXPECT_EQ(kpi("revenue").value, 30.0);  // orders 10, 11, 12 at 10 each
  // Removing the KPI removes its view.
  ASSERT_TRUE(store->RemoveKpiQuery("revenue").ok());
  EXPECT_EQ(engine->TaskStatistics().count("__rill_kpi_revenue"), 0u);
  EXPECT_FALSE(engine->GetTable("__rill_kpi_revenue").ok());
}

TEST(MetricsStore, RecordsAFailingKpiQueryAsAnEngineAlert) {
  FakeClock clock;
  auto engine = MakeEngine(clock);
  auto store = MakeStore(engine.get(), InMemory());
  ASSERT_TRUE(store->AddKpiQuery("broken", "SELECT * FROM missing_table", 1.0).ok());
  ASSERT_TRUE(store->Flush().ok());
  ASSERT_TRUE(store->Flush().ok());  // the event is recorded during the first flush
  EXPECT_EQ(Text(*store, "SELECT source FROM rill_alerts WHERE component = 'kpi:broken'"),
            "engine");
  EXPECT_EQ(Text(*store, "SELECT severity FROM rill_alerts WHERE component = 'kpi:broken'"),
            "error");
  auto latest = store->LatestKpis();
  ASSERT_EQ(latest.size(), 1u);
  EXPECT_NE(latest[0].last_error.find("missing_table"), std::string::npos);
  EXPECT_EQ(latest[0].errors, 1);
}

TEST(MetricsStore, FiresRulesOnlyAfterTheirCooldown) {
  FakeClock clock;
  auto engine = MakeEngine(clock);
  auto depth = std::make_shared<std::atomic<double>>(20);
  ASSERT_TRUE(engine->RegisterBusinessMetric("queue_depth", [depth] {
                      return Result<double>(depth->load());
                    }).ok());
  auto store = MakeStore(engine.get(), InMemory());
  ASSERT_TRUE(store->AddAlertRule("deep_queue", "queue_depth", ">", 10,
                                  /*cooldown_seconds=*/30, "error",
                                  std::string("https://hooks.example/x"))
                  .ok());
  EXPECT_TRUE(store->AddAlertRule("bad", "queue_depth", "=>", 1).IsInvalid());
  EXPECT_TRUE(store->AddAlertRule("bad", "queue_depth", ">", 1, 1, "fatal").IsInvalid());

  auto step_and_flush = [&](double t) {
    clock.Set(t);
    ASSERT_TRUE(engine->Step().ok());
    ASSERT_TRUE(store->Flush().ok());
  };
  step_and_flush(1000);  // fires
  step_and_flush(1010);  // cooldown
  step_and_flush(1029.5);
  depth->store(5);
  step_and_flush(1031);  // cooldown over but condition false
  depth->store(50);
  step_and_flush(1032);  // fires
  EXPECT_EQ(Count(*store, "SELECT count(*) FROM rill_alerts WHERE source = 'rule'"), 2);
  EXPECT_EQ(Text(*store, "SELECT string_agg(ts::VARCHAR, ',' ORDER BY ts) FROM rill_alerts "
                         "WHERE rule = 'deep_queue'"),
            "1000.0,1032.0");
  EXPECT_EQ(Value(*store, "SELECT value FROM rill_alerts WHERE ts = 1032"), 50);
  EXPECT_EQ(Value(*store, "SELECT threshold FROM rill_alerts WHERE ts = 1032"), 10);
  EXPECT_EQ(Text(*store, "SELECT severity FROM rill_alerts WHERE ts = 1032"), "error");
  EXPECT_EQ(Text(*store, "SELECT component FROM rill_alerts WHERE ts = 1032"), "queue_depth");

  EXPECT_EQ(Count(*store, "SELECT fire_count FROM rill_alert_rules WHERE name = 'deep_queue'"),
            2);
  EXPECT_EQ(Text(*store, "SELECT op FROM rill_alert_rules"), ">");
  EXPECT_EQ(Text(*store, "SELECT webhook FROM rill_alert_rules"), "https://hooks.example/x");
  auto rules = store->AlertRules();
  ASSERT_EQ(rules.size(), 1u);
  EXPECT_EQ(rules[0].state.fire_count, 2);
  EXPECT_EQ(*rules[0].state.last_value, 50);

  ASSERT_TRUE(store->RemoveAlertRule("deep_queue").ok());
  EXPECT_TRUE(store->RemoveAlertRule("deep_queue").IsKeyError());
  step_and_flush(1100);
  EXPECT_EQ(Count(*store, "SELECT count(*) FROM rill_alerts WHERE source = 'rule'"), 2);
  EXPECT_EQ(Count(*store, "SELECT count(*) FROM rill_alert_rules"), 0);
}

TEST(MetricsStore, EvaluatesRulesAgainstKpiValuesAndSystemMetrics) {
  FakeClock clock;
  auto engine = MakeEngine(clock);
  auto orders = engine->RegisterTable("orders", OrdersSchema(), {.primary_key = {"order_id"}});
  ASSERT_TRUE((*orders)->Write(Orders({1}, {"Gold"}, {900})).ok());
  auto store = MakeStore(engine.get(), InMemory());
  ASSERT_TRUE(store->AddKpiQuery("total_revenue", "SELECT SUM(amount) AS revenue FROM orders",
                                 1.0).ok());
  ASSERT_TRUE(store->AddAlertRule("low_revenue", "total_revenue", "<", 1000, 60).ok());
  ASSERT_TRUE(store->AddAlertRule("rows", "table.orders.rows", ">=", 1, 60, "info").ok());
  ASSERT_TRUE(store->AddAlertRule("unknown", "no_such_metric", ">", 0, 0).ok());
  ASSERT_TRUE(store->Flush().ok());
  EXPECT_EQ(Count(*store, "SELECT count(*) FROM rill_alerts WHERE rule = 'low_revenue'"), 1);
  EXPECT_EQ(Count(*store, "SELECT count(*) FROM rill_alerts WHERE rule = 'rows'"), 1);
  EXPECT_EQ(Count(*store, "SELECT count(*) FROM rill_alerts WHERE rule = 'unknown'"), 0);
  EXPECT_EQ(Text(*store, "SELECT last_value FROM rill_alert_rules WHERE name = 'unknown'"),
            "<null>");
}

TEST(MetricsStore, CallsAlertListenersWithEveryAlert) {
  auto store = MakeStore(nullptr, InMemory());
  std::vector<AlertRecord> seen;
  const uint64_t id = store->AddAlertListener([&](const AlertRecord& a) { seen.push_back(a); });
  ASSERT_TRUE(store->Error("e", "d").ok());
  ASSERT_TRUE(store->Flush().ok());
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].source, EventSource::kUser);
  EXPECT_EQ(seen[0].severity, Severity::kError);
  EXPECT_EQ(seen[0].detail, "d");
  store->RemoveAlertListener(id);
  ASSERT_TRUE(store->Alert("i").ok());
  ASSERT_TRUE(store->Flush().ok());
  EXPECT_EQ(seen.size(), 1u);
}

TEST(MetricsStore, PersistsToItsFileAcrossRestarts) {
  TempDbPath db("metrics_store_persist");
  {
    MetricsOptions options;
    options.path = db.path;
    auto store = MakeStore(nullptr, options);
    ASSERT_TRUE(store->Error("survives").ok());
    // Not flushed: the destructor writes what is pending.
  }
  MetricsOptions options;
  options.path = db.path;
  auto store = MakeStore(nullptr, options);
  EXPECT_EQ(Text(*store, "SELECT message FROM rill_alerts"), "survives");
  ASSERT_TRUE(store->Flush().ok());
  EXPECT_GT(Count(*store, "SELECT max(metrics_db_file_bytes) FROM rill_telemetry"), 0);
}

TEST(MetricsStore, FlushesOnItsOwnThreadOnceStarted) {
  FakeClock clock;
  auto engine = MakeEngine(clock);
  MetricsOptions options = InMemory();
  options.flush_interval_seconds = 0.02;
  auto store = MakeStore(engine.get(), options);
  ASSERT_TRUE(store->Start().ok());
  ASSERT_TRUE(store->Start().ok());  // no-op
  ASSERT_TRUE(store->Warn("from the API").ok());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (store->stats().batches_written < 3 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_GE(store->stats().batches_written, 3);
  EXPECT_EQ(Count(*store, "SELECT count(*) FROM rill_alerts"), 1);
  ASSERT_TRUE(store->Error("flushed").ok());
  ASSERT_TRUE(store->Flush().ok());
  EXPECT_EQ(Count(*store, "SELECT count(*) FROM rill_alerts"), 2);
  store->Stop();
  store->Stop();
  EXPECT_FALSE(store->running());
  const auto stats = store->stats();
  EXPECT_EQ(stats.write_errors, 0) << stats.last_write_error;
  EXPECT_EQ(stats.batches_dropped, 0);
  EXPECT_EQ(stats.alerts_written, 2);
}

// Threads of this process whose nice value (field 19 of /proc/self/task/*/stat)
// is `nice`.
int ThreadsAtNice(int nice) {
  int count = 0;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream in(task.path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream fields(stat.substr(close + 2));
    std::string field;
    for (int i = 3; i <= 19 && fields >> field; ++i) {
      if (i == 19 && std::stoi(field) == nice) ++count;
    }
  }
  return count;
}

TEST(MetricsStore, ItsThreadsYieldTheCpuToTheTickThread) {
  // Issue 16: the collector (KPI queries, rules) and the writer run at a lower
  // priority than the tick thread, so on a busy machine the tick goes first.
  FakeClock clock;
  auto engine = MakeEngine(clock);
  auto store = MakeStore(engine.get(), InMemory());
  const int before = ThreadsAtNice(kBackgroundNice);
  ASSERT_TRUE(store->Start().ok());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (ThreadsAtNice(kBackgroundNice) < before + 2 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(ThreadsAtNice(kBackgroundNice), before + 2);
  store->Stop();
  EXPECT_EQ(ThreadsAtNice(kBackgroundNice), before);
  EXPECT_GT(ThreadsAtNice(0), 0);  // this thread (the one that ticks) is not lowered
}

}  // namespace
}  // namespace rill
