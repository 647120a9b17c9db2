// Remote SQL is bounded: metrics-database queries over HTTP and pgwire and KPI
// queries posted over HTTP are interrupted at the query timeout, and one
// query cannot take more than the query memory limit. Also: prepared
// statements describe the parameter types DuckDB binds. Over real sockets
// against a started Server.
#include <unistd.h>

#include <boost/json.hpp>
#include <gtest/gtest.h>

#include "pgwire_socket_client.h"
#include "rill/sql/sql_engine.h"
#include "server_test_util.h"

namespace rill::server {
namespace {

namespace json = boost::json;
using pgwire::testing::Bind;
using pgwire::testing::Describe;
using pgwire::testing::ErrorField;
using pgwire::testing::Execute;
using pgwire::testing::Get16;
using pgwire::testing::Get32;
using pgwire::testing::Parse;
using pgwire::testing::PgSocketClient;
using pgwire::testing::RowValues;
using pgwire::testing::SqlStateOf;
using pgwire::testing::Sync;
using testing::Harness;
using testing::Post;
using testing::Reply;

// 4e10 rows of a cross join: minutes of work, interruptible between chunks.
constexpr const char* kSlowSql =
    "SELECT count(*) AS n FROM range(200000) a(i), range(200000) b(j) WHERE i + j >= 0";

ServerOptions NoAuth() {
  ServerOptions options;
  options.token = "";
  return options;
}

std::string QueryBody(const std::string& sql) {
  return json::serialize(json::object{{"sql", sql}});
}

TEST(PgWireLimits, MetricsDatabaseQueryOverHttpIsInterruptedAtTheQueryTimeout) {
  ServerOptions options;
  options.query_timeout_seconds = 0.5;
  Harness h(options);
  Reply r = Post(h.server->address(), "/api/v1/metrics/query", QueryBody(kSlowSql),
                 "test-token");
  EXPECT_NE(r.status, 200) << r.body;
  EXPECT_NE(r.body.find("query_timeout_seconds"), std::string::npos) << r.body;
  EXPECT_EQ(h.server->stats().query_timeouts, 1);
  // The metrics database still answers.
  Reply ok = Post(h.server->address(), "/api/v1/metrics/query",
                  QueryBody("SELECT count(*) AS n FROM rill_alerts"), "test-token");
  EXPECT_EQ(ok.status, 200) << ok.body;
}

TEST(PgWireLimits, MetricsDatabaseQueryOverPgwireIsCancelledWith57014) {
  ServerOptions options = NoAuth();
  options.query_timeout_seconds = 0.5;
  Harness h(options);
  PgSocketClient client(h.server->address());
  ASSERT_TRUE(client.StartUp("rill_metrics"));
  auto slow = client.SimpleQuery(kSlowSql);
  EXPECT_EQ(SqlStateOf(slow), "57014");
  auto rows = client.SimpleQuery("SELECT count(*) FROM rill_alerts");
  EXPECT_EQ(pgwire::testing::Types(rows), "T D C Z");
}

TEST(PgWireLimits, LiveTableQueryOverPgwireIsCancelledWith57014) {
  ServerOptions options = NoAuth();
  options.query_timeout_seconds = 0.5;
  Harness h(options);
  PgSocketClient client(h.server->address());
  ASSERT_TRUE(client.StartUp());
  EXPECT_EQ(SqlStateOf(client.SimpleQuery(kSlowSql)), "57014");
}

// An engine, a metrics store whose KPI queries time out after 0.5 s, a server.
struct KpiHarness {
  std::unique_ptr<Engine> engine;
  std::unique_ptr<MetricsStore> metrics;
  std::unique_ptr<Server> server;
  KpiHarness() {
    engine = Engine::Make().ValueOrDie();
    TableOptions to;
    to.primary_key = {"order_id"};
    auto table = engine->RegisterTable("orders", testing::OrdersSchema(), to).ValueOrDie();
    EXPECT_TRUE(table->Write(testing::Orders(0, 10)).ok());
    MetricsOptions mo;
    mo.path = ":memory:";
    mo.flush_interval_seconds = 0.2;
    mo.query_timeout_seconds = 0.5;
    metrics = MetricsStore::Make(engine.get(), mo).ValueOrDie();
    EXPECT_TRUE(metrics->Start().ok());
    ServerOptions so;
    so.listen = "127.0.0.1:0";
    so.token = "test-token";
    server = Server::Make(engine.get(), metrics.get(), so).ValueOrDie();
    EXPECT_TRUE(server->Start().ok());
  }
  ~KpiHarness() {
    server->Stop();
    metrics->Stop();
  }
};

TEST(PgWireLimits, KpiPostedWithASlowQueryIsInterruptedAndAlerted) {
  KpiHarness h;
  const std::string a = h.server->address();
  json::object kpi{{"name", "slow"}, {"sql", kSlowSql}, {"interval_seconds", 3600}};
  Reply posted = Post(a, "/api/v1/kpis", json::serialize(kpi), "test-token");
  ASSERT_EQ(posted.status, 201) << posted.body;
  // Wait for the run's error alert (an event; bounded by 60 flushes).
  int64_t alerts = 0;
  for (int i = 0; i < 60 && alerts == 0; ++i) {
    ASSERT_TRUE(h.metrics->Flush().ok());
    auto count = h.metrics->QueryMetrics(
        "SELECT count(*) FROM rill_alerts WHERE component = 'kpi:slow' AND severity = 'error'");
    ASSERT_TRUE(count.ok()) << count.status().ToString();
    alerts = std::static_pointer_cast<arrow::Int64Array>((*count)->column(0)->chunk(0))->Value(0);
  }
  ASSERT_EQ(alerts, 1);
  auto kpis = h.metrics->LatestKpis();
  ASSERT_EQ(kpis.size(), 1u);
  EXPECT_NE(kpis[0].last_error.find("query_timeout_seconds"), std::string::npos)
      << kpis[0].last_error;
  EXPECT_EQ(kpis[0].errors, 1);
  // The engine keeps serving.
  Reply ok = Post(a, "/api/v1/query", QueryBody("SELECT count(*) AS n FROM orders"), "test-token");
  EXPECT_EQ(ok.status, 200) << ok.body;
  // A typo is still refused at once.
  json::object typo{{"name", "typo"}, {"sql", "SELECT max(nope) FROM orders"}};
  EXPECT_EQ(Post(a, "/api/v1/kpis", json::serialize(typo), "test-token").status, 400);
}

// Distinct counting 20M keys needs ~200 MB of hash table.
constexpr const char* kBigSql = "SELECT count(DISTINCT range) AS n FROM range(20000000)";

TEST(PgWireLimits, QueryNeedingMoreThanTheMemoryLimitFailsAndTheEngineKeepsServing) {
  ServerOptions options;
  options.query_memory_limit_bytes = 64 << 20;
  Harness h(options);
  EXPECT_EQ(h.engine->sql().MemoryLimit(), 64 << 20);
  const std::string a = h.server->address();
  Reply big = Post(a, "/api/v1/query", QueryBody(kBigSql), "test-token");
  EXPECT_NE(big.status, 200);
  EXPECT_NE(big.body.find("Out of Memory"), std::string::npos) << big.body;
  Reply ok = Post(a, "/api/v1/query", QueryBody("SELECT count(*) AS n FROM orders"), "test-token");
  ASSERT_EQ(ok.status, 200) << ok.body;
  EXPECT_NE(ok.body.find("100"), std::string::npos) << ok.body;
}

TEST(PgWireLimits, MetricsDatabaseQueryOverTheMemoryLimitFailsWith53200) {
  ServerOptions options = NoAuth();
  options.query_memory_limit_bytes = 64 << 20;
  Harness h(options);
  PgSocketClient client(h.server->address());
  ASSERT_TRUE(client.StartUp("rill_metrics"));
  EXPECT_EQ(SqlStateOf(client.SimpleQuery(kBigSql)), "53200");
  auto rows = client.SimpleQuery("SELECT count(*) FROM rill_alerts");
  EXPECT_EQ(pgwire::testing::Types(rows), "T D C Z");
}

TEST(PgWireLimits, DefaultMemoryLimitIsAQuarterOfPhysicalMemory) {
  Harness h;
  const int64_t physical =
      static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE);
  // DuckDB rounds the limit to its block size.
  EXPECT_NEAR(static_cast<double>(h.engine->sql().MemoryLimit()), physical / 4.0,
              physical / 100.0);
}

// ParameterDescription ('t') OIDs.
std::vector<int32_t> ParameterOids(const pgwire::testing::BackendMessage& m) {
  std::vector<int32_t> oids;
  const int n = Get16(m.body, 0);
  for (int i = 0; i < n; ++i) oids.push_back(Get32(m.body, 2 + 4 * static_cast<size_t>(i)));
  return oids;
}

std::string Int8(int64_t v) {
  std::string s;
  for (int shift = 56; shift >= 0; shift -= 8) {
    s.push_back(static_cast<char>((static_cast<uint64_t>(v) >> shift) & 0xff));
  }
  return s;
}

TEST(PgWireLimits, PreparedStatementDescribesTheParameterTypesDuckDbBinds) {
  Harness h(NoAuth());
  PgSocketClient client(h.server->address());
  ASSERT_TRUE(client.StartUp());
  client.ClearSeen();
  ASSERT_TRUE(client.Send(
      Parse("s1", "SELECT count(*) FROM orders WHERE order_id > $1 AND amount < $2 "
                  "AND user_tier = $3 AND $4::bigint > 0") +
      Describe('S', "s1") + Sync()));
  auto description = client.Until('t');
  ASSERT_TRUE(description.has_value()) << SqlStateOf(client.seen());
  EXPECT_EQ(ParameterOids(*description), (std::vector<int32_t>{20, 701, 25, 20}));
  ASSERT_TRUE(client.Until('Z').has_value());
  // The client then sends int8 in binary (as asyncpg does for int8).
  client.ClearSeen();
  ASSERT_TRUE(client.Send(Bind("", "s1", {1, 0, 0, 1},
                               {Int8(89), std::string("1000"), std::string("Gold"), Int8(1)},
                               {}) +
                          Execute("", 0) + Sync()));
  auto row = client.Until('D');
  ASSERT_TRUE(row.has_value()) << SqlStateOf(client.seen());
  // ids 90..99 with tier Gold (even): 90, 92, ..., 98.
  EXPECT_EQ(RowValues(*row)[0], "5");
}

TEST(PgWireLimits, ParameterDuckDbCannotTypeIsDescribedAsText) {
  Harness h(NoAuth());
  PgSocketClient client(h.server->address());
  ASSERT_TRUE(client.StartUp());
  ASSERT_TRUE(client.Send(Parse("s", "SELECT $1 AS v") + Describe('S', "s") + Sync()));
  auto description = client.Until('t');
  ASSERT_TRUE(description.has_value());
  EXPECT_EQ(ParameterOids(*description), (std::vector<int32_t>{25}));
}

}  // namespace
}  // namespace rill::server
