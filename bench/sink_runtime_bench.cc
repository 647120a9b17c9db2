// The sink runtime's cost to the tick and its latency (issue 24).
//
//   sink_runtime_bench [--rate 50000] [--batch-rows 500] [--interval-ms 20]
//                      [--seconds 5] [--reps 3] [--warmup-s 1] [--keys 100k]
//
// sink_tick_p99_ratio: a keyed table `t` (id int64 | v int64 | ts float64) fed
// by a MemoryConnector at `rate` rows/s (random keys out of `keys`) from a
// producer thread; the main thread ticks (Engine::Step) every `interval-ms` and
// times every tick. With three sinks (changelog, upsert, append; in-process
// writers that touch every value of every row they get, interval 0.05 s) and
// without any; repetitions alternate the order; value = median p99 with /
// median p99 without (target <= 1.1), ratio = its inverse.
//
// change_feed_lag_ms_p99: first the sustainable rate (the producer pushes as
// fast as the engine takes it, ticks back to back, one changelog sink; rows the
// sink committed per second), then half of it for `seconds`, ticking every
// `interval-ms`: per row (every 16th), the wall time from its push (stamped in
// `ts`) to the sink writer's Write call that gets it. Reported p50/p99/max;
// no competitor.
#include <algorithm>
#include <atomic>
#include <mutex>
#include <random>
#include <thread>

#include <arrow/api.h>

#include "bench_util.h"
#include "rill/connector/memory_connector.h"
#include "rill/engine/engine.h"
#include "rill/sink/sink_set.h"

namespace rill::bench {
namespace {

double WallSeconds() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

std::shared_ptr<arrow::Schema> Schema() {
  return arrow::schema({arrow::field("id", arrow::int64(), false),
                        arrow::field("v", arrow::int64()), arrow::field("ts", arrow::float64())});
}

/// Rows of random keys; `ts` filled at push time.
std::shared_ptr<arrow::RecordBatch> MakeBatch(std::mt19937_64& rng, int64_t rows, int64_t keys,
                                              double ts) {
  arrow::Int64Builder id, v;
  arrow::DoubleBuilder t;
  for (int64_t i = 0; i < rows; ++i) {
    Check(id.Append(static_cast<int64_t>(rng() % keys)), "append");
    Check(v.Append(static_cast<int64_t>(rng() % 1000)), "append");
    Check(t.Append(ts), "append");
  }
  return arrow::RecordBatch::Make(Schema(), rows,
                                  {Check(id.Finish(), "id"), Check(v.Finish(), "v"),
                                   Check(t.Finish(), "ts")});
}

/// A writer that reads every value (the minimum a real writer does) and, when
/// `lags` is set, records push -> Write for every 16th row.
class BenchWriter : public SinkWriter {
 public:
  explicit BenchWriter(std::vector<double>* lags = nullptr, std::mutex* mu = nullptr)
      : lags_(lags), mu_(mu) {}
  Status Open(const std::shared_ptr<arrow::Schema>&, const std::vector<std::string>&) override {
    return Status::OK();
  }
  Result<std::optional<SinkProgress>> LoadProgress() override { return progress_; }
  Status Write(const ChangeSet& changes, SinkMode) override {
    const double now = WallSeconds();
    for (const auto& b : changes.batches) {
      auto ids = std::static_pointer_cast<arrow::Int64Array>(b->GetColumnByName("id"));
      auto ts = std::static_pointer_cast<arrow::DoubleArray>(b->GetColumnByName("ts"));
      for (int64_t i = 0; i < b->num_rows(); ++i) {
        sum_ += ids->Value(i);
        if (lags_ && (rows_ + i) % 16 == 0 && !ts->IsNull(i)) {
          std::lock_guard<std::mutex> lock(*mu_);
          lags_->push_back((now - ts->Value(i)) * 1000);
        }
      }
      rows_ += b->num_rows();
      bytes_ += b->num_rows() * 24;
    }
    return Status::OK();
  }
  Status Commit(const CommitPoint& point) override {
    progress_ = SinkProgress{point.version, point.epoch};
    committed_rows_.store(rows_);
    return Status::OK();
  }
  void Abort() override {}
  void Close() override {}
  int64_t bytes_written() const override { return bytes_; }
  const char* type() const override { return "bench"; }
  int64_t committed_rows() const { return committed_rows_.load(); }

 private:
  std::vector<double>* lags_;
  std::mutex* mu_;
  std::optional<SinkProgress> progress_;
  int64_t sum_ = 0;
  int64_t rows_ = 0;
  std::atomic<int64_t> committed_rows_{0};
  std::atomic<int64_t> bytes_{0};
};

struct Config {
  int64_t rate = 50000;
  int64_t batch_rows = 500;
  int64_t interval_ms = 20;
  int64_t keys = 100000;
  double seconds = 5;
  double warmup_s = 1;
  int reps = 3;
};

struct Setup {
  std::unique_ptr<Engine> engine;
  std::shared_ptr<MemoryConnector> connector;
};

Setup MakeEngine() {
  Setup s;
  s.engine = Check(Engine::Make(), "engine");
  TableOptions keyed;
  keyed.primary_key = {"id"};
  Check(s.engine->RegisterTable("t", Schema(), keyed), "table");
  s.connector = std::make_shared<MemoryConnector>("t", nullptr, BufferLimits{}, "in");
  Check(s.engine->AddConnector(s.connector), "connector");
  return s;
}

SinkOptions SinkOpts(const std::string& name, SinkMode mode, double interval) {
  SinkOptions o;
  o.name = name;
  o.table = "t";
  o.mode = mode;
  o.interval_seconds = interval;
  return o;
}

/// Push `rate` rows/s from a thread until `stop`.
std::thread Producer(MemoryConnector* c, const Config& cfg, int64_t rate, std::atomic<bool>* stop,
                     uint64_t seed) {
  return std::thread([=] {
    std::mt19937_64 rng(seed);
    const double start = NowSeconds();
    int64_t pushed = 0;
    while (!stop->load()) {
      const double due = static_cast<double>(pushed) / static_cast<double>(rate);
      const double now = NowSeconds() - start;
      if (now < due) {
        std::this_thread::sleep_for(std::chrono::duration<double>(std::min(due - now, 0.005)));
        continue;
      }
      (void)c->Push(MakeBatch(rng, cfg.batch_rows, cfg.keys, WallSeconds()));
      pushed += cfg.batch_rows;
    }
  });
}

double P(std::vector<double> v, double q) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

/// One repetition: the p99 tick latency (ms) with or without three sinks.
double TickP99(const Config& cfg, bool sinks, uint64_t seed) {
  Setup s = MakeEngine();
  if (sinks) {
    auto& set = SinkSet::For(s.engine.get());
    Check(set.Add(SinkOpts("changelog", SinkMode::kChangelog, 0.05),
                       std::make_unique<BenchWriter>()), "sink");
    Check(set.Add(SinkOpts("upsert", SinkMode::kUpsert, 0.05),
                       std::make_unique<BenchWriter>()), "sink");
    Check(set.Add(SinkOpts("append", SinkMode::kAppend, 0.05),
                       std::make_unique<BenchWriter>()), "sink");
  }
  std::atomic<bool> stop{false};
  auto producer = Producer(s.connector.get(), cfg, cfg.rate, &stop, seed);
  std::vector<double> ticks;
  const double start = NowSeconds();
  const double step = static_cast<double>(cfg.interval_ms) / 1000;
  for (double next = start; NowSeconds() - start < cfg.seconds; next += step) {
    const double wait = next - NowSeconds();
    if (wait > 0) std::this_thread::sleep_for(std::chrono::duration<double>(wait));
    const double t0 = NowSeconds();
    Check(s.engine->Step(), "step");
    if (t0 - start >= cfg.warmup_s) ticks.push_back((NowSeconds() - t0) * 1000);
  }
  stop = true;
  producer.join();
  return P(ticks, 0.99);
}

void RunTickRatio(const Config& cfg) {
  std::vector<double> with, without;
  for (int r = 0; r < cfg.reps; ++r) {
    const bool first_with = r % 2 == 1;
    for (int k = 0; k < 2; ++k) {
      const bool use = (k == 0) == first_with;
      (use ? with : without).push_back(TickP99(cfg, use, 42 + r));
    }
    Log("sink tick rep %d: with %.2f ms, without %.2f ms", r, with.back(), without.back());
  }
  Measurement m;
  m.name = "sink_tick_p99_ratio";
  m.value = Median(with) / Median(without);
  m.unit = "x";
  m.baseline = "no sinks";
  m.ratio = 1 / m.value;
  m.targets = {{"value", "<=", 1.1}};
  m.reps = cfg.reps;
  m.extra_numbers = {{"tick_p99_ms_with_three_sinks", Median(with)},
                     {"tick_p99_ms_without_sinks", Median(without)},
                     {"rate_rows_per_s", static_cast<double>(cfg.rate)}};
  Emit(m);
}

/// Rows/s one changelog sink commits when the producer outruns the engine.
double SustainableRate(const Config& cfg) {
  Setup s = MakeEngine();
  auto writer = std::make_unique<BenchWriter>();
  BenchWriter* w = writer.get();
  Check(SinkSet::For(s.engine.get())
                 .Add(SinkOpts("lag", SinkMode::kChangelog, 0.001), std::move(writer)),
             "sink");
  std::atomic<bool> stop{false};
  auto producer = Producer(s.connector.get(), cfg, 50'000'000, &stop, 7);
  const double start = NowSeconds();
  int64_t at_warm = 0;
  double warm = start;
  while (NowSeconds() - start < 3) {
    Check(s.engine->Step(), "step");
    if (at_warm == 0 && NowSeconds() - start > 1) {
      at_warm = std::max<int64_t>(1, w->committed_rows());
      warm = NowSeconds();
    }
  }
  const double rate = static_cast<double>(w->committed_rows() - at_warm) / (NowSeconds() - warm);
  stop = true;
  producer.join();
  return rate;
}

void RunLag(const Config& cfg) {
  const double sustainable = SustainableRate(cfg);
  const auto rate = static_cast<int64_t>(std::max(1000.0, sustainable / 2));
  Log("sustainable %.0f rows/s; measuring the lag at %lld rows/s", sustainable,
      static_cast<long long>(rate));
  std::vector<double> lags;
  std::mutex mu;
  {
    Setup s = MakeEngine();
    Check(SinkSet::For(s.engine.get())
                   .Add(SinkOpts("lag", SinkMode::kChangelog, 0.001),
                        std::make_unique<BenchWriter>(&lags, &mu)),
               "sink");
    std::atomic<bool> stop{false};
    auto producer = Producer(s.connector.get(), cfg, rate, &stop, 9);
    const double start = NowSeconds();
    const double step = static_cast<double>(cfg.interval_ms) / 1000;
    for (double next = start; NowSeconds() - start < cfg.seconds; next += step) {
      const double wait = next - NowSeconds();
      if (wait > 0) std::this_thread::sleep_for(std::chrono::duration<double>(wait));
      Check(s.engine->Step(), "step");
    }
    stop = true;
    producer.join();
  }
  std::lock_guard<std::mutex> lock(mu);
  Measurement m;
  m.name = "change_feed_lag_ms_p99";
  m.value = P(lags, 0.99);
  m.unit = "ms";
  m.reps = 1;
  m.extra_numbers = {{"lag_ms_p50", P(lags, 0.5)},
                     {"lag_ms_max", P(lags, 1.0)},
                     {"samples", static_cast<double>(lags.size())},
                     {"rate_rows_per_s", static_cast<double>(rate)},
                     {"sustainable_rows_per_s", sustainable},
                     {"tick_interval_ms", static_cast<double>(cfg.interval_ms)}};
  m.extra = {{"path", "push -> tick (interval-ms) -> table version -> change feed -> "
                      "sink writer Write"}};
  Emit(m);
}

int Main(int argc, char** argv) {
  Args args(argc, argv);
  Config cfg;
  cfg.rate = args.Int("rate", cfg.rate);
  cfg.batch_rows = args.Int("batch-rows", cfg.batch_rows);
  cfg.interval_ms = args.Int("interval-ms", cfg.interval_ms);
  cfg.keys = args.Int("keys", cfg.keys);
  cfg.seconds = std::stod(args.Str("seconds", "5"));
  cfg.warmup_s = std::stod(args.Str("warmup-s", "1"));
  cfg.reps = static_cast<int>(args.Int("reps", cfg.reps));
  const std::string only = args.Str("only", "");
  if (only.empty() || only == "tick") RunTickRatio(cfg);
  if (only.empty() || only == "lag") RunLag(cfg);
  return 0;
}

}  // namespace
}  // namespace rill::bench

int main(int argc, char** argv) { return rill::bench::Main(argc, argv); }
