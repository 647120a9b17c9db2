// window_bench: event-time windows, Rill's WindowOperator against DuckDB
// recomputing the same windows after every batch, in the same process.
//
// Data: `--events` events (default 1m) in `--batch` rows (default 10k), keys
// uniform over `--keys` (default 100k), event time advancing `--rate` events
// per second (default 10k: one batch per second, i.e. one tick of a 1 s
// trigger) with up to 2 s of disorder, price float64. Windows: tumbling 60 s,
// hopping 60 s every 10 s, session gap 30 s; aggregates count(*), sum, avg,
// min, max of price; allowed lateness 5 s.
//
// Rill: per batch WindowOperator::Consume + Emit (closed windows out, freed).
// DuckDB: per batch INSERT the batch into a table, recompute every window over
// the rows still buffered (GROUP BY time bucket, key; hopping through
// unnest(range()); sessions through gaps-and-islands window functions), then
// DELETE the rows no open window needs (sessions: rows older than watermark -
// 4 gaps, an approximation that favours DuckDB). This is what keeping window
// results current with SQL costs.
//
// Prints window_rows_per_s_<kind>_1m (value: Rill rows/s, baseline: DuckDB,
// ratio, target >= 10) and with --growth window_row_cost_growth_<kind>: Rill's
// ns per row at --large events (default 10m) over --small (default 100k),
// target <= 1.5. Each rep's log line also has both sides' CPU seconds (on a
// shared machine wall time includes waiting for a core). --rill-only runs
// only Rill and prints no JSON (for profiling).
#include <ctime>

#include <arrow/api.h>

#include "bench_util.h"
#include "rill/common/arrow_init.h"
#include "rill/engine/window_operator.h"

namespace rill::bench {
namespace {

constexpr double kLateness = 5;

std::shared_ptr<arrow::Schema> EventSchema() {
  return arrow::schema({arrow::field("key", arrow::int64()), arrow::field("t", arrow::float64()),
                        arrow::field("price", arrow::float64())});
}

int64_t g_rate = 10000;  // events per second of event time (--rate)

std::vector<std::shared_ptr<arrow::RecordBatch>> MakeEvents(int64_t events, int64_t batch,
                                                            int64_t keys) {
  std::mt19937_64 rng(42);
  std::uniform_int_distribution<int64_t> key(0, keys - 1);
  std::uniform_real_distribution<double> jitter(0, 2), price(1, 1000);
  std::vector<std::shared_ptr<arrow::RecordBatch>> out;
  for (int64_t start = 0; start < events; start += batch) {
    const int64_t n = std::min(batch, events - start);
    arrow::Int64Builder k;
    arrow::DoubleBuilder t, p;
    Check(k.Reserve(n), "reserve");
    Check(t.Reserve(n), "reserve");
    Check(p.Reserve(n), "reserve");
    for (int64_t i = 0; i < n; ++i) {
      k.UnsafeAppend(key(rng));
      // Millisecond event times keep the windows exact on both sides.
      t.UnsafeAppend(std::round((1e6 + (start + i) / static_cast<double>(g_rate) - jitter(rng)) * 1000) /
                      1000);
      p.UnsafeAppend(std::round(price(rng) * 100) / 100);
    }
    out.push_back(arrow::RecordBatch::Make(EventSchema(), n,
                                           {Check(k.Finish(), "k"), Check(t.Finish(), "t"),
                                            Check(p.Finish(), "p")}));
  }
  return out;
}

WindowSpec Spec(WindowKind kind) {
  WindowSpec spec;
  spec.kind = kind;
  spec.time_column = "t";
  spec.size_seconds = 60;
  spec.slide_seconds = 10;
  spec.gap_seconds = 30;
  spec.group_by = {"key"};
  spec.allowed_lateness_seconds = kLateness;
  for (const auto& [out, expr] :
       std::vector<std::pair<std::string, std::string>>{{"n", "count(*)"},
                                                        {"s", "sum(price)"},
                                                        {"a", "avg(price)"},
                                                        {"lo", "min(price)"},
                                                        {"hi", "max(price)"}}) {
    spec.aggregations.push_back(Check(ParseWindowAggregation(out, expr), "agg"));
  }
  return spec;
}

// Rill: seconds to push every batch through Consume + Emit; `rows_out` gets the
// number of emitted rows.
double RunRill(WindowKind kind, const std::vector<std::shared_ptr<arrow::RecordBatch>>& batches,
               int64_t* rows_out) {
  auto op = Check(WindowOperator::Make(Spec(kind), EventSchema(), nullptr), "operator");
  const double t0 = NowSeconds();
  int64_t out = 0;
  double now = 0;
  for (const auto& b : batches) {
    Check(op->Consume(b, now, nullptr), "consume");
    out += Check(op->Emit(now), "emit")->num_rows();
    now += 0.01;
  }
  out += Check(op->Flush(), "flush")->num_rows();
  *rows_out = out;
  return NowSeconds() - t0;
}

double RunDuck(WindowKind kind, const std::vector<std::shared_ptr<arrow::RecordBatch>>& batches) {
  duckdb::DuckDB db(nullptr);
  duckdb::Connection con(db);
  DuckRun(con, "SET threads TO 1");
  DuckRun(con, "CREATE TABLE ev (key BIGINT, t DOUBLE, price DOUBLE)");
  DuckArrowSource source(EventSchema());
  source.CreateView(con, "batch");
  const std::string aggs =
      "count(*) AS n, sum(price) AS s, avg(price) AS a, min(price) AS lo, max(price) AS hi";
  std::string recompute, prune;
  switch (kind) {
    case WindowKind::kTumbling:
      recompute = "SELECT floor(t / 60) * 60 AS ws, key, " + aggs + " FROM ev GROUP BY ALL";
      prune = "DELETE FROM ev WHERE floor(t / 60) * 60 + 60 <= $1";
      break;
    case WindowKind::kHopping:
      recompute =
          "SELECT ws, key, " + aggs +
          " FROM (SELECT ev.*, unnest(range(CAST(floor(t / 10) * 10 AS BIGINT), "
          "CAST(floor(t - 60) AS BIGINT), -10)) AS ws FROM ev) GROUP BY ALL";
      prune = "DELETE FROM ev WHERE floor(t / 10) * 10 + 60 <= $1";
      break;
    case WindowKind::kSession:
      recompute =
          "WITH o AS (SELECT *, CASE WHEN t - lag(t) OVER (PARTITION BY key ORDER BY t) < 30 "
          "THEN 0 ELSE 1 END AS brk FROM ev), s AS (SELECT *, sum(brk) OVER (PARTITION BY key "
          "ORDER BY t ROWS UNBOUNDED PRECEDING) AS sid FROM o) SELECT key, sid, min(t), "
          "max(t) + 30, " + aggs + " FROM s GROUP BY key, sid";
      prune = "DELETE FROM ev WHERE t < $1 - 120";
      break;
  }
  auto prune_stmt = DuckPrepare(con, prune);
  const double t0 = NowSeconds();
  double max_t = -1e300;
  for (const auto& b : batches) {
    source.Set(b);
    DuckRun(con, "INSERT INTO ev SELECT * FROM batch");
    auto result = con.Query(recompute);
    if (result->HasError()) Die("duckdb: " + result->GetError());
    const auto& t = static_cast<const arrow::DoubleArray&>(*b->column(1));
    for (int64_t i = 0; i < t.length(); ++i) max_t = std::max(max_t, t.Value(i));
    auto pruned = prune_stmt->Execute(duckdb::Value::DOUBLE(max_t - kLateness));
    if (pruned->HasError()) Die("duckdb: " + pruned->GetError());
  }
  return NowSeconds() - t0;
}

bool g_rill_only = false;  // --rill-only: skip DuckDB (for profiling; prints no JSON)

void Compare(WindowKind kind, int64_t events, int64_t batch, int64_t keys, int reps) {
  auto batches = MakeEvents(events, batch, keys);
  std::vector<double> rill, duck;
  int64_t rows_out = 0;
  for (int r = 0; r < reps; ++r) {
    // CPU times too: on a shared machine wall time also counts waiting for a core.
    const std::clock_t cpu0 = std::clock();
    rill.push_back(RunRill(kind, batches, &rows_out));
    const std::clock_t cpu1 = std::clock();
    if (g_rill_only) {
      Log("%s rep %d: rill %.3f s (cpu %.3f s)", WindowKindName(kind), r, rill.back(),
          static_cast<double>(cpu1 - cpu0) / CLOCKS_PER_SEC);
      continue;
    }
    duck.push_back(RunDuck(kind, batches));
    Log("%s rep %d: rill %.3f s (cpu %.3f s), duckdb %.3f s (cpu %.3f s)", WindowKindName(kind),
        r, rill.back(), static_cast<double>(cpu1 - cpu0) / CLOCKS_PER_SEC, duck.back(),
        static_cast<double>(std::clock() - cpu1) / CLOCKS_PER_SEC);
  }
  if (g_rill_only) return;
  Measurement m;
  m.name = std::string("window_rows_per_s_") + WindowKindName(kind) + "_" + CountLabel(events);
  m.value = events / Median(rill);
  m.unit = "rows/s";
  m.baseline = "duckdb recomputing the open windows after each batch";
  m.baseline_value = events / Median(duck);
  m.ratio = *m.baseline_value > 0 ? m.value / *m.baseline_value : NAN;
  m.targets = {{"ratio", ">=", 10}};
  m.reps = reps;
  m.extra_numbers = {{"keys", static_cast<double>(keys)},
                     {"events_per_event_second", static_cast<double>(g_rate)},
                     {"batch_rows", static_cast<double>(batch)},
                     {"windows_emitted", static_cast<double>(rows_out)}};
  Emit(m);
}

void Growth(WindowKind kind, int64_t small, int64_t large, int64_t batch, int64_t keys,
            int reps) {
  auto small_batches = MakeEvents(small, batch, keys);
  std::vector<double> s, l;
  int64_t out = 0;
  for (int r = 0; r < reps; ++r) s.push_back(RunRill(kind, small_batches, &out) / small * 1e9);
  small_batches.clear();
  auto large_batches = MakeEvents(large, batch, keys);
  for (int r = 0; r < reps; ++r) l.push_back(RunRill(kind, large_batches, &out) / large * 1e9);
  Measurement m;
  m.name = std::string("window_row_cost_growth_") + WindowKindName(kind);
  m.value = Median(l) / Median(s);
  m.unit = "x";
  m.ratio_vs = "target";
  m.targets = {{"value", "<=", 1.5}};
  m.reps = reps;
  m.extra_numbers = {{"ns_per_row_small", Median(s)}, {"ns_per_row_large", Median(l)},
                     {"small_events", static_cast<double>(small)},
                     {"large_events", static_cast<double>(large)}};
  Emit(m);
}

}  // namespace
}  // namespace rill::bench

int main(int argc, char** argv) {
  using namespace rill;
  using namespace rill::bench;
  Check(InitializeArrowCompute(), "arrow compute");
  Args args(argc, argv);
  const int64_t batch = args.Int("batch", 10000);
  const int64_t keys = args.Int("keys", 100000);
  const int reps = static_cast<int>(args.Int("reps", 3));
  g_rate = std::max<int64_t>(1, args.Int("rate", 10000));
  g_rill_only = args.Flag("rill-only");
  std::vector<WindowKind> kinds = {WindowKind::kTumbling, WindowKind::kHopping,
                                   WindowKind::kSession};
  if (args.Flag("kind")) kinds = {Check(ParseWindowKind(args.Str("kind", "")), "kind")};
  for (auto kind : kinds) {
    if (args.Flag("growth")) {
      Growth(kind, args.Int("small", 100000), args.Int("large", 10000000), batch, keys, reps);
    } else {
      Compare(kind, args.Int("events", 1000000), batch, keys, reps);
    }
  }
  return 0;
}
