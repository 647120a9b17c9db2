// Incremental views (issue 27): a ScheduledSqlTask kept up to date from its
// sources' change feeds, against the same SQL re-run by DuckDB over the live
// tables in the same process.
//
//   ivm_bench [--only groupby,join,kpi,q4] [--rows 1m,10m] [--changes 10k] [--ticks 10]
//             [--reps 3] [--groups 1000] [--orders 1m] [--customers 100k]
//             [--kpi-rows <largest --rows>] [--kpi-seconds max(2, ticks/2)]
//             [--kpi-rate 5000] [--q4-events 500k] [--threads <nproc, max 4>]
//             [--no-minmax]
//
// groupby: a keyed table `t` (key | grp | price | qty) of `rows` rows; per tick
//   `changes` changes pushed through a MemoryConnector with an op column (80%
//   upserts of live keys with new values, 10% deletes, 10% inserts of deleted
//   keys, so the table keeps its size), then Engine::Step(). Two tasks run every
//   tick: `agg_inc` (incremental=true) and `agg_full` (incremental=false):
//     SELECT grp, count(*), sum(qty), avg(price), min(price), max(price) FROM t GROUP BY
//     grp
//   over `groups` groups. The figure is agg_inc's run (TaskStats::last_duration_s:
//   its change-feed read, DuckDB's delta query, the fold into the group state and
//   the write of the output); the competitor is the same SQL through
//   Engine::Query (DuckDB over the live table's view: what a re-run costs),
//   timed in the same tick before or after Step() (alternating). agg_full's run
//   (the engine's own recompute, output replace included) is reported beside it.
//   Prints ivm_groupby_tick_ms_<rows> (ratio = DuckDB / incremental, target
//   >= 100) and, with two or more sizes, ivm_groupby_growth_<large>_vs_<small>:
//   the incremental tick's median at the largest size / at the smallest (target
//   <= 1.5; ratio = 1.5 / value). --no-minmax (a diagnostic) drops min and max
//   from the query (names get _no_minmax).
// join: orders (order_id | customer_id | amount | qty; `orders` rows) and
//   customers (customer_id | nation | segment; `customers` rows), `changes`
//   changes per tick on each side (customers: 90% upserts with a new nation and
//   segment, 5% deletes, 5% inserts), the task
//     SELECT c.nation, sum(o.amount), count(*) FROM orders o JOIN customers c
//     ON o.customer_id = c.customer_id GROUP BY c.nation
//   measured as above: ivm_join_agg_tick_ms_<orders> (target >= 30).
// kpi: the `rill demo` orders table (8 columns) preloaded with `kpi-rows`
//   orders and fed the demo's stream (`kpi-rate` rows/s, 30% status updates of
//   recent orders) in 100 ms ticks, with the demo's dashboard: a MetricsStore
//   (":memory:") with its three KPI queries (total revenue, max order amount,
//   cancelled ratio; every 1 s) and the revenue_by_region ScheduledSqlTask
//   (every 1 s; without its ORDER BY, which is not maintainable). Incremental:
//   the KPIs as written (the store keeps them as incremental views) and the
//   task incremental=true; recompute: the KPIs wrapped as SELECT * FROM (...)
//   (re-run by the store) and the task incremental=false. Windows of
//   `kpi-seconds` alternate on one engine. The figure is the process's CPU
//   time (getrusage: all threads) / wall time of the window:
//   ivm_kpi_cpu_share (cores; ratio = recompute / incremental).
// q4: Nexmark q4 (bench/nexmark/): one ScheduledSqlTask re-running the Nexmark
//   SQL (incremental=false; the planner refuses its subquery in FROM) against
//   the same query written as two chained incremental tasks (max bid per
//   auction, then the average per category), `q4-events` events in 10k-event
//   micro-batches; DuckDB inserting each micro-batch and re-running the SQL
//   alongside: nexmark_q4_events_per_s_incremental.
//
// Repetitions: groupby and join run `reps` blocks of `ticks` ticks on one
// engine (the tables are loaded once); at the end of each block the output of
// the incremental task is compared with the query's result (every group,
// floating values to 1e-9 relative) and the program exits non-zero on a
// difference. Figures are medians over all ticks of all blocks.
#include <sys/resource.h>

#include <sstream>
#include <thread>

#include "bench_util.h"
#include "nexmark/queries.h"
#include "rill/common/arrow_init.h"
#include "rill/connector/memory_connector.h"
#include "rill/engine/engine.h"
#include "rill/engine/task.h"
#include "rill/metrics/metrics_store.h"
#include "rill/table/change_feed.h"

namespace rill::bench {
namespace {

struct Config {
  std::vector<int64_t> rows = {1'000'000, 10'000'000};
  int64_t changes = 10'000;
  int ticks = 10;
  int reps = 3;
  int64_t groups = 1000;
  int64_t orders = 1'000'000;
  int64_t customers = 100'000;
  int64_t kpi_rows = 0;  // 0: the largest of rows
  double kpi_seconds = 0;
  int64_t kpi_rate = 5000;
  int64_t q4_events = 500'000;
  int threads = 2;
  bool no_minmax = false;
};

// ---------------------------------------------------------------------------
// Keys that come and go: a live set and a dead set, O(1) random picks.

class Churn {
 public:
  Churn(int64_t live, int64_t spare, uint64_t seed) : rng_(seed) {
    pos_.resize(live + spare);
    for (int64_t k = 0; k < live + spare; ++k) {
      auto& set = k < live ? alive_ : dead_;
      pos_[k] = static_cast<int64_t>(set.size());
      set.push_back(k);
    }
  }
  /// Return a random live key (it stays live).
  int64_t AnyLive() { return alive_[rng_() % alive_.size()]; }
  /// Move a random live key to the dead set and return it.
  int64_t Kill() { return Move(alive_, dead_); }
  /// Move a random dead key to the live set and return it.
  int64_t Revive() { return Move(dead_, alive_); }
  std::mt19937_64& rng() { return rng_; }

 private:
  int64_t Move(std::vector<int64_t>& from, std::vector<int64_t>& to) {
    const size_t i = rng_() % from.size();
    const int64_t k = from[i];
    pos_[from.back()] = static_cast<int64_t>(i);
    from[i] = from.back();
    from.pop_back();
    pos_[k] = static_cast<int64_t>(to.size());
    to.push_back(k);
    return k;
  }
  std::mt19937_64 rng_;
  std::vector<int64_t> alive_, dead_, pos_;
};

/// One tick's changes: (key, is_delete), in push order.
std::vector<std::pair<int64_t, bool>> NextChanges(Churn& churn, int64_t changes,
                                                  double delete_fraction,
                                                  double insert_fraction) {
  std::vector<std::pair<int64_t, bool>> out;
  const auto deletes = static_cast<int64_t>(changes * delete_fraction);
  const auto inserts = static_cast<int64_t>(changes * insert_fraction);
  for (int64_t i = 0; i < changes - deletes - inserts; ++i) {
    out.emplace_back(churn.AnyLive(), false);
  }
  for (int64_t i = 0; i < deletes; ++i) {
    out.emplace_back(churn.Kill(), true);
  }
  for (int64_t i = 0; i < inserts; ++i) {
    out.emplace_back(churn.Revive(), false);
  }
  return out;
}

// ---------------------------------------------------------------------------
// Batches. Every change batch has a string column `op` ("upsert" / "delete")
// named as the connector's op column; delete rows carry only the key.

std::shared_ptr<arrow::Array> Finish(arrow::ArrayBuilder& b) {
  std::shared_ptr<arrow::Array> a;
  Check(b.Finish(&a), "finish");
  return a;
}

std::shared_ptr<arrow::Schema> GroupSchema(bool with_op) {
  std::vector<std::shared_ptr<arrow::Field>> f = {
      arrow::field("key", arrow::int64(), false), arrow::field("grp", arrow::int64()),
      arrow::field("price", arrow::float64()), arrow::field("qty", arrow::int64())};
  if (with_op) {
    f.push_back(arrow::field("op", arrow::utf8()));
  }
  return arrow::schema(f);
}

std::shared_ptr<arrow::RecordBatch> GroupBatch(
    const std::vector<std::pair<int64_t, bool>>& rows, int64_t groups, bool with_op,
    std::mt19937_64& rng) {
  arrow::Int64Builder key, grp, qty;
  arrow::DoubleBuilder price;
  arrow::StringBuilder op;
  std::uniform_real_distribution<double> price_dist(1.0, 500.0);
  for (const auto& [k, del] : rows) {
    Check(key.Append(k), "key");
    if (del) {
      Check(grp.AppendNull(), "grp");
      Check(price.AppendNull(), "price");
      Check(qty.AppendNull(), "qty");
    } else {
      Check(grp.Append(static_cast<int64_t>(rng() % groups)), "grp");
      Check(price.Append(std::round(price_dist(rng) * 100) / 100), "price");
      Check(qty.Append(static_cast<int64_t>(1 + rng() % 20)), "qty");
    }
    if (with_op) {
      Check(op.Append(del ? "delete" : "upsert"), "op");
    }
  }
  std::vector<std::shared_ptr<arrow::Array>> cols = {Finish(key), Finish(grp),
                                                     Finish(price), Finish(qty)};
  if (with_op) {
    cols.push_back(Finish(op));
  }
  return arrow::RecordBatch::Make(GroupSchema(with_op), static_cast<int64_t>(rows.size()),
                                  cols);
}

std::shared_ptr<arrow::Schema> OrderSchema(bool with_op) {
  std::vector<std::shared_ptr<arrow::Field>> f = {
      arrow::field("order_id", arrow::int64(), false),
      arrow::field("customer_id", arrow::int64()),
      arrow::field("amount", arrow::float64()), arrow::field("qty", arrow::int64())};
  if (with_op) {
    f.push_back(arrow::field("op", arrow::utf8()));
  }
  return arrow::schema(f);
}

std::shared_ptr<arrow::RecordBatch> OrderBatch(
    const std::vector<std::pair<int64_t, bool>>& rows, int64_t customer_keys,
    bool with_op, std::mt19937_64& rng) {
  arrow::Int64Builder id, customer, qty;
  arrow::DoubleBuilder amount;
  arrow::StringBuilder op;
  std::uniform_real_distribution<double> amount_dist(1.0, 1000.0);
  for (const auto& [k, del] : rows) {
    Check(id.Append(k), "id");
    if (del) {
      Check(customer.AppendNull(), "customer");
      Check(amount.AppendNull(), "amount");
      Check(qty.AppendNull(), "qty");
    } else {
      Check(customer.Append(static_cast<int64_t>(rng() % customer_keys)), "customer");
      Check(amount.Append(std::round(amount_dist(rng) * 100) / 100), "amount");
      Check(qty.Append(static_cast<int64_t>(1 + rng() % 10)), "qty");
    }
    if (with_op) {
      Check(op.Append(del ? "delete" : "upsert"), "op");
    }
  }
  std::vector<std::shared_ptr<arrow::Array>> cols = {Finish(id), Finish(customer),
                                                     Finish(amount), Finish(qty)};
  if (with_op) {
    cols.push_back(Finish(op));
  }
  return arrow::RecordBatch::Make(OrderSchema(with_op), static_cast<int64_t>(rows.size()),
                                  cols);
}

constexpr const char* kNations[] = {
    "ALGERIA",      "ARGENTINA",  "BRAZIL",  "CANADA",         "EGYPT",
    "ETHIOPIA",     "FRANCE",     "GERMANY", "INDIA",          "INDONESIA",
    "IRAN",         "IRAQ",       "JAPAN",   "JORDAN",         "KENYA",
    "MOROCCO",      "MOZAMBIQUE", "PERU",    "CHINA",          "ROMANIA",
    "SAUDI ARABIA", "VIETNAM",    "RUSSIA",  "UNITED KINGDOM", "UNITED STATES"};
constexpr const char* kSegments[] = {"AUTOMOBILE", "BUILDING", "FURNITURE", "HOUSEHOLD",
                                     "MACHINERY"};

std::shared_ptr<arrow::Schema> CustomerSchema(bool with_op) {
  std::vector<std::shared_ptr<arrow::Field>> f = {
      arrow::field("customer_id", arrow::int64(), false),
      arrow::field("nation", arrow::utf8()), arrow::field("segment", arrow::utf8())};
  if (with_op) {
    f.push_back(arrow::field("op", arrow::utf8()));
  }
  return arrow::schema(f);
}

std::shared_ptr<arrow::RecordBatch> CustomerBatch(
    const std::vector<std::pair<int64_t, bool>>& rows, bool with_op,
    std::mt19937_64& rng) {
  arrow::Int64Builder id;
  arrow::StringBuilder nation, segment, op;
  for (const auto& [k, del] : rows) {
    Check(id.Append(k), "id");
    if (del) {
      Check(nation.AppendNull(), "nation");
      Check(segment.AppendNull(), "segment");
    } else {
      Check(nation.Append(kNations[rng() % std::size(kNations)]), "nation");
      Check(segment.Append(kSegments[rng() % std::size(kSegments)]), "segment");
    }
    if (with_op) {
      Check(op.Append(del ? "delete" : "upsert"), "op");
    }
  }
  std::vector<std::shared_ptr<arrow::Array>> cols = {Finish(id), Finish(nation),
                                                     Finish(segment)};
  if (with_op) {
    cols.push_back(Finish(op));
  }
  return arrow::RecordBatch::Make(CustomerSchema(with_op),
                                  static_cast<int64_t>(rows.size()), cols);
}

// ---------------------------------------------------------------------------
// Engine helpers.

std::unique_ptr<Engine> MakeEngine(const Config& cfg) {
  EngineOptions eo;
  eo.sql_threads = cfg.threads;
  eo.log_repeat_window_seconds = 0;
  return Check(Engine::Make(eo), "engine");
}

std::shared_ptr<MemoryConnector> AddKeyedTable(Engine& engine, const std::string& name,
                                               std::shared_ptr<arrow::Schema> schema,
                                               const std::string& key) {
  TableOptions to;
  to.primary_key = {key};
  Check(engine.RegisterTable(name, std::move(schema), to).status(), "register table");
  BufferLimits limits;
  limits.max_records = 50'000'000;
  auto conn = std::make_shared<MemoryConnector>(name, nullptr, limits, name + "_in");
  conn->set_op_column("op");
  Check(engine.AddConnector(conn), "connector");
  return conn;
}

/// Load keys [0, n) through `conn` in 100k-row batches (a Step per 1M rows).
template <typename MakeRows>
void Preload(Engine& engine, MemoryConnector& conn, int64_t n, MakeRows&& make) {
  std::vector<std::pair<int64_t, bool>> rows;
  for (int64_t start = 0; start < n; start += 100'000) {
    rows.clear();
    for (int64_t k = start; k < std::min(n, start + 100'000); ++k) {
      rows.emplace_back(k, false);
    }
    Check(conn.Push(make(rows)), "preload push");
    if ((start / 100'000) % 10 == 9) {
      Check(engine.Step(), "preload step");
    }
  }
  Check(engine.Step(), "preload step");
}

void AddTask(Engine& engine, const std::string& name, const std::string& sql,
             const std::string& output, double interval, IncrementalMode mode) {
  Check(engine.AddSqlTask(std::make_shared<ScheduledSqlTask>(
            name, sql, output, interval, std::vector<std::string>{},
            /*use_prepared_statements=*/true, std::nullopt, mode)),
        "add task");
}

TaskStats StatsOf(Engine& engine, const std::string& task) {
  auto all = engine.TaskStatistics();
  auto it = all.find(task);
  if (it == all.end()) {
    Die("no task " + task);
  }
  if (it->second.errors > 0) {
    Die("task " + task + " failed: " + it->second.last_error);
  }
  return it->second;
}

int64_t IntAt(const arrow::Table& t, int column) {
  auto scalar = Check(t.column(column)->GetScalar(0), "scalar");
  return std::static_pointer_cast<arrow::Int64Scalar>(
             Check(scalar->CastTo(arrow::int64()), "cast"))
      ->value;
}

/// Compare the output table `output` with `query`'s result, row by row on
/// `keys` (no keys: one row each); values equal, or within 1e-9 relative when
/// numeric (summation order differs). Die on any difference.
void CheckSame(Engine& engine, const std::string& what, const std::string& query,
               const std::string& output, const std::vector<std::string>& keys,
               const std::vector<std::string>& values) {
  std::string on, bad = "r.__p IS NULL OR o.__p IS NULL", cols;
  for (const auto& k : keys) {
    on += (on.empty() ? "" : " AND ") + ("r." + k + " = o." + k);
    cols += k + ", ";
  }
  for (const auto& v : values) {
    cols += v + ", ";
    bad += " OR NOT coalesce(r." + v + " IS NOT DISTINCT FROM o." + v +
           " OR abs(CAST(r." + v + " AS DOUBLE) - CAST(o." + v +
           " AS DOUBLE)) <= 1e-9 * greatest(1.0, abs(CAST(r." + v +
           " AS DOUBLE))), false)";
  }
  const std::string sql =
      "SELECT count(*) FILTER (WHERE " + bad +
      "), count(r.__p), count(o.__p) FROM (SELECT *, 1 AS __p FROM (" + query +
      ")) r FULL OUTER JOIN (SELECT " + cols + "1 AS __p FROM " + output + ") o ON " +
      (on.empty() ? "true" : on);
  auto result = Check(engine.Query(sql), "check query");
  const int64_t wrong = IntAt(*result, 0);
  if (wrong != 0) {
    Die(what + ": the incremental output " + output + " differs from the query in " +
        std::to_string(wrong) + " rows (query " + std::to_string(IntAt(*result, 1)) +
        " rows, output " + std::to_string(IntAt(*result, 2)) + "): " + query);
  }
  Log("%s: %s equals the query (%lld rows)", what.c_str(), output.c_str(),
      static_cast<long long>(IntAt(*result, 1)));
}

/// Per-tick figures (milliseconds) of one scenario.
struct TickFigures {
  std::vector<double> inc, duck, full, ingest;
  int64_t changes_read = 0;
  int64_t state_bytes = 0;
  std::string maintenance, full_maintenance;
};

/// One scenario's ticks: `push` feeds one tick's changes; the tasks `agg_inc`
/// and `agg_full` run in Step(); `query` is timed through Engine::Query.
template <typename Push>
TickFigures RunTicks(const Config& cfg, Engine& engine, const std::string& what,
                     const std::string& query, const std::vector<std::string>& keys,
                     const std::vector<std::string>& values, Push&& push) {
  TickFigures f;
  // First runs: the incremental task builds its state from the whole query.
  const double t0 = NowSeconds();
  Check(engine.Step(), "first task run");
  Log("%s: first run (state built from the whole query) %.2f s, incremental %.2f s, full "
      "%.2f s",
      what.c_str(), NowSeconds() - t0, StatsOf(engine, "agg_inc").last_duration_s,
      StatsOf(engine, "agg_full").last_duration_s);
  CheckSame(engine, what + " (first run)", query, "agg_inc_out", keys, values);
  const int64_t read0 = StatsOf(engine, "agg_inc").changes_read;
  int tick = 0;
  for (int rep = 0; rep < cfg.reps; ++rep) {
    for (int t = 0; t < cfg.ticks; ++t, ++tick) {
      push();
      double duck_ms = 0, step_ms = 0;
      auto run_query = [&] {
        const double q0 = NowSeconds();
        auto r = Check(engine.Query(query), "duckdb query");
        duck_ms = 1e3 * (NowSeconds() - q0);
        if (r->num_rows() == 0) {
          Die("empty query result");
        }
        return duck_ms;
      };
      auto run_step = [&] {
        const double s0 = NowSeconds();
        Check(engine.Step(), "step");
        step_ms = 1e3 * (NowSeconds() - s0);
        return step_ms;
      };
      RunAlternating(tick, run_step, run_query);
      const TaskStats inc = StatsOf(engine, "agg_inc");
      const TaskStats full = StatsOf(engine, "agg_full");
      f.inc.push_back(1e3 * inc.last_duration_s);
      f.full.push_back(1e3 * full.last_duration_s);
      f.duck.push_back(duck_ms);
      f.ingest.push_back(step_ms - 1e3 * (inc.last_duration_s + full.last_duration_s));
    }
    CheckSame(engine, what + " rep " + std::to_string(rep), query, "agg_inc_out", keys,
              values);
    Log("%s rep %d: incremental %.2f ms, duckdb %.2f ms, recompute task %.2f ms (medians "
        "so far)",
        what.c_str(), rep, Median(f.inc), Median(f.duck), Median(f.full));
  }
  const TaskStats inc = StatsOf(engine, "agg_inc");
  f.changes_read = inc.changes_read - read0;
  f.state_bytes = inc.state_bytes;
  f.maintenance = inc.maintenance;
  f.full_maintenance = StatsOf(engine, "agg_full").maintenance;
  if (f.maintenance != "incremental") {
    Die(what + ": agg_inc is not incremental: " + f.maintenance);
  }
  return f;
}

Measurement TickMeasurement(const Config& cfg, const std::string& name,
                            const TickFigures& f, const std::string& query,
                            double target) {
  Measurement m;
  m.name = name;
  m.value = Median(f.inc);
  m.unit = "ms";
  m.baseline =
      "duckdb: the same SQL re-run over the live table (Engine::Query), same process";
  m.baseline_value = Median(f.duck);
  m.ratio = *m.baseline_value / m.value;
  m.targets = {{"ratio", ">=", target}};
  m.reps = cfg.reps;
  m.extra_numbers = {
      {"ticks", static_cast<double>(f.inc.size())},
      {"changes_per_tick", static_cast<double>(cfg.changes)},
      {"changes_read_per_tick", static_cast<double>(f.changes_read) / f.inc.size()},
      {"recompute_task_ms", Median(f.full)},
      {"ratio_vs_recompute_task", Median(f.full) / m.value},
      {"ingest_ms", Median(f.ingest)},
      {"incremental_p90_ms",
       [&] {
         auto v = f.inc;
         std::sort(v.begin(), v.end());
         return v[std::min(v.size() - 1, static_cast<size_t>(0.9 * v.size()))];
       }()},
      {"state_bytes", static_cast<double>(f.state_bytes)},
      {"threads", static_cast<double>(cfg.threads)}};
  m.extra = {{"query", query},
             {"rill_maintenance", f.maintenance},
             {"recompute_task_maintenance", f.full_maintenance},
             {"duckdb_maintenance", "recompute"},
             {"value_is",
              "ScheduledSqlTask incremental=true: TaskStats::last_duration_s (change "
              "feed read, delta query, fold, output write)"}};
  m.extra_bools = {{"correct", true}};
  return m;
}

// ---------------------------------------------------------------------------
// groupby

constexpr char kGroupSql[] =
    "SELECT grp, count(*) AS n, sum(qty) AS total_qty, avg(price) AS avg_price, "
    "min(price) AS min_price, max(price) AS max_price FROM t GROUP BY grp";
// --no-minmax (a diagnostic): the same without min/max, whose ordered
// multisets are the incremental state's largest part.
constexpr char kGroupSqlNoMinMax[] =
    "SELECT grp, count(*) AS n, sum(qty) AS total_qty, avg(price) AS avg_price FROM t "
    "GROUP BY grp";

double GroupBy(const Config& cfg, int64_t rows) {
  const std::string label = CountLabel(rows) + (cfg.no_minmax ? "_no_minmax" : "");
  const std::string sql = cfg.no_minmax ? kGroupSqlNoMinMax : kGroupSql;
  std::vector<std::string> values = {"n", "total_qty", "avg_price"};
  if (!cfg.no_minmax) {
    values.insert(values.end(), {"min_price", "max_price"});
  }
  Log("groupby %s: loading", label.c_str());
  auto engine = MakeEngine(cfg);
  auto conn = AddKeyedTable(*engine, "t", GroupSchema(false), "key");
  std::mt19937_64 rng(42);
  const double l0 = NowSeconds();
  Preload(*engine, *conn, rows,
          [&](const auto& r) { return GroupBatch(r, cfg.groups, true, rng); });
  Log("groupby %s: %lld rows loaded in %.1f s", label.c_str(),
      static_cast<long long>(Check(engine->GetTable("t"), "t")->num_rows()),
      NowSeconds() - l0);
  AddTask(*engine, "agg_inc", sql, "agg_inc_out", 0, IncrementalMode::kOn);
  AddTask(*engine, "agg_full", sql, "agg_full_out", 0, IncrementalMode::kOff);
  Churn churn(rows, std::max<int64_t>(rows / 10, cfg.changes), 7);
  auto f = RunTicks(cfg, *engine, "groupby " + label, sql, {"grp"}, values, [&] {
    auto changes = NextChanges(churn, cfg.changes, 0.1, 0.1);
    Check(conn->Push(GroupBatch(changes, cfg.groups, true, churn.rng())), "push");
  });
  auto m = TickMeasurement(cfg, "ivm_groupby_tick_ms_" + label, f, sql, 100);
  m.extra_numbers.push_back({"rows", static_cast<double>(rows)});
  m.extra_numbers.push_back({"groups", static_cast<double>(cfg.groups)});
  Emit(m);
  return m.value;
}

// ---------------------------------------------------------------------------
// join

constexpr char kJoinSql[] =
    "SELECT c.nation, sum(o.amount) AS revenue, count(*) AS orders FROM orders o "
    "JOIN customers c ON o.customer_id = c.customer_id GROUP BY c.nation";

void Join(const Config& cfg) {
  const std::string label = CountLabel(cfg.orders);
  auto engine = MakeEngine(cfg);
  auto orders = AddKeyedTable(*engine, "orders", OrderSchema(false), "order_id");
  auto customers =
      AddKeyedTable(*engine, "customers", CustomerSchema(false), "customer_id");
  std::mt19937_64 rng(43);
  const int64_t customer_spare = std::max<int64_t>(cfg.customers / 10, cfg.changes);
  const double l0 = NowSeconds();
  Preload(*engine, *customers, cfg.customers,
          [&](const auto& r) { return CustomerBatch(r, true, rng); });
  Preload(*engine, *orders, cfg.orders, [&](const auto& r) {
    return OrderBatch(r, cfg.customers + customer_spare, true, rng);
  });
  Log("join: %s orders, %s customers loaded in %.1f s", label.c_str(),
      CountLabel(cfg.customers).c_str(), NowSeconds() - l0);
  AddTask(*engine, "agg_inc", kJoinSql, "agg_inc_out", 0, IncrementalMode::kOn);
  AddTask(*engine, "agg_full", kJoinSql, "agg_full_out", 0, IncrementalMode::kOff);
  Churn order_churn(cfg.orders, std::max<int64_t>(cfg.orders / 10, cfg.changes), 8);
  Churn customer_churn(cfg.customers, customer_spare, 9);
  auto f = RunTicks(
      cfg, *engine, "join " + label, kJoinSql, {"nation"}, {"revenue", "orders"}, [&] {
        auto o = NextChanges(order_churn, cfg.changes, 0.1, 0.1);
        Check(orders->Push(
                  OrderBatch(o, cfg.customers + customer_spare, true, order_churn.rng())),
              "push orders");
        auto c = NextChanges(customer_churn, cfg.changes, 0.05, 0.05);
        Check(customers->Push(CustomerBatch(c, true, customer_churn.rng())),
              "push customers");
      });
  auto m = TickMeasurement(cfg, "ivm_join_agg_tick_ms_" + label, f, kJoinSql, 30);
  m.extra_numbers.push_back({"orders", static_cast<double>(cfg.orders)});
  m.extra_numbers.push_back({"customers", static_cast<double>(cfg.customers)});
  m.extra.push_back({"changes",
                     "per tick, on each side: orders 80% upserts / 10% deletes / "
                     "10% inserts; customers 90% upserts (new nation) / 5% / 5%"});
  Emit(m);
}

// ---------------------------------------------------------------------------
// kpi: the demo's orders stream and KPIs (apps/rill/demo.cc).

constexpr const char* kRegions[] = {"us-east", "us-west", "eu-west", "apac", "latam"};
constexpr const char* kProducts[] = {"widget", "gadget", "gizmo", "sprocket",
                                     "doohickey"};
constexpr const char* kStatuses[] = {"pending", "paid", "shipped", "delivered",
                                     "cancelled"};

struct Kpi {
  const char* name;
  const char* sql;
  std::vector<std::string> keys, values;
};
const std::vector<Kpi>& Kpis() {
  static const std::vector<Kpi> kpis = {
      {"revenue_by_region",
       "SELECT region, count(*) AS orders, sum(price * quantity) AS revenue FROM orders "
       "WHERE status <> 'cancelled' GROUP BY region",
       {"region"},
       {"orders", "revenue"}},
      {"total_revenue",
       "SELECT round(sum(quantity * price), 2) AS revenue FROM orders WHERE status <> "
       "'cancelled'",
       {},
       {"revenue"}},
      {"max_order_amount",
       "SELECT max(quantity * price) AS max_amount FROM orders",
       {},
       {"max_amount"}},
      {"cancelled_ratio",
       "SELECT avg(CASE WHEN status = 'cancelled' THEN 1.0 ELSE 0.0 END) AS ratio FROM "
       "orders",
       {},
       {"ratio"}}};
  return kpis;
}

std::shared_ptr<arrow::Schema> DemoOrdersSchema() {
  return arrow::schema(
      {arrow::field("order_id", arrow::int64(), false),
       arrow::field("customer_id", arrow::int64()), arrow::field("region", arrow::utf8()),
       arrow::field("product", arrow::utf8()), arrow::field("quantity", arrow::int64()),
       arrow::field("price", arrow::float64()), arrow::field("status", arrow::utf8()),
       arrow::field("event_ts", arrow::float64())});
}

/// The demo's generator: new orders, and status updates (pending → paid →
/// shipped → delivered, or cancelled) of the 50k most recent orders.
class DemoOrders {
 public:
  DemoOrders(uint64_t seed, int64_t first_id)
      : rng_(seed), recent_(kRecent), next_id_(first_id) {}

  /// Orders [first, first + n) as old orders (statuses of a settled history).
  std::shared_ptr<arrow::RecordBatch> History(int64_t first, int64_t n) {
    Builders b;
    for (int64_t id = first; id < first + n; ++id) {
      Order o = NewOrder(id);
      const uint64_t r = rng_() % 100;
      o.status = r < 8 ? 4 : r < 80 ? 3 : static_cast<int>(r % 3);
      b.Add(o, 0);
    }
    return b.Finish();
  }
  /// `n` stream events at `now` (30% updates of recent orders).
  std::shared_ptr<arrow::RecordBatch> Next(int64_t n, double now) {
    Builders b;
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    for (int64_t i = 0; i < n; ++i) {
      Order* order = nullptr;
      if (unit(rng_) < 0.3) {
        Order& c = recent_[(next_id_ - 1 - rng_() % kRecent) % kRecent];
        if (c.id >= 0 && c.status != 3 && c.status != 4) {
          c.status = unit(rng_) < 0.1 ? 4 : c.status + 1;
          order = &c;
        }
      }
      if (order == nullptr) {
        order = &recent_[next_id_ % kRecent];
        *order = NewOrder(next_id_++);
      }
      b.Add(*order, now);
    }
    return b.Finish();
  }

 private:
  struct Order {
    int64_t id = -1, customer = 0, quantity = 0;
    int region = 0, product = 0, status = 0;
    double price = 0;
  };
  struct Builders {
    arrow::Int64Builder id, customer, quantity;
    arrow::StringBuilder region, product, status;
    arrow::DoubleBuilder price, ts;
    void Add(const Order& o, double now) {
      Check(id.Append(o.id), "id");
      Check(customer.Append(o.customer), "customer");
      Check(region.Append(kRegions[o.region]), "region");
      Check(product.Append(kProducts[o.product]), "product");
      Check(quantity.Append(o.quantity), "quantity");
      Check(price.Append(o.price), "price");
      Check(status.Append(kStatuses[o.status]), "status");
      Check(ts.Append(now), "ts");
    }
    std::shared_ptr<arrow::RecordBatch> Finish() {
      const int64_t n = id.length();
      return arrow::RecordBatch::Make(
          DemoOrdersSchema(), n,
          {bench::Finish(id), bench::Finish(customer), bench::Finish(region),
           bench::Finish(product), bench::Finish(quantity), bench::Finish(price),
           bench::Finish(status), bench::Finish(ts)});
    }
  };
  Order NewOrder(int64_t id) {
    Order o;
    o.id = id;
    o.customer = static_cast<int64_t>(rng_() % 50000);
    o.region = static_cast<int>(rng_() % std::size(kRegions));
    o.product = static_cast<int>(rng_() % std::size(kProducts));
    o.quantity = static_cast<int64_t>(1 + rng_() % 5);
    o.price = 5.0 + static_cast<double>(rng_() % 20000) / 100.0;
    o.status = 0;
    return o;
  }
  static constexpr int64_t kRecent = 50000;
  std::mt19937_64 rng_;
  std::vector<Order> recent_;
  int64_t next_id_;
};

double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

struct KpiWindow {
  double cpu_share = 0;  // CPU seconds / wall second (cores)
  double task_s = 0;     // engine task run time in the window (views, revenue_by_region)
  int64_t late_ticks = 0;
  std::string maintenance;  // of the KPIs and the task, as the store / engine say
};

/// One window: a MetricsStore (":memory:", as `rill demo`) with the demo's
/// three KPI queries and the revenue_by_region task. Incremental: the KPIs as
/// written (the store keeps a view task "__rill_kpi_<name>" per KPI and reads
/// it) and the task with incremental=true. Recompute: each KPI wrapped as
/// SELECT * FROM (<sql>) (same result; a subquery in FROM is not maintainable,
/// so the store re-runs it) and the task with incremental=false.
KpiWindow KpiRun(const Config& cfg, Engine& engine, MemoryConnector& conn,
                 DemoOrders& gen, bool inc, int rep) {
  const std::string task =
      std::string("revenue_by_region") + (inc ? "_inc_" : "_full_") + std::to_string(rep);
  MetricsOptions mo;
  mo.path = ":memory:";
  auto store = Check(MetricsStore::Make(&engine, mo), "metrics store");
  const auto& kpis = Kpis();
  for (size_t i = 1; i < kpis.size(); ++i) {
    const std::string sql =
        inc ? kpis[i].sql : "SELECT * FROM (" + std::string(kpis[i].sql) + ")";
    Check(store->AddKpiQuery(kpis[i].name, sql, 1.0, "line", "ts", kpis[i].values[0]),
          "kpi");
  }
  AddTask(engine, task, kpis[0].sql, task + "_out", 1.0,
          inc ? IncrementalMode::kOn : IncrementalMode::kOff);
  Check(store->Start(), "store start");
  const double tick_s = 0.1;
  const auto rows_per_tick = static_cast<int64_t>(cfg.kpi_rate * tick_s);
  // Warm-up (not in the window): tick until every KPI has run from its final
  // source (an incremental view builds its state from the whole table first).
  std::vector<std::string> views;
  const double warm0 = NowSeconds();
  for (;;) {
    Check(conn.Push(gen.Next(rows_per_tick, NowSeconds())), "push");
    Check(engine.Step(), "step");
    std::this_thread::sleep_for(std::chrono::duration<double>(tick_s));
    bool ready = true;
    views.clear();
    const auto stats = engine.TaskStatistics();
    for (const auto& k : store->LatestKpis()) {
      if (k.runs == 0 || k.maintenance.empty()) {
        ready = false;
      }
      if (k.maintenance == "incremental") {
        auto it = stats.find("__rill_kpi_" + k.query.name);
        if (it == stats.end() || it->second.runs < 2) {
          ready = false;
        }
        views.push_back("__rill_kpi_" + k.query.name);
      }
    }
    if (ready && NowSeconds() - warm0 > 2.0) {
      break;
    }
    if (NowSeconds() - warm0 > 300) {
      Die("kpi: the KPIs did not all run within 300 s");
    }
  }
  auto task_seconds = [&] {
    double total = 0;
    for (const auto& [name, s] : engine.TaskStatistics()) {
      total += s.total_duration_s;
    }
    return total;
  };
  KpiWindow w;
  const auto before = engine.TaskStatistics();
  const double task0 = task_seconds();
  const double start = NowSeconds();
  const double cpu0 = CpuSeconds();
  double deadline = start;
  while (deadline < start + cfg.kpi_seconds) {
    const double now = NowSeconds();
    if (now < deadline) {
      std::this_thread::sleep_for(std::chrono::duration<double>(deadline - now));
    } else if (now - deadline > tick_s) {
      ++w.late_ticks;
    }
    Check(conn.Push(gen.Next(rows_per_tick, NowSeconds())), "push");
    Check(engine.Step(), "step");
    deadline += tick_s;
  }
  const double wall = NowSeconds() - start;
  w.cpu_share = (CpuSeconds() - cpu0) / wall;
  w.task_s = task_seconds() - task0;
  // Before Stop(), which interrupts a KPI query in flight (an error of its own).
  const auto snapshots = store->LatestKpis();
  store->Stop();
  std::string per_task;
  for (const auto& [name, s] : engine.TaskStatistics()) {
    const auto it = before.find(name);
    const int64_t runs = s.runs - (it == before.end() ? 0 : it->second.runs);
    const double secs =
        s.total_duration_s - (it == before.end() ? 0 : it->second.total_duration_s);
    if (runs > 0) {
      char buf[200];
      std::snprintf(buf, sizeof(buf), " %s %lld runs %.0f ms;", name.c_str(),
                    static_cast<long long>(runs), 1e3 * secs);
      per_task += buf;
    }
  }
  for (const auto& k : snapshots) {
    if (k.errors > 0) {
      Die("kpi " + k.query.name + ": " + k.last_error);
    }
    const bool incremental = k.maintenance == "incremental";
    if (incremental != inc) {
      Die("kpi " + k.query.name + " maintenance is '" + k.maintenance + "' in the " +
          (inc ? "incremental" : "recompute") + " window");
    }
    w.maintenance += k.query.name + ": " + k.maintenance + "; ";
  }
  const TaskStats ts = StatsOf(engine, task);
  w.maintenance += "revenue_by_region (task): " + ts.maintenance;
  if (inc) {
    // The views and the task's output against the queries, all brought up to date.
    for (size_t i = 1; i < kpis.size(); ++i) {
      const std::string view = "__rill_kpi_" + std::string(kpis[i].name);
      Check(engine.RunTaskNow(view), "run view now");
      CheckSame(engine, std::string("kpi ") + kpis[i].name, kpis[i].sql, view,
                kpis[i].keys, kpis[i].values);
    }
    Check(engine.RunTaskNow(task), "run task now");
    CheckSame(engine, "kpi revenue_by_region", kpis[0].sql, task + "_out", kpis[0].keys,
              kpis[0].values);
  }
  // The orders table's change log (a probe feed opened for the moment):
  // feeds open with the views, and after they are dropped.
  auto orders = Check(engine.GetTable("orders"), "orders");
  auto log_stats = [&] { return orders->OpenChangeFeed()->stats(); };
  const ChangeFeedStats with_views = log_stats();
  store.reset();  // drops the KPIs' views
  Check(engine.RemoveSqlTask(task), "remove task");
  Check(engine.DropTable(task + "_out"), "drop output");
  const ChangeFeedStats after = log_stats();
  Log("kpi %s rep %d: orders change log: %lld feeds open (%lld rows, %lld versions) with "
      "the views (a probe included), %lld after they are dropped",
      inc ? "incremental" : "recompute", rep,
      static_cast<long long>(with_views.open_feeds),
      static_cast<long long>(with_views.log_rows),
      static_cast<long long>(with_views.log_versions),
      static_cast<long long>(after.open_feeds));
  Log("kpi %s rep %d: CPU %.2f cores over %.1f s, engine tasks %.2f s (%s), %lld late "
      "ticks",
      inc ? "incremental" : "recompute", rep, w.cpu_share, wall, w.task_s,
      per_task.c_str(), static_cast<long long>(w.late_ticks));
  return w;
}

void KpiCpuShare(const Config& cfg) {
  const int64_t rows = cfg.kpi_rows;
  auto engine = MakeEngine(cfg);
  TableOptions to;
  to.primary_key = {"order_id"};
  Check(engine->RegisterTable("orders", DemoOrdersSchema(), to).status(), "orders");
  BufferLimits limits;
  limits.max_records = 50'000'000;
  auto conn = std::make_shared<MemoryConnector>("orders", DemoOrdersSchema(), limits,
                                                "orders_in");
  Check(engine->AddConnector(conn), "connector");
  DemoOrders gen(44, rows);
  const double l0 = NowSeconds();
  for (int64_t start = 0; start < rows; start += 100'000) {
    Check(conn->Push(gen.History(start, std::min<int64_t>(100'000, rows - start))),
          "preload");
    if ((start / 100'000) % 10 == 9) {
      Check(engine->Step(), "preload step");
    }
  }
  Check(engine->Step(), "preload step");
  Log("kpi: %s orders loaded in %.1f s", CountLabel(rows).c_str(), NowSeconds() - l0);
  std::vector<double> inc_share, full_share, inc_task, full_task;
  KpiWindow inc_last, full_last;
  for (int rep = 0; rep < cfg.reps; ++rep) {
    auto inc = [&] {
      inc_last = KpiRun(cfg, *engine, *conn, gen, true, rep);
      inc_task.push_back(inc_last.task_s / cfg.kpi_seconds);
      return inc_last.cpu_share;
    };
    auto full = [&] {
      full_last = KpiRun(cfg, *engine, *conn, gen, false, rep);
      full_task.push_back(full_last.task_s / cfg.kpi_seconds);
      return full_last.cpu_share;
    };
    auto [i, f] = RunAlternating(rep, inc, full);
    inc_share.push_back(i);
    full_share.push_back(f);
  }
  Measurement m;
  m.name = "ivm_kpi_cpu_share";
  m.value = Median(inc_share);
  m.unit = "cores";
  m.baseline =
      "recompute: the same KPIs re-run by the MetricsStore every 1 s, the task with "
      "incremental=false";
  m.baseline_value = Median(full_share);
  m.ratio = *m.baseline_value / m.value;
  m.reps = cfg.reps;
  std::string sqls;
  for (const auto& k : Kpis()) {
    sqls += std::string(sqls.empty() ? "" : "; ") + k.sql;
  }
  m.extra_numbers = {
      {"rows", static_cast<double>(rows)},
      {"window_s", cfg.kpi_seconds},
      {"tick_ms", 100},
      {"kpi_interval_s", 1},
      {"stream_rows_per_s", static_cast<double>(cfg.kpi_rate)},
      {"incremental_engine_task_share", Median(inc_task)},
      {"recompute_engine_task_share", Median(full_task)},
      {"recompute_late_ticks_last_rep", static_cast<double>(full_last.late_ticks)},
      {"cores", static_cast<double>(std::thread::hardware_concurrency())},
      {"threads", static_cast<double>(cfg.threads)}};
  m.extra = {{"queries", sqls},
             {"rill_maintenance", inc_last.maintenance},
             {"baseline_maintenance", full_last.maintenance},
             {"value_is",
              "process CPU time (getrusage, all threads: ticks, the store's KPI "
              "queries and writer) / wall time over the window, ingest included; "
              "*_engine_task_share: engine task run time / wall time"},
             {"note",
              "KPIs through a MetricsStore as in rill demo (incremental views since "
              "287c536); recompute forced by wrapping each KPI as SELECT * FROM (...). "
              "revenue_by_region is the demo's ScheduledSqlTask without its ORDER BY "
              "(not maintainable)"}};
  m.extra_bools = {{"correct", true}};
  Emit(m);
}

// ---------------------------------------------------------------------------
// Nexmark q4

double RunQ4(const std::vector<nexmark::EventBatch>& events, bool incremental,
             nexmark::CheckResult* check, std::string* maintenance, double* task_s) {
  nexmark::PipelineOptions o;
  o.buffer_records = 10'000'000;
  o.q4_split = incremental;
  o.q4_incremental = incremental ? IncrementalMode::kOn : IncrementalMode::kOff;
  auto p = Check(nexmark::MakePipeline(4, o), "pipeline");
  const double elapsed = Check(p.Run(events), "run");
  *check = Check(nexmark::CheckAgainstDuckDb(p, events), "check");
  if (!check->correct()) {
    Die("nexmark q4 (" + std::string(incremental ? "incremental" : "recompute") +
        "): output differs from DuckDB: missing " + std::to_string(check->missing) +
        ", extra " + std::to_string(check->extra));
  }
  maintenance->clear();
  *task_s = 0;
  for (const auto& [name, s] : p.engine->TaskStatistics()) {
    if (s.errors > 0) {
      Die("nexmark task " + name + ": " + s.last_error);
    }
    *maintenance += (maintenance->empty() ? "" : "; ") + name + ": " + s.maintenance;
    *task_s += s.total_duration_s;
  }
  return elapsed;
}

double RunQ4Duck(const std::vector<nexmark::EventBatch>& events) {
  duckdb::DuckDB db(nullptr);
  duckdb::Connection con(db);
  DuckRun(con, "SET threads TO 1");
  DuckArrowSource ps(nexmark::PersonSchema()), as(nexmark::AuctionSchema()),
      bs(nexmark::BidSchema());
  ps.CreateView(con, "person_batch");
  as.CreateView(con, "auction_batch");
  bs.CreateView(con, "bid_batch");
  for (const char* t : {"person", "auction", "bid"}) {
    DuckRun(con, std::string("CREATE TABLE ") + t + " AS SELECT * FROM " + t +
                     "_batch LIMIT 0");
  }
  const std::string sql = nexmark::ReferenceSql(4);
  const double t0 = NowSeconds();
  for (size_t i = 0; i < events.size(); ++i) {
    ps.Set(events[i].person);
    as.Set(events[i].auction);
    bs.Set(events[i].bid);
    for (const char* t : {"person", "auction", "bid"}) {
      DuckRun(con, std::string("INSERT INTO ") + t + " SELECT * FROM " + t + "_batch");
    }
    if (i % 10 == 9 ||
        i + 1 == events.size()) {  // as often as Rill's q4 (every 0.1 s, 10 ticks)
      auto r = con.Query(sql);
      if (r->HasError()) {
        Die("duckdb q4: " + r->GetError());
      }
      while (r->Fetch()) {
      }
    }
  }
  return NowSeconds() - t0;
}

void NexmarkQ4(const Config& cfg) {
  nexmark::GeneratorConfig gc;
  gc.rate = 10'000;
  nexmark::Generator gen(gc);
  std::vector<nexmark::EventBatch> events;
  int64_t total = 0;
  for (int64_t done = 0; done < cfg.q4_events; done += 10'000) {
    events.push_back(
        Check(gen.Next(std::min<int64_t>(10'000, cfg.q4_events - done)), "generate"));
    total += events.back().events();
  }
  // Why the query as written is recomputed.
  std::string refusal;
  {
    nexmark::PipelineOptions o;
    auto p = Check(nexmark::MakePipeline(4, o), "pipeline");
    Status st =
        ScheduledSqlTask::CheckIncremental(p.engine->sql(), nexmark::ReferenceSql(4));
    refusal = st.ok() ? "maintainable" : st.message();
  }
  std::vector<double> inc_s, full_s, duck_s, inc_task, full_task;
  std::string inc_maint, full_maint;
  nexmark::CheckResult inc_check, full_check;
  for (int rep = 0; rep < cfg.reps; ++rep) {
    double task = 0;
    auto inc = [&] {
      const double s = RunQ4(events, true, &inc_check, &inc_maint, &task);
      inc_task.push_back(task);
      return s;
    };
    auto full = [&] {
      const double s = RunQ4(events, false, &full_check, &full_maint, &task);
      full_task.push_back(task);
      return s;
    };
    auto [i, f] = RunAlternating(rep, inc, full);
    inc_s.push_back(i);
    full_s.push_back(f);
    duck_s.push_back(RunQ4Duck(events));
    Log("q4 rep %d: incremental %.2f s (tasks %.2f s), recompute %.2f s (task %.2f s), "
        "duckdb %.2f s",
        rep, i, inc_task.back(), f, full_task.back(), duck_s.back());
  }
  Measurement m;
  m.name = "nexmark_q4_events_per_s_incremental";
  m.value = total / Median(inc_s);
  m.unit = "events/s";
  m.baseline =
      "rill recompute: q4 as one ScheduledSqlTask (the Nexmark SQL), incremental=false";
  m.baseline_value = total / Median(full_s);
  m.ratio = m.value / *m.baseline_value;
  m.reps = cfg.reps;
  m.extra_numbers = {{"events", static_cast<double>(total)},
                     {"batch_events", 10'000},
                     {"q4_interval_ticks", 10},
                     {"rill_cores", 1},
                     {"incremental_task_s", Median(inc_task)},
                     {"recompute_task_s", Median(full_task)},
                     {"duckdb_events_per_s", total / Median(duck_s)},
                     {"ratio_vs_duckdb", m.value / (total / Median(duck_s))},
                     {"reference_rows", static_cast<double>(inc_check.reference_rows)}};
  m.extra = {
      {"rill_mode",
       "incremental: two chained ScheduledSqlTasks, incremental=true "
       "(q4_1_max: max(price) per auction of the auction ⋈ bid join; "
       "q4_2_avg: avg per category over q4_max)"},
      {"rill_maintenance", inc_maint},
      {"baseline_mode", "recompute: one ScheduledSqlTask re-running the Nexmark SQL"},
      {"baseline_maintenance", full_maint},
      {"duckdb_mode",
       "recompute: insert each micro-batch, re-run the SQL every 10 "
       "micro-batches (as often as Rill's q4 task), 1 thread"},
      {"nexmark_sql_incremental", refusal}};
  m.extra_bools = {{"correct", inc_check.correct() && full_check.correct()}};
  Emit(m);
}

bool Wanted(const std::string& only, const std::string& what) {
  if (only.empty()) {
    return true;
  }
  std::stringstream s(only);
  std::string item;
  while (std::getline(s, item, ',')) {
    if (item == what) {
      return true;
    }
  }
  return false;
}

int Main(int argc, char** argv) {
  Args args(argc, argv);
  Check(InitializeArrowCompute(), "arrow compute");
  Config cfg;
  {
    std::stringstream s(args.Str("rows", "1m,10m"));
    std::string item;
    cfg.rows.clear();
    while (std::getline(s, item, ',')) {
      cfg.rows.push_back(Args::ParseCount(item));
    }
    std::sort(cfg.rows.begin(), cfg.rows.end());
  }
  cfg.changes = args.Int("changes", cfg.changes);
  cfg.ticks = static_cast<int>(args.Int("ticks", cfg.ticks));
  cfg.reps = static_cast<int>(args.Int("reps", cfg.reps));
  cfg.groups = args.Int("groups", cfg.groups);
  cfg.orders = args.Int("orders", cfg.orders);
  cfg.customers = args.Int("customers", cfg.customers);
  cfg.kpi_rows = args.Int("kpi-rows", cfg.rows.back());
  cfg.kpi_seconds =
      std::stod(args.Str("kpi-seconds", std::to_string(std::max(2.0, cfg.ticks / 2.0))));
  cfg.kpi_rate = args.Int("kpi-rate", cfg.kpi_rate);
  cfg.q4_events = args.Int("q4-events", cfg.q4_events);
  const int hw = static_cast<int>(std::thread::hardware_concurrency());
  cfg.threads = static_cast<int>(args.Int("threads", std::min(4, std::max(1, hw))));
  if (cfg.rows.empty() || cfg.ticks < 1 || cfg.reps < 1 || cfg.changes < 10 ||
      cfg.groups < 1) {
    Die("bad arguments");
  }
  cfg.no_minmax = args.Flag("no-minmax");
  const std::string only = args.Str("only", "");
  if (Wanted(only, "groupby")) {
    std::vector<double> ms;
    for (int64_t rows : cfg.rows) {
      ms.push_back(GroupBy(cfg, rows));
    }
    if (cfg.rows.size() >= 2) {
      Measurement g;
      g.name = "ivm_groupby_growth_" + CountLabel(cfg.rows.back()) + "_vs_" +
               CountLabel(cfg.rows.front()) + (cfg.no_minmax ? "_no_minmax" : "");
      g.value = ms.back() / ms.front();
      g.unit = "x";
      g.ratio = 1.5 / g.value;
      g.ratio_vs = "target";
      g.targets = {{"value", "<=", 1.5}};
      g.reps = cfg.reps;
      g.extra_numbers = {{"small_ms", ms.front()}, {"large_ms", ms.back()}};
      g.extra = {
          {"value_is", "median incremental tick at the large table / at the small one"}};
      Emit(g);
    }
  }
  if (Wanted(only, "join")) {
    Join(cfg);
  }
  if (Wanted(only, "kpi")) {
    KpiCpuShare(cfg);
  }
  if (Wanted(only, "q4")) {
    NexmarkQ4(cfg);
  }
  return 0;
}

}  // namespace
}  // namespace rill::bench

int main(int argc, char** argv) { return rill::bench::Main(argc, argv); }
