// Pipeline files: the shipped example runs; every kind of error names the
// file, the line and the key.
#include "pipeline.h"

#include <chrono>
#include <map>
#include <string>
#include <thread>

#include <arrow/api.h>
#include <gtest/gtest.h>

namespace rill::app {
namespace {

std::string ExamplePath() {
  return std::string(RILL_SOURCE_DIR) + "/examples/pipelines/orders.yaml";
}

/// Expect `yaml` to fail to parse with a message containing each of `parts`.
void ExpectError(const std::string& yaml, std::vector<std::string> parts) {
  auto parsed = ParsePipeline(yaml, "p.yaml");
  ASSERT_FALSE(parsed.ok()) << yaml;
  EXPECT_TRUE(parsed.status().IsInvalid()) << parsed.status().ToString();
  for (const std::string& part : parts) {
    EXPECT_NE(parsed.status().message().find(part), std::string::npos)
        << "missing '" << part << "' in: " << parsed.status().message();
  }
}

constexpr char kTable[] = R"(tables:
  - name: t
    columns: {id: int64, v: float64, s: string}
    primary_key: id
)";

TEST(LoadPipeline, ParsesTheShippedExample) {
  auto parsed = LoadPipeline(ExamplePath());
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const Pipeline& p = *parsed;
  EXPECT_EQ(p.engine.trigger_interval_ms, 100);
  ASSERT_EQ(p.tables.size(), 1u);
  EXPECT_EQ(p.tables[0].name, "orders");
  EXPECT_EQ(p.tables[0].schema->num_fields(), 8);
  EXPECT_FALSE(p.tables[0].schema->field(0)->nullable());
  EXPECT_EQ(p.tables[0].options.primary_key, std::vector<std::string>{"order_id"});
  EXPECT_EQ(p.tables[0].options.retention->max_rows, 200000);
  ASSERT_EQ(p.connectors.size(), 2u);
  EXPECT_EQ(p.connectors[0].type, "generator");
  EXPECT_EQ(p.connectors[0].generator.columns.size(), 8u);
  ASSERT_EQ(p.sql_tasks.size(), 1u);
  EXPECT_EQ(p.sql_tasks[0].primary_key, std::vector<std::string>{"region"});
  ASSERT_EQ(p.kpis.size(), 3u);
  EXPECT_EQ(p.kpis[1].query.chart_type, ChartType::kBar);
  ASSERT_EQ(p.rules.size(), 2u);
  EXPECT_EQ(p.rules[0].rule.op, CompareOp::kGreater);
  EXPECT_EQ(p.rules[0].where.line, 87);
  EXPECT_EQ(p.server.listen, "127.0.0.1:9494");
}

TEST(ApplyPipeline, RunsTheExampleAndTheTaskMatchesTheTable) {
  auto parsed = LoadPipeline(ExamplePath());
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  auto engine = Engine::Make(parsed->engine).ValueOrDie();
  MetricsOptions mo;
  mo.path = ":memory:";
  auto metrics = MetricsStore::Make(engine.get(), mo).ValueOrDie();
  ASSERT_TRUE(ApplyPipeline(*parsed, *engine, metrics.get()).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  ASSERT_TRUE(engine->Step().ok());  // ingest, then the task over that version

  auto orders = engine->GetTable("orders").ValueOrDie()->snapshot()->ToTable().ValueOrDie();
  ASSERT_GT(orders->num_rows(), 100);
  // Oracle: revenue by region summed here from the orders rows.
  std::map<std::string, double> expected;
  auto region = orders->GetColumnByName("region");
  auto status = orders->GetColumnByName("status");
  auto price = orders->GetColumnByName("price");
  auto quantity = orders->GetColumnByName("quantity");
  for (int64_t i = 0; i < orders->num_rows(); ++i) {
    auto st = std::static_pointer_cast<arrow::StringScalar>(*status->GetScalar(i));
    if (st->view() == "cancelled") continue;
    auto r = std::static_pointer_cast<arrow::StringScalar>(*region->GetScalar(i));
    auto p = std::static_pointer_cast<arrow::DoubleScalar>(*price->GetScalar(i));
    auto q = std::static_pointer_cast<arrow::Int64Scalar>(*quantity->GetScalar(i));
    expected[std::string(r->view())] += p->value * static_cast<double>(q->value);
  }
  auto revenue =
      engine->GetTable("revenue_by_region").ValueOrDie()->snapshot()->ToTable().ValueOrDie();
  ASSERT_EQ(revenue->num_rows(), static_cast<int64_t>(expected.size()));
  for (int64_t i = 0; i < revenue->num_rows(); ++i) {
    auto r = std::static_pointer_cast<arrow::StringScalar>(
        *revenue->GetColumnByName("region")->GetScalar(i));
    auto v = std::static_pointer_cast<arrow::DoubleScalar>(
        *revenue->GetColumnByName("revenue")->GetScalar(i));
    EXPECT_NEAR(v->value, expected[std::string(r->view())], 1e-6 * v->value);
  }
  ASSERT_TRUE(metrics->Flush().ok());
  auto kpis = metrics->LatestKpis();
  ASSERT_EQ(kpis.size(), 3u);
  for (const auto& k : kpis) {
    EXPECT_TRUE(k.value.has_value()) << k.query.name << ": " << k.last_error;
  }
  EXPECT_EQ(metrics->AlertRules().size(), 2u);
  engine->Stop();
}

TEST(ApplyPipeline, GeneratorFillsEveryDeclaredKind) {
  auto parsed = ParsePipeline(R"(tables:
  - name: e
    columns:
      - {name: id, type: int32, nullable: false}
      - {name: k, type: int16}
      - {name: x, type: float32}
      - {name: c, type: int64}
      - {name: ts, type: "timestamp[ms, UTC]"}
      - {name: flag, type: bool}
      - {name: note, type: string}
    mode: append
    retention: {max_rows: 1000}
connectors:
  - {name: gen, type: generator, table: e, rows_per_second: 1000, interval_ms: 10, seed: 7,
     columns: {id: {sequence: {start: 10, step: 2}}, k: {random_int: [3, 4]},
               x: {random_float: [0, 1]}, c: {choice: ["5", "6"], weights: [1, 0]},
               ts: now, flag: {constant: "true"}}}
)",
                              "g.yaml");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  auto engine = Engine::Make().ValueOrDie();
  ASSERT_TRUE(ApplyPipeline(*parsed, *engine, nullptr).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ASSERT_TRUE(engine->Step().ok());
  auto rows = engine->Query("SELECT min(id), count(*), min(k), max(k), min(x) >= 0, "
                            "max(x) < 1, min(c), max(c), bool_and(flag), count(note), "
                            "max(ts) > TIMESTAMP '2020-01-01' FROM e")
                  .ValueOrDie();
  ASSERT_EQ(rows->num_rows(), 1);
  auto cell = [&](int i) { return (*rows->column(i)->GetScalar(0))->ToString(); };
  EXPECT_EQ(cell(0), "10");
  EXPECT_GT(std::stoi(cell(1)), 10);
  EXPECT_EQ(cell(2), "3");
  EXPECT_EQ(cell(3), "4");
  EXPECT_EQ(cell(4), "true");
  EXPECT_EQ(cell(5), "true");
  EXPECT_EQ(cell(6), "5");  // weight 0 never picks "6"
  EXPECT_EQ(cell(7), "5");
  EXPECT_EQ(cell(8), "true");
  EXPECT_EQ(cell(9), "0");  // no spec: null
  EXPECT_EQ(cell(10), "true");
  engine->Stop();
}

TEST(ApplyPipeline, JoinTaskFromTheFileMatchesTheSameJoinInSql) {
  auto parsed = ParsePipeline(R"(tables:
  - {name: customers, columns: {customer_id: int64, tier: string}, primary_key: customer_id}
  - {name: orders, columns: {order_id: int64, customer_id: int64, amount: float64},
     primary_key: order_id}
connectors:
  - {type: generator, table: customers, rows_per_second: 500, interval_ms: 10, seed: 3,
     columns: {customer_id: {random_int: [1, 20]}, tier: {choice: [gold, silver, bronze]}}}
  - {type: generator, table: orders, rows_per_second: 2000, interval_ms: 10, seed: 4,
     columns: {order_id: {sequence: 1}, customer_id: {random_int: [1, 30]},
               amount: {random_float: [1, 100]}}}
tasks:
  - name: revenue_by_tier
    type: join
    left: orders
    right: customers
    keys: customer_id
    join_type: left
    group_by: tier
    aggregations: [{column: amount, function: sum}, {column: order_id, function: count}]
    primary_key: tier
)",
                              "j.yaml");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  auto engine = Engine::Make().ValueOrDie();
  ASSERT_TRUE(ApplyPipeline(*parsed, *engine, nullptr).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ASSERT_TRUE(engine->Step().ok());
  auto diff = engine->Query(R"(
      WITH expected AS (
        SELECT c.tier, sum(o.amount) AS s, count(o.order_id) AS n
        FROM orders o LEFT JOIN customers c ON o.customer_id = c.customer_id GROUP BY c.tier)
      SELECT count(*) FROM expected e FULL JOIN revenue_by_tier r
        ON e.tier IS NOT DISTINCT FROM r.tier
      WHERE r.tier IS NULL AND e.tier IS NOT NULL OR abs(e.s - r.amount_sum) > 1e-6
         OR e.n <> r.order_id_count OR e.n IS NULL)")
                  .ValueOrDie();
  EXPECT_EQ((*diff->column(0)->GetScalar(0))->ToString(), "0");
  auto out = engine->Query("SELECT count(*) FROM revenue_by_tier").ValueOrDie();
  EXPECT_GE(std::stoi((*out->column(0)->GetScalar(0))->ToString()), 3);
  engine->Stop();
}

TEST(LoadPipeline, MissingFileIsAnIOError) {
  auto parsed = LoadPipeline("/nonexistent/pipeline.yaml");
  ASSERT_TRUE(parsed.status().IsIOError());
  EXPECT_NE(parsed.status().message().find("/nonexistent/pipeline.yaml"), std::string::npos);
}

TEST(ParsePipeline, EngineTakesMaxRecordsPerTick) {
  auto parsed = ParsePipeline("engine:\n  max_records_per_tick: 5000\n", "p.yaml");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->engine.max_records_per_tick, 5000);
  ExpectError("engine:\n  max_records_per_tick: -1\n",
              {"p.yaml:2: engine.max_records_per_tick: must not be negative"});
}

TEST(ParsePipeline, EngineTakesMemoryBudgetPolicy) {
  auto parsed = ParsePipeline("engine:\n  memory_budget_mb: 64\n  memory_budget_policy: shed\n",
                              "p.yaml");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->engine.memory_budget_policy, MemoryBudgetPolicy::kShed);
  EXPECT_EQ(parsed->engine.memory_budget_bytes, 64 << 20);
  auto defaulted = ParsePipeline("engine:\n  memory_budget_mb: 64\n", "p.yaml");
  ASSERT_TRUE(defaulted.ok());
  EXPECT_EQ(defaulted->engine.memory_budget_policy, MemoryBudgetPolicy::kWarn);
  ExpectError("engine:\n  memory_budget_mb: 64\n  memory_budget_policy: drop\n",
              {"p.yaml:3: engine.memory_budget_policy: must be 'warn' or 'shed', got 'drop'"});
  ExpectError("engine:\n  memory_budget_policy: shed\n",
              {"p.yaml:2: engine.memory_budget_policy: 'shed' needs engine.memory_budget_mb"});
}

TEST(ParsePipeline, ErrorsNameFileLineAndKey) {
  ExpectError("tables:\n  - name: t\n    columns: {a: int64\n", {"p.yaml:", "YAML syntax error"});
  ExpectError("engine: {}\ntabels: []\n", {"p.yaml:2: tabels: unknown key", "tables"});
  ExpectError("engine:\n  trigger_interval_ms: fast\n",
              {"p.yaml:2: engine.trigger_interval_ms: expected an integer, got 'fast'"});
  ExpectError("tables:\n  - name: t\n    columns:\n      - {name: a, type: int64}\n"
              "      - {name: b, type: decimal}\n",
              {"p.yaml:5: tables[0].columns[1].type", "unknown type 'decimal'"});
  ExpectError("tables:\n  - name: t\n    columns: {a: int64}\n    primary_key: [a, z]\n",
              {"p.yaml:4: tables[0].primary_key: column \"z\" named in key does not exist"});
  ExpectError("tables:\n  - name: t\n    columns: {a: int64}\n    mode: append\n",
              {"p.yaml:2: tables[0]: Retention policy (TTL) with max_rows or max_age_seconds is "
               "mandatory for append-only tables"});
  ExpectError("tables:\n  - name: t\n    colums: {a: int64}\n",
              {"p.yaml:3: tables[0].colums: unknown key"});
  ExpectError("tables:\n  - name: t\n    columns: {a: int64}\n  - name: t\n    columns: {a: int64}\n",
              {"p.yaml:4: tables[1].name: table 't' is declared twice (first at line 2)"});
  ExpectError("tables:\n  - columns: {a: int64}\n", {"p.yaml:2: tables[0]: missing required key 'name'"});
  ExpectError(std::string(kTable) + "connectors:\n  - {type: memory, table: nope}\n",
              {"p.yaml:6: connectors[0].table: unknown table 'nope'"});
  ExpectError(std::string(kTable) + "connectors:\n  - type: mqtt\n    table: t\n",
              {"p.yaml:6: connectors[0].type: unknown connector type 'mqtt'", "kafka"});
  ExpectError(std::string(kTable) +
                  "connectors:\n  - type: generator\n    table: t\n    columns:\n      w: now\n",
              {"p.yaml:9: connectors[0].columns.w: unknown column 'w'"});
  ExpectError(std::string(kTable) +
                  "connectors:\n  - type: memory\n    table: t\n    on_overflow: block\n",
              {"p.yaml:8: connectors[0].on_overflow", "block"});
  ExpectError(
      std::string(kTable) + "tasks:\n  - name: x\n    type: sql\n",
      {"p.yaml:6: tasks[0]: missing required option 'sql' of a materialized view"});
  ExpectError(std::string(kTable) +
                  "tasks:\n  - name: j\n    left: t\n    right: t\n    keys: id\n"
                  "    join_type: sideways\n",
              {"p.yaml:10: tasks[0].join_type", "sideways"});
  ExpectError(std::string(kTable) +
                  "tasks:\n  - name: j\n    left: t\n    right: t\n    keys: id\n"
                  "    aggregations: {v: median}\n",
              {"p.yaml:10: tasks[0].aggregations.v", "median"});
  ExpectError(std::string(kTable) + "kpis:\n  - {name: k, sql: SELECT 1, chart_type: pie}\n",
              {"p.yaml:6: kpis[0].chart_type", "pie"});
  ExpectError("kpis:\n  - name: k\n    sql: SELECT 1\n    interval_seconds: 0\n",
              {"p.yaml:2: kpis[0]", "interval"});
  ExpectError("alert_rules:\n  - {name: r, metric: m, op: '=>', threshold: 1}\n",
              {"p.yaml:2: alert_rules[0].op", "unknown comparison operator '=>'"});
  ExpectError("alert_rules:\n  - name: r\n    metric: m\n    op: '>'\n    threshold: high\n",
              {"p.yaml:5: alert_rules[0].threshold: expected a number, got 'high'"});
  ExpectError("alert_rules:\n  - name: r\n    metric: m\n    op: '>'\n    threshold: 1\n"
              "    webhook: {url: 'https://h.example/x', format: teams}\n",
              {"p.yaml:2: alert_rules[0]", "unknown webhook format 'teams'"});
  ExpectError("alert_rules:\n  - name: r\n    metric: m\n    op: '>'\n    threshold: 1\n"
              "    webhook: ftp://h.example/x\n",
              {"p.yaml:6: alert_rules[0].webhook: webhook url must start with http"});
  ExpectError("alert_rules:\n  - name: r\n    metric: m\n    op: '>'\n    threshold: 1\n"
              "    severity: fatal\n",
              {"p.yaml:6: alert_rules[0].severity", "fatal"});
}

TEST(ParsePipeline, RuleWebhookTakesAUrlOrAUrlAndFormat) {
  auto parsed = ParsePipeline(
      "alert_rules:\n"
      "  - {name: a, metric: m, op: '>', threshold: 1, webhook: 'https://h.example/a'}\n"
      "  - {name: b, metric: m, op: '<', threshold: 2,\n"
      "     webhook: {url: 'http://h.example/b', format: google_chat}}\n",
      "w.yaml");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->rules[0].rule.webhook, "https://h.example/a");
  EXPECT_EQ(parsed->rules[0].rule.webhook_format, "custom");
  EXPECT_EQ(parsed->rules[1].rule.webhook, "http://h.example/b");
  EXPECT_EQ(parsed->rules[1].rule.webhook_format, "google_chat");
}

// Sql tasks, stream tasks, KPIs and rules read the option tables the DDL reads
// (src/rill/pipeline/tasks.h); errors still name the file, line and key.
TEST(ParsePipeline, TasksReadTheSharedOptionTables) {
  auto parsed =
      ParsePipeline(std::string(kTable) +
                        "tasks:\n  - {name: v, sql: SELECT 1 AS a, primary_key: a}\n"
                        "stream_tasks:\n"
                        "  - {name: s, sql: SELECT * FROM t, source: t,\n"
                        "     retention: {max_rows: 10}, interval_seconds: 2}\n"
                        "  - {name: s2, sql: SELECT * FROM t, source: t, output: o,\n"
                        "     max_age_seconds: 60}\n",
                    "s.yaml");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  ASSERT_EQ(parsed->sql_tasks.size(), 1u);
  EXPECT_EQ(parsed->sql_tasks[0].output, "v");
  EXPECT_EQ(parsed->sql_tasks[0].primary_key, std::vector<std::string>{"a"});
  ASSERT_EQ(parsed->stream_tasks.size(), 2u);
  EXPECT_EQ(parsed->stream_tasks[0].output, "s");
  EXPECT_EQ(parsed->stream_tasks[0].retention.max_rows, 10);
  EXPECT_EQ(parsed->stream_tasks[0].interval_seconds, 2);
  EXPECT_EQ(parsed->stream_tasks[1].output, "o");
  EXPECT_EQ(parsed->stream_tasks[1].retention.max_age_seconds, 60);
  ExpectError(
      std::string(kTable) + "tasks:\n  - name: v\n    sql: SELECT 1\n    every: 2\n",
      {"p.yaml:8: tasks[0].every: unknown option 'every' of a materialized view"});
  ExpectError(
      std::string(kTable) + "tasks:\n  - name: v\n    sql: SELECT 1\n    left: t\n",
      {"p.yaml:8: tasks[0].left: only a join task takes 'left'"});
  // `incremental`: a sql task's auto / true / false (YAML booleans), a join's boolean.
  auto incremental =
      ParsePipeline(std::string(kTable) +
                        "tasks:\n  - {name: v, sql: SELECT 1, incremental: false}\n"
                        "  - {name: w, sql: SELECT 2, incremental: auto}\n"
                        "  - {name: x, sql: SELECT 3}\n",
                    "i.yaml");
  ASSERT_TRUE(incremental.ok()) << incremental.status().ToString();
  ASSERT_EQ(incremental->sql_tasks.size(), 3u);
  EXPECT_EQ(incremental->sql_tasks[0].incremental, IncrementalMode::kOff);
  EXPECT_EQ(incremental->sql_tasks[1].incremental, IncrementalMode::kAuto);
  EXPECT_EQ(incremental->sql_tasks[2].incremental, IncrementalMode::kAuto);
  ExpectError(std::string(kTable) +
                  "tasks:\n  - name: v\n    sql: SELECT 1\n    incremental: maybe\n",
              {"p.yaml:8: tasks[0].incremental: incremental must be auto, true or false, "
               "got 'maybe'"});
  ExpectError(
      "stream_tasks:\n  - name: s\n    sql: SELECT 1\n    max_rows: 5\n",
      {"p.yaml:2: stream_tasks[0]: missing required option 'source' of a stream view"});
  ExpectError("stream_tasks:\n  - name: s\n    sql: SELECT 1\n    source: t\n",
              {"p.yaml:2: stream_tasks[0]: a stream view's output is an append table"});
  ExpectError(
      "stream_tasks:\n  - name: s\n    sql: SELECT 1\n    source: t\n"
      "    retention: {max_rows: lots}\n",
      {"p.yaml:5: stream_tasks[0].retention: retention.max_rows: expected an integer"});
  ExpectError(
      "alert_rules:\n  - name: r\n    metric: m\n    op: '>'\n    threshold: 1\n"
      "    webhook: {url: 'https://h.example/x', fmt: slack}\n",
      {"p.yaml:6: alert_rules[0].webhook.fmt: unknown key"});
  auto flat = ParsePipeline(
      "alert_rules:\n  - {name: r, metric: m, op: '>', threshold: 1,\n"
      "     webhook: 'https://h.example/x', webhook_format: slack}\n",
      "w.yaml");
  ASSERT_TRUE(flat.ok()) << flat.status().ToString();
  EXPECT_EQ(flat->rules[0].rule.webhook_format, "slack");
}

TEST(ApplyPipeline, EngineErrorsNameTheDeclaration) {
  auto parsed = ParsePipeline(std::string(kTable) + "  - name: rill_mine\n    columns: {a: int64}\n",
                              "a.yaml");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  auto engine = Engine::Make().ValueOrDie();
  Status st = ApplyPipeline(*parsed, *engine, nullptr);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("a.yaml:5: tables[1]: "), std::string::npos) << st.ToString();

  auto with_kpi = ParsePipeline("kpis:\n  - {name: k, sql: SELECT 1}\n", "k.yaml");
  ASSERT_TRUE(with_kpi.ok());
  st = ApplyPipeline(*with_kpi, *engine, nullptr);
  EXPECT_NE(st.message().find("k.yaml:2: kpis[0]: KPI queries and alert rules need a metrics"),
            std::string::npos)
      << st.ToString();
}

}  // namespace
}  // namespace rill::app
