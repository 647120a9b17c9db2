// Delete throughput of a keyed snapshot table against DuckDB (issue 25).
//
//   delete_bench --keys 1m [--reps 7] [--batches 20] [--batch-rows 10000]
//       Preload a rill::LiveTable (primary key `key`) and a DuckDB table with a
//       PRIMARY KEY with the same `keys` distinct keys, then time deletes of
//       batches of `batch-rows` distinct existing keys from both: Rill's
//       LiveTable::Delete against DuckDB's prepared
//       `DELETE FROM t WHERE key IN (SELECT key FROM incoming)` over the same
//       Arrow batch (arrow_scan, zero copy). Prints delete_rows_per_s_keys_<n>.
//
// Each repetition deletes keys drawn from a random permutation of the keys
// still present (no key twice), then puts the deleted rows back, untimed, so
// that every repetition starts from a full table. DuckDB deletes a prefix of
// the same batches (its rate is steady); both tables are checked against the
// expected row count after each repetition.
#include <algorithm>
#include <numeric>
#include <random>

#include "bench_util.h"
#include "rill/table/live_table.h"

namespace rill::bench {
namespace {

constexpr int64_t kPreloadBatchRows = 128 * 1024;

std::shared_ptr<arrow::RecordBatch> KeysOnly(const std::shared_ptr<arrow::RecordBatch>& batch) {
  return Check(batch->SelectColumns({0}), "select key");
}

int Run(int64_t keys, int64_t batch_rows, int64_t batches, int64_t duck_batches, int reps,
        int duckdb_threads, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const std::string label = "keys_" + CountLabel(keys);
  Log("delete %s: preloading", label.c_str());
  TableOptions options;
  options.primary_key = {"key"};
  options.mode = TableMode::kSnapshot;
  auto table = Check(LiveTable::Make("bench", BenchSchema(false), options), "table");
  auto preload = SequentialBatches(keys, kPreloadBatchRows, false, rng);
  for (const auto& batch : preload) Check(table->Write(batch), "preload write");

  duckdb::DBConfig config;
  config.options.maximum_threads = duckdb_threads;
  duckdb::DuckDB db(nullptr, &config);
  duckdb::Connection con(db);
  DuckRun(con, "SET threads = " + std::to_string(duckdb_threads));
  DuckRun(con, "CREATE TABLE t (key BIGINT PRIMARY KEY, price DOUBLE, region VARCHAR, qty BIGINT)");
  {
    DuckArrowSource source(BenchSchema(false));
    source.Set(preload);
    source.CreateView(con, "preload");
    DuckRun(con, "INSERT INTO t SELECT key, price, region, qty FROM preload");
    DuckRun(con, "DROP VIEW preload");
  }
  DuckArrowSource incoming(BenchSchema(false));
  incoming.CreateView(con, "incoming");
  DuckArrowSource keys_in(KeysOnly(preload[0])->schema());
  keys_in.CreateView(con, "incoming_keys");
  auto remove = DuckPrepare(con, "DELETE FROM t WHERE key IN (SELECT key FROM incoming_keys)");
  auto put_back = DuckPrepare(con, "INSERT INTO t SELECT key, price, region, qty FROM incoming");

  std::vector<int64_t> order(keys);
  std::iota(order.begin(), order.end(), 0);
  std::vector<double> rill_rates;
  std::vector<double> duck_rates;
  std::string check = "ok";
  for (int rep = -1; rep < reps; ++rep) {  // rep -1 warms both up, untimed
    const int64_t count = rep < 0 ? std::min<int64_t>(3, batches) : batches;
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<std::shared_ptr<arrow::RecordBatch>> rows;  // full rows, to put back
    std::vector<std::shared_ptr<arrow::RecordBatch>> key_batches;
    for (int64_t b = 0; b < count; ++b) {
      std::vector<int64_t> ks(order.begin() + b * batch_rows, order.begin() + (b + 1) * batch_rows);
      rows.push_back(MakeBatch(ks, false, rng));
      key_batches.push_back(KeysOnly(rows.back()));
    }
    const int64_t duck_count = std::min(duck_batches, count);
    auto run_rill = [&] {
      int64_t deleted = 0;
      const double start = NowSeconds();
      for (const auto& batch : key_batches) deleted += Check(table->Delete(batch), "delete").deleted;
      const double elapsed = NowSeconds() - start;
      if (deleted != count * batch_rows) check = "MISMATCH rill deleted " + std::to_string(deleted);
      return static_cast<double>(count * batch_rows) / elapsed;
    };
    auto run_duck = [&] {
      const double start = NowSeconds();
      for (int64_t b = 0; b < duck_count; ++b) {
        keys_in.Set(key_batches[b]);
        DuckExecute(*remove);
      }
      return static_cast<double>(duck_count * batch_rows) / (NowSeconds() - start);
    };
    const auto [r, d] = RunAlternating(rep, run_rill, run_duck);
    const int64_t rill_left = table->num_rows();
    const int64_t duck_left = DuckScalar(con, "SELECT count(*) FROM t");
    if (rill_left != keys - count * batch_rows || duck_left != keys - duck_count * batch_rows) {
      check = "MISMATCH rill_rows=" + std::to_string(rill_left) +
              " duckdb_rows=" + std::to_string(duck_left);
    }
    // Put the rows back (untimed).
    Check(table->Write(rows), "put back");
    for (int64_t b = 0; b < duck_count; ++b) {
      incoming.Set(rows[b]);
      DuckExecute(*put_back);
    }
    if (table->num_rows() != keys || DuckScalar(con, "SELECT count(*) FROM t") != keys) {
      check = "MISMATCH after putting rows back";
    }
    if (rep >= 0) {
      rill_rates.push_back(r);
      duck_rates.push_back(d);
    }
    Log("rep %d: rill %.0f rows/s, duckdb %.0f rows/s", rep, r, d);
  }
  Measurement m;
  m.name = "delete_rows_per_s_" + label;
  m.value = Median(rill_rates);
  m.unit = "rows/s";
  m.baseline = "duckdb_delete_where_key_in";
  m.baseline_value = Median(duck_rates);
  m.ratio = m.value / *m.baseline_value;
  m.reps = reps;
  if (keys == 1000000) m.targets = {{"ratio", ">=", 20}};
  m.extra_numbers = {{"batch_rows", static_cast<double>(batch_rows)},
                     {"rill_rows_per_rep", static_cast<double>(batch_rows * batches)},
                     {"duckdb_rows_per_rep",
                      static_cast<double>(batch_rows * std::min(duck_batches, batches))},
                     {"duckdb_threads", static_cast<double>(duckdb_threads)}};
  m.extra = {{"check", check},
             {"note", "same Arrow batches of distinct existing keys; Rill: LiveTable::Delete; "
                      "DuckDB: prepared DELETE FROM t WHERE key IN (SELECT key FROM arrow_scan) "
                      "on a PRIMARY KEY table (a prefix of Rill's batches); deleted rows are "
                      "put back, untimed, after each repetition"}};
  Emit(m);
  return check == "ok" ? 0 : 1;
}

}  // namespace
}  // namespace rill::bench

int main(int argc, char** argv) {
  using namespace rill::bench;
  Args args(argc, argv);
  if (args.Flag("help")) {
    std::printf(
        "delete_bench --keys N [--reps R] [--batches B] [--duck-batches B] [--batch-rows N]\n"
        "             [--duckdb-threads T] [--seed S]\n");
    return 0;
  }
  const int64_t keys = args.Int("keys", 1000000);
  const int64_t batch_rows = args.Int("batch-rows", 10000);
  const int64_t batches = std::min(args.Int("batches", 20), keys / std::max<int64_t>(batch_rows, 1));
  return Run(keys, batch_rows, batches, args.Int("duck-batches", 5),
             static_cast<int>(args.Int("reps", 7)), static_cast<int>(args.Int("duckdb-threads", 1)),
             static_cast<uint64_t>(args.Int("seed", 42)));
}
