// SQL over a live table against the same rows in a native DuckDB table.
//
//   query_bench [--rows 1m] [--reps 15] [--threads 1]
//
// Loads `rows` rows into a keyed live table of a rill::Engine and times a
// GROUP BY aggregate through Engine::Query (DuckDB over the live table's
// arrow_scan view), against the same query over a native DuckDB table holding
// the same rows, in a separate in-memory DuckDB with the same thread count.
// Prints query_ms_live_<n> (baseline query_ms_native_<n>; ratio = native/live),
// then the same after 200,000 upserts have left dead rows in the live table's
// chunks (query_ms_live_<n>_after_upserts; the native table is reloaded with the
// live table's rows so both hold the same data).
#include <random>

#include "bench_util.h"
#include "rill/engine/engine.h"

namespace rill::bench {
namespace {

constexpr char kQuery[] =
    "SELECT region, count(*) AS orders, sum(price * qty) AS revenue, avg(price) AS avg_price, "
    "max(qty) AS max_qty FROM {t} GROUP BY region ORDER BY region";

std::string QueryOn(const std::string& table) {
  std::string q = kQuery;
  q.replace(q.find("{t}"), 3, table);
  return q;
}

/// Load `source`'s rows into a fresh native table `native`.
void LoadNative(duckdb::Connection& con, std::shared_ptr<arrow::Schema> schema,
                std::vector<std::shared_ptr<arrow::RecordBatch>> batches) {
  DuckArrowSource source(std::move(schema));
  source.Set(std::move(batches));
  source.CreateView(con, "load_src");
  DuckRun(con, "CREATE OR REPLACE TABLE native AS SELECT key, price, region, qty FROM load_src");
  DuckRun(con, "DROP VIEW load_src");
  DuckRun(con, "CHECKPOINT");
}

void Compare(const std::string& name, const std::string& note, Engine& engine,
             duckdb::Connection& con, int reps, int threads, int64_t rows) {
  const std::string live_sql = QueryOn("events");
  auto native = DuckPrepare(con, QueryOn("native"));
  // Same answer on both sides (the result is small: one row per region). The
  // first live query after the writes also computes what the scan keeps per
  // chunk (statistics, dictionaries): timed apart.
  const double first_start = NowSeconds();
  auto live_result = Check(engine.Query(live_sql), "live query");
  const double first_ms = 1e3 * (NowSeconds() - first_start);
  auto native_result = con.Query(QueryOn("native"));
  std::string check = "ok";
  if (native_result->HasError()) {
    Die("native query: " + native_result->GetError());
  }
  if (static_cast<int64_t>(native_result->RowCount()) != live_result->num_rows()) {
    check = "MISMATCH: live " + std::to_string(live_result->num_rows()) + " groups, native " +
            std::to_string(native_result->RowCount());
  } else {
    auto orders = live_result->GetColumnByName("orders");
    for (int64_t i = 0; i < live_result->num_rows(); ++i) {
      auto scalar = Check(orders->GetScalar(i), "scalar");
      int64_t live_n = std::static_pointer_cast<arrow::Int64Scalar>(scalar)->value;
      int64_t native_n = native_result->GetValue(1, i).GetValue<int64_t>();
      if (live_n != native_n) {
        check = "MISMATCH: group " + std::to_string(i) + " count live " +
                std::to_string(live_n) + " native " + std::to_string(native_n);
      }
    }
  }

  std::vector<double> live_ms;
  std::vector<double> native_ms;
  for (int rep = -2; rep < reps; ++rep) {  // two untimed warm-up rounds
    auto run_live = [&] {
      double start = NowSeconds();
      Check(engine.Query(live_sql), "live query");
      return 1e3 * (NowSeconds() - start);
    };
    auto run_native = [&] {
      double start = NowSeconds();
      DuckExecute(*native);
      return 1e3 * (NowSeconds() - start);
    };
    const auto [l, n] = RunAlternating(rep, run_live, run_native);
    if (rep >= 0) {
      live_ms.push_back(l);
      native_ms.push_back(n);
    }
  }
  Measurement m;
  m.name = name;
  m.value = Median(live_ms);
  m.unit = "ms";
  m.baseline = "query_ms_native_" + CountLabel(rows);
  m.baseline_value = Median(native_ms);
  m.ratio = *m.baseline_value / m.value;
  m.targets = {{"ratio", ">=", 1 / 1.5}};
  m.reps = reps;
  m.extra_numbers = {{"threads", static_cast<double>(threads)},
                     {"live_first_query_ms", first_ms},
                     {"live_chunks",
                      static_cast<double>(Check(engine.GetTable("events"), "table")
                                              ->num_chunks())}};
  m.extra = {{"check", check},
             {"query", kQuery},
             {"note", note + "; ratio = native/live, target: live <= 1.5x native"}};
  Emit(m);
  Log("%s: live %.2f ms, native %.2f ms", name.c_str(), m.value, *m.baseline_value);
}

int Run(int64_t rows, int reps, int threads, uint64_t seed) {
  std::mt19937_64 rng(seed);
  EngineOptions options;
  options.sql_threads = threads;
  auto engine = Check(Engine::Make(options), "engine");
  TableOptions table_options;
  table_options.primary_key = {"key"};
  table_options.mode = TableMode::kSnapshot;
  auto table = Check(engine->RegisterTable("events", BenchSchema(false), table_options),
                     "register");
  auto batches = SequentialBatches(rows, 128 * 1024, false, rng);
  for (const auto& batch : batches) {
    Check(table->Write(batch), "write");
  }
  Log("live table: %lld rows in %lld chunks", static_cast<long long>(table->num_rows()),
      static_cast<long long>(table->num_chunks()));

  duckdb::DBConfig config;
  config.options.maximum_threads = threads;
  duckdb::DuckDB db(nullptr, &config);
  duckdb::Connection con(db);
  DuckRun(con, "SET threads = " + std::to_string(threads));
  LoadNative(con, BenchSchema(false), batches);

  const std::string label = CountLabel(rows);
  Compare("query_ms_live_" + label, "fresh table, every row alive", *engine, con, reps,
          threads, rows);

  // Upsert 200k random existing keys: chunks now carry dead rows.
  for (int i = 0; i < 20; ++i) {
    Check(table->Write(RandomKeyBatch(rows, 10000, false, rng)), "upsert");
  }
  auto live_rows = Check(table->snapshot()->ToTable(), "to table");
  auto combined = Check(live_rows->CombineChunksToBatch(), "combine");
  auto user_rows = Check(combined->SelectColumns({0, 1, 2, 3}), "select");
  LoadNative(con, user_rows->schema(), {user_rows});
  Compare("query_ms_live_" + label + "_after_upserts",
          "after 200k upserts of random keys (dead rows in live chunks); native reloaded "
          "with the same live rows",
          *engine, con, reps, threads, rows);
  return 0;
}

}  // namespace
}  // namespace rill::bench

int main(int argc, char** argv) {
  using namespace rill::bench;
  Args args(argc, argv);
  if (args.Flag("help")) {
    std::printf("query_bench [--rows 1m] [--reps 15] [--threads 1] [--seed S]\n");
    return 0;
  }
  return Run(args.Int("rows", 1000000), static_cast<int>(args.Int("reps", 15)),
             static_cast<int>(args.Int("threads", 1)),
             static_cast<uint64_t>(args.Int("seed", 7)));
}
