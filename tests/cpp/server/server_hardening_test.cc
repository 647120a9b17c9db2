// Issue 23 on the HTTP side, over real sockets: truthful ingest receipts
// (drop_oldest), no ingest into rill_* tables, the token checked on the
// headers before any body is read, CORS by parsed origin, bounded and
// validated Arrow IPC bodies, results streamed batch by batch, and static
// assets per server.
#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include <arrow/io/memory.h>
#include <arrow/ipc/writer.h>
#include <arrow/util/compression.h>
#include <boost/json.hpp>

#include "rill/connector/json_stream_connector.h"
#include "server_test_util.h"

namespace rill::server::testing {
namespace {

namespace json = boost::json;

std::string OrdersNdjson(int64_t begin, int64_t end) {
  std::string out;
  for (int64_t i = begin; i < end; ++i) {
    out += "{\"order_id\":" + std::to_string(i) + ",\"user_tier\":\"Gold\",\"amount\":" +
           std::to_string(i) + ".5}\n";
  }
  return out;
}

int64_t Rows(Harness& h, const std::string& table = "orders") {
  return h.engine->GetTable(table).ValueOrDie()->num_rows();
}

/// Runs engine ticks on its own thread while alive.
class Ticker {
 public:
  explicit Ticker(Engine* engine)
      : thread_([this, engine] {
          while (!done_) {
            (void)engine->Step();
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
          }
        }) {}
  ~Ticker() {
    done_ = true;
    thread_.join();
  }

 private:
  std::atomic<bool> done_{false};
  std::thread thread_;
};

json::object ParseObject(const std::string& body) {
  auto value = json::parse(body);
  EXPECT_TRUE(value.is_object()) << body;
  return value.is_object() ? value.as_object() : json::object{};
}

/// POST an Arrow IPC body (the shared Request helper always sends JSON).
Reply PostIpc(const std::string& address, const std::string& target, const std::string& body) {
  net::io_context ioc;
  beast::tcp_stream stream(ioc);
  std::string host = address.substr(0, address.rfind(':'));
  auto port = static_cast<uint16_t>(std::stoi(address.substr(address.rfind(':') + 1)));
  stream.expires_after(std::chrono::seconds(30));
  stream.connect(tcp::endpoint(net::ip::make_address(host), port));
  http::request<http::string_body> req{http::verb::post, target, 11};
  req.set(http::field::host, host);
  req.set(http::field::authorization, "Bearer test-token");
  req.set(http::field::content_type, "application/vnd.apache.arrow.stream");
  req.body() = body;
  req.prepare_payload();
  http::write(stream, req);
  beast::flat_buffer buffer;
  http::response<http::string_body> res;
  beast::error_code ec;
  http::read(stream, buffer, res, ec);
  if (ec) return Reply{-1, ec.message(), {}};
  return Reply{static_cast<int>(res.result_int()), res.body(), {}};
}

std::string IpcStream(const std::shared_ptr<arrow::RecordBatch>& batch,
                      arrow::Compression::type compression) {
  auto sink = arrow::io::BufferOutputStream::Create().ValueOrDie();
  auto options = arrow::ipc::IpcWriteOptions::Defaults();
  if (compression != arrow::Compression::UNCOMPRESSED) {
    options.codec = arrow::util::Codec::Create(compression).ValueOrDie();
  }
  auto writer = arrow::ipc::MakeStreamWriter(sink, batch->schema(), options).ValueOrDie();
  EXPECT_TRUE(writer->WriteRecordBatch(*batch).ok());
  EXPECT_TRUE(writer->Close().ok());
  return sink->Finish().ValueOrDie()->ToString();
}

// --- ingest receipts ---------------------------------------------------------------

TEST(HttpIngestReceipt, WaitCountsTheRowsDropOldestDroppedFromTheSamePushAsDropped) {
  Harness h;
  JsonStreamOptions co;
  co.name = "http:orders";  // the application's own ingest connector
  co.limits.max_records = 5;
  co.limits.on_overflow = OverflowPolicy::kDropOldest;
  auto connector = JsonStreamConnector::Make("orders", co).ValueOrDie();
  ASSERT_TRUE(h.engine->AddConnector(connector).ok());
  Ticker ticker(h.engine.get());
  Reply r = Post(h.server->address(), "/api/v1/ingest/orders?wait=true",
                 OrdersNdjson(1000, 1008), "test-token");
  ASSERT_EQ(r.status, 200) << r.body;
  auto out = ParseObject(r.body);
  EXPECT_EQ(out["records"].to_number<int64_t>(), 8) << r.body;
  EXPECT_EQ(out["accepted"].to_number<int64_t>(), 5) << r.body;
  EXPECT_EQ(out["dropped"].to_number<int64_t>(), 3) << r.body;
  EXPECT_EQ(out["rejected"].to_number<int64_t>(), 0) << r.body;
  // Published: every accepted row is in the table (the last five).
  EXPECT_TRUE(out["published"].as_bool()) << r.body;
  auto kept = h.engine->Query("SELECT min(order_id), count(*) FROM orders WHERE order_id >= 1000")
                  .ValueOrDie();
  EXPECT_EQ(kept->column(0)->GetScalar(0).ValueOrDie()->ToString(), "1003");
  EXPECT_EQ(kept->column(1)->GetScalar(0).ValueOrDie()->ToString(), "5");
}

TEST(HttpIngestReceipt, WaitCountsRowsALaterPushDroppedBeforeATickTookThem) {
  Harness h;  // no ticks at all: only drops move the buffer, so the count is exact
  JsonStreamOptions co;
  co.name = "http:orders";
  co.limits.max_records = 4;
  co.limits.on_overflow = OverflowPolicy::kDropOldest;
  auto connector = JsonStreamConnector::Make("orders", co).ValueOrDie();
  ASSERT_TRUE(h.engine->AddConnector(connector).ok());
  Reply first;
  std::thread waiter([&] {
    first = Post(h.server->address(), "/api/v1/ingest/orders?wait=true&timeout=1",
                 OrdersNdjson(2000, 2004), "test-token");
  });
  // Once the first push is buffered, four more rows make drop_oldest drop all
  // four of the first push while its request waits.
  while (connector->stats().pushed_records < 4) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_TRUE(connector->PushBytes(OrdersNdjson(3000, 3004)).ok());
  waiter.join();
  // No tick ran, so nothing is published (504), but the receipt says where
  // the rows went: none accepted, four dropped.
  ASSERT_EQ(first.status, 504) << first.body;
  auto out = ParseObject(first.body);
  EXPECT_EQ(out["accepted"].to_number<int64_t>(), 0) << first.body;
  EXPECT_EQ(out["dropped"].to_number<int64_t>(), 4) << first.body;
  EXPECT_FALSE(out["published"].as_bool());
}

TEST(HttpIngestReceipt, IngestIntoSystemTablesIsRefusedWith403) {
  Harness h;
  Ticker ticker(h.engine.get());
  const std::string forged =
      R"({"connector":"kafka","position":"x","error":"forged","raw":"x"})" "\n";
  for (const std::string table : {"rill_rejects", "rill_alerts", "rill_metrics"}) {
    Reply r = Post(h.server->address(), "/api/v1/ingest/" + table + "?wait=true", forged,
                   "test-token");
    EXPECT_EQ(r.status, 403) << table << ": " << r.body;
    auto out = ParseObject(r.body);
    EXPECT_EQ(out["code"].as_string(), "Forbidden") << r.body;
    EXPECT_NE(std::string(out["message"].as_string()).find("system table"), std::string::npos);
  }
  auto rejects = h.engine->Query("SELECT count(*) FROM rill_rejects").ValueOrDie();
  EXPECT_EQ(rejects->column(0)->GetScalar(0).ValueOrDie()->ToString(), "0");
}

// --- the token before the body -----------------------------------------------------

TEST(HttpAuthBeforeBody, AnUnauthenticatedHundredMegabyteHeaderGets401AtOnceAndIsClosed) {
  ServerOptions o;
  o.max_body_bytes = 256 << 20;  // 100 MB is within the body limit
  Harness h(o);
  bool closed = false;
  const std::string head =
      "POST /api/v1/ingest/orders HTTP/1.1\r\nHost: x\r\n"
      "Content-Type: application/x-ndjson\r\nContent-Length: 100000000\r\n\r\n";
  // No body follows and the client keeps its side open: only a check on the
  // headers answers (the old server waited for 100 MB until its idle timeout).
  std::string raw = RawExchange(h.server->address(), head, /*timeout_seconds=*/8, &closed,
                                /*half_close=*/false);
  EXPECT_EQ(StatusOf(raw), 401) << raw;
  EXPECT_NE(raw.find("WWW-Authenticate: Bearer"), std::string::npos) << raw;
  EXPECT_TRUE(closed) << "the server must close the connection after the refusal";
  EXPECT_EQ(Rows(h), 100);
}

TEST(HttpAuthBeforeBody, AWrongTokenIsRefusedOnTheHeadersToo) {
  Harness h;
  bool closed = false;
  const std::string head =
      "POST /api/v1/query HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer wrong\r\n"
      "Content-Type: application/json\r\nContent-Length: 1000000\r\n\r\n{\"sql\":";
  std::string raw = RawExchange(h.server->address(), head, 8, &closed, /*half_close=*/false);
  EXPECT_EQ(StatusOf(raw), 401) << raw;
  EXPECT_TRUE(closed);
  // The right token on the same route still works, and so does login.
  EXPECT_EQ(Post(h.server->address(), "/api/v1/query", R"({"sql":"SELECT 1"})", "test-token")
                .status,
            200);
  EXPECT_EQ(Post(h.server->address(), "/api/v1/login", R"({"token":"test-token"})").status, 200);
}

TEST(HttpAuthBeforeBody, PublicRoutesTakeSmallBodiesOnly) {
  Harness h;
  bool closed = false;
  const std::string head =
      "POST /api/v1/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "Content-Length: 10000000\r\n\r\n";
  std::string raw = RawExchange(h.server->address(), head, 8, &closed, /*half_close=*/false);
  EXPECT_EQ(StatusOf(raw), 413) << raw;
  EXPECT_TRUE(closed);
}

// --- CORS --------------------------------------------------------------------------

std::string AllowedOriginOf(Harness& h, const std::string& origin) {
  Reply r = Request(h.server->address(), http::verb::get, "/api/v1/info", "", "test-token",
                    {{"Origin", origin}});
  EXPECT_EQ(r.status, 200) << r.body;
  auto it = r.headers.find("access-control-allow-origin");
  return it == r.headers.end() ? "" : it->second;
}

TEST(HttpCors, OnlyOriginsWhoseHostIsReallyLoopbackAreReflected) {
  Harness h;
  for (const std::string evil :
       {"http://127.evil.example", "http://127.0.0.1.evil.example",
        "http://localhost.evil.example", "http://127.0.0.1@evil.example",
        "http://evil.example/127.0.0.1", "http://127.1", "http://[::2]:80", "file://127.0.0.1",
        "http://127.0.0.1:x"}) {
    EXPECT_EQ(AllowedOriginOf(h, evil), "") << evil;
  }
  for (const std::string local :
       {"http://127.0.0.1:3000", "http://[::1]:8080", "http://localhost:5173",
        "http://127.3.4.5", "https://localhost"}) {
    EXPECT_EQ(AllowedOriginOf(h, local), local) << local;
  }
}

// --- Arrow IPC bodies --------------------------------------------------------------

TEST(HttpIngestArrow, AZstdBodyDecompressingBeyondTheBoundIs413AndNothingIsBuffered) {
  ServerOptions o;
  o.max_ingest_decompressed_bytes = 1 << 20;
  Harness h(o);
  // 4M zero ids: 32 MiB once inflated, a few KiB compressed.
  constexpr int64_t kRows = 4 << 20;
  std::shared_ptr<arrow::Buffer> zeros =
      arrow::AllocateBuffer(kRows * 8).ValueOrDie();
  std::memset(zeros->mutable_data(), 0, static_cast<size_t>(zeros->size()));
  auto ids = std::make_shared<arrow::Int64Array>(kRows, zeros);
  auto batch = arrow::RecordBatch::Make(
      arrow::schema({arrow::field("order_id", arrow::int64())}), kRows, {ids});
  std::string body = IpcStream(batch, arrow::Compression::ZSTD);
  ASSERT_LT(body.size(), 64u * 1024);
  Reply r = PostIpc(h.server->address(), "/api/v1/ingest/orders", body);
  EXPECT_EQ(r.status, 413) << r.body;
  EXPECT_NE(r.body.find("max_ingest_decompressed_bytes"), std::string::npos) << r.body;
  // Within the bound, compressed bodies still work.
  std::string small = IpcStream(Orders(500, 510), arrow::Compression::LZ4_FRAME);
  r = PostIpc(h.server->address(), "/api/v1/ingest/orders", small);
  EXPECT_EQ(r.status, 202) << r.body;
  ASSERT_TRUE(h.engine->Step().ok());
  EXPECT_EQ(Rows(h), 110);
}

TEST(HttpIngestArrow, ABatchWithOffsetsOutsideItsDataIsRefusedWith400) {
  Harness h;
  // A utf8 column whose offsets point past its 3 bytes of data.
  auto offsets = arrow::Buffer::FromString(std::string(
      "\x00\x00\x00\x00\x03\x00\x00\x00\x00\x00\x10\x00", 12));
  auto data = arrow::Buffer::FromString("abc");
  auto tiers = std::make_shared<arrow::StringArray>(2, offsets, data);
  arrow::Int64Builder id;
  ASSERT_TRUE(id.AppendValues({1, 2}).ok());
  arrow::DoubleBuilder amount;
  ASSERT_TRUE(amount.AppendValues({1.0, 2.0}).ok());
  auto batch = arrow::RecordBatch::Make(OrdersSchema(), 2,
                                        {*id.Finish(), tiers, *amount.Finish()});
  ASSERT_FALSE(batch->ValidateFull().ok());
  Reply r = PostIpc(h.server->address(), "/api/v1/ingest/orders",
                    IpcStream(batch, arrow::Compression::UNCOMPRESSED));
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("invalid"), std::string::npos) << r.body;
  ASSERT_TRUE(h.engine->Step().ok());
  EXPECT_EQ(Rows(h), 100);
}

// --- streamed results --------------------------------------------------------------

TEST(HttpQueryStream, CsvRowsArriveBeforeTheQueryHasRunToItsEnd) {
  Harness h;
  // The query fails at row 5,000,000: a result built whole first answers 400;
  // a streamed one has sent its status line and first rows by then, and ends
  // the connection without the last chunk.
  const std::string sql =
      "SELECT CASE WHEN range < 5000000 THEN range ELSE error('late failure') END AS i "
      "FROM range(6000000)";
  net::io_context ioc;
  beast::tcp_stream stream(ioc);
  std::string address = h.server->address();
  stream.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"),
                               static_cast<uint16_t>(std::stoi(h.port()))));
  stream.expires_after(std::chrono::seconds(60));
  http::request<http::string_body> req{http::verb::post, "/api/v1/query", 11};
  req.set(http::field::host, "127.0.0.1");
  req.set(http::field::authorization, "Bearer test-token");
  req.set(http::field::content_type, "application/json");
  req.body() = json::serialize(json::object{{"sql", sql}, {"format", "csv"}});
  req.prepare_payload();
  http::write(stream, req);
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(1ull << 31);
  beast::error_code ec;
  http::read_header(stream, buffer, parser, ec);
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(parser.get().result_int(), 200u);
  EXPECT_TRUE(parser.get().chunked());
  http::read(stream, buffer, parser, ec);
  EXPECT_TRUE(ec) << "the stream must end without its last chunk";
  const std::string& body = parser.get().body();
  EXPECT_EQ(body.substr(0, 8), "\"i\"\n0\n1\n") << body.substr(0, 40);
  EXPECT_GT(body.size(), 100000u);
  // The connection pool still serves queries afterwards.
  EXPECT_EQ(Post(address, "/api/v1/query", R"({"sql":"SELECT 1 AS x","format":"csv"})",
                 "test-token").body,
            "\"x\"\n1\n");
}

TEST(HttpQueryStream, ArrowAndNdjsonOfALargeResultCarryEveryRowInOrder) {
  Harness h;
  Reply nd = Post(h.server->address(), "/api/v1/query",
                  R"x({"sql":"SELECT range AS i FROM range(100000)","format":"ndjson"})x",
                  "test-token");
  ASSERT_EQ(nd.status, 200) << nd.body.substr(0, 200);
  EXPECT_EQ(std::count(nd.body.begin(), nd.body.end(), '\n'), 100000);
  EXPECT_EQ(nd.body.substr(nd.body.size() - 12), "{\"i\":99999}\n");
  Reply bad = Post(h.server->address(), "/api/v1/query",
                   R"({"sql":"SELECT nope FROM orders","format":"csv"})", "test-token");
  EXPECT_EQ(bad.status, 400) << bad.body;
}

// --- static assets -----------------------------------------------------------------

TEST(StaticAssets, TwoServersInOneProcessServeTheirOwnDashboards) {
  auto root = std::filesystem::temp_directory_path() /
              ("rill-static-" + std::to_string(::getpid()));
  std::vector<std::unique_ptr<Harness>> servers;
  for (const std::string name : {"first", "second"}) {
    std::filesystem::create_directories(root / name);
    std::ofstream(root / name / "index.html") << "<p>" << name << " dashboard</p>";
    ServerOptions o;
    o.dashboard_dir = (root / name).string();
    servers.push_back(std::make_unique<Harness>(o, /*rows=*/0, /*with_metrics=*/false));
  }
  EXPECT_EQ(Get(servers[0]->server->address(), "/").body, "<p>first dashboard</p>");
  EXPECT_EQ(Get(servers[1]->server->address(), "/").body, "<p>second dashboard</p>");
  EXPECT_EQ(Get(servers[0]->server->address(), "/index.html").body, "<p>first dashboard</p>");
  servers.clear();
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace rill::server::testing
