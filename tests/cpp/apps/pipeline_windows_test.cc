// The `windows:` section of pipeline files: parsed with the options of
// rills.WindowTask, applied as engine window tasks whose output matches DuckDB
// computing the same windows; bad values name the file, line and key.
#include <random>
#include <string>

#include <arrow/api.h>
#include <gtest/gtest.h>

#include "pipeline.h"
#include "rill/engine/window_task.h"

namespace rill::app {
namespace {

constexpr char kTables[] = R"(tables:
  - name: ev
    columns: {ts: float64, k: string, v: float64}
    mode: append
    retention: {max_rows: 100000}
)";

std::shared_ptr<arrow::RecordBatch> Events(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  arrow::DoubleBuilder t, v;
  arrow::StringBuilder k;
  for (int i = 0; i < n; ++i) {
    EXPECT_TRUE(t.Append(1000 + static_cast<double>(rng() % 100000) / 1000.0).ok());
    EXPECT_TRUE(k.Append(std::string(1, static_cast<char>('a' + rng() % 3))).ok());
    EXPECT_TRUE(v.Append(static_cast<double>(rng() % 1000)).ok());
  }
  auto schema = arrow::schema({arrow::field("ts", arrow::float64()),
                               arrow::field("k", arrow::utf8()),
                               arrow::field("v", arrow::float64())});
  return arrow::RecordBatch::Make(schema, n, {*t.Finish(), *k.Finish(), *v.Finish()});
}

int64_t Count(Engine& engine, const std::string& sql) {
  auto table = engine.Query(sql).ValueOrDie();
  return std::stoll((*table->column(0)->GetScalar(0))->ToString());
}

TEST(PipelineWindows, ParsesEveryOption) {
  auto parsed = ParsePipeline(std::string(kTables) + R"yaml(windows:
  - name: per_10s
    source: ev
    output: ev_10s
    time_column: ts
    window: sliding
    size_seconds: 10
    slide_seconds: 5
    group_by: [k]
    aggregations: [{column: "*", function: count}, {column: v, function: sum}]
    allowed_lateness_seconds: 2
    idle_timeout_seconds: 30
    emit: on_update
    retention: {max_rows: 500}
    late_table: ev_late
    late_max_rows: 10
    interval_seconds: 0.5
)yaml",
                              "w.yaml");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  ASSERT_EQ(parsed->window_tasks.size(), 1u);
  const WindowTaskOptions& o = parsed->window_tasks[0].options;
  EXPECT_EQ(o.source_table, "ev");
  EXPECT_EQ(o.output_table, "ev_10s");
  EXPECT_EQ(o.spec.kind, WindowKind::kHopping);
  EXPECT_EQ(o.spec.slide_seconds, 5);
  EXPECT_EQ(o.spec.group_by, std::vector<std::string>{"k"});
  ASSERT_EQ(o.spec.aggregations.size(), 2u);
  EXPECT_EQ(o.spec.aggregations[0].output, "count");
  EXPECT_EQ(o.spec.aggregations[1].output, "v_sum");
  EXPECT_EQ(o.spec.aggregations[1].kind, WindowAggKind::kSum);
  EXPECT_EQ(o.spec.allowed_lateness_seconds, 2);
  EXPECT_EQ(o.spec.idle_timeout_seconds, 30);
  EXPECT_EQ(o.spec.emit, EmitMode::kOnUpdate);
  EXPECT_EQ(o.retention->max_rows, 500);
  EXPECT_EQ(o.late_table, "ev_late");
  EXPECT_EQ(o.late_max_rows, 10);
  EXPECT_EQ(o.interval_seconds, 0.5);
  EXPECT_EQ(parsed->window_tasks[0].where.line, 7);
}

TEST(PipelineWindows, AppliedTaskMatchesDuckDbOverTheSameRows) {
  auto parsed = ParsePipeline(std::string(kTables) + R"yaml(windows:
  - name: per_10s
    source: ev
    time_column: ts
    size_seconds: 10
    group_by: k
    aggregations: {n: "count(*)", s: "sum(v)", hi: "max(v)"}
)yaml",
                              "w.yaml");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  auto engine = Engine::Make().ValueOrDie();
  ASSERT_TRUE(ApplyPipeline(*parsed, *engine, nullptr).ok());
  auto ev = engine->GetTable("ev").ValueOrDie();
  for (uint32_t batch = 0; batch < 3; ++batch) {
    ASSERT_TRUE(ev->Write(Events(500, batch)).ok());
    ASSERT_TRUE(engine->Step().ok());
  }
  auto stats = engine->TaskStatistics()["per_10s"];
  ASSERT_EQ(stats.errors, 0) << stats.last_error;
  // Windows closed by the watermark (no lateness): end <= max(ts); late rows
  // (behind the watermark of their batch) are in the late table, not here.
  const std::string expected = R"(
      SELECT floor(ts / 10) * 10 AS ws, k, count(*) AS n, sum(v) AS s, max(v) AS hi FROM ev
      WHERE floor(ts / 10) * 10 + 10 <= (SELECT max(ts) FROM ev)
        AND NOT EXISTS (SELECT 1 FROM per_10s_late l WHERE l.ts = ev.ts AND l.k = ev.k
                        AND l.v = ev.v)
      GROUP BY ALL)";
  EXPECT_GT(Count(*engine, "SELECT count(*) FROM per_10s"), 10);
  EXPECT_EQ(Count(*engine, "SELECT count(*) FROM (" + expected + ") e FULL JOIN per_10s r "
                           "ON e.ws = r.window_start AND e.k = r.k "
                           "WHERE r.k IS NULL OR e.k IS NULL OR e.n <> r.n "
                           "OR abs(e.s - r.s) > 1e-6 OR e.hi <> r.hi"),
            0);
  engine->Stop();
}

TEST(PipelineWindows, BadValuesNameFileLineAndKey) {
  auto expect_error = [](const std::string& window, std::vector<std::string> parts) {
    auto parsed = ParsePipeline(std::string(kTables) + "windows:\n" + window, "w.yaml");
    ASSERT_FALSE(parsed.ok()) << window;
    for (const auto& part : parts) {
      EXPECT_NE(parsed.status().message().find(part), std::string::npos)
          << "missing '" << part << "' in: " << parsed.status().message();
    }
  };
  expect_error("  - {name: w, source: ev, window: weekly}\n",
               {"w.yaml:7", "windows[0].window", "weekly"});
  expect_error("  - {name: w, source: ev, size_seconds: -1}\n", {"w.yaml:7", "size"});
  expect_error("  - {name: w, source: ev, emit: sometimes}\n", {"windows[0].emit"});
  expect_error("  - {name: w, source: ev, sizes: 3}\n",
               {"windows[0].sizes", "unknown option 'sizes'"});
  expect_error("  - {name: w}\n", {"w.yaml:7", "missing required option 'source'"});
  expect_error("  - {name: w, source: ev, aggregations: {x: \"\"}}\n", {"aggregations.x"});
  expect_error("  - {name: w, source: ev}\n  - {name: w, source: ev}\n", {"declared twice"});
  // An entry of a multi-line mapping is named at its own line.
  expect_error("  - name: w\n    source: ev\n    aggregations:\n      n: count(*)\n"
               "      s: \"\"\n",
               {"w.yaml:11", "windows[0].aggregations.s"});
  expect_error("  - {name: w, source: ev, aggregations: \"n=sum(v\"}\n",
               {"w.yaml:7", "windows[0].aggregations", "unbalanced"});
}

TEST(PipelineWindows, AggregationsMayBeWrittenAsTheSqlString) {
  auto parsed = ParsePipeline(std::string(kTables) + R"yaml(windows:
  - name: w
    source: ev
    aggregations: "n=count(*), q=quantile_cont(v, 0.5)"
    max_rows: 20
)yaml",
                              "w.yaml");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const WindowTaskOptions& o = parsed->window_tasks[0].options;
  ASSERT_EQ(o.spec.aggregations.size(), 2u);
  EXPECT_EQ(o.spec.aggregations[1].output, "q");
  EXPECT_EQ(o.spec.aggregations[1].expression, "quantile_cont(v, 0.5)");
  EXPECT_EQ(o.retention->max_rows, 20);
  EXPECT_EQ(parsed->window_tasks[0].given.size(), 4u);
}

}  // namespace
}  // namespace rill::app
