// The declared views, KPI queries and alert rules (src/rill/pipeline/tasks.h):
// each kind reads the same options from the DDL (name and query from the
// statement) and the pipeline file (name and sql among the options), with
// the SQLSTATEs psql gets; the views it makes run on a real engine.
#include "rill/pipeline/tasks.h"

#include <string>
#include <vector>

#include <arrow/api.h>
#include <gtest/gtest.h>

#include "rill/connector/memory_connector.h"
#include "rill/engine/engine.h"

#include "pipeline/options_test_util.h"

namespace rill::pipeline {
namespace {

/// Expect `status` to be refused with `sqlstate` and a message holding `parts`.
void ExpectRefused(const Status& status, const char* sqlstate,
                   std::vector<std::string> parts) {
  ExpectRefusedWith(status, sqlstate, parts);
}

std::vector<std::string> Keys(const Options& options) {
  std::vector<std::string> out;
  for (const auto& [k, v] : options) out.push_back(k);
  return out;
}

TEST(PipelineTasks, MaterializedViewReadsTheStatementOrTheYamlWay) {
  auto ddl = ReadMaterializedView(
      Opts({{"interval_seconds", "2.5"}, {"primary_key", "region"}}),
      "CREATE MATERIALIZED VIEW v", "revenue_by_region", "SELECT region FROM orders");
  ASSERT_TRUE(ddl.ok()) << ddl.status().ToString();
  EXPECT_EQ(ddl->name, "revenue_by_region");
  EXPECT_EQ(ddl->sql, "SELECT region FROM orders");
  EXPECT_EQ(ddl->output, "revenue_by_region");  // defaults to the name
  EXPECT_EQ(ddl->interval_seconds, 2.5);
  EXPECT_EQ(ddl->primary_key, std::vector<std::string>{"region"});
  EXPECT_EQ(Keys(ddl->given),
            (std::vector<std::string>{"interval_seconds", "primary_key"}));

  auto yaml = ReadMaterializedView(Opts({{"name", "t"},
                                         {"sql", "SELECT 1"},
                                         {"output", "out"},
                                         {"primary_key", "a, b"}}),
                                   "p.yaml:3: tasks[0]");
  ASSERT_TRUE(yaml.ok()) << yaml.status().ToString();
  EXPECT_EQ(yaml->name, "t");
  EXPECT_EQ(yaml->sql, "SELECT 1");
  EXPECT_EQ(yaml->output, "out");
  EXPECT_EQ(yaml->interval_seconds, 1.0);
  EXPECT_EQ(yaml->primary_key, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(Keys(yaml->given), (std::vector<std::string>{"output", "primary_key"}));
}

TEST(PipelineTasks, MaterializedViewRefusalsCarryTheirSqlState) {
  ExpectRefused(ReadMaterializedView(Opts({{"intervall", "1"}}),
                                     "CREATE MATERIALIZED VIEW v", "v", "SELECT 1")
                    .status(),
                kSqlStateSyntax,
                {"option 'intervall': unknown option 'intervall' of a materialized view",
                 "interval_seconds, primary_key"});
  ExpectRefused(
      ReadMaterializedView(Opts({{"interval_seconds", "0"}}), "here", "v", "SELECT 1")
          .status(),
      kSqlStateBadValue, {"option 'interval_seconds': interval_seconds must be > 0"});
  ExpectRefused(
      ReadMaterializedView(Opts({{"interval_seconds", "soon"}}), "here", "v", "q")
          .status(),
      kSqlStateBadValue, {"expected a number, got 'soon'"});
  ExpectRefused(
      ReadMaterializedView(Opts({{"name", "t"}}), "p.yaml:6: tasks[0]").status(),
      kSqlStateSyntax,
      {"p.yaml:6: tasks[0]: missing required option 'sql' of a materialized view"});
  ExpectRefused(ReadMaterializedView(Opts({{"sql", "SELECT 1"}}), "here").status(),
                kSqlStateSyntax, {"missing required option 'name'"});
  ExpectRefused(
      ReadMaterializedView(Opts({{"sql", "SELECT 2"}}), "here", "v", "SELECT 1").status(),
      kSqlStateSyntax, {"option 'sql' is given twice (AS gives the query)"});
  ExpectRefused(
      ReadMaterializedView(Opts({{"name", "w"}}), "here", "v", "SELECT 1").status(),
      kSqlStateSyntax, {"option 'name' is given twice"});
}

TEST(PipelineTasks, MaterializedViewTakesIncrementalAutoTrueOrFalse) {
  auto plain = ReadMaterializedView({}, "here", "v", "SELECT 1");
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ(plain->incremental, IncrementalMode::kAuto);  // the default
  const std::pair<const char*, IncrementalMode> cases[] = {
      {"auto", IncrementalMode::kAuto}, {"true", IncrementalMode::kOn},
      {"false", IncrementalMode::kOff}, {"TRUE", IncrementalMode::kOn},
      // YAML's other booleans arrive as their text.
      {"yes", IncrementalMode::kOn},    {"off", IncrementalMode::kOff}};
  for (const auto& [text, mode] : cases) {
    auto decl =
        ReadMaterializedView(Opts({{"incremental", text}}), "here", "v", "SELECT 1");
    ASSERT_TRUE(decl.ok()) << text << ": " << decl.status().ToString();
    EXPECT_EQ(decl->incremental, mode) << text;
    EXPECT_EQ(Keys(decl->given), std::vector<std::string>{"incremental"});
    auto task = MakeMaterializedView(*decl);
    ASSERT_TRUE(task.ok()) << task.status().ToString();
    EXPECT_EQ((*task)->incremental(), mode) << text;
  }
  // The YAML way (name and sql among the options) takes it alike.
  auto yaml = ReadMaterializedView(
      Opts({{"name", "t"}, {"sql", "SELECT 1"}, {"incremental", "false"}}), "p.yaml:3");
  ASSERT_TRUE(yaml.ok()) << yaml.status().ToString();
  EXPECT_EQ(yaml->incremental, IncrementalMode::kOff);

  ExpectRefused(
      ReadMaterializedView(Opts({{"incremental", "sometimes"}}), "here", "v", "SELECT 1")
          .status(),
      kSqlStateBadValue,
      {"option 'incremental'", "incremental must be auto, true or false", "'sometimes'"});
  const Options twice = Opts({{"incremental", "true"}, {"incremental", "false"}});
  ExpectRefused(ReadMaterializedView(twice, "here", "v", "SELECT 1").status(),
                kSqlStateSyntax, {"option 'incremental' is given twice"});
  // A stream view appends what its query makes of the new rows: no such option.
  ExpectRefused(ReadStreamView(Opts({{"source", "orders"},
                                     {"max_rows", "10"},
                                     {"incremental", "true"}}),
                               "here", "s", "SELECT 1")
                    .status(),
                kSqlStateSyntax, {"unknown option 'incremental' of a stream view"});
}

TEST(PipelineTasks, StreamViewTakesFlatOrNestedRetention) {
  auto flat = ReadStreamView(Opts({{"source", "orders"}, {"max_rows", "100000"}}),
                             "CREATE STREAM VIEW big_orders", "big_orders",
                             "SELECT * FROM orders WHERE price > 100");
  ASSERT_TRUE(flat.ok()) << flat.status().ToString();
  EXPECT_EQ(flat->source, "orders");
  EXPECT_EQ(flat->output, "big_orders");
  EXPECT_EQ(flat->retention.max_rows, 100000);
  EXPECT_FALSE(flat->retention.max_age_seconds.has_value());
  EXPECT_EQ(flat->interval_seconds, 0);

  Options nested = Opts({{"name", "s"},
                         {"sql", "SELECT 1"},
                         {"source", "t"},
                         {"output", "o"},
                         {"interval_seconds", "0.5"}});
  OptionValue retention;
  retention.kind = OptionValue::Kind::kMap;
  retention.where = "p.yaml:7: stream_tasks[0].retention";
  for (const auto& [k, v] : std::initializer_list<std::pair<const char*, const char*>>{
           {"max_age_seconds", "60"}, {"time_column", "ts"}}) {
    retention.items.push_back(OptionValue::Scalar(v));
    retention.items.back().key = k;
  }
  nested.emplace_back("retention", retention);
  auto yaml = ReadStreamView(nested, "p.yaml:2: stream_tasks[0]");
  ASSERT_TRUE(yaml.ok()) << yaml.status().ToString();
  EXPECT_EQ(yaml->name, "s");
  EXPECT_EQ(yaml->output, "o");
  EXPECT_EQ(yaml->retention.max_age_seconds, 60);
  EXPECT_EQ(yaml->retention.time_column, "ts");
  EXPECT_EQ(yaml->interval_seconds, 0.5);

  nested.emplace_back("max_age_seconds",
                      OptionValue::Scalar("5", "p.yaml:9: max_age_seconds"));
  ExpectRefused(ReadStreamView(nested, "here").status(), kSqlStateSyntax,
                {"p.yaml:9: max_age_seconds: max_age_seconds is given twice"});
  nested.pop_back();
  retention.items.back().key = "time_colum";
  nested.back().second = retention;
  ExpectRefused(
      ReadStreamView(nested, "here").status(), kSqlStateSyntax,
      {"p.yaml:7: stream_tasks[0].retention: unknown retention option 'time_colum'"});
}

TEST(PipelineTasks, StreamViewRefusalsCarryTheirSqlState) {
  ExpectRefused(
      ReadStreamView(Opts({{"max_rows", "10"}}), "CREATE STREAM VIEW s", "s", "q")
          .status(),
      kSqlStateSyntax,
      {"CREATE STREAM VIEW s: missing required option 'source' of a stream view"});
  ExpectRefused(
      ReadStreamView(Opts({{"source", "t"}}), "CREATE STREAM VIEW s", "s", "q").status(),
      kSqlStateSyntax, {"append table: give max_rows or max_age_seconds"});
  ExpectRefused(
      ReadStreamView(Opts({{"source", "t"}, {"max_rows", "-1"}}), "here", "s", "q")
          .status(),
      kSqlStateBadValue, {"here: RetentionPolicy max_rows must be >= 0"});
  ExpectRefused(
      ReadStreamView(
          Opts({{"source", "t"}, {"max_rows", "1"}, {"interval_seconds", "-1"}}), "here",
          "s", "q")
          .status(),
      kSqlStateBadValue, {"interval_seconds must be >= 0"});
  ExpectRefused(
      ReadStreamView(Opts({{"source", "t"}, {"max_rows", "many"}}), "here", "s", "q")
          .status(),
      kSqlStateBadValue, {"option 'max_rows': expected an integer, got 'many'"});
  ExpectRefused(
      ReadStreamView(Opts({{"source", "t"}, {"max_rows", "1"}, {"primary_key", "a"}}),
                     "here", "s", "q")
          .status(),
      kSqlStateSyntax, {"unknown option 'primary_key' of a stream view"});
}

TEST(PipelineTasks, KpiReadsItsOptionsAndChecksTheQuery) {
  auto kpi = ReadKpi(
      Opts({{"interval_seconds", "1"}, {"chart_type", "bar"}, {"y_col", "revenue"}}),
      "CREATE KPI total_revenue", "total_revenue",
      "SELECT sum(price) AS revenue FROM orders");
  ASSERT_TRUE(kpi.ok()) << kpi.status().ToString();
  EXPECT_EQ(kpi->query.name, "total_revenue");
  EXPECT_EQ(kpi->query.sql, "SELECT sum(price) AS revenue FROM orders");
  EXPECT_EQ(kpi->query.chart_type, ChartType::kBar);
  EXPECT_EQ(kpi->query.x_col, "ts");
  EXPECT_EQ(kpi->query.y_col, "revenue");
  EXPECT_EQ(kpi->given.size(), 3u);

  ExpectRefused(ReadKpi(Opts({{"chart_type", "pie"}}), "here", "k", "SELECT 1").status(),
                kSqlStateBadValue, {"option 'chart_type'", "pie"});
  ExpectRefused(
      ReadKpi(Opts({{"interval_seconds", "0"}}), "CREATE KPI k", "k", "SELECT 1")
          .status(),
      kSqlStateBadValue, {"CREATE KPI k: KPI query 'k': interval_seconds"});
  ExpectRefused(ReadKpi(Opts({{"colour", "red"}}), "here", "k", "SELECT 1").status(),
                kSqlStateSyntax,
                {"unknown option 'colour' of a KPI", "chart_type, x_col, y_col"});
  ExpectRefused(ReadKpi(Opts({{"name", "k"}}), "p.yaml:2: kpis[0]").status(),
                kSqlStateSyntax, {"p.yaml:2: kpis[0]: missing required option 'sql'"});
}

TEST(PipelineTasks, AlertRuleReadsItsOptions) {
  auto rule = ReadAlertRule(Opts({{"metric", "max_price"},
                                  {"op", ">"},
                                  {"threshold", "1000"},
                                  {"severity", "error"},
                                  {"cooldown_seconds", "5"},
                                  {"message", "too dear"},
                                  {"enabled", "off"},
                                  {"webhook", "https://h.example/x"},
                                  {"webhook_format", "slack"}}),
                            "CREATE ALERT RULE high_price", "high_price");
  ASSERT_TRUE(rule.ok()) << rule.status().ToString();
  const AlertRule& r = rule->rule;
  EXPECT_EQ(r.name, "high_price");
  EXPECT_EQ(r.metric, "max_price");
  EXPECT_EQ(r.op, CompareOp::kGreater);
  EXPECT_EQ(r.threshold, 1000);
  EXPECT_EQ(r.severity, Severity::kError);
  EXPECT_EQ(r.cooldown_seconds, 5);
  EXPECT_EQ(r.message, "too dear");
  EXPECT_FALSE(r.enabled);
  EXPECT_EQ(r.webhook, "https://h.example/x");
  EXPECT_EQ(r.webhook_format, "slack");
  EXPECT_EQ(rule->given.size(), 9u);

  auto yaml = ReadAlertRule(
      Opts({{"name", "r"}, {"metric", "m"}, {"op", "<="}, {"threshold", "2"}}),
      "p.yaml:2: alert_rules[0]");
  ASSERT_TRUE(yaml.ok()) << yaml.status().ToString();
  EXPECT_EQ(yaml->rule.name, "r");
  EXPECT_EQ(yaml->rule.op, CompareOp::kLessEqual);
  EXPECT_EQ(yaml->rule.severity, Severity::kWarning);
  EXPECT_FALSE(yaml->rule.webhook.has_value());
  EXPECT_EQ(Keys(yaml->given), (std::vector<std::string>{"metric", "op", "threshold"}));
}

TEST(PipelineTasks, AlertRuleRefusalsCarryTheirSqlState) {
  const char* where = "CREATE ALERT RULE r";
  ExpectRefused(
      ReadAlertRule(Opts({{"op", ">"}, {"threshold", "1"}}), where, "r").status(),
      kSqlStateSyntax, {"missing required option 'metric'"});
  ExpectRefused(ReadAlertRule(Opts({{"metric", "m"}, {"op", ">"}}), where, "r").status(),
                kSqlStateSyntax, {"missing required option 'threshold'"});
  ExpectRefused(
      ReadAlertRule(Opts({{"metric", "m"}, {"op", "=>"}, {"threshold", "1"}}), where, "r")
          .status(),
      kSqlStateBadValue, {"option 'op': unknown comparison operator '=>'"});
  ExpectRefused(ReadAlertRule(Opts({{"metric", "m"},
                                    {"op", ">"},
                                    {"threshold", "1"},
                                    {"webhook", "ftp://h.example"}}),
                              where, "r")
                    .status(),
                kSqlStateBadValue,
                {"option 'webhook': webhook url must start with http"});
  ExpectRefused(ReadAlertRule(Opts({{"metric", "m"},
                                    {"op", ">"},
                                    {"threshold", "1"},
                                    {"webhook_format", "teams"}}),
                              where, "r")
                    .status(),
                kSqlStateBadValue,
                {"CREATE ALERT RULE r: ", "unknown webhook format 'teams'"});
  ExpectRefused(
      ReadAlertRule(
          Opts({{"metric", "m"}, {"op", ">"}, {"threshold", "1"}, {"severity", "fatal"}}),
          where, "r")
          .status(),
      kSqlStateBadValue, {"option 'severity'", "fatal"});
  ExpectRefused(
      ReadAlertRule(
          Opts({{"metric", "m"}, {"op", ">"}, {"threshold", "1"}, {"sql", "SELECT 1"}}),
          where, "r")
          .status(),
      kSqlStateSyntax, {"unknown option 'sql'", "webhook_format"});
  ExpectRefused(
      ReadAlertRule(
          Opts({{"metric", "m"}, {"op", ">"}, {"threshold", "1"}, {"enabled", "maybe"}}),
          where, "r")
          .status(),
      kSqlStateBadValue, {"option 'enabled'", "maybe"});
}

TEST(PipelineTasks, MarkdownListsEveryKindsOptions) {
  const std::string md = TaskOptionsMarkdown();
  for (const char* part :
       {"#### `CREATE MATERIALIZED VIEW` / `tasks:` (type: sql)",
        "#### `CREATE STREAM VIEW`", "#### `CREATE KPI`", "#### `CREATE ALERT RULE`",
        "| `source` (required) | string |", "| `primary_key` | names |",
        "| `retention` | mapping |", "| `threshold` (required) | number |",
        "| `incremental` | string | auto (default)", "\\| true:", "0A000",
        "line (default) \\| bar \\| scatter"}) {
    EXPECT_NE(md.find(part), std::string::npos) << "missing '" << part << "' in:\n" << md;
  }
}

// --- The views on a real engine -----------------------------------------------

std::shared_ptr<arrow::Schema> Orders() {
  return arrow::schema({arrow::field("order_id", arrow::int64(), false),
                        arrow::field("region", arrow::utf8()),
                        arrow::field("price", arrow::float64())});
}

std::shared_ptr<arrow::RecordBatch> OrdersBatch(std::vector<int64_t> ids,
                                                std::vector<std::string> regions,
                                                std::vector<double> prices) {
  arrow::Int64Builder id;
  arrow::StringBuilder region;
  arrow::DoubleBuilder price;
  EXPECT_TRUE(id.AppendValues(ids).ok());
  EXPECT_TRUE(region.AppendValues(regions).ok());
  EXPECT_TRUE(price.AppendValues(prices).ok());
  return arrow::RecordBatch::Make(Orders(), static_cast<int64_t>(ids.size()),
                                  {*id.Finish(), *region.Finish(), *price.Finish()});
}

struct EngineFixture {
  double now = 100;
  std::unique_ptr<Engine> engine;
  std::shared_ptr<MemoryConnector> in;
  EngineFixture() {
    EngineOptions o;
    o.clock = [this] { return now; };
    engine = *Engine::Make(std::move(o));
    EXPECT_TRUE(
        engine->RegisterTable("orders", Orders(), TableOptions{{"order_id"}}).ok());
    in = std::make_shared<MemoryConnector>("orders", Orders());
    EXPECT_TRUE(engine->AddConnector(in).ok());
  }
  void Tick() {
    now += 1;
    ASSERT_TRUE(engine->Step().ok());
  }
  /// The rows of `sql` as "a|b|c" lines.
  std::vector<std::string> Rows(const std::string& sql) {
    auto result = engine->Query(sql);
    EXPECT_TRUE(result.ok()) << result.status().ToString();
    if (!result.ok()) return {};
    auto table = (*result)->CombineChunks().ValueOrDie();
    std::vector<std::string> out;
    for (int64_t r = 0; r < table->num_rows(); ++r) {
      std::string line;
      for (int c = 0; c < table->num_columns(); ++c) {
        auto scalar = table->column(c)->GetScalar(r).ValueOrDie();
        line += (c ? "|" : "") + scalar->ToString();
      }
      out.push_back(line);
    }
    return out;
  }
};

TEST(PipelineTasks, MaterializedViewRunsOnTheEngine) {
  EngineFixture f;
  auto decl = ReadMaterializedView(
      Opts({{"interval_seconds", "1"}, {"primary_key", "region"}}),
      "CREATE MATERIALIZED VIEW revenue_by_region", "revenue_by_region",
      "SELECT region, sum(price) AS revenue, count(*) AS n FROM orders GROUP BY region");
  ASSERT_TRUE(decl.ok()) << decl.status().ToString();
  auto task = MakeMaterializedView(*decl);
  ASSERT_TRUE(task.ok()) << task.status().ToString();
  EXPECT_EQ((*task)->output_table(), "revenue_by_region");
  EXPECT_EQ((*task)->primary_key(), std::vector<std::string>{"region"});
  ASSERT_TRUE(f.engine->AddSqlTask(*task).ok());
  ASSERT_TRUE(f.in->Push(OrdersBatch({1, 2, 3}, {"eu", "us", "eu"}, {10, 20, 5})).ok());
  f.Tick();
  EXPECT_EQ(f.Rows("SELECT region, revenue, n FROM revenue_by_region ORDER BY region"),
            (std::vector<std::string>{"eu|15|2", "us|20|1"}));
  ASSERT_TRUE(f.in->Push(OrdersBatch({4}, {"us"}, {1})).ok());
  f.Tick();
  EXPECT_EQ(f.Rows("SELECT region, revenue, n FROM revenue_by_region ORDER BY region"),
            (std::vector<std::string>{"eu|15|2", "us|21|2"}));

  MaterializedViewDecl bad = *decl;
  bad.interval_seconds = 0;
  EXPECT_TRUE(MakeMaterializedView(bad).status().IsInvalid());
}

TEST(PipelineTasks, StreamViewRunsOnTheEngineOverNewRows) {
  EngineFixture f;
  auto decl = ReadStreamView(Opts({{"source", "orders"}, {"max_rows", "100000"}}),
                             "CREATE STREAM VIEW big_orders", "big_orders",
                             "SELECT order_id, price FROM orders WHERE price > 100");
  ASSERT_TRUE(decl.ok()) << decl.status().ToString();
  auto task = MakeStreamView(*decl, f.engine.get());
  ASSERT_TRUE(task.ok()) << task.status().ToString();
  EXPECT_EQ((*task)->source_table(), "orders");
  ASSERT_TRUE(f.engine->AddSqlTask(*task).ok());
  ASSERT_TRUE(
      f.in->Push(OrdersBatch({1, 2, 3}, {"eu", "us", "eu"}, {150, 20, 500})).ok());
  f.Tick();
  EXPECT_EQ(f.Rows("SELECT order_id, price FROM big_orders ORDER BY order_id"),
            (std::vector<std::string>{"1|150", "3|500"}));
  // Only the new rows are read: the earlier big orders are not appended again.
  ASSERT_TRUE(f.in->Push(OrdersBatch({4, 5}, {"us", "us"}, {101, 1})).ok());
  f.Tick();
  EXPECT_EQ(f.Rows("SELECT order_id, price FROM big_orders ORDER BY order_id"),
            (std::vector<std::string>{"1|150", "3|500", "4|101"}));
  EXPECT_FALSE(MakeStreamView(*decl, nullptr).ok());
}

}  // namespace
}  // namespace rill::pipeline
