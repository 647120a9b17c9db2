// The declared windows' option table (src/rill/pipeline/windows.h): the SQL
// DDL's CREATE WINDOW and the pipeline file's `windows:` read the same
// options, with the same checks and SQLSTATEs, into the same WindowTask.
#include "rill/pipeline/windows.h"

#include <set>
#include <string>

#include <arrow/api.h>
#include <gtest/gtest.h>

#include "rill/engine/engine.h"
#include "rill/pipeline/ddl.h"

#include "pipeline/options_test_util.h"

namespace rill::pipeline {
namespace {

OptionValue Map(std::initializer_list<std::pair<const char*, OptionValue>> entries,
                std::string where) {
  OptionValue v;
  v.kind = OptionValue::Kind::kMap;
  v.where = std::move(where);
  for (const auto& [key, value] : entries) {
    v.items.push_back(value);
    v.items.back().key = key;
  }
  return v;
}

void ExpectRefused(const Options& options, const char* sqlstate,
                   std::vector<std::string> parts, std::string name = "w") {
  auto decl = ReadWindow(options, "CREATE WINDOW w", name);
  ASSERT_FALSE(decl.ok());
  EXPECT_TRUE(decl.status().IsInvalid());
  EXPECT_EQ(SqlStateOf(decl.status()), sqlstate) << decl.status().ToString();
  for (const auto& part : parts) {
    EXPECT_NE(decl.status().message().find(part), std::string::npos)
        << "missing '" << part << "' in: " << decl.status().message();
  }
}

TEST(PipelineWindows, TheIssuesCreateWindowReadsEveryOption) {
  auto stmt = ParseDdl(
      "CREATE WINDOW orders_per_minute WITH (source = 'orders', time_column = 'ts', "
      "window = 'tumbling', size_seconds = 60, group_by = 'region', "
      "aggregations = 'n=count(*),revenue=sum(price)')");
  ASSERT_TRUE(stmt.ok()) << stmt.status().ToString();
  auto decl = ReadWindow(stmt->with, "CREATE WINDOW", stmt->name);
  ASSERT_TRUE(decl.ok()) << decl.status().ToString();
  const WindowTaskOptions& o = decl->options;
  EXPECT_EQ(o.name, "orders_per_minute");
  EXPECT_EQ(o.source_table, "orders");
  EXPECT_EQ(o.output_table, "orders_per_minute");
  EXPECT_EQ(o.spec.time_column, "ts");
  EXPECT_EQ(o.spec.kind, WindowKind::kTumbling);
  EXPECT_EQ(o.spec.size_seconds, 60);
  EXPECT_EQ(o.spec.group_by, std::vector<std::string>{"region"});
  ASSERT_EQ(o.spec.aggregations.size(), 2u);
  EXPECT_EQ(o.spec.aggregations[0].output, "n");
  EXPECT_EQ(o.spec.aggregations[0].kind, WindowAggKind::kCountStar);
  EXPECT_EQ(o.spec.aggregations[1].output, "revenue");
  EXPECT_EQ(o.spec.aggregations[1].kind, WindowAggKind::kSum);
  EXPECT_EQ(o.spec.aggregations[1].column, "price");
  EXPECT_EQ(decl->given.size(), 6u);
}

TEST(PipelineWindows, TheStringFormKeepsCommasInsideParenthesesAndQuotes) {
  auto decl = ReadWindow(
      Opts({{"source", "ev"},
            {"window", "SLIDING"},
            {"size_seconds", "10"},
            {"slide_seconds", "5"},
            {"aggregations",
             " q = quantile_cont(v, 0.9) , s=string_agg(k, ','),"
             "\"Odd, = name\"=sum(v * (1 + 2)),c = count(*)"},
            {"max_rows", "500"},
            {"max_age_seconds", "60"}}),
      "here", "w");
  ASSERT_TRUE(decl.ok()) << decl.status().ToString();
  const auto& aggs = decl->options.spec.aggregations;
  ASSERT_EQ(aggs.size(), 4u);
  EXPECT_EQ(aggs[0].output, "q");
  EXPECT_EQ(aggs[0].expression, "quantile_cont(v, 0.9)");
  EXPECT_EQ(aggs[0].kind, WindowAggKind::kSql);
  EXPECT_EQ(aggs[1].output, "s");
  EXPECT_EQ(aggs[1].expression, "string_agg(k, ',')");
  EXPECT_EQ(aggs[2].output, "Odd, = name");
  EXPECT_EQ(aggs[2].expression, "sum(v * (1 + 2))");
  EXPECT_EQ(aggs[3].kind, WindowAggKind::kCountStar);
  EXPECT_EQ(decl->options.spec.kind, WindowKind::kHopping);
  ASSERT_TRUE(decl->options.retention.has_value());
  EXPECT_EQ(decl->options.retention->max_rows, 500);
  EXPECT_EQ(decl->options.retention->max_age_seconds, 60);
}

TEST(PipelineWindows, YamlMappingAndListFormsReadLikeThePythonClass) {
  Options options = Opts({{"name", "w"},
                          {"source_table", "ev"},
                          {"output_table", "out"},
                          {"window", "session"},
                          {"gap_seconds", "30"},
                          {"emit", "on_update"},
                          {"late_table", "late"},
                          {"late_max_rows", "7"},
                          {"interval_seconds", "0.5"},
                          {"allowed_lateness_seconds", "2"},
                          {"idle_timeout_seconds", "9"}});
  OptionValue group_by;
  group_by.kind = OptionValue::Kind::kList;
  group_by.items = {OptionValue::Scalar("a"), OptionValue::Scalar("b")};
  options.emplace_back("group_by", group_by);
  options.emplace_back("aggregations",
                       Map({{"n", OptionValue::Scalar("count(*)", "f:3: aggregations.n")},
                            {"hi", OptionValue::Scalar("max(v)", "f:4: aggregations.hi")}},
                           "f:2: aggregations"));
  OptionValue max_rows = OptionValue::Scalar("50", "f:5: retention.max_rows");
  options.emplace_back("retention", Map({{"max_rows", max_rows}}, "f:5: retention"));
  auto decl = ReadWindow(options, "f:1: windows[0]");
  ASSERT_TRUE(decl.ok()) << decl.status().ToString();
  const WindowTaskOptions& o = decl->options;
  EXPECT_EQ(o.name, "w");
  EXPECT_EQ(o.source_table, "ev");
  EXPECT_EQ(o.output_table, "out");
  EXPECT_EQ(o.spec.kind, WindowKind::kSession);
  EXPECT_EQ(o.spec.gap_seconds, 30);
  EXPECT_EQ(o.spec.emit, EmitMode::kOnUpdate);
  EXPECT_EQ(o.spec.group_by, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(o.spec.allowed_lateness_seconds, 2);
  EXPECT_EQ(o.spec.idle_timeout_seconds, 9);
  EXPECT_EQ(o.late_table, "late");
  EXPECT_EQ(o.late_max_rows, 7);
  EXPECT_EQ(o.interval_seconds, 0.5);
  EXPECT_EQ(o.retention->max_rows, 50);
  ASSERT_EQ(o.spec.aggregations.size(), 2u);
  EXPECT_EQ(o.spec.aggregations[0].output, "n");
  EXPECT_EQ(o.spec.aggregations[1].kind, WindowAggKind::kMax);

  // [{column, function}]: output column_function; column "*": the function's name.
  OptionValue list;
  list.kind = OptionValue::Kind::kList;
  list.where = "f:2: aggregations";
  list.items.push_back(Map({{"column", OptionValue::Scalar("*")},
                            {"function", OptionValue::Scalar("count")}},
                           "f:3: aggregations[0]"));
  list.items.push_back(Map({{"column", OptionValue::Scalar("my \"v\"")},
                            {"function", OptionValue::Scalar("sum")}},
                           "f:4: aggregations[1]"));
  Options with_list = Opts({{"source", "ev"}});
  with_list.emplace_back("aggregations", list);
  auto listed = ReadWindow(with_list, "here", "w");
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  const auto& aggs = listed->options.spec.aggregations;
  ASSERT_EQ(aggs.size(), 2u);
  EXPECT_EQ(aggs[0].output, "count");
  EXPECT_EQ(aggs[0].kind, WindowAggKind::kCountStar);
  EXPECT_EQ(aggs[1].output, "my \"v\"_sum");
  EXPECT_EQ(aggs[1].expression, "sum(\"my \"\"v\"\"\")");
  EXPECT_EQ(aggs[1].column, "my \"v\"");

  // Without aggregations: count = count(*), as rills.WindowTask.
  auto plain = ReadWindow(Opts({{"source", "ev"}}), "here", "w");
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  ASSERT_EQ(plain->options.spec.aggregations.size(), 1u);
  EXPECT_EQ(plain->options.spec.aggregations[0].output, "count");
}

TEST(PipelineWindows, RefusalsCarryTheirSqlState) {
  ExpectRefused(Opts({{"source", "ev"}, {"sizes", "3"}}), kSqlStateSyntax,
                {"option 'sizes'", "unknown option 'sizes' of a window", "size_seconds"});
  ExpectRefused(Opts({{"window", "tumbling"}}), kSqlStateSyntax,
                {"CREATE WINDOW w", "missing required option 'source'"});
  ExpectRefused(Opts({{"source", "ev"}}), kSqlStateSyntax,
                {"missing required option 'name'"}, /*name=*/"");
  ExpectRefused(Opts({{"source", "ev"}, {"name", "other"}}), kSqlStateSyntax,
                {"differs from the window's name 'w'"});
  ExpectRefused(Opts({{"source", "ev"}, {"source_table", "ev"}}), kSqlStateSyntax,
                {"given twice"});
  ExpectRefused(Opts({{"source", "ev"}, {"window", "weekly"}}), kSqlStateBadValue,
                {"option 'window'", "unknown window 'weekly'"});
  ExpectRefused(Opts({{"source", "ev"}, {"emit", "sometimes"}}), kSqlStateBadValue,
                {"option 'emit'", "sometimes"});
  ExpectRefused(Opts({{"source", "ev"}, {"size_seconds", "ten"}}), kSqlStateBadValue,
                {"expected a number"});
  ExpectRefused(Opts({{"source", "ev"}, {"size_seconds", "-1"}}), kSqlStateBadValue,
                {"CREATE WINDOW w", "size"});
  ExpectRefused(Opts({{"source", "ev"}, {"window", "session"}}), kSqlStateBadValue, {"gap"});
  ExpectRefused(Opts({{"source", "ev"}, {"output", "ev"}}), kSqlStateBadValue,
                {"must differ"});
  ExpectRefused(Opts({{"source", "ev"}, {"aggregations", "count(*)"}}), kSqlStateBadValue,
                {"option 'aggregations'", "output=expression"});
  ExpectRefused(Opts({{"source", "ev"}, {"aggregations", "n=count(*),"}}), kSqlStateBadValue,
                {"empty aggregation"});
  ExpectRefused(Opts({{"source", "ev"}, {"aggregations", "n=sum(v, s=max(v)"}}),
                kSqlStateBadValue, {"unbalanced"});
  ExpectRefused(Opts({{"source", "ev"}, {"aggregations", "n=count(*), n=sum(v)"}}),
                kSqlStateBadValue, {"aggregation output 'n' clashes"});
  ExpectRefused(Opts({{"source", "ev"}, {"retention", "5"}}), kSqlStateBadValue,
                {"option 'retention'", "expected a mapping"});
  ExpectRefused(Opts({{"source", "ev"}, {"max_rows", "-1"}}), kSqlStateBadValue,
                {"max_rows must be >= 0"});

  Options both = Opts({{"source", "ev"}, {"max_rows", "5"}});
  both.emplace_back("retention", Map({{"max_rows", OptionValue::Scalar("5")}}, "r"));
  ExpectRefused(both, kSqlStateSyntax, {"not both"});
  // A bad entry of a YAML mapping is named at its own place.
  Options bad_entry = Opts({{"source", "ev"}});
  bad_entry.emplace_back("aggregations",
                         Map({{"x", OptionValue::Scalar("", "f:9: aggregations.x")}},
                             "f:8: aggregations"));
  ExpectRefused(bad_entry, kSqlStateBadValue, {"f:9: aggregations.x"});
  Options bad_key = Opts({{"source", "ev"}});
  bad_key.emplace_back("retention",
                       Map({{"rows", OptionValue::Scalar("5", "f:7: retention.rows")}},
                           "f:7: retention"));
  ExpectRefused(bad_key, kSqlStateSyntax, {"f:7: retention.rows", "unknown option 'rows'"});
}

TEST(PipelineWindows, TheOptionsMarkdownListsEveryOption) {
  const std::string md = WindowOptionsMarkdown();
  for (const auto& d : WindowOptionTable().defs) {
    EXPECT_NE(md.find("`" + d.name + "`"), std::string::npos) << d.name;
  }
  EXPECT_NE(md.find("`source` (required) (or `source_table`)"), std::string::npos) << md;
  EXPECT_NE(md.find("| any |"), std::string::npos) << md;
}

std::shared_ptr<arrow::RecordBatch> Events(const std::vector<double>& t,
                                           const std::vector<std::string>& k,
                                           const std::vector<double>& v) {
  arrow::DoubleBuilder tb, vb;
  arrow::StringBuilder kb;
  EXPECT_TRUE(tb.AppendValues(t).ok());
  EXPECT_TRUE(kb.AppendValues(k).ok());
  EXPECT_TRUE(vb.AppendValues(v).ok());
  auto schema = arrow::schema({arrow::field("ts", arrow::float64()),
                               arrow::field("region", arrow::utf8()),
                               arrow::field("price", arrow::float64())});
  return arrow::RecordBatch::Make(schema, static_cast<int64_t>(t.size()),
                                  {tb.Finish().ValueOrDie(), kb.Finish().ValueOrDie(),
                                   vb.Finish().ValueOrDie()});
}

TEST(PipelineWindows, MakeWindowComputesATumblingWindowInAnEngine) {
  auto engine = Engine::Make().ValueOrDie();
  TableOptions append;
  append.mode = TableMode::kAppend;
  append.retention = RetentionPolicy{int64_t{1000}, std::nullopt, "z_insert_ts"};
  auto orders =
      engine->RegisterTable("orders", Events({}, {}, {})->schema(), append).ValueOrDie();
  auto decl = ReadWindow(Opts({{"source", "orders"},
                               {"time_column", "ts"},
                               {"window", "tumbling"},
                               {"size_seconds", "60"},
                               {"group_by", "region"},
                               {"aggregations", "n=count(*),revenue=sum(price)"}}),
                         "CREATE WINDOW", "orders_per_minute");
  ASSERT_TRUE(decl.ok()) << decl.status().ToString();
  auto task = MakeWindow(*decl);
  ASSERT_TRUE(task.ok()) << task.status().ToString();
  ASSERT_TRUE(engine->AddWindowTask(*task).ok());
  auto rows_in = Events({1, 30, 59, 10, 61, 130}, {"eu", "eu", "us", "us", "eu", "eu"},
                        {1, 2, 4, 8, 16, 32});
  ASSERT_TRUE(orders->Write(rows_in).ok());
  ASSERT_TRUE(engine->Step().ok());
  auto stats = engine->TaskStatistics()["orders_per_minute"];
  ASSERT_EQ(stats.errors, 0) << stats.last_error;
  // Watermark 130 closed [0, 60) and [60, 120); [120, 180) is open.
  auto table = engine
                   ->Query("SELECT window_start, region, n, revenue FROM orders_per_minute "
                           "ORDER BY window_start, region")
                   .ValueOrDie();
  auto rows = table->CombineChunksToBatch().ValueOrDie();
  std::vector<std::string> got;
  for (int64_t r = 0; r < rows->num_rows(); ++r) {
    std::string row;
    for (int c = 0; c < rows->num_columns(); ++c) {
      row += (c ? "," : "") + rows->column(c)->GetScalar(r).ValueOrDie()->ToString();
    }
    got.push_back(row);
  }
  EXPECT_EQ(got, (std::vector<std::string>{"0,eu,2,3", "0,us,2,12", "60,eu,1,16"}));
  engine->Stop();
}

}  // namespace
}  // namespace rill::pipeline
