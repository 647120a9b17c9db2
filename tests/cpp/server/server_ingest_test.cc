// POST /api/v1/ingest/{table} over a real socket: the bounds (gzip inflation,
// wait timeout) and ?wait=true against ticks driven by the test.
#include <thread>

#include <arrow/util/compression.h>

#include "server_test_util.h"

namespace rill::server::testing {
namespace {

std::string Gzip(const std::string& data) {
  auto codec = arrow::util::Codec::Create(arrow::Compression::GZIP).ValueOrDie();
  int64_t bound = codec->MaxCompressedLen(static_cast<int64_t>(data.size()),
                                          reinterpret_cast<const uint8_t*>(data.data()));
  std::string out(static_cast<size_t>(bound), '\0');
  int64_t n = codec
                  ->Compress(static_cast<int64_t>(data.size()),
                             reinterpret_cast<const uint8_t*>(data.data()), bound,
                             reinterpret_cast<uint8_t*>(out.data()))
                  .ValueOrDie();
  out.resize(static_cast<size_t>(n));
  return out;
}

std::string OrdersNdjson(int64_t begin, int64_t end) {
  std::string out;
  for (int64_t i = begin; i < end; ++i) {
    out += "{\"order_id\":" + std::to_string(i) + ",\"user_tier\":\"Gold\",\"amount\":" +
           std::to_string(i) + ".5}\n";
  }
  return out;
}

int64_t Rows(Harness& h) { return h.engine->GetTable("orders").ValueOrDie()->num_rows(); }

TEST(ServerIngest, GzipBodyInflatingBeyondTheLimitIs413AndNothingIsBuffered) {
  ServerOptions options;
  options.max_ingest_decompressed_bytes = 1 << 20;
  Harness h(options);
  std::string bomb = Gzip(std::string(8 << 20, ' ') + OrdersNdjson(1000, 1001));
  ASSERT_LT(bomb.size(), 64u * 1024);
  Reply r = Request(h.server->address(), http::verb::post, "/api/v1/ingest/orders", bomb,
                    "test-token", {{"Content-Encoding", "gzip"}});
  EXPECT_EQ(r.status, 413) << r.body;
  EXPECT_NE(r.body.find("max_ingest_decompressed_bytes"), std::string::npos) << r.body;

  // Within the limit the same encoding works; a truncated stream is a 400.
  std::string ok = Gzip(OrdersNdjson(1000, 1010));
  r = Request(h.server->address(), http::verb::post, "/api/v1/ingest/orders", ok, "test-token",
              {{"Content-Encoding", "gzip"}});
  EXPECT_EQ(r.status, 202) << r.body;
  EXPECT_NE(r.body.find("\"accepted\":10"), std::string::npos) << r.body;
  r = Request(h.server->address(), http::verb::post, "/api/v1/ingest/orders",
              ok.substr(0, ok.size() / 2), "test-token", {{"Content-Encoding", "gzip"}});
  EXPECT_EQ(r.status, 400) << r.body;
  ASSERT_TRUE(h.engine->Step().ok());
  EXPECT_EQ(Rows(h), 110);
}

TEST(ServerIngest, WaitAnswers504WithoutATickAnd200OnceTheTickPublished) {
  Harness h;  // the engine's loop is not running: the test drives the ticks
  Reply r = Post(h.server->address(), "/api/v1/ingest/orders?wait=true&timeout=0.3",
                 OrdersNdjson(100, 150), "test-token");
  EXPECT_EQ(r.status, 504) << r.body;
  EXPECT_NE(r.body.find("\"published\":false"), std::string::npos) << r.body;
  EXPECT_EQ(Rows(h), 100);

  std::atomic<bool> done{false};
  std::thread ticker([&] {
    while (!done) {
      (void)h.engine->Step();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  r = Post(h.server->address(), "/api/v1/ingest/orders?wait=true", OrdersNdjson(150, 200),
           "test-token");
  // Read before the next tick could matter: the reply comes after publication.
  const int64_t rows_at_reply = Rows(h);
  done = true;
  ticker.join();
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_NE(r.body.find("\"published\":true"), std::string::npos) << r.body;
  EXPECT_EQ(rows_at_reply, 200);
}

TEST(ServerIngest, UnknownTableWrongMethodAndBadTimeout) {
  Harness h;
  EXPECT_EQ(Post(h.server->address(), "/api/v1/ingest/nope", "{}", "test-token").status, 404);
  EXPECT_EQ(Get(h.server->address(), "/api/v1/ingest/orders", "test-token").status, 405);
  EXPECT_EQ(Post(h.server->address(), "/api/v1/ingest/orders", "{}").status, 401);
  EXPECT_EQ(Post(h.server->address(), "/api/v1/ingest/orders?wait=true&timeout=x", "{}",
                 "test-token")
                .status,
            400);
}

}  // namespace
}  // namespace rill::server::testing
