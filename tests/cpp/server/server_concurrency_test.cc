// Many clients at once while the engine ticks and a connector writes: every
// request succeeds, WebSocket subscribers keep receiving, and the server
// stops and restarts under load. Labelled "threads" (also run under TSan).
#include <atomic>
#include <thread>

#include <boost/beast/websocket.hpp>

#include "rill/connector/memory_connector.h"
#include "server/server_test_util.h"

namespace rill::server::testing {
namespace {

namespace websocket = beast::websocket;

TEST(ServerConcurrency, ClientsQueryWhileTheEngineTicksAndWrites) {
  Harness h(ServerOptions{}, 10);
  auto connector = std::make_shared<MemoryConnector>("orders", OrdersSchema());
  ASSERT_TRUE(h.engine->AddConnector(connector).ok());
  ASSERT_TRUE(h.engine->Start().ok());
  std::atomic<bool> stop{false};
  std::thread producer([&] {
    int64_t next = 10;
    while (!stop.load()) {
      ASSERT_TRUE(connector->Push(Orders(next, next + 50)).ok());
      next += 50;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  });
  std::string address = h.server->address();
  std::atomic<int> ws_frames{0};
  std::vector<std::thread> subscribers;
  for (int i = 0; i < 3; ++i) {
    subscribers.emplace_back([&] {
      net::io_context ioc;
      websocket::stream<tcp::socket> ws(ioc);
      std::string host = address.substr(0, address.rfind(':'));
      auto port = static_cast<uint16_t>(std::stoi(address.substr(address.rfind(':') + 1)));
      beast::error_code ec;
      // Errors end the subscriber: the server may stop before a slow thread connects.
      ws.next_layer().connect(tcp::endpoint(net::ip::make_address(host), port), ec);
      if (ec) return;
      ws.set_option(websocket::stream_base::decorator([](websocket::request_type& req) {
        req.set(http::field::authorization, "Bearer test-token");
      }));
      ws.handshake(host, "/api/v1/stream", ec);
      if (ec) return;
      ws.write(net::buffer(std::string(R"({"type":"subscribe","channels":["table:orders","metrics"]})")),
               ec);
      if (ec) return;
      beast::flat_buffer buffer;
      while (!stop.load()) {
        ws.read(buffer, ec);
        if (ec) break;
        buffer.consume(buffer.size());
        ws_frames.fetch_add(1);
        if (ws_frames.load() > 200) break;
      }
      ws.close(websocket::close_code::normal, ec);
    });
  }
  std::atomic<int> failures{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 6; ++t) {
    clients.emplace_back([&, t] {
      for (int i = 0; i < 15; ++i) {
        Reply r;
        switch ((t + i) % 4) {
          case 0:
            r = Post(address, "/api/v1/query",
                     R"({"sql":"SELECT count(*) AS n, max(order_id) AS m FROM orders"})",
                     "test-token");
            break;
          case 1:
            r = Post(address, "/api/v1/query",
                     R"({"sql":"SELECT * FROM orders LIMIT 500","format":"arrow"})", "test-token");
            break;
          case 2:
            r = Get(address, "/api/v1/tables", "test-token");
            break;
          default:
            r = Get(address, "/metrics", "test-token");
        }
        if (r.status != 200) failures.fetch_add(1);
      }
    });
  }
  for (auto& c : clients) c.join();
  EXPECT_EQ(failures.load(), 0);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (ws_frames.load() < 20 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_GE(ws_frames.load(), 20);
  // Stop under load: subscribers see their sockets close; then restart.
  std::thread late([&] {
    for (int i = 0; i < 20; ++i) Get(address, "/api/v1/info", "test-token");
  });
  h.server->Stop();
  late.join();
  stop = true;
  for (auto& s : subscribers) s.join();
  ASSERT_TRUE(h.server->Start().ok());
  EXPECT_EQ(Get(address, "/api/v1/info", "test-token").status, 200);
  producer.join();
  h.engine->Stop();
}

}  // namespace
}  // namespace rill::server::testing
