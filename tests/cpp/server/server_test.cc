// The HTTP API on a real socket (127.0.0.1), read back with a Beast client and
// Arrow's own readers; results compared with the same query run in process.
#include <arrow/csv/api.h>
#include <arrow/io/memory.h>
#include <arrow/ipc/reader.h>
#include <boost/json.hpp>

#include "rill/server/protocol_handler.h"
#include "server/server_test_util.h"

namespace rill::server::testing {
namespace {

namespace json = boost::json;

TEST(Server, HealthzNeedsNoTokenButTheApiDoes) {
  Harness h;
  std::string a = h.server->address();
  EXPECT_EQ(Get(a, "/healthz").status, 200);
  Reply denied = Get(a, "/api/v1/info");
  EXPECT_EQ(denied.status, 401);
  EXPECT_EQ(denied.body.find("orders"), std::string::npos);  // nothing revealed
  EXPECT_EQ(Get(a, "/api/v1/info", "wrong-token").status, 401);
  EXPECT_EQ(Get(a, "/api/v1/info", "test-token-longer").status, 401);
  Reply info = Get(a, "/api/v1/info", "test-token");
  ASSERT_EQ(info.status, 200) << info.body;
  auto doc = json::parse(info.body).as_object();
  EXPECT_EQ(doc["address"].as_string(), a);
  EXPECT_EQ(doc["tables"].as_array().size(), 1u);
  EXPECT_EQ(Get(a, "/metrics").status, 401);
  EXPECT_EQ(Post(a, "/api/v1/query", R"({"sql":"SELECT 1"})").status, 401);
}

TEST(Server, GeneratesALongRandomTokenWhenNoneIsGiven) {
  ServerOptions o;
  o.listen = "127.0.0.1:0";
  o.token = std::nullopt;
  auto engine = Engine::Make().ValueOrDie();
  auto s1 = Server::Make(engine.get(), nullptr, o).ValueOrDie();
  auto s2 = Server::Make(engine.get(), nullptr, o).ValueOrDie();
  EXPECT_GE(s1->token().size(), 32u);  // >= 128 bits in hex
  EXPECT_NE(s1->token(), s2->token());
  EXPECT_NE(s1->dashboard_url().find("?token=" + s1->token()), std::string::npos);
}

TEST(Server, RefusesToServeWithoutAuthOnANonLoopbackAddress) {
  ServerOptions o;
  o.listen = "quack:0.0.0.0:0";
  o.token = "";
  auto engine = Engine::Make().ValueOrDie();
  auto made = Server::Make(engine.get(), nullptr, o);
  ASSERT_FALSE(made.ok());
  EXPECT_NE(made.status().message().find("loopback"), std::string::npos);
  o.listen = "127.0.0.1:0";
  EXPECT_TRUE(Server::Make(engine.get(), nullptr, o).ok());
}

TEST(Server, EmptyTokenOnLoopbackDisablesAuth) {
  ServerOptions o;
  o.token = "";
  Harness h(o);
  EXPECT_EQ(Get(h.server->address(), "/api/v1/info").status, 200);
}

TEST(Server, ParsesListenAddresses) {
  EXPECT_EQ(ParseListenAddress("quack:127.0.0.1:9494")->second, 9494);
  EXPECT_EQ(ParseListenAddress("127.0.0.1:0")->first, "127.0.0.1");
  EXPECT_EQ(ParseListenAddress("[::1]:80")->first, "::1");
  EXPECT_EQ(ParseListenAddress("localhost:1")->first, "127.0.0.1");
  EXPECT_FALSE(ParseListenAddress("127.0.0.1").ok());
  EXPECT_FALSE(ParseListenAddress("127.0.0.1:99999").ok());
  EXPECT_FALSE(ParseListenAddress("127.0.0.1:-1").ok());
}

TEST(Server, LoginSetsAnHttpOnlyStrictCookieThatAuthenticates) {
  Harness h;
  std::string a = h.server->address();
  EXPECT_EQ(Post(a, "/api/v1/login", R"({"token":"nope"})").status, 401);
  Reply ok = Post(a, "/api/v1/login", R"({"token":"test-token"})");
  ASSERT_EQ(ok.status, 200);
  std::string cookie = ok.headers["set-cookie"];
  EXPECT_NE(cookie.find("HttpOnly"), std::string::npos);
  EXPECT_NE(cookie.find("SameSite=Strict"), std::string::npos);
  std::string pair = cookie.substr(0, cookie.find(';'));
  Reply info = Request(a, http::verb::get, "/api/v1/info", "", "", {{"Cookie", pair}});
  EXPECT_EQ(info.status, 200);
  Reply bad = Request(a, http::verb::get, "/api/v1/info", "", "", {{"Cookie", "rill_token=x"}});
  EXPECT_EQ(bad.status, 401);
}

TEST(Server, JsonQueryMatchesTheInProcessResult) {
  Harness h(ServerOptions{}, 500);
  std::string sql = "SELECT user_tier, count(*) AS n, sum(amount) AS s FROM orders "
                    "GROUP BY user_tier ORDER BY user_tier";
  auto expected = h.engine->Query(sql).ValueOrDie();
  Reply r = Post(h.server->address(), "/api/v1/query",
                 json::serialize(json::object{{"sql", sql}, {"format", "json"}}), "test-token");
  ASSERT_EQ(r.status, 200) << r.body;
  auto doc = json::parse(r.body).as_object();
  auto rows = doc["rows"].as_array();
  ASSERT_EQ(static_cast<int64_t>(rows.size()), expected->num_rows());
  auto tiers = std::static_pointer_cast<arrow::StringArray>(expected->column(0)->chunk(0));
  auto counts = std::static_pointer_cast<arrow::Int64Array>(expected->column(1)->chunk(0));
  auto sums = std::static_pointer_cast<arrow::DoubleArray>(expected->column(2)->chunk(0));
  for (size_t i = 0; i < rows.size(); ++i) {
    auto row = rows[i].as_object();
    EXPECT_EQ(row["user_tier"].as_string(), tiers->GetView(static_cast<int64_t>(i)));
    EXPECT_EQ(row["n"].to_number<int64_t>(), counts->Value(static_cast<int64_t>(i)));
    EXPECT_DOUBLE_EQ(row["s"].to_number<double>(), sums->Value(static_cast<int64_t>(i)));
  }
  EXPECT_EQ(doc["columns"].as_array()[1].as_object()["type"].as_string(), "int64");
  EXPECT_EQ(doc["row_count"].to_number<int64_t>(), expected->num_rows());
}

TEST(Server, ArrowFormatIsAnIpcStreamEqualToTheInProcessTable) {
  Harness h(ServerOptions{}, 50000);  // several chunks of the stream
  std::string sql = "SELECT * EXCLUDE (z_insert_ts, z_update_ts) FROM orders ORDER BY order_id";
  auto expected = h.engine->Query(sql).ValueOrDie();
  Reply r = Post(h.server->address(), "/api/v1/query",
                 json::serialize(json::object{{"sql", sql}, {"format", "arrow"}}), "test-token");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.headers["transfer-encoding"], "chunked");
  auto input = std::make_shared<arrow::io::BufferReader>(arrow::Buffer::FromString(r.body));
  auto reader = arrow::ipc::RecordBatchStreamReader::Open(input).ValueOrDie();
  auto got = reader->ToTable().ValueOrDie();
  ASSERT_TRUE(got->Equals(*expected)) << got->ToString().substr(0, 500);
}

TEST(Server, CsvAndNdjsonFormatsCarryEveryRow) {
  Harness h(ServerOptions{}, 20000);
  std::string sql = "SELECT order_id, user_tier, amount FROM orders ORDER BY order_id";
  auto expected = h.engine->Query(sql).ValueOrDie();
  Reply csv = Post(h.server->address(), "/api/v1/query",
                   json::serialize(json::object{{"sql", sql}, {"format", "csv"}}), "test-token");
  ASSERT_EQ(csv.status, 200);
  auto input = std::make_shared<arrow::io::BufferReader>(arrow::Buffer::FromString(csv.body));
  auto reader = arrow::csv::TableReader::Make(arrow::io::default_io_context(), input,
                                              arrow::csv::ReadOptions::Defaults(),
                                              arrow::csv::ParseOptions::Defaults(),
                                              arrow::csv::ConvertOptions::Defaults())
                    .ValueOrDie();
  auto got = reader->Read().ValueOrDie()->CombineChunks().ValueOrDie();
  ASSERT_TRUE(got->Equals(*expected->CombineChunks().ValueOrDie()));
  Reply nd = Post(h.server->address(), "/api/v1/query",
                  json::serialize(json::object{{"sql", sql}, {"format", "ndjson"}}),
                  "test-token");
  ASSERT_EQ(nd.status, 200);
  EXPECT_EQ(std::count(nd.body.begin(), nd.body.end(), '\n'), expected->num_rows());
  auto first = json::parse(nd.body.substr(0, nd.body.find('\n'))).as_object();
  EXPECT_EQ(first["order_id"].to_number<int64_t>(), 0);
}

TEST(Server, RejectedStatementsAndBadBodiesGet400WithTheReason) {
  Harness h;
  std::string a = h.server->address();
  Reply drop = Post(a, "/api/v1/query", R"({"sql":"DROP VIEW orders"})", "test-token");
  EXPECT_EQ(drop.status, 400);
  EXPECT_NE(drop.body.find("SELECT"), std::string::npos) << drop.body;
  Reply file = Post(a, "/api/v1/query", R"x({"sql":"SELECT * FROM read_csv('/etc/passwd')"})x",
                    "test-token");
  EXPECT_EQ(file.status, 400) << file.body;
  // Refused for lack of permission (no file access), not for any other reason.
  EXPECT_NE(file.body.find("Permission Error"), std::string::npos) << file.body;
  EXPECT_EQ(Post(a, "/api/v1/query", "{not json", "test-token").status, 400);
  EXPECT_EQ(Post(a, "/api/v1/query", R"({"format":"json"})", "test-token").status, 400);
  Reply fmt = Post(a, "/api/v1/query", R"({"sql":"SELECT 1","format":"xml"})", "test-token");
  EXPECT_EQ(fmt.status, 400);
  EXPECT_NE(fmt.body.find("xml"), std::string::npos);
  EXPECT_EQ(Get(a, "/api/v1/query", "test-token").status, 405);
  EXPECT_EQ(Get(a, "/api/v1/nothing", "test-token").status, 404);
}

TEST(Server, QueryTimeoutInterruptsDuckDbAndNamesTheLimit) {
  ServerOptions o;
  o.query_timeout_seconds = 0.3;
  Harness h(o);
  // 4 * 10^10 products: far longer than the limit, so a 504 means the timeout fired.
  Reply r = Post(h.server->address(), "/api/v1/query",
                 R"({"sql":"SELECT sum(a.range * b.range) FROM range(200000) a, range(200000) b"})",
                 "test-token");
  EXPECT_EQ(r.status, 504) << r.body;
  EXPECT_NE(r.body.find("query_timeout_seconds"), std::string::npos);
  EXPECT_EQ(h.server->stats().query_timeouts, 1);
  // The pooled connection still works afterwards.
  EXPECT_EQ(Post(h.server->address(), "/api/v1/query", R"({"sql":"SELECT 1 AS x"})",
                 "test-token").status, 200);
}

TEST(Server, TablesListSchemaKeyModeRowsAndBytes) {
  Harness h(ServerOptions{}, 42);
  Reply list = Get(h.server->address(), "/api/v1/tables", "test-token");
  ASSERT_EQ(list.status, 200);
  auto t = json::parse(list.body).as_object()["tables"].as_array()[0].as_object();
  EXPECT_EQ(t["name"].as_string(), "orders");
  EXPECT_EQ(t["rows"].to_number<int64_t>(), 42);
  EXPECT_GT(t["bytes"].to_number<int64_t>(), 0);
  EXPECT_EQ(t["primary_key"].as_array()[0].as_string(), "order_id");
  EXPECT_EQ(t["mode"].as_string(), "snapshot");
  Reply one = Get(h.server->address(), "/api/v1/tables/orders", "test-token");
  EXPECT_EQ(json::parse(one.body).as_object()["rows"].to_number<int64_t>(), 42);
  EXPECT_EQ(Get(h.server->address(), "/api/v1/tables/nope", "test-token").status, 404);
}

TEST(Server, AddressInUseFailsAndRestartOnTheSamePortWorks) {
  Harness h;
  std::string a = h.server->address();
  ServerOptions o;
  o.listen = a;
  o.token = "x";
  auto second = Server::Make(h.engine.get(), nullptr, o).ValueOrDie();
  Status st = second->Start();
  EXPECT_TRUE(st.IsIOError()) << st.ToString();
  EXPECT_NE(st.message().find(a.substr(a.rfind(':') + 1)), std::string::npos);
  h.server->Stop();
  h.server->Stop();  // twice is fine
  EXPECT_EQ(Get(a, "/healthz").status, -1);
  ASSERT_TRUE(second->Start().ok());
  EXPECT_EQ(Get(a, "/healthz").status, 200);
  second->Stop();
  ASSERT_TRUE(h.server->Start().ok());
  EXPECT_EQ(h.server->address(), a);
  EXPECT_EQ(Get(a, "/api/v1/info", "test-token").status, 200);
}

TEST(Server, StaticRootServesThePlaceholderPage) {
  Harness h;
  Reply r = Get(h.server->address(), "/");
  EXPECT_EQ(r.status, 200);
  EXPECT_NE(r.headers["content-type"].find("text/html"), std::string::npos);
  EXPECT_EQ(Get(h.server->address(), "/missing.js").status, 404);
}

TEST(Server, WebhookRouteIsWiredAndNeedsTheToken) {
  Harness h;
  EXPECT_EQ(Post(h.server->address(), "/api/webhook/send", "{}").status, 401);
  int status = Post(h.server->address(), "/api/webhook/send", R"({"url":""})", "test-token").status;
  EXPECT_TRUE(status == 400 || status == 501) << status;
}

TEST(Server, TelemetryNowAndPerObjectStats) {
  Harness h;
  ASSERT_TRUE(h.engine->Step().ok());
  Reply now = Get(h.server->address(), "/api/v1/telemetry", "test-token");
  ASSERT_EQ(now.status, 200);
  EXPECT_GE(json::parse(now.body).as_object()["ticks"].to_number<int64_t>(), 1);
  Reply tables = Get(h.server->address(), "/api/v1/telemetry/tables", "test-token");
  EXPECT_NE(tables.body.find("\"orders\""), std::string::npos);
  EXPECT_EQ(Get(h.server->address(), "/api/v1/telemetry/tasks", "test-token").status, 200);
  EXPECT_EQ(Get(h.server->address(), "/api/v1/telemetry/connectors", "test-token").status, 200);
}

TEST(Server, TelemetryHistoryIsDownSampledToPoints) {
  Harness h;
  for (int i = 0; i < 12; ++i) {
    ASSERT_TRUE(h.metrics->Flush().ok());
  }
  Reply all = Get(h.server->address(), "/api/v1/telemetry/history", "test-token");
  ASSERT_EQ(all.status, 200) << all.body;
  int64_t n = json::parse(all.body).as_object()["row_count"].to_number<int64_t>();
  EXPECT_GE(n, 12);
  Reply some = Get(h.server->address(), "/api/v1/telemetry/history?points=4", "test-token");
  ASSERT_EQ(some.status, 200) << some.body;
  int64_t m = json::parse(some.body).as_object()["row_count"].to_number<int64_t>();
  EXPECT_LE(m, 4);
  EXPECT_GE(m, 3);
  EXPECT_EQ(Get(h.server->address(), "/api/v1/telemetry/history?since=abc", "test-token").status,
            400);
  Reply none = Get(h.server->address(), "/api/v1/telemetry/history?since=1e11", "test-token");
  EXPECT_EQ(json::parse(none.body).as_object()["row_count"].to_number<int64_t>(), 0);
}

/// Answers an SSLRequest with 'N' (no TLS), then closes: the pgwire seam.
class RefuseTls : public ProtocolHandler {
 public:
  void Accept(tcp::socket socket, std::string initial, std::shared_ptr<void> done) override {
    auto sock = std::make_shared<tcp::socket>(std::move(socket));
    auto rest = std::make_shared<std::array<char, 7>>();
    initial_ = initial;
    net::async_read(*sock, net::buffer(*rest),
                    [sock, rest, done](beast::error_code ec, size_t) {
                      if (ec) return;
                      net::async_write(*sock, net::buffer("N", 1),
                                       [sock, done](beast::error_code, size_t) {});
                    });
  }
  std::string initial_;
};

TEST(Server, FirstZeroByteGoesToThePgwireHandlerElseHttp) {
  const std::string ssl_request("\0\0\0\x08\x04\xd2\x16\x2f", 8);
  {
    Harness h;  // the built-in pgwire handler (server/pgwire) refuses TLS with 'N'
    EXPECT_EQ(RawExchange(h.server->address(), ssl_request, 5, nullptr, /*half_close=*/false)
                  .substr(0, 1),
              "N");
    EXPECT_EQ(Get(h.server->address(), "/healthz").status, 200);
  }
  RegisterProtocolHandler(kPgWireProtocol, [](const ProtocolContext& ctx) {
    EXPECT_EQ(ctx.token, "test-token");
    return std::make_unique<RefuseTls>();
  });
  {
    Harness h;
    EXPECT_EQ(RawExchange(h.server->address(), ssl_request, 5, nullptr, /*half_close=*/false)
                  .substr(0, 1),
              "N");
    EXPECT_EQ(Get(h.server->address(), "/healthz").status, 200);
  }
  RegisterProtocolHandler(kPgWireProtocol, nullptr);
  {
    // The test's handler is gone: the next server registers the built-in one.
    Harness h;
    EXPECT_EQ(RawExchange(h.server->address(), ssl_request, 5, nullptr, /*half_close=*/false)
                  .substr(0, 1),
              "N");
  }
}

}  // namespace
}  // namespace rill::server::testing
