// http_bench: the network server's cost (bench/run).
//
//   http_bench --mode overhead [--rows 100k] [--reps 2000]
//     http_query_overhead_ms: p50 / p99 latency of SELECT count(*) over HTTP
//     (keep-alive, JSON) minus the same query in process on as many threads,
//     with 1 and 16 concurrent clients. Targets: p50 <= 0.5 ms, p99 <= 2 ms.
//   http_bench --mode ticks [--clients 64] [--seconds 5]
//     tick_p99_with_64_clients: tick p99 while 64 clients query in a loop, as a
//     ratio to the tick p99 with no clients (target <= 1.2).
//   http_bench --mode fanout [--subscribers 100] [--seconds 5]
//     ws_fanout: 100 WebSocket subscribers on metrics and table:<name>: frames
//     delivered per second, and the tick p99 ratio as above.
//
// Ticks are driven by this program (Step() every interval, each timed) as in
// tick_bench, with a connector pushing rows. Everything on 127.0.0.1.
#include <atomic>
#include <thread>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>

#include "bench_util.h"
#include "rill/connector/memory_connector.h"
#include "rill/engine/engine.h"
#include "rill/server/server.h"

namespace rill::bench {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

double Pct(std::vector<double> v, double q) {
  if (v.empty()) return std::nan("");
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

std::shared_ptr<arrow::Schema> Schema() {
  return arrow::schema({arrow::field("key", arrow::int64()), arrow::field("v", arrow::float64())});
}

std::shared_ptr<arrow::RecordBatch> Batch(int64_t begin, int64_t n) {
  arrow::Int64Builder k;
  arrow::DoubleBuilder v;
  for (int64_t i = 0; i < n; ++i) {
    (void)k.Append(begin + i);
    (void)v.Append(static_cast<double>(i));
  }
  return arrow::RecordBatch::Make(Schema(), n, {*k.Finish(), *v.Finish()});
}

struct Setup {
  std::unique_ptr<Engine> engine;
  std::shared_ptr<MemoryConnector> connector;
  std::unique_ptr<server::Server> server;
  std::string host, port;

  explicit Setup(int64_t rows) {
    engine = Check(Engine::Make(), "engine");
    TableOptions to;
    to.primary_key = {"key"};
    auto table = Check(engine->RegisterTable("t", Schema(), to), "table");
    Check(table->Write(Batch(0, rows)).status(), "preload");
    connector = std::make_shared<MemoryConnector>("t", Schema());
    Check(engine->AddConnector(connector), "connector");
    server::ServerOptions so;
    so.listen = "127.0.0.1:0";
    so.token = "bench";
    so.worker_threads = 4;
    server = Check(server::Server::Make(engine.get(), nullptr, so), "server");
    Check(server->Start(), "start");
    std::string a = server->address();
    host = a.substr(0, a.rfind(':'));
    port = a.substr(a.rfind(':') + 1);
  }
};

/// A keep-alive HTTP client doing POST /api/v1/query.
struct Client {
  net::io_context ioc;
  beast::tcp_stream stream{ioc};
  beast::flat_buffer buffer;
  http::request<http::string_body> req;

  Client(const Setup& s, const std::string& sql) {
    tcp::resolver resolver(ioc);
    stream.connect(resolver.resolve(s.host, s.port));
    req = http::request<http::string_body>(http::verb::post, "/api/v1/query", 11);
    req.set(http::field::host, s.host);
    req.set(http::field::authorization, "Bearer bench");
    req.set(http::field::content_type, "application/json");
    req.body() = "{\"sql\":\"" + sql + "\"}";
    req.prepare_payload();
    req.keep_alive(true);
  }
  /// One request; returns its latency in seconds.
  double Once() {
    double t0 = NowSeconds();
    http::write(stream, req);
    http::response<http::string_body> res;
    http::read(stream, buffer, res);
    if (res.result_int() != 200) Die("query failed: " + res.body());
    return NowSeconds() - t0;
  }
};

void Overhead(const Args& args) {
  Setup s(args.Int("rows", 100000));
  const std::string sql = "SELECT count(*) FROM t";
  const int64_t reps = args.Int("reps", 2000);
  for (int clients : {1, 16}) {
    std::vector<double> http_lat, local_lat;
    double http_seconds = 0, local_seconds = 0;  // wall time of each phase
    std::mutex mu;
    for (int round = 0; round < 2; ++round) {  // interleave HTTP and in-process
      std::vector<std::thread> threads;
      double phase = NowSeconds();
      for (int c = 0; c < clients; ++c) {
        threads.emplace_back([&] {
          std::vector<double> mine;
          Client client(s, sql);
          for (int64_t i = 0; i < reps / clients / 2 + 10; ++i) mine.push_back(client.Once());
          std::lock_guard<std::mutex> lock(mu);
          http_lat.insert(http_lat.end(), mine.begin() + 5, mine.end());
        });
      }
      for (auto& t : threads) t.join();
      http_seconds += NowSeconds() - phase;
      threads.clear();
      phase = NowSeconds();
      for (int c = 0; c < clients; ++c) {
        threads.emplace_back([&] {
          std::vector<double> mine;
          for (int64_t i = 0; i < reps / clients / 2 + 10; ++i) {
            double t0 = NowSeconds();
            Check(s.engine->Query(sql).status(), "query");
            mine.push_back(NowSeconds() - t0);
          }
          std::lock_guard<std::mutex> lock(mu);
          local_lat.insert(local_lat.end(), mine.begin() + 5, mine.end());
        });
      }
      for (auto& t : threads) t.join();
      local_seconds += NowSeconds() - phase;
    }
    auto mean = [](const std::vector<double>& v) {
      double sum = 0;
      for (double x : v) sum += x;
      return v.empty() ? 0.0 : sum / static_cast<double>(v.size());
    };
    // Each client queries in a closed loop, so by Little's law the mean
    // latency is clients / throughput on both sides; the in-process median
    // leaves out most of the time a thread waits for a CPU (queries that ran
    // uninterrupted), the HTTP one includes it (each request is handed from
    // the io thread to a worker and back).
    const double queries_per_phase = static_cast<double>(clients * (reps / clients / 2 + 10) * 2);
    double p50 = 1e3 * (Pct(http_lat, 0.5) - Pct(local_lat, 0.5));
    double p99 = 1e3 * (Pct(http_lat, 0.99) - Pct(local_lat, 0.99));
    Measurement m;
    m.name = "http_query_overhead_ms";
    m.value = p50;
    m.unit = "ms";
    m.baseline = "in-process Engine::Query";
    m.baseline_value = 1e3 * Pct(local_lat, 0.5);
    m.targets = {{"value", "<=", 0.5}};
    m.reps = static_cast<int>(http_lat.size());
    m.extra_numbers = {{"clients", clients},
                       {"p50_overhead_ms", p50},
                       {"p99_overhead_ms", p99},
                       {"p99_target_ms", 2.0},
                       {"http_p50_ms", 1e3 * Pct(http_lat, 0.5)},
                       {"http_p99_ms", 1e3 * Pct(http_lat, 0.99)},
                       {"inprocess_p99_ms", 1e3 * Pct(local_lat, 0.99)},
                       {"http_mean_ms", 1e3 * mean(http_lat)},
                       {"inprocess_mean_ms", 1e3 * mean(local_lat)},
                       {"http_queries_per_s", queries_per_phase / http_seconds},
                       {"inprocess_queries_per_s", queries_per_phase / local_seconds}};
    m.extra = {{"p99_target_met", p99 <= 2.0 ? "true" : "false"}};
    Emit(m);
  }
}

/// Tick every `interval_ms` for `seconds` with a connector pushing rows;
/// return each tick's wall latency.
std::vector<double> RunTicks(Setup& s, double seconds, int64_t interval_ms) {
  std::vector<double> lat;
  int64_t next = 1000000;
  double end = NowSeconds() + seconds;
  while (NowSeconds() < end) {
    double start = NowSeconds();
    Check(s.connector->Push(Batch(next, 1000)), "push");
    next += 1000;
    Check(s.engine->Step().status(), "tick");
    lat.push_back(NowSeconds() - start);
    double sleep = interval_ms / 1e3 - (NowSeconds() - start);
    if (sleep > 0) std::this_thread::sleep_for(std::chrono::duration<double>(sleep));
  }
  return lat;
}

void Ticks(const Args& args) {
  Setup s(args.Int("rows", 100000));
  const int clients = static_cast<int>(args.Int("clients", 64));
  const double seconds = static_cast<double>(args.Int("seconds", 5));
  std::vector<double> p99_none, p99_with;
  int64_t queries = 0;
  for (int rep = 0; rep < 2; ++rep) {
    p99_none.push_back(Pct(RunTicks(s, seconds, 20), 0.99));
    std::atomic<bool> stop{false};
    std::atomic<int64_t> done{0};
    std::vector<std::thread> threads;
    for (int c = 0; c < clients; ++c) {
      threads.emplace_back([&] {
        Client client(s, "SELECT count(*), sum(v) FROM t");
        while (!stop.load()) {
          client.Once();
          done.fetch_add(1);
        }
      });
    }
    p99_with.push_back(Pct(RunTicks(s, seconds, 20), 0.99));
    stop = true;
    for (auto& t : threads) t.join();
    queries += done.load();
  }
  Measurement m;
  m.name = "tick_p99_with_64_clients";
  double with = Median(p99_with), none = Median(p99_none);
  m.value = with / none;
  m.unit = "ratio";
  m.ratio_vs = "tick p99 with no clients";
  m.targets = {{"value", "<=", 1.2}};
  m.reps = 2;
  m.extra_numbers = {{"clients", clients},
                     {"tick_p99_ms_with_clients", 1e3 * with},
                     {"tick_p99_ms_no_clients", 1e3 * none},
                     {"queries_per_second", static_cast<double>(queries) / (2 * seconds)}};
  m.extra = {{"note", "2-core shared machine: clients compete with the tick for CPU"}};
  Emit(m);
}

void Fanout(const Args& args) {
  Setup s(args.Int("rows", 10000));
  const int subscribers = static_cast<int>(args.Int("subscribers", 100));
  const double seconds = static_cast<double>(args.Int("seconds", 5));
  double p99_none = Pct(RunTicks(s, seconds, 20), 0.99);
  net::io_context ioc;
  std::atomic<int64_t> frames{0};
  std::vector<std::shared_ptr<beast::websocket::stream<tcp::socket>>> sockets;
  std::vector<std::shared_ptr<beast::flat_buffer>> buffers;
  std::function<void(size_t)> read_loop = [&](size_t i) {
    sockets[i]->async_read(*buffers[i], [&, i](beast::error_code ec, size_t) {
      if (ec) return;
      frames.fetch_add(1, std::memory_order_relaxed);
      buffers[i]->consume(buffers[i]->size());
      read_loop(i);
    });
  };
  for (int i = 0; i < subscribers; ++i) {
    auto ws = std::make_shared<beast::websocket::stream<tcp::socket>>(ioc);
    ws->next_layer().connect(tcp::endpoint(net::ip::make_address(s.host),
                                           static_cast<uint16_t>(std::stoi(s.port))));
    ws->set_option(beast::websocket::stream_base::decorator(
        [](beast::websocket::request_type& r) { r.set(http::field::authorization, "Bearer bench"); }));
    ws->handshake(s.host, "/api/v1/stream");
    ws->write(net::buffer(std::string(R"({"type":"subscribe","channels":["metrics","table:t"]})")));
    sockets.push_back(ws);
    buffers.push_back(std::make_shared<beast::flat_buffer>());
  }
  for (size_t i = 0; i < sockets.size(); ++i) read_loop(i);
  std::thread io([&] { ioc.run(); });
  int64_t before = frames.load();
  double t0 = NowSeconds();
  double p99_with = Pct(RunTicks(s, seconds, 20), 0.99);
  double rate = static_cast<double>(frames.load() - before) / (NowSeconds() - t0);
  const auto stats = s.server->stats();
  s.server->Stop();
  ioc.stop();
  io.join();
  Measurement m;
  m.name = "ws_fanout";
  m.value = rate;
  m.unit = "frames/s";
  m.ratio = p99_none / p99_with;
  m.ratio_vs = "tick p99 with no subscribers / with (bigger is better)";
  m.extra_numbers = {{"subscribers", subscribers},
                     {"tick_p99_ratio", p99_with / p99_none},
                     {"tick_p99_ms_with", 1e3 * p99_with},
                     {"tick_p99_ms_none", 1e3 * p99_none},
                     {"expected_frames_per_s", subscribers * (50.0 + 1.0)},
                     {"server_frames_sent", static_cast<double>(stats.ws_frames_sent)},
                     {"server_frames_coalesced", static_cast<double>(stats.ws_frames_coalesced)},
                     {"server_frames_dropped", static_cast<double>(stats.ws_frames_dropped)}};
  m.targets = {{"ratio", ">=", 1 / 1.2}};
  Emit(m);
}

}  // namespace
}  // namespace rill::bench

int main(int argc, char** argv) {
  rill::bench::Args args(argc, argv);
  std::string mode = args.Str("mode", "overhead");
  if (mode == "overhead") {
    rill::bench::Overhead(args);
  } else if (mode == "ticks") {
    rill::bench::Ticks(args);
  } else if (mode == "fanout") {
    rill::bench::Fanout(args);
  } else {
    rill::bench::Die("unknown --mode " + mode + " (overhead, ticks, fanout)");
  }
  return 0;
}
