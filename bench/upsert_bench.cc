// Upsert throughput of a keyed snapshot table against DuckDB.
//
//   upsert_bench --keys 1m [--string-keys] [--reps 7] [--batches 20]
//       Preload a rill::LiveTable (primary key `key`) and a DuckDB table with a
//       PRIMARY KEY with the same `keys` distinct keys, then time upserts of
//       10,000-row batches of random existing keys into both. Prints
//       upsert_rows_per_s_[string_]keys_<n> with DuckDB as baseline.
//       With --change-feed, a ChangeFeed is open on the Rill table during the
//       timed upserts (acknowledged after each write, so the log stays small):
//       the write path's recording cost (measurement name + "_change_feed").
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
  /// Batches Rill upserts per repetition: enough to include its compaction cycles.
  int64_t batches_per_rep = 100;
  /// DuckDB upserts the first this-many of the same batches (its rate is steady).
  int64_t duck_batches_per_rep = 20;
  int reps = 7;
  /// Keep a change feed open on the Rill table (acknowledged after each write).
  bool change_feed = false;
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

/// Return rows/s of upserting `batches` into `table`. With `applied`, also
/// return the rows that were applied (one per distinct key of each batch: the
/// rows a later row of the same batch supersedes are not).
double TimeRill(LiveTable& table, const std::vector<std::shared_ptr<arrow::RecordBatch>>& batches,
                int64_t* applied = nullptr, ChangeFeed* feed = nullptr) {
  int64_t rows = 0;
  int64_t distinct = 0;
  double start = NowSeconds();
  for (const auto& batch : batches) {
    WriteStats stats = Check(table.Write(batch), "rill upsert");
    if (feed != nullptr) feed->Acknowledge(feed->current_version());
    rows += batch->num_rows();
    distinct += stats.inserted + stats.updated;
  }
  const double elapsed = NowSeconds() - start;
  if (applied != nullptr) *applied = distinct;
  return static_cast<double>(rows) / elapsed;
}

/// The state both engines should reach: qty per key, maintained with plain
/// vectors (last row per key wins), to check each engine independently.
class ExpectedState {
 public:
  explicit ExpectedState(int64_t keys) : qty_(keys, 0) {}
  void Apply(const arrow::RecordBatch& batch) {
    const auto& qty = static_cast<const arrow::Int64Array&>(*batch.GetColumnByName("qty"));
    auto key = batch.GetColumnByName("key");
    for (int64_t i = 0; i < batch.num_rows(); ++i) {
      int64_t k;
      if (key->type_id() == arrow::Type::STRING) {
        auto text = static_cast<const arrow::StringArray&>(*key).GetView(i);
        k = std::strtoll(std::string(text.substr(4)).c_str(), nullptr, 10);  // "ord-…"
      } else {
        k = static_cast<const arrow::Int64Array&>(*key).Value(i);
      }
      sum_ += qty.Value(i) - qty_[k];
      qty_[k] = qty.Value(i);
    }
  }
  int64_t sum() const { return sum_; }

 private:
  std::vector<int64_t> qty_;
  int64_t sum_ = 0;
};

/// Sum of `qty` over the table's live rows (a cheap check of the final state).
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

/// Return Rill's batches per repetition: at least 100, and enough to replace 60%
/// of the keys, so that each repetition includes the compaction their dead rows
/// trigger (chunks are rewritten at 50% dead rows).
int64_t DefaultBatches(int64_t keys, int64_t batch_rows) {
  return std::max<int64_t>(100, (keys * 6 / 10 + batch_rows - 1) / batch_rows);
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

  // DuckDB sees only a prefix of each repetition's batches: track both states.
  ExpectedState rill_expected(w.keys);
  ExpectedState duck_expected(w.keys);
  {
    std::mt19937_64 preload_rng(seed);
    for (const auto& batch :
         SequentialBatches(w.keys, kPreloadBatchRows, w.string_keys, preload_rng)) {
      rill_expected.Apply(*batch);
      duck_expected.Apply(*batch);
    }
  }

  std::vector<double> rill_rates;
  std::vector<double> duck_rates;
  std::shared_ptr<ChangeFeed> feed = w.change_feed ? table->OpenChangeFeed() : nullptr;
  for (int rep = -1; rep < w.reps; ++rep) {  // rep -1 warms both up, untimed
    std::vector<std::shared_ptr<arrow::RecordBatch>> batches;
    // The warm-up repetition is short: it only has to touch the code paths.
    int64_t count = rep < 0 ? std::min<int64_t>(20, w.batches_per_rep) : w.batches_per_rep;
    for (int64_t b = 0; b < count; ++b) {
      batches.push_back(RandomKeyBatch(w.keys, w.batch_rows, w.string_keys, rng));
    }
    std::vector<std::shared_ptr<arrow::RecordBatch>> duck_batches;
    for (int64_t b = 0; b < std::min<int64_t>(w.duck_batches_per_rep, count); ++b) {
      duck_batches.push_back(WithSeq(batches[b], 0));
      duck_expected.Apply(*batches[b]);
    }
    for (const auto& batch : batches) {
      rill_expected.Apply(*batch);
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
      r = TimeRill(*table, batches, nullptr, feed.get());
      d = run_duck();
    } else {
      d = run_duck();
      r = TimeRill(*table, batches, nullptr, feed.get());
    }
    if (rep >= 0) {
      rill_rates.push_back(r);
      duck_rates.push_back(d);
    }
    Log("rep %d: rill %.0f rows/s, duckdb %.0f rows/s", rep, r, d);
  }

  // Check: each engine holds every key once, with the values it was given last.
  int64_t duck_rows = DuckScalar(con, "SELECT count(*) FROM t");
  int64_t duck_qty = DuckScalar(con, "SELECT sum(qty) FROM t");
  int64_t rill_qty = RillQtySum(*table);
  std::string check = "ok";
  if (table->num_rows() != w.keys || duck_rows != w.keys ||
      rill_qty != rill_expected.sum() || duck_qty != duck_expected.sum()) {
    check = "MISMATCH rill_rows=" + std::to_string(table->num_rows()) +
            " duckdb_rows=" + std::to_string(duck_rows) +
            " rill_sum_qty=" + std::to_string(rill_qty) +
            " duckdb_sum_qty=" + std::to_string(duck_qty) +
            " expected_rill=" + std::to_string(rill_expected.sum()) +
            " expected_duckdb=" + std::to_string(duck_expected.sum());
  }

  Measurement m;
  m.name = "upsert_rows_per_s_" + label + (w.change_feed ? "_change_feed" : "");
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
                     {"rill_rows_per_rep", static_cast<double>(w.batch_rows * w.batches_per_rep)},
                     {"duckdb_rows_per_rep",
                      static_cast<double>(w.batch_rows *
                                          std::min(w.duck_batches_per_rep, w.batches_per_rep))},
                     {"duckdb_threads", static_cast<double>(duckdb_threads)},
                     {"rill_chunks", static_cast<double>(table->num_chunks())}};
  m.extra = {{"check", check},
             {"note", "same Arrow batches (DuckDB: a prefix of Rill's, its rate is steady; "
                      "Rill's repetitions are long enough to include compaction); DuckDB: "
                      "prepared INSERT OR REPLACE from arrow_scan, last row per key kept via "
                      "QUALIFY"}};
  Emit(m);
  return check == "ok" ? 0 : 1;
}

int RunGrowth(int64_t small, int64_t large, int reps, int64_t batches, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Workload ws{small};
  Workload wl{large};
  Log("growth: preloading %lld and %lld keys", static_cast<long long>(small),
      static_cast<long long>(large));
  auto table_small = MakeRillTable(ws, rng);
  auto table_large = MakeRillTable(wl, rng);
  std::vector<double> cost_small;  // ns per offered row
  std::vector<double> cost_large;
  std::vector<double> applied_cost_small;  // ns per applied row (distinct key of a batch)
  std::vector<double> applied_cost_large;
  for (int rep = -1; rep < reps; ++rep) {
    std::vector<std::shared_ptr<arrow::RecordBatch>> bs;
    std::vector<std::shared_ptr<arrow::RecordBatch>> bl;
    int64_t count = rep < 0 ? std::min<int64_t>(20, batches) : batches;
    for (int64_t b = 0; b < count; ++b) {
      bs.push_back(RandomKeyBatch(small, ws.batch_rows, false, rng));
      bl.push_back(RandomKeyBatch(large, wl.batch_rows, false, rng));
    }
    double s;
    double l;
    int64_t applied_s = 0;
    int64_t applied_l = 0;
    if (rep % 2 == 0) {
      s = TimeRill(*table_small, bs, &applied_s);
      l = TimeRill(*table_large, bl, &applied_l);
    } else {
      l = TimeRill(*table_large, bl, &applied_l);
      s = TimeRill(*table_small, bs, &applied_s);
    }
    if (rep >= 0) {
      cost_small.push_back(1e9 / s);
      cost_large.push_back(1e9 / l);
      const double offered = static_cast<double>(count * ws.batch_rows);
      applied_cost_small.push_back(1e9 / s * offered / static_cast<double>(applied_s));
      applied_cost_large.push_back(1e9 / l * offered / static_cast<double>(applied_l));
    }
    Log("rep %d: %.1f ns/row at %s keys, %.1f ns/row at %s keys", rep, 1e9 / s,
        CountLabel(small).c_str(), 1e9 / l, CountLabel(large).c_str());
  }
  Measurement m;
  m.name = "upsert_cost_growth_" + CountLabel(large) + "_vs_" + CountLabel(small);
  m.value = Median(cost_large) / Median(cost_small);
  m.unit = "x";
  m.ratio = 2.0 / m.value;
  m.ratio_vs = "ratio = 2 / value (no baseline): >= 1 means growth <= 2";
  if (small == 1000 && large == 1000000) {
    m.targets = {{"value", "<=", 2}};  // issue #2's target
  }
  m.reps = reps;
  m.extra_numbers = {{"rows_per_rep", static_cast<double>(batches * ws.batch_rows)},
                     {"ns_per_row_" + CountLabel(small), Median(cost_small)},
                     {"ns_per_row_" + CountLabel(large), Median(cost_large)},
                     {"ns_per_applied_row_" + CountLabel(small), Median(applied_cost_small)},
                     {"ns_per_applied_row_" + CountLabel(large), Median(applied_cost_large)},
                     {"growth_per_applied_row",
                      Median(applied_cost_large) / Median(applied_cost_small)}};
  m.extra = {{"note", "Rill only, both tables in one process, repetitions interleaved; cost "
                      "per offered row of 10k-row batches of random keys (at 1k keys a batch "
                      "holds at most 1k distinct keys, so fewer rows are applied per row "
                      "offered); growth_per_applied_row divides by the rows applied "
                      "instead (one per distinct key of a batch)"}};
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
        "upsert_bench --keys N [--string-keys] [--change-feed] [--reps R] [--batches B]\n"
        "             [--duck-batches B]\n"
        "             [--batch-rows N] [--duckdb-threads T] [--seed S]\n"
        "upsert_bench --growth [--small 1k] [--large 1m] [--reps R]\n");
    return 0;
  }
  uint64_t seed = static_cast<uint64_t>(args.Int("seed", 42));
  int reps = static_cast<int>(args.Int("reps", 7));
  if (args.Flag("growth")) {
    int64_t large = args.Int("large", 1000000);
    return RunGrowth(args.Int("small", 1000), large, reps,
                     args.Int("batches", DefaultBatches(large, 10000)), seed);
  }
  Workload w;
  w.keys = args.Int("keys", 1000000);
  w.string_keys = args.Flag("string-keys");
  w.change_feed = args.Flag("change-feed");
  w.reps = reps;
  w.batch_rows = args.Int("batch-rows", 10000);
  w.batches_per_rep = args.Int("batches", DefaultBatches(w.keys, w.batch_rows));
  w.duck_batches_per_rep = args.Int("duck-batches", w.keys >= 1000000 ? 10 : 20);
  return RunComparison(w, static_cast<int>(args.Int("duckdb-threads", 1)), seed);
}
