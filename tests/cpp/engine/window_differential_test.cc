// Randomized differential test: WindowTask against DuckDB computing the same
// windows with plain SQL.
//
// Each sequence picks a window (tumbling, hopping or session; sizes, slide,
// gap, allowed lateness, group_by, emit mode, with or without a DuckDB
// fallback aggregation) and runs ticks. Every tick writes a random batch to
// the source table: event times drift forward with random delays, some rows
// far behind (late), some without a time, values and keys sometimes null.
// The reference replays the watermark rule by itself (a row is late when its
// time is below the watermark of the previous tick; after the tick the
// watermark is max(watermark, max on-time event time - lateness)), keeps the
// on-time rows in a DuckDB table and, after EVERY tick, computes
//   tumbling: GROUP BY floor(t / size) * size,
//   hopping:  every start from range(), CROSS JOIN,
//   session:  gaps-and-islands (lag() >= gap starts a session),
// over all on-time rows, keeping the windows whose end <= watermark
// (on_close), or all windows with is_final = end <= watermark (on_update).
// The output table must equal it as a multiset of rows, and the late table
// must hold every late row with its reason.
//
// RILL_WINDOW_DIFF_ITERATIONS sets the number of sequences (default 40),
// RILL_WINDOW_DIFF_SEED the first seed. A failure prints the seed, the
// configuration and the differing rows.
#include <cinttypes>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <random>
#include <sstream>

#include <arrow/api.h>
#include <gtest/gtest.h>

#include "duckdb.hpp"
#include "rill/engine/engine.h"
#include "rill/engine/window_task.h"

namespace rill {
namespace {

int64_t EnvInt(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v ? std::atoll(v) : fallback;
}

struct Config {
  WindowKind kind = WindowKind::kTumbling;
  int64_t size_ms = 1000, slide_ms = 1000, gap_ms = 1000, lateness_ms = 0;
  std::vector<std::string> group_by;
  EmitMode emit = EmitMode::kOnClose;
  bool sql_agg = false;
  bool null_keys = true;

  std::string Describe() const {
    std::ostringstream o;
    o << WindowKindName(kind) << " size_ms=" << size_ms << " slide_ms=" << slide_ms
      << " gap_ms=" << gap_ms << " lateness_ms=" << lateness_ms << " emit=" << EmitModeName(emit)
      << " sql_agg=" << sql_agg << " group_by=[";
    for (const auto& g : group_by) o << g << " ";
    return o.str() + "]";
  }
};

// The projection both sides are compared through (NULLs spelled out, floats
// rounded where the summation order may differ).
std::string Projection(const Config& c, bool with_final) {
  std::vector<std::string> parts = {"round(window_start * 1e6)::BIGINT",
                                    "round(window_end * 1e6)::BIGINT"};
  for (const auto& g : c.group_by) parts.push_back(g);
  for (const char* a : {"cnt", "cv", "sv", "si", "round(av, 6)", "mn", "mx", "fv", "lv", "cd",
                        "ms", "ax", "ls"}) {
    parts.push_back(a);
  }
  if (c.sql_agg) parts.push_back("round(md, 6)");
  if (with_final) parts.push_back("is_final");
  std::string out = "concat_ws('|'";
  for (const auto& p : parts) out += ", coalesce(CAST(" + p + " AS VARCHAR), 'NULL')";
  return out + ")";
}

std::string Aggregates(const Config& c) {
  std::string s =
      "count(*) AS cnt, count(v) AS cv, sum(v) AS sv, sum(i)::BIGINT AS si, avg(v) AS av, "
      "min(v) AS mn, max(i) AS mx, arg_min(v, tu * 1000000 + seq) FILTER (WHERE v IS NOT NULL) "
      "AS fv, arg_max(i, tu * 1000000 + seq) FILTER (WHERE i IS NOT NULL) AS lv, "
      "count(DISTINCT i) AS cd, min(s) AS ms, count(DISTINCT i) AS ax, "
      "arg_max(s, tu * 1000000 + seq) FILTER (WHERE s IS NOT NULL) AS ls";
  if (c.sql_agg) s += ", median(v) AS md";
  return s;
}

std::string Keys(const Config& c, const std::string& prefix, const std::string& suffix) {
  std::string s;
  for (const auto& g : c.group_by) s += prefix + g + suffix;
  return s;
}

// The expected windows as SQL over table ev(t, k, s, v, i, seq).
std::string ExpectedSql(const Config& c, int64_t watermark_us) {
  const std::string W = std::to_string(watermark_us);
  const std::string base = "WITH b AS (SELECT *, CAST(round(t * 1e6) AS BIGINT) AS tu FROM ev)";
  std::string windows;
  if (c.kind == WindowKind::kSession) {
    const std::string G = std::to_string(c.gap_ms * 1000);
    const std::string part =
        c.group_by.empty() ? "" : "PARTITION BY " + Keys(c, "", ",").substr(0) + "NULL";
    windows = base +
              ", o AS (SELECT *, CASE WHEN tu - lag(tu) OVER (" + part +
              " ORDER BY tu, seq) < " + G + " THEN 0 ELSE 1 END AS brk FROM b)"
              ", w0 AS (SELECT *, sum(brk) OVER (" + part +
              " ORDER BY tu, seq ROWS UNBOUNDED PRECEDING) AS sid FROM o)"
              ", w AS (SELECT *, min(tu) OVER (" + part + ", sid) AS ws, max(tu) OVER (" +
              part + ", sid) + " + G + " AS we FROM w0)";
    if (c.group_by.empty()) {
      windows = base +
                ", o AS (SELECT *, CASE WHEN tu - lag(tu) OVER (ORDER BY tu, seq) < " + G +
                " THEN 0 ELSE 1 END AS brk FROM b)"
                ", w0 AS (SELECT *, sum(brk) OVER (ORDER BY tu, seq ROWS UNBOUNDED PRECEDING) "
                "AS sid FROM o)"
                ", w AS (SELECT *, min(tu) OVER (PARTITION BY sid) AS ws, max(tu) OVER "
                "(PARTITION BY sid) + " + G + " AS we FROM w0)";
    }
  } else {
    const std::string S = std::to_string(c.size_ms * 1000);
    const std::string L = std::to_string(c.slide_ms * 1000);
    // range() is evaluated per row through a lateral join.
    windows = base + ", w AS (SELECT b.*, r.ws, r.ws + " + S +
              " AS we FROM b, LATERAL (SELECT unnest(range(b.tu - ((b.tu % " + L + ") + " + L +
              ") % " + L + ", b.tu - " + S + ", -" + L + ")) AS ws) AS r)";
  }
  std::string select = "SELECT ws / 1e6 AS window_start, we / 1e6 AS window_end" +
                       Keys(c, ", ", "") + ", " + Aggregates(c);
  std::string final_col = c.emit == EmitMode::kOnUpdate ? ", we <= " + W + " AS is_final" : "";
  std::string having = c.emit == EmitMode::kOnUpdate ? "" : " HAVING we <= " + W;
  std::string group = " GROUP BY ws, we" + Keys(c, ", ", "");
  return windows + select + final_col + " FROM w" + group + having;
}

class WindowDifferential {
 public:
  WindowDifferential(uint64_t seed) : rng_(seed), seed_(seed), con_(db_) {}

  void Run() {
    PickConfig();
    EngineOptions options;
    options.clock = [this] { return now_; };
    auto engine = Engine::Make(options);
    ASSERT_TRUE(engine.ok()) << engine.status().ToString();
    engine_ = std::move(*engine);
    auto schema = arrow::schema({arrow::field("t", arrow::float64()),
                                 arrow::field("k", arrow::int64()),
                                 arrow::field("s", arrow::utf8()),
                                 arrow::field("v", arrow::float64()),
                                 arrow::field("i", arrow::int64()),
                                 arrow::field("seq", arrow::int64())});
    TableOptions topts;
    topts.mode = TableMode::kAppend;
    topts.retention = RetentionPolicy{int64_t{10000000}, std::nullopt, "z_insert_ts"};
    auto source = engine_->RegisterTable("ev", schema, topts);
    ASSERT_TRUE(source.ok()) << source.status().ToString();
    source_ = *source;
    ASSERT_TRUE(engine_->AddWindowTask(MakeTask()).ok());
    Exec("CREATE TABLE ev (t DOUBLE, k BIGINT, s VARCHAR, v DOUBLE, i BIGINT, seq BIGINT)");
    const int ticks = std::uniform_int_distribution<int>(5, 30)(rng_);
    for (int tick = 0; tick < ticks && !::testing::Test::HasFailure(); ++tick) {
      Tick(tick);
    }
  }

 private:
  void PickConfig() {
    auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); };
    config_.kind = static_cast<WindowKind>(pick(3));
    config_.size_ms = 250 * (1 + pick(8));
    config_.slide_ms = config_.kind == WindowKind::kHopping ? 250 * (1 + pick(6)) : config_.size_ms;
    config_.gap_ms = 100 * (1 + pick(10));
    config_.lateness_ms = 250 * pick(5);
    const int keys = pick(3);
    if (keys >= 1) config_.group_by.push_back("k");
    if (keys >= 2) config_.group_by.push_back("s");
    config_.emit = config_.kind != WindowKind::kSession && pick(3) == 0 ? EmitMode::kOnUpdate
                                                                       : EmitMode::kOnClose;
    config_.null_keys = config_.emit == EmitMode::kOnClose;
    config_.sql_agg = pick(3) == 0;
  }

  std::shared_ptr<WindowTask> MakeTask() {
    WindowTaskOptions o;
    o.name = "w";
    o.source_table = "ev";
    o.output_table = "out";
    o.spec.kind = config_.kind;
    o.spec.time_column = "t";
    o.spec.size_seconds = config_.size_ms / 1000.0;
    o.spec.slide_seconds = config_.slide_ms / 1000.0;
    o.spec.gap_seconds = config_.gap_ms / 1000.0;
    o.spec.allowed_lateness_seconds = config_.lateness_ms / 1000.0;
    o.spec.group_by = config_.group_by;
    o.spec.emit = config_.emit;
    std::vector<std::pair<std::string, std::string>> aggs = {
        {"cnt", "count(*)"},        {"cv", "count(v)"},    {"sv", "sum(v)"},
        {"si", "sum(i)"},           {"av", "avg(v)"},      {"mn", "min(v)"},
        {"mx", "max(i)"},           {"fv", "first(v)"},    {"lv", "last(i)"},
        {"cd", "count(DISTINCT i)"}, {"ms", "min(s)"},     {"ax", "approx_count_distinct(i)"},
        {"ls", "last(s)"}};
    if (config_.sql_agg) aggs.push_back({"md", "median(v)"});
    for (auto& [out, expr] : aggs) {
      o.spec.aggregations.push_back(*ParseWindowAggregation(out, expr));
    }
    auto task = WindowTask::Make(o);
    EXPECT_TRUE(task.ok()) << task.status().ToString();
    return *task;
  }

  void Tick(int tick) {
    auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); };
    now_ += 1;
    event_ms_ += pick(1500);
    const int rows = pick(25);
    arrow::DoubleBuilder t, v;
    arrow::Int64Builder k, i, seq;
    arrow::StringBuilder s;
    int64_t batch_max = INT64_MIN;
    std::string insert;
    for (int r = 0; r < rows; ++r) {
      const int delay = pick(10) == 0 ? pick(8000) : pick(1200);
      const bool null_t = pick(25) == 0;
      const int64_t tms = event_ms_ - delay;
      ASSERT_TRUE((null_t ? t.AppendNull() : t.Append(tms / 1000.0)).ok());
      const bool null_k = config_.null_keys && pick(10) == 0;
      const bool null_s = config_.null_keys && pick(10) == 0;
      const int64_t kv = pick(3);
      const std::string sv = std::string(1, static_cast<char>('a' + pick(3)));
      const bool null_v = pick(6) == 0, null_i = pick(6) == 0;
      const double vv = pick(100) - 30;
      const int64_t iv = pick(7);
      ASSERT_TRUE((null_k ? k.AppendNull() : k.Append(kv)).ok());
      ASSERT_TRUE((null_s ? s.AppendNull() : s.Append(sv)).ok());
      ASSERT_TRUE((null_v ? v.AppendNull() : v.Append(vv)).ok());
      ASSERT_TRUE((null_i ? i.AppendNull() : i.Append(iv)).ok());
      ASSERT_TRUE(seq.Append(next_seq_).ok());
      const int64_t tus = tms * 1000;
      if (null_t) {
        ++expect_null_;
      } else if (tus < watermark_us_) {
        ++expect_late_;
      } else {
        batch_max = std::max(batch_max, tus);
        auto lit = [](bool null, const std::string& x) { return null ? "NULL" : x; };
        insert += std::string(insert.empty() ? "" : ",") + "(" + std::to_string(tms / 1000.0) +
                  "," + lit(null_k, std::to_string(kv)) + "," + lit(null_s, "'" + sv + "'") + "," +
                  lit(null_v, std::to_string(vv)) + "," + lit(null_i, std::to_string(iv)) + "," +
                  std::to_string(next_seq_) + ")";
      }
      ++next_seq_;
    }
    if (rows > 0) {
      std::vector<std::shared_ptr<arrow::Array>> cols(6);
      ASSERT_TRUE(t.Finish(&cols[0]).ok() && k.Finish(&cols[1]).ok() && s.Finish(&cols[2]).ok() &&
                  v.Finish(&cols[3]).ok() && i.Finish(&cols[4]).ok() && seq.Finish(&cols[5]).ok());
      auto batch = arrow::RecordBatch::Make(source_->user_schema(), rows, cols);
      ASSERT_TRUE(source_->Write(batch, now_).ok());
    }
    if (!insert.empty()) Exec("INSERT INTO ev VALUES " + insert);
    if (batch_max != INT64_MIN) {
      max_t_us_ = std::max(max_t_us_, batch_max);
      watermark_us_ = std::max(watermark_us_, max_t_us_ - config_.lateness_ms * 1000);
    }
    auto stepped = engine_->Step();
    ASSERT_TRUE(stepped.ok()) << stepped.status().ToString();
    Compare(tick);
  }

  void Compare(int tick) {
    const bool upd = config_.emit == EmitMode::kOnUpdate;
    std::multiset<std::string> actual, expected;
    if (engine_->TableNames().size() > 1) {
      auto got = engine_->Query("SELECT " + Projection(config_, upd) + " FROM out");
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      auto col = (*got)->column(0);
      for (const auto& chunk : col->chunks()) {
        auto& a = static_cast<const arrow::StringArray&>(*chunk);
        for (int64_t r = 0; r < a.length(); ++r) actual.insert(std::string(a.GetView(r)));
      }
    }
    auto want = con_.Query("SELECT " + Projection(config_, upd) + " FROM (" +
                           ExpectedSql(config_, watermark_us_) + ")");
    ASSERT_FALSE(want->HasError()) << want->GetError() << "\n" << ExpectedSql(config_, watermark_us_);
    for (duckdb::idx_t r = 0; r < want->RowCount(); ++r) {
      expected.insert(want->GetValue(0, r).ToString());
    }
    if (actual != expected) {
      std::ostringstream diff;
      for (const auto& a : actual) {
        if (!expected.count(a)) diff << "  only in rill:   " << a << "\n";
      }
      for (const auto& e : expected) {
        if (!actual.count(e)) diff << "  only in duckdb: " << e << "\n";
      }
      FAIL() << "seed " << seed_ << " tick " << tick << " (" << config_.Describe()
             << ") watermark_us " << watermark_us_ << "\n" << diff.str();
    }
    // Late rows: all kept, with their reasons.
    auto late = engine_->Query(
        "SELECT count(*) FILTER (WHERE late_reason = 'behind watermark'), "
        "count(*) FILTER (WHERE late_reason = 'null event time') FROM out_late");
    int64_t got_late = 0, got_null = 0;
    if (late.ok()) {
      got_late = std::static_pointer_cast<arrow::Int64Array>((*late)->column(0)->chunk(0))->Value(0);
      got_null = std::static_pointer_cast<arrow::Int64Array>((*late)->column(1)->chunk(0))->Value(0);
    }
    ASSERT_EQ(got_late, expect_late_) << "seed " << seed_ << " tick " << tick;
    ASSERT_EQ(got_null, expect_null_) << "seed " << seed_ << " tick " << tick;
    auto task = engine_->TaskStatistics();
    ASSERT_EQ(task["w"].errors, 0) << task["w"].last_error;
  }

  void Exec(const std::string& sql) {
    auto r = con_.Query(sql);
    ASSERT_FALSE(r->HasError()) << r->GetError() << "\n" << sql;
  }

  std::mt19937_64 rng_;
  uint64_t seed_;
  Config config_;
  duckdb::DuckDB db_{nullptr};
  duckdb::Connection con_;
  std::unique_ptr<Engine> engine_;
  std::shared_ptr<LiveTable> source_;
  double now_ = 1000;
  int64_t event_ms_ = 100000;
  int64_t next_seq_ = 0;
  int64_t watermark_us_ = INT64_MIN;
  int64_t max_t_us_ = INT64_MIN;
  int64_t expect_late_ = 0, expect_null_ = 0;
};

TEST(WindowDifferential, MatchesDuckDbAfterEveryTick) {
  const int64_t iterations = EnvInt("RILL_WINDOW_DIFF_ITERATIONS", 40);
  const int64_t seed = EnvInt("RILL_WINDOW_DIFF_SEED", 1);
  for (int64_t i = 0; i < iterations && !::testing::Test::HasFailure(); ++i) {
    WindowDifferential(static_cast<uint64_t>(seed + i)).Run();
  }
}

}  // namespace
}  // namespace rill
