// Append throughput of an append table with max_rows retention against DuckDB.
//
//   append_bench [--max-rows 1m] [--reps 7] [--batches 100] [--batch-rows 10000]
//
// Both sides start full (max_rows rows), so every appended batch also expires
// as many old rows. Rill: LiveTable in append mode with RetentionPolicy
// max_rows. DuckDB, given the same Arrow batches through arrow_scan_dumb:
//   append_rows_per_s_ttl:             INSERT, then DELETE rows beyond max_rows
//                                      (by the monotonic event id), per batch
//   append_rows_per_s_ttl_vs_plain_insert: INSERT only, no retention at all (an
//                                      upper bound for DuckDB; the table grows)
#include <random>

#include "bench_util.h"
#include "rill/table/live_table.h"

namespace rill::bench {
namespace {

int Run(int64_t max_rows, int reps, int64_t batches_per_rep, int64_t batch_rows,
        int duckdb_threads, uint64_t seed) {
  std::mt19937_64 rng(seed);
  TableOptions options;
  options.mode = TableMode::kAppend;
  RetentionPolicy retention;
  retention.max_rows = max_rows;
  options.retention = retention;
  auto table = Check(LiveTable::Make("events", BenchSchema(false), options), "table");
  // `key` is a monotonic event id: DuckDB's retention deletes by it.
  auto preload = SequentialBatches(max_rows, 128 * 1024, false, rng);
  for (const auto& batch : preload) {
    Check(table->Write(batch), "preload");
  }

  duckdb::DBConfig config;
  config.options.maximum_threads = duckdb_threads;
  duckdb::DuckDB db(nullptr, &config);
  duckdb::Connection con(db);
  DuckRun(con, "SET threads = " + std::to_string(duckdb_threads));
  DuckRun(con, "CREATE TABLE ttl (key BIGINT, price DOUBLE, region VARCHAR, qty BIGINT)");
  DuckRun(con, "CREATE TABLE plain (key BIGINT, price DOUBLE, region VARCHAR, qty BIGINT)");
  DuckArrowSource source(BenchSchema(false));
  source.Set(preload);
  source.CreateView(con, "incoming");
  DuckRun(con, "INSERT INTO ttl SELECT * FROM incoming");
  DuckRun(con, "INSERT INTO plain SELECT * FROM incoming");
  auto insert_ttl = DuckPrepare(con, "INSERT INTO ttl SELECT * FROM incoming");
  auto delete_ttl = DuckPrepare(con, "DELETE FROM ttl WHERE key < $1");
  auto insert_plain = DuckPrepare(con, "INSERT INTO plain SELECT * FROM incoming");

  int64_t next_key = max_rows;
  std::vector<double> rill_rates;
  std::vector<double> ttl_rates;
  std::vector<double> plain_rates;
  for (int rep = -1; rep < reps; ++rep) {
    auto batches = SequentialBatches(batches_per_rep * batch_rows, batch_rows, false, rng,
                                     next_key);
    auto run_rill = [&] {
      double start = NowSeconds();
      for (const auto& batch : batches) {
        Check(table->Write(batch), "append");
      }
      return static_cast<double>(batches_per_rep * batch_rows) / (NowSeconds() - start);
    };
    auto run_ttl = [&] {
      double start = NowSeconds();
      int64_t end_key = next_key;
      for (const auto& batch : batches) {
        source.Set(batch);
        DuckExecute(*insert_ttl);
        end_key += batch->num_rows();
        DuckExecute(*delete_ttl, {duckdb::Value::BIGINT(end_key - max_rows)});
      }
      return static_cast<double>(batches_per_rep * batch_rows) / (NowSeconds() - start);
    };
    auto run_plain = [&] {
      double start = NowSeconds();
      for (const auto& batch : batches) {
        source.Set(batch);
        DuckExecute(*insert_plain);
      }
      return static_cast<double>(batches_per_rep * batch_rows) / (NowSeconds() - start);
    };
    double r;
    double t;
    double p;
    if (rep % 2 == 0) {
      r = run_rill();
      t = run_ttl();
      p = run_plain();
    } else {
      p = run_plain();
      t = run_ttl();
      r = run_rill();
    }
    next_key += batches_per_rep * batch_rows;
    if (rep >= 0) {
      rill_rates.push_back(r);
      ttl_rates.push_back(t);
      plain_rates.push_back(p);
    }
    Log("rep %d: rill %.0f rows/s, duckdb insert+delete %.0f, duckdb insert %.0f", rep, r, t,
        p);
  }

  int64_t duck_rows = DuckScalar(con, "SELECT count(*) FROM ttl");
  int64_t duck_min = DuckScalar(con, "SELECT min(key) FROM ttl");
  std::string check = "ok";
  if (table->num_rows() != max_rows || duck_rows != max_rows ||
      duck_min != next_key - max_rows) {
    check = "MISMATCH rill_rows=" + std::to_string(table->num_rows()) +
            " duckdb_rows=" + std::to_string(duck_rows);
  }

  const std::string common =
      "append table, max_rows=" + std::to_string(max_rows) + " (full: every batch expires as "
      "many rows), " + std::to_string(batch_rows) + "-row batches";
  Measurement m;
  m.name = "append_rows_per_s_ttl";
  m.value = Median(rill_rates);
  m.unit = "rows/s";
  m.baseline = "duckdb_insert_then_delete_beyond_max_rows";
  m.baseline_value = Median(ttl_rates);
  m.ratio = m.value / *m.baseline_value;
  m.reps = reps;
  m.extra_numbers = {{"duckdb_threads", static_cast<double>(duckdb_threads)},
                     {"rill_chunks", static_cast<double>(table->num_chunks())}};
  m.extra = {{"check", check},
             {"note", common + "; DuckDB: INSERT then DELETE WHERE id < newest-max_rows, "
                               "per batch (same retention semantics)"}};
  Emit(m);

  Measurement p = m;
  p.name = "append_rows_per_s_ttl_vs_plain_insert";
  p.baseline = "duckdb_plain_insert_no_retention";
  p.baseline_value = Median(plain_rates);
  p.ratio = p.value / *p.baseline_value;
  p.extra = {{"check", check},
             {"note", common + "; DuckDB: INSERT only, no retention (DuckDB's upper bound)"}};
  Emit(p);
  return check == "ok" ? 0 : 1;
}

}  // namespace
}  // namespace rill::bench

int main(int argc, char** argv) {
  using namespace rill::bench;
  Args args(argc, argv);
  if (args.Flag("help")) {
    std::printf(
        "append_bench [--max-rows 1m] [--reps 7] [--batches 100] [--batch-rows 10000]\n"
        "             [--duckdb-threads 1] [--seed S]\n");
    return 0;
  }
  return Run(args.Int("max-rows", 1000000), static_cast<int>(args.Int("reps", 7)),
             args.Int("batches", 100), args.Int("batch-rows", 10000),
             static_cast<int>(args.Int("duckdb-threads", 1)),
             static_cast<uint64_t>(args.Int("seed", 11)));
}
