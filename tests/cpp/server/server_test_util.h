// Helpers for the server tests: an engine + metrics store + server on
// 127.0.0.1:0, a blocking Beast HTTP client, and a raw socket exchange.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <arrow/api.h>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <gtest/gtest.h>

#include "rill/engine/engine.h"
#include "rill/metrics/metrics_store.h"
#include "rill/server/server.h"

namespace rill::server::testing {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

inline std::shared_ptr<arrow::Schema> OrdersSchema() {
  return arrow::schema({arrow::field("order_id", arrow::int64()),
                        arrow::field("user_tier", arrow::utf8()),
                        arrow::field("amount", arrow::float64())});
}

/// Orders order_id in [begin, end): tier "Gold" for even ids, amount id * 1.5.
inline std::shared_ptr<arrow::RecordBatch> Orders(int64_t begin, int64_t end) {
  arrow::Int64Builder id;
  arrow::StringBuilder tier;
  arrow::DoubleBuilder amount;
  for (int64_t i = begin; i < end; ++i) {
    EXPECT_TRUE(id.Append(i).ok());
    EXPECT_TRUE(tier.Append(i % 2 == 0 ? "Gold" : "Silver").ok());
    EXPECT_TRUE(amount.Append(static_cast<double>(i) * 1.5).ok());
  }
  return arrow::RecordBatch::Make(OrdersSchema(), end - begin,
                                  {*id.Finish(), *tier.Finish(), *amount.Finish()});
}

struct Reply {
  int status = 0;
  std::string body;
  std::map<std::string, std::string> headers;  // lower-case names
};

/// An engine (with an `orders` table of `rows` rows), a :memory: metrics store
/// and a started server.
struct Harness {
  std::unique_ptr<Engine> engine;
  std::unique_ptr<MetricsStore> metrics;
  std::unique_ptr<Server> server;

  explicit Harness(ServerOptions options = {}, int64_t rows = 100, bool with_metrics = true,
                   std::string metrics_path = ":memory:") {
    EngineOptions eo;
    eo.trigger_interval_ms = 20;
    engine = Engine::Make(eo).ValueOrDie();
    TableOptions to;
    to.primary_key = {"order_id"};
    auto table = engine->RegisterTable("orders", OrdersSchema(), to).ValueOrDie();
    if (rows > 0) {
      EXPECT_TRUE(table->Write(Orders(0, rows)).ok());
    }
    if (with_metrics) {
      MetricsOptions mo;
      mo.path = metrics_path;
      mo.flush_interval_seconds = 0.2;
      metrics = MetricsStore::Make(engine.get(), mo).ValueOrDie();
      EXPECT_TRUE(metrics->Start().ok());
    }
    if (options.listen == ServerOptions{}.listen) {
      options.listen = "127.0.0.1:0";
    }
    if (!options.token.has_value()) {
      options.token = "test-token";
    }
    server = Server::Make(engine.get(), metrics.get(), options).ValueOrDie();
    Status st = server->Start();
    EXPECT_TRUE(st.ok()) << st.ToString();
  }
  ~Harness() {
    if (server) server->Stop();
    server.reset();
    if (metrics) metrics->Stop();
    metrics.reset();
    if (engine) engine->Stop();
  }
  std::string port() const {
    std::string a = server->address();
    return a.substr(a.rfind(':') + 1);
  }
};

/// One HTTP request on a new connection.
inline Reply Request(const std::string& address, http::verb method, const std::string& target,
                     const std::string& body = "", const std::string& token = "",
                     std::vector<std::pair<std::string, std::string>> headers = {}) {
  net::io_context ioc;
  tcp::resolver resolver(ioc);
  beast::tcp_stream stream(ioc);
  std::string host = address.substr(0, address.rfind(':'));
  std::string port = address.substr(address.rfind(':') + 1);
  stream.expires_after(std::chrono::seconds(30));
  beast::error_code connect_ec;
  auto endpoints = resolver.resolve(host, port, connect_ec);
  if (!connect_ec) stream.connect(endpoints, connect_ec);
  if (connect_ec) {
    return Reply{-1, connect_ec.message(), {}};
  }
  http::request<http::string_body> req{method, target, 11};
  req.set(http::field::host, host);
  if (!token.empty()) req.set(http::field::authorization, "Bearer " + token);
  for (auto& [k, v] : headers) req.set(k, v);
  if (!body.empty() || method == http::verb::post) {
    req.set(http::field::content_type, "application/json");
    req.body() = body;
    req.prepare_payload();
  }
  beast::error_code write_ec;
  http::write(stream, req, write_ec);
  if (write_ec) {
    return Reply{-1, write_ec.message(), {}};
  }
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(1ull << 31);
  beast::error_code ec;
  http::read(stream, buffer, parser, ec);
  Reply reply;
  if (ec) {
    reply.status = -1;
    reply.body = ec.message();
    return reply;
  }
  auto res = parser.release();
  reply.status = static_cast<int>(res.result_int());
  reply.body = res.body();
  for (const auto& f : res) {
    std::string name(f.name_string());
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    reply.headers[name] = std::string(f.value());
  }
  stream.socket().shutdown(tcp::socket::shutdown_both, ec);
  return reply;
}

inline Reply Get(const std::string& address, const std::string& target,
                 const std::string& token = "") {
  return Request(address, http::verb::get, target, "", token);
}
inline Reply Post(const std::string& address, const std::string& target,
                  const std::string& body, const std::string& token = "") {
  return Request(address, http::verb::post, target, body, token);
}

/// Send raw bytes, then read until the server closes or `timeout` passes.
/// Returns what came back ("" when the server closed without a word).
inline std::string RawExchange(const std::string& address, const std::string& bytes,
                               double timeout_seconds = 5, bool* closed = nullptr,
                               bool half_close = true) {
  net::io_context ioc;
  tcp::socket socket(ioc);
  std::string host = address.substr(0, address.rfind(':'));
  auto port = static_cast<uint16_t>(std::stoi(address.substr(address.rfind(':') + 1)));
  socket.connect(tcp::endpoint(net::ip::make_address(host), port));
  beast::error_code ec;
  net::write(socket, net::buffer(bytes), ec);
  if (half_close) socket.shutdown(tcp::socket::shutdown_send, ec);
  if (closed != nullptr) *closed = false;
  std::string out;
  auto deadline = std::chrono::steady_clock::now() +
                  std::chrono::milliseconds(static_cast<int64_t>(timeout_seconds * 1000));
  socket.non_blocking(true);
  char buf[4096];
  while (std::chrono::steady_clock::now() < deadline) {
    size_t n = socket.read_some(net::buffer(buf), ec);
    if (ec == net::error::would_block) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      continue;
    }
    if (ec) {
      if (closed != nullptr) *closed = true;
      break;
    }
    out.append(buf, n);
  }
  return out;
}

/// The status code of the first response line in `raw`, or 0.
inline int StatusOf(const std::string& raw) {
  if (raw.rfind("HTTP/1.1 ", 0) != 0 || raw.size() < 12) return 0;
  return std::stoi(raw.substr(9, 3));
}

}  // namespace rill::server::testing
