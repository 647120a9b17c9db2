// ingest_bench: HTTP ingest against in-process push_bytes (bench/run).
//
//   ingest_bench [--rows 400k] [--batch 1000] [--clients 4] [--reps 3]
//     http_ingest_rows_per_s: NDJSON events POSTed to /api/v1/ingest/{table}
//     by `clients` keep-alive connections (one body per `batch` rows, 202
//     replies), as a ratio to JsonStreamConnector::PushBytes of the same bodies
//     from as many threads in process. Target: ratio >= 0.7.
//
// Both sides decode into the same kind of connector with an unlimited buffer,
// drained (and dropped) between repetitions; no ticks run, so the figure is the
// ingest path alone. Everything on 127.0.0.1.
#include <atomic>
#include <random>
#include <thread>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "bench_util.h"
#include "rill/connector/json_stream_connector.h"
#include "rill/engine/engine.h"
#include "rill/server/server.h"

namespace rill::bench {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

std::shared_ptr<arrow::Schema> Schema() {
  return arrow::schema({
      arrow::field("event_id", arrow::int64()), arrow::field("user_id", arrow::utf8()),
      arrow::field("event_type", arrow::utf8()), arrow::field("page", arrow::utf8()),
      arrow::field("price", arrow::float64()), arrow::field("quantity", arrow::int64()),
      arrow::field("is_mobile", arrow::boolean()), arrow::field("country", arrow::utf8()),
      arrow::field("latency_ms", arrow::int64()), arrow::field("score", arrow::float64()),
      arrow::field("ts", arrow::timestamp(arrow::TimeUnit::MILLI)),
  });
}

/// `rows` events as NDJSON bodies of `batch` lines each.
std::vector<std::string> MakeBodies(int64_t rows, int64_t batch) {
  std::mt19937_64 rng(42);
  const char* types[] = {"view", "click", "add_to_cart", "purchase", "search"};
  const char* countries[] = {"US", "DE", "FR", "JP", "BR", "IN", "GB", "NG"};
  const char* pages[] = {"/home", "/product/123", "/search?q=shoes", "/cart", "/checkout"};
  std::vector<std::string> bodies;
  char buf[512];
  for (int64_t i = 0; i < rows; ++i) {
    if (i % batch == 0) bodies.emplace_back();
    int len = std::snprintf(
        buf, sizeof(buf),
        "{\"event_id\":%lld,\"user_id\":\"u-%06llu\",\"event_type\":\"%s\",\"page\":\"%s\","
        "\"price\":%.2f,\"quantity\":%llu,\"is_mobile\":%s,\"country\":\"%s\","
        "\"latency_ms\":%llu,\"score\":%.6f,\"ts\":%lld}\n",
        static_cast<long long>(i), static_cast<unsigned long long>(rng() % 1000000),
        types[rng() % 5], pages[rng() % 5], (rng() % 100000) / 100.0,
        static_cast<unsigned long long>(rng() % 10 + 1), rng() % 2 ? "true" : "false",
        countries[rng() % 8], static_cast<unsigned long long>(rng() % 2000),
        (rng() % 1000000) / 1e6, static_cast<long long>(1700000000000LL + i * 7));
    bodies.back().append(buf, static_cast<size_t>(len));
  }
  return bodies;
}

/// Run `work(client)` on `clients` threads; return the seconds they took.
double OnThreads(int clients, const std::function<void(int)>& work) {
  std::vector<std::thread> threads;
  double t0 = NowSeconds();
  for (int c = 0; c < clients; ++c) threads.emplace_back(work, c);
  for (auto& t : threads) t.join();
  return NowSeconds() - t0;
}

/// POST bodies c, c + clients, ... on one keep-alive connection.
void PostBodies(const std::string& host, const std::string& port,
                const std::vector<std::string>& bodies, int c, int clients) {
  net::io_context ioc;
  beast::tcp_stream stream(ioc);
  stream.connect(tcp::endpoint(net::ip::make_address(host),
                               static_cast<uint16_t>(std::stoi(port))));
  // As curl, urllib3 and Go's net/http do: without it, the last segment of a
  // body waits for the server's delayed ACK (Nagle), milliseconds per request.
  stream.socket().set_option(tcp::no_delay(true));
  beast::flat_buffer buffer;
  for (size_t i = static_cast<size_t>(c); i < bodies.size(); i += static_cast<size_t>(clients)) {
    http::request<http::string_body> req{http::verb::post, "/api/v1/ingest/events", 11};
    req.set(http::field::host, host);
    req.set(http::field::authorization, "Bearer bench");
    req.set(http::field::content_type, "application/x-ndjson");
    req.body() = bodies[i];
    req.prepare_payload();
    http::write(stream, req);
    http::response<http::string_body> res;
    http::read(stream, buffer, res);
    if (res.result_int() != 202) Die("ingest answered " + std::to_string(res.result_int()) +
                                     ": " + res.body());
  }
  beast::error_code ec;
  stream.socket().shutdown(tcp::socket::shutdown_both, ec);
}

void Run(const Args& args) {
  const int64_t rows = args.Int("rows", 400000);
  const int64_t batch = args.Int("batch", 1000);
  const int clients = static_cast<int>(args.Int("clients", 4));
  const int reps = static_cast<int>(args.Int("reps", 3));
  std::vector<std::string> bodies = MakeBodies(rows, batch);
  int64_t bytes = 0;
  for (const auto& b : bodies) bytes += static_cast<int64_t>(b.size());

  auto engine = Check(Engine::Make(), "engine");
  Check(engine->RegisterTable("events", Schema()).status(), "table");
  server::ServerOptions so;
  so.listen = "127.0.0.1:0";
  so.token = "bench";
  so.worker_threads = clients;
  so.ingest_max_buffer_records = 0;  // unlimited: the bench drains between reps
  so.ingest_max_buffer_bytes = 0;
  auto server = Check(server::Server::Make(engine.get(), nullptr, so), "server");
  Check(server->Start(), "start");
  std::string address = server->address();
  std::string host = address.substr(0, address.rfind(':'));
  std::string port = address.substr(address.rfind(':') + 1);

  JsonStreamOptions jo;
  jo.decode.schema = Schema();
  jo.limits.max_records = 0;
  auto local = Check(JsonStreamConnector::Make("events", jo), "connector");

  std::vector<double> http_s, local_s;
  for (int r = 0; r < reps; ++r) {
    local_s.push_back(OnThreads(clients, [&](int c) {
      for (size_t i = static_cast<size_t>(c); i < bodies.size();
           i += static_cast<size_t>(clients)) {
        Check(local->PushBytes(bodies[i]), "push_bytes");
      }
    }));
    (void)local->Poll();
    http_s.push_back(
        OnThreads(clients, [&](int c) { PostBodies(host, port, bodies, c, clients); }));
    for (const auto& conn : engine->Connectors()) (void)conn->Poll();
  }
  int64_t received = 0;
  for (const auto& conn : engine->Connectors()) received += conn->stats().parsed_records;
  if (received != rows * reps) {
    Die("the server decoded " + std::to_string(received) + " rows, expected " +
        std::to_string(rows * reps));
  }
  server->Stop();
  const double http_rate = static_cast<double>(rows) / Median(http_s);
  const double local_rate = static_cast<double>(rows) / Median(local_s);
  Measurement m;
  m.name = "http_ingest_rows_per_s";
  m.value = http_rate;
  m.unit = "rows/s";
  m.baseline = "JsonStreamConnector::PushBytes in process, same bodies, same threads";
  m.baseline_value = local_rate;
  m.ratio = http_rate / local_rate;
  m.targets = {{"ratio", ">=", 0.7}};
  m.reps = reps;
  m.extra_numbers = {{"rows", static_cast<double>(rows)},
                     {"clients", clients},
                     {"rows_per_body", static_cast<double>(batch)},
                     {"mb_per_s", static_cast<double>(bytes) / Median(http_s) / 1e6}};
  Emit(m);
}

}  // namespace
}  // namespace rill::bench

int main(int argc, char** argv) {
  rill::bench::Args args(argc, argv);
  rill::bench::Run(args);
  return 0;
}
