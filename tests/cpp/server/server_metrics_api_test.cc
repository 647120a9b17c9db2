// Alerts, KPI queries, alert rules and Prometheus /metrics over HTTP.
#include <boost/json.hpp>

#include "server/server_test_util.h"

namespace rill::server::testing {
namespace {

namespace json = boost::json;

json::object Obj(const Reply& r) { return json::parse(r.body).as_object(); }

TEST(ServerMetricsApi, PostedAlertsAreListedAndFiltered) {
  Harness h;
  std::string a = h.server->address();
  EXPECT_EQ(Post(a, "/api/v1/alerts", R"({"message":"m"})").status, 401);
  Reply bad = Post(a, "/api/v1/alerts", R"({"message":"m","severity":"loud"})", "test-token");
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(Post(a, "/api/v1/alerts", R"({"severity":"info"})", "test-token").status, 400);
  ASSERT_EQ(Post(a, "/api/v1/alerts",
                 R"({"message":"disk low","severity":"error","detail":"5%","component":"disk"})",
                 "test-token").status, 201);
  ASSERT_EQ(Post(a, "/api/v1/alerts", R"({"message":"fyi","severity":"info"})", "test-token")
                .status, 201);
  auto all = Obj(Get(a, "/api/v1/alerts", "test-token"));
  EXPECT_GE(all["row_count"].to_number<int64_t>(), 2);
  auto errors = Obj(Get(a, "/api/v1/alerts?severity=error&source=user", "test-token"));
  ASSERT_EQ(errors["row_count"].to_number<int64_t>(), 1);
  auto row = errors["rows"].as_array()[0].as_object();
  EXPECT_EQ(row["message"].as_string(), "disk low");
  EXPECT_EQ(row["detail"].as_string(), "5%");
  EXPECT_EQ(row["component"].as_string(), "disk");
  EXPECT_EQ(Obj(Get(a, "/api/v1/alerts?limit=1", "test-token"))["row_count"].to_number<int64_t>(),
            1);
  EXPECT_EQ(Get(a, "/api/v1/alerts?limit=x", "test-token").status, 400);
  EXPECT_EQ(Get(a, "/api/v1/alerts?source=x'--", "test-token").status, 400);
  EXPECT_EQ(Obj(Get(a, "/api/v1/alerts?since=1e11", "test-token"))["row_count"]
                .to_number<int64_t>(), 0);
}

TEST(ServerMetricsApi, KpiQueriesCreateListHistoryDelete) {
  Harness h(ServerOptions{}, 10);
  std::string a = h.server->address();
  Reply typo = Post(a, "/api/v1/kpis", R"({"name":"k","sql":"SELECT max(nope) FROM orders"})",
                    "test-token");
  EXPECT_EQ(typo.status, 400);
  ASSERT_EQ(Post(a, "/api/v1/kpis",
                 R"({"name":"Max Amount","sql":"SELECT max(amount) AS m FROM orders",
                     "interval_seconds":0.1,"chart_type":"bar","y_col":"m"})",
                 "test-token").status, 201);
  ASSERT_TRUE(h.metrics->Flush().ok());
  ASSERT_TRUE(h.metrics->Flush().ok());
  auto list = Obj(Get(a, "/api/v1/kpis", "test-token"))["kpis"].as_array();
  ASSERT_EQ(list.size(), 1u);
  auto k = list[0].as_object();
  EXPECT_EQ(k["chart_type"].as_string(), "bar");
  EXPECT_DOUBLE_EQ(k["value"].to_number<double>(), 9 * 1.5);
  Reply hist = Get(a, "/api/v1/kpis/Max%20Amount/history?column=m", "test-token");
  ASSERT_EQ(hist.status, 200) << hist.body;
  EXPECT_GE(Obj(hist)["row_count"].to_number<int64_t>(), 1);
  EXPECT_EQ(Request(a, http::verb::delete_, "/api/v1/kpis/Max%20Amount", "", "test-token").status,
            200);
  EXPECT_EQ(Request(a, http::verb::delete_, "/api/v1/kpis/Max%20Amount", "", "test-token").status,
            404);
  EXPECT_TRUE(Obj(Get(a, "/api/v1/kpis", "test-token"))["kpis"].as_array().empty());
}

TEST(ServerMetricsApi, AlertRulesCreateUpdateFireAndDelete) {
  Harness h(ServerOptions{}, 10);
  std::string a = h.server->address();
  EXPECT_EQ(Post(a, "/api/v1/rules", R"({"name":"r"})", "test-token").status, 400);
  EXPECT_EQ(Post(a, "/api/v1/rules", R"({"name":"r","metric":"x","op":"~","threshold":1})",
                 "test-token").status, 400);
  ASSERT_EQ(Post(a, "/api/v1/rules",
                 R"({"name":"many rows","metric":"table.orders.rows","op":">","threshold":1000,
                     "cooldown_seconds":0,"severity":"error"})",
                 "test-token").status, 201);
  ASSERT_TRUE(h.metrics->Flush().ok());
  auto rule = Obj(Get(a, "/api/v1/rules", "test-token"))["rules"].as_array()[0].as_object();
  EXPECT_EQ(rule["fire_count"].to_number<int64_t>(), 0);  // 10 rows: not above 1000
  Reply patch = Request(a, http::verb::patch, "/api/v1/rules/many%20rows",
                        R"({"threshold":5,"enabled":true})", "test-token");
  ASSERT_EQ(patch.status, 200) << patch.body;
  ASSERT_TRUE(h.metrics->Flush().ok());
  ASSERT_TRUE(h.metrics->Flush().ok());
  rule = Obj(Get(a, "/api/v1/rules", "test-token"))["rules"].as_array()[0].as_object();
  EXPECT_DOUBLE_EQ(rule["threshold"].to_number<double>(), 5);
  EXPECT_GE(rule["fire_count"].to_number<int64_t>(), 1);
  auto fired = Obj(Get(a, "/api/v1/alerts?source=rule", "test-token"));
  EXPECT_GE(fired["row_count"].to_number<int64_t>(), 1);
  Reply off = Request(a, http::verb::patch, "/api/v1/rules/many%20rows", R"({"enabled":false})",
                      "test-token");
  EXPECT_EQ(off.status, 200);
  rule = Obj(Get(a, "/api/v1/rules", "test-token"))["rules"].as_array()[0].as_object();
  EXPECT_FALSE(rule["enabled"].as_bool());
  EXPECT_EQ(Request(a, http::verb::patch, "/api/v1/rules/nope", "{}", "test-token").status, 404);
  EXPECT_EQ(Request(a, http::verb::delete_, "/api/v1/rules/many%20rows", "", "test-token").status,
            200);
  EXPECT_TRUE(Obj(Get(a, "/api/v1/rules", "test-token"))["rules"].as_array().empty());
}

TEST(ServerMetricsApi, RulesCreatedOverHttpSurviveARestartOfTheProcess) {
  std::string path = ::testing::TempDir() + "/server_rules_" + std::to_string(getpid()) + ".db";
  std::remove(path.c_str());
  {
    Harness h(ServerOptions{}, 10, true, path);
    ASSERT_EQ(Post(h.server->address(), "/api/v1/rules",
                   R"({"name":"keep me","metric":"table.orders.rows","op":">=","threshold":3,
                       "cooldown_seconds":7,"severity":"info","enabled":false})",
                   "test-token").status, 201);
    ASSERT_TRUE(h.metrics->Flush().ok());
  }
  {
    Harness h(ServerOptions{}, 10, true, path);
    auto rules = Obj(Get(h.server->address(), "/api/v1/rules", "test-token"))["rules"].as_array();
    ASSERT_EQ(rules.size(), 1u);
    auto r = rules[0].as_object();
    EXPECT_EQ(r["name"].as_string(), "keep me");
    EXPECT_EQ(r["op"].as_string(), ">=");
    EXPECT_DOUBLE_EQ(r["threshold"].to_number<double>(), 3);
    EXPECT_DOUBLE_EQ(r["cooldown_seconds"].to_number<double>(), 7);
    EXPECT_EQ(r["severity"].as_string(), "info");
    EXPECT_FALSE(r["enabled"].as_bool());
  }
  std::remove(path.c_str());
  std::remove((path + ".wal").c_str());
}

TEST(ServerMetricsApi, MetricsDatabaseQuery) {
  Harness h;
  ASSERT_TRUE(h.metrics->Flush().ok());
  Reply r = Post(h.server->address(), "/api/v1/metrics/query",
                 R"({"sql":"SELECT count(*) AS n FROM rill_telemetry"})", "test-token");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_GE(Obj(r)["rows"].as_array()[0].as_object()["n"].to_number<int64_t>(), 1);
  Reply write = Post(h.server->address(), "/api/v1/metrics/query",
                     R"({"sql":"DELETE FROM rill_alerts"})", "test-token");
  EXPECT_EQ(write.status, 400);
}

TEST(ServerMetricsApi, WithoutAMetricsDatabaseTheRoutesSay503) {
  Harness h(ServerOptions{}, 1, /*with_metrics=*/false);
  Reply r = Get(h.server->address(), "/api/v1/alerts", "test-token");
  EXPECT_EQ(r.status, 503);
  EXPECT_NE(r.body.find("metrics database"), std::string::npos);
  EXPECT_EQ(Get(h.server->address(), "/api/v1/info", "test-token").status, 200);
}

TEST(ServerMetricsApi, PrometheusTextHasTheDocumentedFamilies) {
  Harness h(ServerOptions{}, 7);
  ASSERT_TRUE(h.engine->Step().ok());
  Post(h.server->address(), "/api/v1/query", R"({"sql":"SELECT 1"})", "test-token");
  Reply r = Get(h.server->address(), "/metrics", "test-token");
  ASSERT_EQ(r.status, 200);
  EXPECT_NE(r.headers["content-type"].find("text/plain"), std::string::npos);
  for (const char* line :
       {"rill_table_rows{table=\"orders\"} 7", "# TYPE rill_ingest_rows_total counter",
        "# TYPE rill_tick_duration_seconds histogram", "rill_build_info 1",
        "rill_query_duration_seconds_count{protocol=\"http\"} 1",
        "rill_open_connections{protocol=\"http\"} ", "rill_open_connections{protocol=\"pgwire\"} 0"}) {
    EXPECT_NE(r.body.find(line), std::string::npos) << line << "\n" << r.body;
  }
}

}  // namespace
}  // namespace rill::server::testing
