#include "nexmark/latency.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <mutex>
#include <thread>

#include "bench_util.h"
#include "nexmark/generator.h"
#include "nexmark/ws_frames.h"
#include "rill/connector/memory_connector.h"
#include "rill/engine/engine.h"
#include "rill/engine/stream_sql_task.h"
#include "rill/server/server.h"
#include "rill/table/schema.h"

namespace rill::nexmark {
namespace {

using bench::Check;
using bench::Log;

double WallMs() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int64_t RssBytes() {
  std::ifstream f("/proc/self/statm");
  int64_t pages = 0, rss = 0;
  f >> pages >> rss;
  return rss * 4096;
}

/// Bids generated once by the Nexmark generator (in batches of ~256, each
/// with its own buffers) and cycled by every producer: a push is then only a
/// new date_time column, so the producer outruns the engine and the
/// sustainable rate is the engine's, not the generator's.
const std::vector<std::shared_ptr<arrow::RecordBatch>>& BidPool() {
  static const auto pool = [] {
    GeneratorConfig c;
    c.rate = 1e6;
    Generator gen(c);
    std::vector<std::shared_ptr<arrow::RecordBatch>> out;
    for (int i = 0; i < 1200; ++i) out.push_back(Check(gen.Next(278), "generate").bid);
    return out;
  }();
  return pool;
}

struct Sample {
  double at_ms;
  float latency_ms;
};

/// One engine running q0 over bids pushed by a producer thread at `rate`; with
/// `websocket`, also the engine's server on 127.0.0.1:0 and a WebSocket client
/// subscribed to table:q0_out.
class LatencyRun {
 public:
  LatencyRun(int64_t tick_ms, double rate, int64_t buffer_records, int64_t budget,
             bool websocket = false)
      : websocket_(websocket), rate_(rate) {
    EngineOptions eo;
    eo.trigger_interval_ms = tick_ms;
    eo.memory_budget_bytes = budget;
    eo.log_repeat_window_seconds = 60;
    engine_ = Check(Engine::Make(std::move(eo)), "engine");
    TableOptions t;
    t.mode = TableMode::kAppend;
    t.retention = RetentionPolicy{};
    t.retention->max_rows = 2'000'000;
    Check(engine_->RegisterTable("bid", BidSchema(), t).status(), "bid");
    BufferLimits limits;
    limits.max_records = std::max<int64_t>(buffer_records, 10'000);
    limits.on_overflow = OverflowPolicy::kDropOldest;
    conn_ = std::make_shared<MemoryConnector>("bid", BidSchema(), limits, "bid_in");
    Check(engine_->AddConnector(conn_), "connector");
    TableOptions out = t;
    out.retention->max_rows = 500'000;
    Check(engine_->DeclareTable("q0_out", out), "declare");
    Check(engine_->AddSqlTask(Check(
              StreamSqlTask::Make("q0", "SELECT auction, bidder, price, date_time FROM bid",
                                  engine_.get(), "bid", "q0_out", *out.retention),
              "task")),
          "add task");
    Check(engine_->Subscribe("q0_out", [this](const auto& v) { OnVersion(*v); }).status(),
          "subscribe");
    if (websocket) {
      server::ServerOptions so;
      so.listen = "127.0.0.1:0";
      so.token = "";  // loopback only
      so.io_threads = 1;
      so.worker_threads = 1;
      server_ = Check(server::Server::Make(engine_.get(), nullptr, so), "server");
    }
  }

  void Start() {
    Check(engine_->Start(), "start");
    if (server_) {
      Check(server_->Start(), "server start");
      ws_ = std::make_unique<WsFrameRecorder>();
      Check(ws_->Open(server_->address(), server_->token(), "q0_out"), "websocket");
    }
    producer_ = std::thread([this] { Produce(); });
  }
  void Stop() {
    stop_ = true;
    if (producer_.joinable()) producer_.join();
    if (server_) server_->Stop();  // closes the client's socket: its reader ends
    if (ws_) ws_->Join();
    engine_->Stop();
  }
  ~LatencyRun() { Stop(); }

  void set_rate(double rate) { rate_ = rate; }
  Engine& engine() { return *engine_; }
  MemoryConnector& connector() { return *conn_; }
  int64_t produced() const { return produced_.load(); }
  /// Latencies of rows made visible at or after `from_ms` (wall ms).
  std::vector<Sample> SamplesSince(double from_ms) {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<Sample> out;
    for (const auto& s : samples_) {
      if (s.at_ms >= from_ms) out.push_back(s);
    }
    return out;
  }
  /// (wall ms, new rows) of each output version published at or after `from_ms`.
  std::vector<std::pair<double, int64_t>> VersionsSince(double from_ms) {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::pair<double, int64_t>> out;
    for (const auto& v : versions_) {
      if (v.first >= from_ms) out.push_back(v);
    }
    return out;
  }
  void ClearSamples() {
    std::lock_guard<std::mutex> lock(mu_);
    samples_.clear();
    versions_.clear();
    stamped_.clear();
  }
  /// Event pushed -> WebSocket frame latencies of frames received in
  /// [from_ms, to_ms); call after Stop(). Empty without `websocket`.
  std::vector<float> WsLatenciesSince(double from_ms, double to_ms, int64_t* frames,
                                      int64_t* versions_coalesced) {
    if (!ws_) return {};
    auto f = ws_->frames();
    f.erase(std::find_if(f.begin(), f.end(), [&](const auto& x) { return x.received_ms >= to_ms; }),
            f.end());
    *frames = std::count_if(f.begin(), f.end(),
                            [&](const auto& x) { return x.received_ms >= from_ms; });
    std::lock_guard<std::mutex> lock(mu_);
    return MatchFrames(stamped_, f, from_ms, versions_coalesced);
  }

 private:
  void Produce() {
    const auto& pool = BidPool();
    size_t next = 0;
    auto last = std::chrono::steady_clock::now();
    double credit = 0;
    while (!stop_) {
      auto now = std::chrono::steady_clock::now();
      const double rate = rate_.load();
      credit += rate * std::chrono::duration<double>(now - last).count();
      last = now;
      // Cannot keep up: do not burst (at most 50 ms of input, at most 50k bids).
      credit = std::min(credit, std::clamp(rate * 0.05, 1000.0, 50'000.0));
      if (credit < pool[next]->num_rows()) {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        continue;
      }
      const int64_t now_ms = static_cast<int64_t>(WallMs());
      while (credit >= pool[next]->num_rows()) {
        auto bids = pool[next];
        next = (next + 1) % pool.size();
        arrow::TimestampBuilder ts(arrow::timestamp(arrow::TimeUnit::MILLI),
                                   arrow::default_memory_pool());
        Check(ts.AppendValues(std::vector<int64_t>(bids->num_rows(), now_ms)), "ts");
        bids = Check(bids->SetColumn(5, bids->schema()->field(5), Check(ts.Finish(), "ts")), "set");
        (void)conn_->Push(bids);
        credit -= static_cast<double>(bids->num_rows());
        produced_ += bids->num_rows();
      }
    }
  }

  // Tick thread: the rows of this version newer than the cursor.
  void OnVersion(const TableVersion& version) {
    const double now = WallMs();
    const int upd = version.schema()->GetFieldIndex(kUpdateTsColumn);
    const int dt = version.schema()->GetFieldIndex("date_time");
    const auto& type = static_cast<const arrow::TimestampType&>(*version.schema()->field(dt)->type());
    const double to_ms = type.unit() == arrow::TimeUnit::MICRO ? 1e-3
                         : type.unit() == arrow::TimeUnit::NANO ? 1e-6
                         : type.unit() == arrow::TimeUnit::SECOND ? 1e3 : 1.0;
    std::vector<Sample> fresh;
    StampedVersion stamped{version.version(), {}};
    double newest = cursor_;
    int64_t rows = 0;
    const auto& chunks = version.chunks();
    for (size_t i = chunks.size(); i-- > 0;) {
      const auto& b = *chunks[i].batch;
      const int64_t n = b.num_rows();
      if (n == 0) continue;
      const double* ts = b.column(upd)->data()->GetValues<double>(1);
      if (ts[n - 1] <= cursor_) break;
      newest = std::max(newest, ts[n - 1]);
      const int64_t* t = b.column(dt)->data()->GetValues<int64_t>(1);
      int64_t first = std::upper_bound(ts, ts + n, cursor_) - ts;
      rows += n - first;
      // Every 16th row is enough for percentiles and keeps the callback cheap.
      for (int64_t r = first; r < n; r += 16) {
        fresh.push_back({now, static_cast<float>(now - t[r] * to_ms)});
        if (websocket_) stamped.stamps_ms.push_back(t[r] * to_ms);
      }
      if (first > 0) break;
    }
    cursor_ = newest;
    std::lock_guard<std::mutex> lock(mu_);
    samples_.insert(samples_.end(), fresh.begin(), fresh.end());
    versions_.push_back({now, rows});
    if (websocket_ && !stamped.stamps_ms.empty()) stamped_.push_back(std::move(stamped));
  }

  const bool websocket_;
  std::atomic<double> rate_;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> produced_{0};
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<server::Server> server_;  // declared after engine_: destroyed first
  std::unique_ptr<WsFrameRecorder> ws_;     // set before the producer starts
  std::shared_ptr<MemoryConnector> conn_;
  std::thread producer_;
  double cursor_ = -1e300;  // tick thread
  std::mutex mu_;
  std::vector<Sample> samples_;  // guarded by mu_
  std::vector<std::pair<double, int64_t>> versions_;  // guarded by mu_: (wall ms, new rows)
  std::vector<StampedVersion> stamped_;  // guarded by mu_; ascending versions
};

double Percentile(std::vector<float> v, double p) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * v.size()))];
}

std::vector<float> Latencies(const std::vector<Sample>& s) {
  std::vector<float> out;
  for (const auto& x : s) out.push_back(x.latency_ms);
  return out;
}

double MeasureSustainable() {
  LatencyRun run(100, 1e9, 20'000'000, 0);
  run.Start();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const int64_t r0 = run.engine().GetMetrics().total_records_processed;
  const int64_t p0 = run.produced();
  const double t0 = bench::NowSeconds();
  std::this_thread::sleep_for(std::chrono::seconds(4));
  const int64_t r1 = run.engine().GetMetrics().total_records_processed;
  const double elapsed = bench::NowSeconds() - t0;
  const double rate = (r1 - r0) / elapsed;
  const double pushed = (run.produced() - p0) / elapsed;
  const int64_t buffered = run.connector().stats().buffered_records;
  run.Stop();
  Log("sustainable rate (engine, producer saturating on the other core): %.0f bids/s "
      "(producer pushed %.0f bids/s, %lld still buffered)",
      rate, pushed, (long long)buffered);
  return rate;
}

double LatencyPoint(int64_t tick_ms, double pct, double sustainable, double seconds) {
  const double rate = sustainable * pct / 100;
  const LatencyPointResult r = MeasureLatencyPoint(tick_ms, rate, seconds);
  const std::string point =
      "tick" + std::to_string(tick_ms) + "ms_rate" + std::to_string(static_cast<int>(pct)) + "pct";
  const std::vector<std::pair<std::string, double>> common = {
      {"tick_ms", static_cast<double>(tick_ms)},
      {"target_bids_per_s", rate},
      {"achieved_bids_per_s", r.achieved_bids_per_s},
      {"sustainable_bids_per_s", sustainable},
      {"dropped_records", static_cast<double>(r.dropped_records)}};
  // One line per path, same run, same rows, same fields: p50/p99/p999, the
  // point's common numbers, then the path's own.
  auto line = [&](const std::string& what, double p50, double p99, double p999,
                  std::vector<std::pair<std::string, double>> own, std::string path) {
    bench::Measurement m;
    m.name = "nexmark_" + what + "_ms_" + point;
    m.value = p99;
    m.unit = "ms (p99)";
    if (tick_ms == 10 && pct == 50) m.targets = {{"value", "<=", 50}};
    m.extra_numbers = {{what + "_ms_p50", p50}, {what + "_ms_p99", p99}, {what + "_ms_p999", p999}};
    m.extra_numbers.insert(m.extra_numbers.end(), common.begin(), common.end());
    m.extra_numbers.insert(m.extra_numbers.end(), own.begin(), own.end());
    m.extra = {{"path", std::move(path)}};
    bench::Emit(m);
  };
  line("e2e_latency", r.p50, r.p99, r.p999, {{"samples", static_cast<double>(r.samples)}},
       "push into MemoryConnector -> tick -> q0 StreamSqlTask -> output "
       "table version published (subscriber)");
  // Event pushed -> the WebSocket frame announcing the row's version.
  line("e2e_ws_latency", r.ws_p50, r.ws_p99, r.ws_p999,
       {{"samples", static_cast<double>(r.ws_samples)},
        {"ws_frames", static_cast<double>(r.ws_frames)},
        {"ws_versions_coalesced", static_cast<double>(r.ws_versions_coalesced)}},
       "as nexmark_e2e_latency_ms, then the server's table:q0_out subscription "
       "-> WebSocket frame {version} -> received by a Beast client on "
       "127.0.0.1 (own thread, same process)");
  return r.p99;
}

void Overload(double sustainable, double seconds, double normal_p99, int64_t budget) {
  const int64_t tick_ms = 10;
  LatencyRun run(tick_ms, sustainable * 3, static_cast<int64_t>(sustainable), budget);
  run.Start();
  const auto m0 = run.engine().GetMetrics();
  const double t0 = bench::NowSeconds();
  const int64_t produced0 = run.produced();
  int64_t peak_rss = 0;
  while (bench::NowSeconds() - t0 < seconds) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    peak_rss = std::max(peak_rss, RssBytes());
    run.ClearSamples();  // only the recovery's samples are needed
  }
  const auto m1 = run.engine().GetMetrics();
  const double overload_s = bench::NowSeconds() - t0;
  const int64_t dropped = run.connector().stats().dropped_records;
  const double achieved = (run.produced() - produced0) / overload_s;
  // Back to half the sustainable rate: when is latency normal again?
  run.set_rate(sustainable * 0.5);
  const double drop_ms = WallMs();
  const double bound = std::max(2 * normal_p99, 50.0);
  double recovered_s = NAN;
  std::this_thread::sleep_for(std::chrono::seconds(15));
  auto samples = run.SamplesSince(drop_ms);
  // The first 200 ms slice after which every slice's p99 is within the bound.
  for (double s = 0; s < 15; s += 0.2) {
    bool ok = true;
    for (double u = s; u < 14.8 && ok; u += 0.2) {
      std::vector<float> slice;
      for (const auto& x : samples) {
        if (x.at_ms >= drop_ms + u * 1000 && x.at_ms < drop_ms + (u + 0.2) * 1000) {
          slice.push_back(x.latency_ms);
        }
      }
      ok = slice.empty() || Percentile(slice, 0.99) <= bound;
    }
    if (ok) {
      recovered_s = s;
      break;
    }
  }
  run.Stop();
  bench::Measurement m;
  m.name = "nexmark_overload_recovery_s";
  m.value = recovered_s;
  m.unit = "s";
  m.targets = {{"value", "<=", 10}};
  m.extra_numbers = {{"overload_seconds", overload_s},
                     {"overload_bids_per_s", 3 * sustainable},
                     {"achieved_bids_per_s", achieved},
                     {"dropped_records", static_cast<double>(dropped)},
                     {"ticks_during_overload", static_cast<double>(m1.ticks - m0.ticks)},
                     {"ticks_expected", overload_s * 1000 / tick_ms},
                     {"max_tick_ms", m1.max_batch_latency_s * 1000},
                     {"peak_rss_bytes", static_cast<double>(peak_rss)},
                     {"memory_budget_bytes", static_cast<double>(budget)},
                     {"memory_warnings", static_cast<double>(m1.memory_warnings)},
                     {"recovery_p99_bound_ms", bound}};
  m.extra_bools = {{"rss_under_budget", peak_rss <= budget}};
  bench::Emit(m);
}

}  // namespace

LatencyPointResult MeasureLatencyPoint(int64_t tick_ms, double rate, double seconds,
                                       bool websocket) {
  LatencyRun run(tick_ms, rate, static_cast<int64_t>(rate * 2), 0, websocket);
  run.Start();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const double from = WallMs();
  const int64_t p0 = run.produced();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  auto lat = Latencies(run.SamplesSince(from));
  const double achieved = (run.produced() - p0) / seconds;
  const double to = WallMs();
  {
    auto versions = run.VersionsSince(from);
    std::vector<float> gaps, rows;
    for (size_t i = 1; i < versions.size(); ++i) {
      gaps.push_back(static_cast<float>(versions[i].first - versions[i - 1].first));
    }
    for (const auto& v : versions) rows.push_back(static_cast<float>(v.second));
    Log("tick %lld ms, %.0f bids/s: %zu versions, gap ms p50 %.1f p99 %.1f max %.1f; rows/version "
        "p50 %.0f p99 %.0f max %.0f; max tick %.1f ms",
        (long long)tick_ms, rate, versions.size(), Percentile(gaps, 0.5), Percentile(gaps, 0.99),
        Percentile(gaps, 1.0), Percentile(rows, 0.5), Percentile(rows, 0.99), Percentile(rows, 1.0),
        run.engine().GetMetrics().max_batch_latency_s * 1000);
  }
  run.Stop();
  LatencyPointResult r;
  r.p50 = Percentile(lat, 0.5);
  r.p99 = Percentile(lat, 0.99);
  r.p999 = Percentile(lat, 0.999);
  r.samples = static_cast<int64_t>(lat.size());
  r.achieved_bids_per_s = achieved;
  r.dropped_records = run.connector().stats().dropped_records;
  // Frames received after `to` (while stopping) are left out, as for `lat`.
  auto ws = run.WsLatenciesSince(from, to, &r.ws_frames, &r.ws_versions_coalesced);
  r.ws_p50 = Percentile(ws, 0.5);
  r.ws_p99 = Percentile(ws, 0.99);
  r.ws_p999 = Percentile(ws, 0.999);
  r.ws_samples = static_cast<int64_t>(ws.size());
  return r;
}

void RunLatencySuite(const LatencyOptions& options) {
  const double sustainable =
      options.sustainable_rate > 0 ? options.sustainable_rate : MeasureSustainable();
  double normal_p99 = NAN;
  auto points = options.points;
  if (points.empty()) {
    for (int64_t tick : {100, 10}) {
      for (double pct : {10.0, 50.0, 90.0}) points.emplace_back(tick, pct);
    }
  }
  for (const auto& [tick, pct] : points) {
    const double p99 = LatencyPoint(tick, pct, sustainable, options.seconds);
    if (tick == 10 && pct == 50) normal_p99 = p99;
  }
  if (options.overload_seconds > 0) {
    Overload(sustainable, options.overload_seconds, normal_p99, options.memory_budget_bytes);
  }
}

}  // namespace rill::nexmark
