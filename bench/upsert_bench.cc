// Upsert throughput of a keyed snapshot table against DuckDB.
//
//   upsert_bench --keys 1m [--string-keys] [--reps 7] [--batches 20]
//       Preload a rill::LiveTable (primary key `key`) and a DuckDB table with a
//       PRIMARY KEY with the same `keys` distinct keys, then time upserts of
//       10,000-row batches of random existing keys into both. Prints
//       upsert_rows_per_s_[string_]keys_<n> with DuckDB as baseline.
//   upsert_bench --growth [--small 1k] [--large 1m]
//       Rill only: time upserts into a small and a large table, interleaved,
//       and print upsert_cost_growth_<large>_vs_<small> (per-row cost ratio).
//
// DuckDB gets the same Arrow batches through `arrow_scan_dumb` (zero copy) and
// runs one prepared `INSERT OR REPLACE ... SELECT` per batch. DuckDB refuses a
// batch that holds a key twice, so the statement keeps the last row per key
// (QUALIFY over a `seq` column added to DuckDB's copy of the batch): the same
// semantics as Rill's upsert, whose cost includes that de-duplication too.
#include <random>

#include "bench_util.h"
#include "rill/table/live_table.h"

namespace rill::bench {
namespace {

constexpr int64_t kPreloadBatchRows = 128 * 1024;

struct Workload {
  int64_t keys = 0;
  bool string_keys = false;
  int64_t batch_rows = 10000;
  int64_t batches_per_rep = 20;
  int reps = 7;
};

std::shared_ptr<LiveTable> MakeRillTable(const Workload& w, std::mt19937_64& rng) {
  TableOptions options;
  options.primary_key = {"key"};
  options.mode = TableMode::kSnapshot;
  auto table = Check(LiveTable::Make("bench", BenchSchema(w.string_keys), options), "table");
  for (const auto& batch : SequentialBatches(w.keys, kPreloadBatchRows, w.string_keys, rng)) {
    Check(table->Write(batch), "preload write");
  }
  if (table->num_rows() != w.keys) {
    Die("rill preload holds " + std::to_string(table->num_rows()) + " rows, expected " +
        std::to_string(w.keys));
  }
  return table;
}

/// Return rows/s of upserting `batches` into `table`.
double TimeRill(LiveTable& table, const std::vector<std::shared_ptr<arrow::RecordBatch>>& batches) {
  int64_t rows = 0;
  double start = NowSeconds();
  for (const auto& batch : batches) {
    Check(table.Write(batch), "rill upsert");
    rows += batch->num_rows();
  }
  return static_cast<double>(rows) / (NowSeconds() - start);
}

/// Sum of `qty` over the table's live rows (a cheap cross-check with DuckDB).
int64_t RillQtySum(const LiveTable& table) {
  auto t = Check(table.snapshot()->ToTable(), "to table");
  int64_t sum = 0;
  for (const auto& chunk : t->GetColumnByName("qty")->chunks()) {
    const auto& qty = static_cast<const arrow::Int64Array&>(*chunk);
    for (int64_t i = 0; i < qty.length(); ++i) {
      sum += qty.IsValid(i) ? qty.Value(i) : 0;
    }
  }
  return sum;
}

int RunComparison(const Workload& w, int duckdb_threads, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const std::string label =
      std::string(w.string_keys ? "string_keys_" : "keys_") + CountLabel(w.keys);
  Log("upsert %s: preloading", label.c_str());

  double t0 = NowSeconds();
  auto table = MakeRillTable(w, rng);
  Log("rill preload %.2fs", NowSeconds() - t0);

  duckdb::DBConfig config;
  config.options.maximum_threads = duckdb_threads;
  duckdb::DuckDB db(nullptr, &config);
  duckdb::Connection con(db);
  DuckRun(con, "SET threads = " + std::to_string(duckdb_threads));
  DuckRun(con, std::string("CREATE TABLE t (key ") + (w.string_keys ? "VARCHAR" : "BIGINT") +
                   " PRIMARY KEY, price DOUBLE, region VARCHAR, qty BIGINT)");
  t0 = NowSeconds();
  {
    std::mt19937_64 preload_rng(seed);  // the same rows Rill got
    DuckArrowSource preload(BenchSchema(w.string_keys));
    preload.Set(SequentialBatches(w.keys, kPreloadBatchRows, w.string_keys, preload_rng));
    preload.CreateView(con, "preload");
    DuckRun(con, "INSERT INTO t SELECT key, price, region, qty FROM preload");
    DuckRun(con, "DROP VIEW preload");
  }
  Log("duckdb preload %.2fs", NowSeconds() - t0);

  DuckArrowSource incoming(WithSeq(RandomKeyBatch(1, 1, w.string_keys, rng), 0)->schema());
  incoming.CreateView(con, "incoming");
  auto upsert = DuckPrepare(
      con,
      "INSERT OR REPLACE INTO t SELECT key, price, region, qty FROM incoming "
      "QUALIFY row_number() OVER (PARTITION BY key ORDER BY seq DESC) = 1");

  std::vector<double> rill_rates;
  std::vector<double> duck_rates;
  for (int rep = -1; rep < w.reps; ++rep) {  // rep -1 warms both up, untimed
    std::vector<std::shared_ptr<arrow::RecordBatch>> batches;
    for (int64_t b = 0; b < w.batches_per_rep; ++b) {
      batches.push_back(RandomKeyBatch(w.keys, w.batch_rows, w.string_keys, rng));
    }
    std::vector<std::shared_ptr<arrow::RecordBatch>> duck_batches;
    for (const auto& batch : batches) {
      duck_batches.push_back(WithSeq(batch, 0));
    }
    auto run_duck = [&] {
      int64_t rows = 0;
      double start = NowSeconds();
      for (const auto& batch : duck_batches) {
        incoming.Set(batch);
        DuckExecute(*upsert);
        rows += batch->num_rows();
      }
      return static_cast<double>(rows) / (NowSeconds() - start);
    };
    double r;
    double d;
    if (rep % 2 == 0) {  // alternate who goes first
      r = TimeRill(*table, batches);
      d = run_duck();
    } else {
      d = run_duck();
      r = TimeRill(*table, batches);
    }
    if (rep >= 0) {
      rill_rates.push_back(r);
      duck_rates.push_back(d);
    }
    Log("rep %d: rill %.0f rows/s, duckdb %.0f rows/s", rep, r, d);
  }

  // Cross-check: both hold every key once, with the same values.
  int64_t duck_rows = DuckScalar(con, "SELECT count(*) FROM t");
  int64_t duck_qty = DuckScalar(con, "SELECT sum(qty) FROM t");
  int64_t rill_qty = RillQtySum(*table);
  std::string check = "ok";
  if (table->num_rows() != w.keys || duck_rows != w.keys || duck_qty != rill_qty) {
    check = "MISMATCH rill_rows=" + std::to_string(table->num_rows()) +
            " duckdb_rows=" + std::to_string(duck_rows) +
            " rill_sum_qty=" + std::to_string(rill_qty) +
            " duckdb_sum_qty=" + std::to_string(duck_qty);
  }

  Measurement m;
  m.name = "upsert_rows_per_s_" + label;
  m.value = Median(rill_rates);
  m.unit = "rows/s";
  m.baseline = "duckdb_insert_or_replace_pk";
  m.baseline_value = Median(duck_rates);
  m.ratio = m.value / *m.baseline_value;
  m.reps = w.reps;
  if (w.keys == 1000000 && !w.string_keys) {
    m.targets = {{"ratio", ">=", 10}, {"value", ">=", 5e6}};
  }
  m.extra_numbers = {{"batch_rows", static_cast<double>(w.batch_rows)},
                     {"rows_per_rep", static_cast<double>(w.batch_rows * w.batches_per_rep)},
                     {"duckdb_threads", static_cast<double>(duckdb_threads)},
                     {"rill_chunks", static_cast<double>(table->num_chunks())}};
  m.extra = {{"check", check},
             {"note", "same Arrow batches; DuckDB: prepared INSERT OR REPLACE from arrow_scan, "
                      "last row per key kept via QUALIFY"}};
  Emit(m);
  return check == "ok" ? 0 : 1;
}

int RunGrowth(int64_t small, int64_t large, int reps, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Workload ws{small};
  Workload wl{large};
  Log("growth: preloading %lld and %lld keys", static_cast<long long>(small),
      static_cast<long long>(large));
  auto table_small = MakeRillTable(ws, rng);
  auto table_large = MakeRillTable(wl, rng);
  std::vector<double> cost_small;
  std::vector<double> cost_large;
  for (int rep = -1; rep < reps; ++rep) {
    std::vector<std::shared_ptr<arrow::RecordBatch>> bs;
    std::vector<std::shared_ptr<arrow::RecordBatch>> bl;
    for (int64_t b = 0; b < ws.batches_per_rep; ++b) {
      bs.push_back(RandomKeyBatch(small, ws.batch_rows, false, rng));
      bl.push_back(RandomKeyBatch(large, wl.batch_rows, false, rng));
    }
    double s;
    double l;
    if (rep % 2 == 0) {
      s = TimeRill(*table_small, bs);
      l = TimeRill(*table_large, bl);
    } else {
      l = TimeRill(*table_large, bl);
      s = TimeRill(*table_small, bs);
    }
    if (rep >= 0) {
      cost_small.push_back(1e9 / s);
      cost_large.push_back(1e9 / l);
    }
    Log("rep %d: %.1f ns/row at %s keys, %.1f ns/row at %s keys", rep, 1e9 / s,
        CountLabel(small).c_str(), 1e9 / l, CountLabel(large).c_str());
  }
  Measurement m;
  m.name = "upsert_cost_growth_" + CountLabel(large) + "_vs_" + CountLabel(small);
  m.value = Median(cost_large) / Median(cost_small);
  m.unit = "x";
  m.ratio = 2.0 / m.value;
  m.ratio_vs = "target: ratio = 2 / value, >= 1 meets the target (no baseline)";
  m.targets = {{"value", "<=", 2}};
  m.reps = reps;
  m.extra_numbers = {{"ns_per_row_" + CountLabel(small), Median(cost_small)},
                     {"ns_per_row_" + CountLabel(large), Median(cost_large)}};
  m.extra = {{"note", "Rill only, both tables in one process, repetitions interleaved; cost "
                      "per offered row of 10k-row batches of random keys (at 1k keys a batch "
                      "holds at most 1k distinct keys, so fewer rows are applied per row "
                      "offered)"}};
  Emit(m);
  return 0;
}

}  // namespace
}  // namespace rill::bench

int main(int argc, char** argv) {
  using namespace rill::bench;
  Args args(argc, argv);
  if (args.Flag("help")) {
    std::printf(
        "upsert_bench --keys N [--string-keys] [--reps R] [--batches B] [--batch-rows N]\n"
        "             [--duckdb-threads T] [--seed S]\n"
        "upsert_bench --growth [--small 1k] [--large 1m] [--reps R]\n");
    return 0;
  }
  uint64_t seed = static_cast<uint64_t>(args.Int("seed", 42));
  int reps = static_cast<int>(args.Int("reps", 7));
  if (args.Flag("growth")) {
    return RunGrowth(args.Int("small", 1000), args.Int("large", 1000000), reps, seed);
  }
  Workload w;
  w.keys = args.Int("keys", 1000000);
  w.string_keys = args.Flag("string-keys");
  w.reps = reps;
  w.batches_per_rep = args.Int("batches", 20);
  w.batch_rows = args.Int("batch-rows", 10000);
  return RunComparison(w, static_cast<int>(args.Int("duckdb-threads", 1)), seed);
}
