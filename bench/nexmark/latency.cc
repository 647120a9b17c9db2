#include "nexmark/latency.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>

#include <arrow/table.h>

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

double SteadyMs() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

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

/// Bids generated once by the Nexmark generator (in batches of ~278, each
/// with its own buffers) and cycled by every producer: a push is then only a
/// new date_time column, so the producer outruns the engine and the
/// sustainable rate is the engine's, not the generator's. `per_batch` > 1:
/// the same bids, `per_batch` generator batches to a batch (the overload's
/// producers push ~2k bids at a time, as a Kafka or WebSocket reader would).
const std::vector<std::shared_ptr<arrow::RecordBatch>>& BidPool(int per_batch) {
  static const auto single = [] {
    GeneratorConfig c;
    c.rate = 1e6;
    Generator gen(c);
    std::vector<std::shared_ptr<arrow::RecordBatch>> out;
    for (int i = 0; i < 1200; ++i) out.push_back(Check(gen.Next(278), "generate").bid);
    return out;
  }();
  if (per_batch == 1) return single;
  static std::mutex mu;
  static std::map<int, std::vector<std::shared_ptr<arrow::RecordBatch>>> grouped;
  std::lock_guard<std::mutex> lock(mu);
  auto& pool = grouped[per_batch];
  for (size_t i = pool.size() * per_batch; i + per_batch <= single.size(); i += per_batch) {
    std::vector<std::shared_ptr<arrow::RecordBatch>> group(single.begin() + i,
                                                           single.begin() + i + per_batch);
    pool.push_back(Check(arrow::ConcatenateRecordBatches(group), "concatenate"));
  }
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
             bool websocket = false, int producers = 1, int batches_per_push = 0,
             int64_t max_records_per_tick = 0)
      : websocket_(websocket),
        producers_(producers),
        // 0: as many generator batches (~278 bids) to a push as ~1 ms of each
        // producer's share of the rate, at most 8 (~2.2k bids, a network
        // reader's batch).
        batches_per_push_(batches_per_push > 0
                              ? batches_per_push
                              : static_cast<int>(std::clamp(rate / producers / 1000 / 278, 1.0, 8.0))),
        rate_(rate) {
    BidPool(batches_per_push_);  // generated before the clock starts
    EngineOptions eo;
    eo.trigger_interval_ms = tick_ms;
    eo.memory_budget_bytes = budget;
    eo.log_repeat_window_seconds = 60;
    eo.max_records_per_tick = max_records_per_tick;
    eo.sql_threads = 1;  // the tick thread runs the query itself: no hand-off to a DuckDB worker
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
    out.retention->max_rows = 2'000'000;  // > one 100 ms tick's rows at the sustainable rate
    Check(engine_->DeclareTable("q0_out", out), "declare");
    Check(engine_->AddSqlTask(Check(
              StreamSqlTask::Make("q0", "SELECT auction, bidder, price, date_time FROM bid",
                                  engine_.get(), "bid", "q0_out", *out.retention),
              "task")),
          "add task");
    Check(engine_->Subscribe("q0_out", [this](const auto& v) { OnVersion(*v); }).status(),
          "subscribe");
    // Tick ends (steady ms), for the gaps between ticks (overload).
    engine_->AddTickEndHook([this](double) {
      const double t = SteadyMs();
      std::lock_guard<std::mutex> lock(tick_mu_);
      if (last_tick_end_ms_ > 0) max_tick_gap_ms_ = std::max(max_tick_gap_ms_, t - last_tick_end_ms_);
      last_tick_end_ms_ = t;
      ++tick_ends_;
      tick_records_.emplace_back(t, engine_->GetMetrics().total_records_processed);
      if (tick_records_.size() > 100'000) tick_records_.erase(tick_records_.begin(), tick_records_.begin() + 50'000);
    });
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
    for (int i = 0; i < producers_; ++i) {
      producers_threads_.emplace_back([this, i] { Produce(i); });
    }
  }
  void Stop() {
    stop_ = true;
    for (auto& t : producers_threads_) {
      if (t.joinable()) t.join();
    }
    if (server_) server_->Stop();  // closes the client's socket: its reader ends
    if (ws_) ws_->Join();
    engine_->Stop();
  }
  ~LatencyRun() { Stop(); }

  void set_rate(double rate) { rate_ = rate; }
  Engine& engine() { return *engine_; }
  MemoryConnector& connector() { return *conn_; }
  int64_t produced() const { return produced_.load(); }
  /// The longest gap between two tick ends since the last call (ms), and the
  /// tick ends counted meanwhile; resets both.
  std::pair<double, int64_t> TakeTickGaps() {
    std::lock_guard<std::mutex> lock(tick_mu_);
    std::pair<double, int64_t> out{max_tick_gap_ms_, tick_ends_};
    max_tick_gap_ms_ = 0;
    tick_ends_ = 0;
    return out;
  }
  /// (steady ms, total records processed) at each tick end so far.
  std::vector<std::pair<double, int64_t>> TickRecords() {
    std::lock_guard<std::mutex> lock(tick_mu_);
    return tick_records_;
  }
  /// Take the latencies of rows made visible at or after `from_ms` (wall ms);
  /// the samples are moved out under the lock (the tick thread's subscriber
  /// waits on it) and filtered after.
  std::vector<Sample> TakeSamplesSince(double from_ms) {
    std::vector<Sample> all;
    {
      std::lock_guard<std::mutex> lock(mu_);
      all.swap(samples_);
    }
    all.erase(std::remove_if(all.begin(), all.end(),
                             [&](const Sample& s) { return s.at_ms < from_ms; }),
              all.end());
    return all;
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
  // Producer `index` of producers_: its share of the rate, its own part of
  // the pool. The date_time column of a push is one value (the push's ms), so
  // arrays are reused while the ms and the batch length stay the same.
  void Produce(int index) {
    const auto& pool = BidPool(batches_per_push_);
    size_t next = pool.size() * index / producers_;
    auto last = std::chrono::steady_clock::now();
    double credit = 0;
    int64_t stamp_ms = -1;
    std::map<int64_t, std::shared_ptr<arrow::Array>> stamps;  // by length, for stamp_ms
    while (!stop_) {
      auto now = std::chrono::steady_clock::now();
      const double rate = rate_.load() / producers_;
      credit += rate * std::chrono::duration<double>(now - last).count();
      last = now;
      // Preempted or behind: catch up at most 50 ms of input at once.
      credit = std::min(credit, std::max(rate * 0.05, 1000.0));
      if (credit < pool[next]->num_rows()) {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        continue;
      }
      const int64_t now_ms = static_cast<int64_t>(WallMs());
      if (now_ms != stamp_ms) {
        stamp_ms = now_ms;
        stamps.clear();
      }
      while (credit >= pool[next]->num_rows()) {
        const auto& bids = pool[next];
        next = (next + 1) % pool.size();
        auto& ts = stamps[bids->num_rows()];
        if (!ts) {
          arrow::TimestampBuilder b(arrow::timestamp(arrow::TimeUnit::MILLI),
                                    arrow::default_memory_pool());
          Check(b.AppendValues(std::vector<int64_t>(bids->num_rows(), now_ms)), "ts");
          ts = Check(b.Finish(), "ts");
        }
        (void)conn_->Push(Check(bids->SetColumn(5, bids->schema()->field(5), ts), "set"));
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
  const int producers_;
  const int batches_per_push_;
  std::atomic<double> rate_;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> produced_{0};
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<server::Server> server_;  // declared after engine_: destroyed first
  std::unique_ptr<WsFrameRecorder> ws_;     // set before the producer starts
  std::shared_ptr<MemoryConnector> conn_;
  std::vector<std::thread> producers_threads_;
  std::mutex tick_mu_;
  double last_tick_end_ms_ = 0;  // guarded by tick_mu_
  double max_tick_gap_ms_ = 0;   // guarded by tick_mu_
  int64_t tick_ends_ = 0;        // guarded by tick_mu_
  std::vector<std::pair<double, int64_t>> tick_records_;  // guarded by tick_mu_
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

/// Rows one tick takes at most in the latency and overload runs: 2 tick
/// intervals' worth of `rate` (EngineOptions::max_records_per_tick), so a
/// backlog (a cold start, a preempted tick, overload) is worked off in ticks
/// of bounded length, back to back, instead of one tick of seconds.
int64_t TickCap(double rate, int64_t tick_ms) {
  return std::max<int64_t>(10'000, static_cast<int64_t>(rate * tick_ms / 1000 * 2));
}

/// One probe of MeasureSustainable: `rate` offered for 1 s of warm-up and
/// 5 s of measurement at a 10 ms tick; true when the engine kept up.
bool KeepsUp(double rate, int producers) {
  constexpr int64_t kTickMs = 10;
  LatencyRun run(kTickMs, rate, static_cast<int64_t>(rate), 0, false, producers, 0,
                 TickCap(rate, kTickMs));
  run.Start();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const auto m0 = run.engine().GetMetrics();
  const int64_t p0 = run.produced();
  const double from = SteadyMs();
  int64_t max_backlog = 0;
  while (SteadyMs() - from < 5000) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    max_backlog = std::max(max_backlog, run.connector().stats().buffered_records);
  }
  const double seconds = (SteadyMs() - from) / 1000;
  const auto m1 = run.engine().GetMetrics();
  const double offered = (run.produced() - p0) / seconds;
  const double processed = (m1.total_records_processed - m0.total_records_processed) / seconds;
  const auto stats = run.connector().stats();
  run.Stop();
  const bool ok = offered >= 0.95 * rate && processed >= 0.98 * offered &&
                  stats.dropped_records == 0 && max_backlog < rate * 0.1;
  Log("  probe %.1fM bids/s: offered %.1fM, processed %.1fM, dropped %lld, longest backlog %.0f "
      "ms of input: %s",
      rate / 1e6, offered / 1e6, processed / 1e6, (long long)stats.dropped_records,
      max_backlog / rate * 1000, ok ? "keeps up" : "falls behind");
  return ok;
}

double MeasureSustainable(int producers) {
  // The highest rate the engine keeps up with, offered the way the latency
  // and overload runs offer it (paced producers, the same batches, a 10 ms
  // tick): doubling from 2M bids/s until a probe falls behind, then bisecting
  // 4 times. Keeping up: >= 98% of what was offered processed in a 5 s
  // window, nothing dropped, and never 100 ms of input or more waiting in the
  // buffer (sampled every 20 ms): latency stays bounded, not just throughput.
  double lo = 0, hi = 0;
  for (double r = 2e6; r <= 256e6; r *= 2) {
    if (!KeepsUp(r, producers)) {
      hi = r;
      break;
    }
    lo = r;
  }
  if (hi == 0) return lo;
  for (int i = 0; i < 4; ++i) {
    const double mid = (lo + hi) / 2;
    (KeepsUp(mid, producers) ? lo : hi) = mid;
  }
  Log("sustainable rate (10 ms tick, %d paced producer threads): %.0f bids/s", producers, lo);
  return lo;
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

void Overload(double sustainable, double seconds, double normal_p99, int64_t budget,
              int producers) {
  const int64_t tick_ms = 10;
  // `producers` threads share the 3× rate, pushing batches of 8 generator
  // batches (~2.2k bids) at a time (one thread pushing single batches cannot
  // offer it next to a busy tick thread on 2 cores).
  // A tick takes at most 2 intervals' worth of the sustainable rate, however
  // deep the backlog; the rest waits in the 1 s buffer, whose drop_oldest
  // policy sheds the excess.
  const int64_t per_tick = TickCap(sustainable, tick_ms);
  LatencyRun run(tick_ms, sustainable * 3, static_cast<int64_t>(sustainable), budget,
                 /*websocket=*/false, producers, 0, per_tick);
  run.Start();
  const auto m0 = run.engine().GetMetrics();
  run.TakeTickGaps();
  const double t0 = bench::NowSeconds();
  const int64_t produced0 = run.produced();
  int64_t peak_rss = 0;
  double next_log = 60;
  while (bench::NowSeconds() - t0 < seconds) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    peak_rss = std::max(peak_rss, RssBytes());
    run.ClearSamples();  // only the recovery's samples are needed
    const double at = bench::NowSeconds() - t0;
    if (at >= next_log) {
      next_log += 60;
      const auto m = run.engine().GetMetrics();
      Log("overload %.0f s: offered %.0f bids/s, dropped %lld, ticks %lld, peak RSS %.0f MB", at,
          (run.produced() - produced0) / at, (long long)run.connector().stats().dropped_records,
          (long long)(m.ticks - m0.ticks), peak_rss / 1e6);
    }
  }
  const auto m1 = run.engine().GetMetrics();
  const auto [max_gap_ms, tick_ends] = run.TakeTickGaps();
  const double overload_s = bench::NowSeconds() - t0;
  const int64_t dropped = run.connector().stats().dropped_records;
  const double achieved = (run.produced() - produced0) / overload_s;
  // Back to half the sustainable rate: when is latency normal again?
  run.set_rate(sustainable * 0.5);
  const double drop_ms = WallMs();
  const double bound = std::max(2 * normal_p99, 50.0);
  std::this_thread::sleep_for(std::chrono::seconds(15));
  auto samples = run.TakeSamplesSince(drop_ms);
  // Samples of the 15 s in 200 ms slices; recovered at the first slice from
  // which on every 1 s window's p99 is within the bound.
  constexpr int kSlices = 75;
  std::vector<std::vector<float>> slices(kSlices);
  std::vector<float> last5;
  for (const auto& x : samples) {
    const int i = static_cast<int>((x.at_ms - drop_ms) / 200);
    if (i >= 0 && i < kSlices) slices[i].push_back(x.latency_ms);
    if (i >= 50 && i < kSlices) last5.push_back(x.latency_ms);
  }
  // Windows of 1 s (5 slices) sliding by 200 ms: one preempted tick on a
  // shared machine does not count as "not recovered".
  double recovered_s = NAN;
  for (int i = kSlices - 5; i >= 0; --i) {
    std::vector<float> window;
    for (int j = i; j < i + 5; ++j) window.insert(window.end(), slices[j].begin(), slices[j].end());
    if (!window.empty() && Percentile(window, 0.99) > bound) break;
    recovered_s = i * 0.2;
  }
  // Per second after the drop: p99 latency and the longest gap between tick
  // ends.
  const auto ticks = run.TickRecords();
  std::string timeline, gaps;
  const double drop_steady = SteadyMs() - (WallMs() - drop_ms);
  for (int i = 0; i < kSlices; i += 5) {
    std::vector<float> second;
    for (int j = i; j < i + 5; ++j) second.insert(second.end(), slices[j].begin(), slices[j].end());
    timeline += " " + std::to_string(static_cast<int>(Percentile(second, 0.99)));
    double gap = 0;
    for (size_t k = 1; k < ticks.size(); ++k) {
      const double at = ticks[k].first - drop_steady;
      if (at >= i * 200 && at < (i + 5) * 200) gap = std::max(gap, ticks[k].first - ticks[k - 1].first);
    }
    gaps += " " + std::to_string(static_cast<int>(gap));
  }
  Log("after the load drop, per second: p99 ms%s; longest tick gap ms%s", timeline.c_str(),
      gaps.c_str());
  const double after_p99 = Percentile(last5, 0.99);
  peak_rss = std::max(peak_rss, RssBytes());
  run.Stop();
  bench::Measurement m;
  m.name = "nexmark_overload_recovery_s";
  m.value = recovered_s;
  m.unit = "s";
  m.targets = {{"value", "<=", 10}};
  m.extra_numbers = {{"overload_seconds", overload_s},
                     {"sustainable_bids_per_s", sustainable},
                     {"overload_bids_per_s", 3 * sustainable},
                     {"achieved_bids_per_s", achieved},
                     {"offered_ratio_to_sustainable", achieved / sustainable},
                     {"producer_threads", static_cast<double>(producers)},
                     {"max_records_per_tick", static_cast<double>(per_tick)},
                     {"dropped_records", static_cast<double>(dropped)},
                     {"ticks_during_overload", static_cast<double>(m1.ticks - m0.ticks)},
                     {"ticks_expected", overload_s * 1000 / tick_ms},
                     {"max_tick_gap_ms", max_gap_ms},
                     {"max_tick_ms", m1.max_batch_latency_s * 1000},
                     {"peak_rss_bytes", static_cast<double>(peak_rss)},
                     {"memory_budget_bytes", static_cast<double>(budget)},
                     {"memory_warnings", static_cast<double>(m1.memory_warnings)},
                     {"recovery_p99_bound_ms", bound},
                     {"p99_ms_10_to_15_s_after", after_p99}};
  (void)tick_ends;
  m.extra_bools = {{"rss_under_budget", peak_rss <= budget}};
  bench::Emit(m);
}

}  // namespace

LatencyPointResult MeasureLatencyPoint(int64_t tick_ms, double rate, double seconds,
                                       bool websocket) {
  LatencyRun run(tick_ms, rate, static_cast<int64_t>(rate * 2), 0, websocket, 1, 0,
                 TickCap(rate, tick_ms));
  run.Start();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const double from = WallMs();
  const int64_t p0 = run.produced();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  auto lat = Latencies(run.TakeSamplesSince(from));
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
      options.sustainable_rate > 0 ? options.sustainable_rate : MeasureSustainable(options.producers);
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
    Overload(sustainable, options.overload_seconds, normal_p99, options.memory_budget_bytes,
             options.producers);
  }
}

}  // namespace rill::nexmark
