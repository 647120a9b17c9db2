// The `sinks:` section of pipeline files: parsed options, errors naming the
// file, line and key, and ApplyPipeline starting the sinks.
#include "pipeline.h"

#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "rill/pipeline/catalog.h"

#include "rill/sink/sink_set.h"

namespace rill::app {
namespace {

std::string ExamplePath() {
  return std::string(RILL_SOURCE_DIR) + "/examples/pipelines/orders_sinks.yaml";
}

void ExpectError(const std::string& yaml, std::vector<std::string> parts) {
  auto parsed = ParsePipeline(yaml, "p.yaml");
  ASSERT_FALSE(parsed.ok()) << yaml;
  EXPECT_TRUE(parsed.status().IsInvalid()) << parsed.status().ToString();
  for (const std::string& part : parts) {
    EXPECT_NE(parsed.status().message().find(part), std::string::npos)
        << "missing '" << part << "' in: " << parsed.status().message();
  }
}

constexpr char kTables[] = R"(tables:
  - name: t
    columns: {id: int64, v: float64, s: string}
    primary_key: id
  - name: log
    columns: {v: float64}
    mode: append
    retention: {max_rows: 100}
tasks:
  - name: agg
    type: sql
    sql: SELECT s, sum(v) AS v FROM t GROUP BY s
    output: by_s
    primary_key: s
)";

TEST(PipelineSinks, ParsesEveryOptionOfTheThreeTypes) {
  auto parsed = ParsePipeline(std::string(kTables) + R"(sinks:
  - name: files
    type: file
    table: t
    mode: append
    interval_seconds: 0.5
    max_batch_rows: 10
    on_error: drop
    retry_initial_seconds: 0.2
    retry_max_seconds: 3
    max_backlog_rows: 50
    emit_retention_deletes: true
    path: out/t
    format: ndjson
    partition_by: [s]
    roll_rows: 7
    roll_seconds: 2.5
  - name: topic
    type: kafka
    table: t
    topic: out
    kafka_config: {bootstrap.servers: "127.0.0.1:9", linger.ms: 5}
    format: json
    key_columns: id
    key_format: string
    exactly_once: true
  - name: pg
    type: postgres
    table: by_s
    dsn: host=127.0.0.1
    target_table: public.by_s
    create_table: true
    connect_timeout_seconds: 3
)",
                               "p.yaml");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  ASSERT_EQ(parsed->sinks.size(), 3u);
  const SinkSpec& f = parsed->sinks[0];
  EXPECT_EQ(f.kind, "file");
  EXPECT_EQ(f.where.line, 16);
  EXPECT_EQ(f.options.name, "files");
  EXPECT_EQ(f.options.table, "t");
  EXPECT_EQ(f.options.mode, SinkMode::kAppend);
  EXPECT_EQ(f.options.interval_seconds, 0.5);
  EXPECT_EQ(f.options.max_batch_rows, 10);
  EXPECT_EQ(f.options.on_error, SinkErrorPolicy::kDrop);
  EXPECT_EQ(f.options.retry_initial_seconds, 0.2);
  EXPECT_EQ(f.options.retry_max_seconds, 3);
  EXPECT_EQ(f.options.max_backlog_rows, 50);
  EXPECT_TRUE(f.options.emit_retention_deletes);
  EXPECT_EQ(f.file.path, "out/t");
  EXPECT_EQ(f.file.format, "ndjson");
  EXPECT_EQ(f.file.partition_by, std::vector<std::string>{"s"});
  EXPECT_EQ(f.file.roll_rows, 7);
  EXPECT_EQ(f.file.roll_seconds, 2.5);
  const SinkSpec& k = parsed->sinks[1];
  EXPECT_EQ(k.options.mode, SinkMode::kChangelog);  // the default
  EXPECT_EQ(k.kafka.topic, "out");
  EXPECT_EQ(k.kafka.kafka_config.at("bootstrap.servers"), "127.0.0.1:9");
  EXPECT_EQ(k.kafka.kafka_config.at("linger.ms"), "5");
  EXPECT_EQ(k.kafka.key_columns, std::vector<std::string>{"id"});
  EXPECT_EQ(k.kafka.key_format, "string");
  EXPECT_TRUE(k.kafka.exactly_once);
  EXPECT_EQ(k.kafka.transactional_id, "rill-topic");  // stable across restarts
  const SinkSpec& p = parsed->sinks[2];
  EXPECT_EQ(p.options.mode, SinkMode::kUpsert);  // PostgresSink's default
  EXPECT_EQ(p.options.table, "by_s");            // a task's output
  EXPECT_EQ(p.postgres.dsn, "host=127.0.0.1");
  EXPECT_EQ(p.postgres.target_table, "public.by_s");
  EXPECT_TRUE(p.postgres.create_table);
  EXPECT_EQ(p.postgres.connect_timeout_seconds, 3);
  EXPECT_EQ(p.postgres.sink_name, "pg");
  EXPECT_EQ(p.postgres.mode, SinkMode::kUpsert);
}

TEST(PipelineSinks, ErrorsNameTheFileTheLineAndTheKey) {
  const std::string t = kTables;
  ExpectError(t + "sinks:\n  - {name: a, type: s3, table: t}\n",
              {"p.yaml:16: sinks[0].type", "expected kafka, postgres or file", "s3"});
  ExpectError(t + "sinks:\n  - {name: a, type: file, table: nope, path: x}\n",
              {"p.yaml:16: sinks[0].table", "unknown table 'nope'"});
  ExpectError(t + "sinks:\n  - {name: a, type: file, table: t}\n",
              {"p.yaml:16: sinks[0]", "missing required option 'path'"});
  ExpectError(t + "sinks:\n  - {type: file, table: t, path: x}\n",
              {"sinks[0]", "missing required option 'name'"});
  ExpectError(t + "sinks:\n  - {name: a, type: file, table: t, path: x, topic: y}\n",
              {"sinks[0].topic", "unknown option 'topic'"});
  ExpectError(t + "sinks:\n  - {name: a, type: file, table: t, path: x, mode: merge}\n",
              {"sinks[0].mode", "merge"});
  ExpectError(t + "sinks:\n  - {name: a, type: file, table: t, path: x, on_error: skip}\n",
              {"sinks[0].on_error", "skip"});
  ExpectError(t + "sinks:\n  - {name: a, type: file, table: t, path: x, interval_seconds: 0}\n",
              {"sinks[0].interval_seconds", "must be positive"});
  ExpectError(t + "sinks:\n  - {name: a, type: file, table: t, path: x, max_batch_rows: -1}\n",
              {"sinks[0].max_batch_rows", "must not be negative"});
  ExpectError(t + "sinks:\n  - {name: a, type: file, table: t, path: x, format: xlsx}\n",
              {"sinks[0].format", "expected parquet, ndjson, csv or arrow"});
  ExpectError(t + "sinks:\n  - {name: a, type: file, table: t, path: x, partition_by: zz}\n",
              {"sinks[0].partition_by", "unknown column 'zz'"});
  ExpectError(t + "sinks:\n  - {name: a, type: kafka, table: log, topic: o, mode: upsert, "
                  "kafka_config: {bootstrap.servers: h}}\n",
              {"p.yaml:16: sinks[0].mode", "upsert needs a table with a primary_key"});
  ExpectError(t + "sinks:\n  - {name: a, type: file, table: t, path: x, mode: upsert}\n",
              {"p.yaml:16: sinks[0].mode", "a file sink cannot upsert"});
  ExpectError(t + "sinks:\n  - {name: a, type: kafka, table: t, topic: o}\n",
              {"sinks[0]", "missing required option 'bootstrap.servers'"});
  ExpectError(t + "sinks:\n  - {name: a, type: kafka, table: t, topic: o, kafka_config: {acks: "
                  "all}}\n",
              {"sinks[0].kafka_config", "bootstrap.servers"});
  ExpectError(t + "sinks:\n  - {name: a, type: kafka, table: t, topic: o, kafka_config: "
                  "{bootstrap.servers: h}, key_columns: [id, s], key_format: string}\n",
              {"sinks[0].key_format", "needs one key column"});
  ExpectError(t + "sinks:\n  - {name: a, type: postgres, table: t, dsn: d}\n",
              {"sinks[0]", "missing required option 'target_table'"});
  ExpectError(t + "sinks:\n  - {name: a, type: file, table: t, path: x}\n"
                  "  - {name: a, type: file, table: t, path: y}\n",
              {"p.yaml:17: sinks[1].name", "declared twice (first at line 16)"});
}

TEST(PipelineSinks, KafkaPropertiesMayBeWrittenAmongTheOptionsAsInCreateSink) {
  auto parsed = ParsePipeline(std::string(kTables) + R"(sinks:
  - name: topic
    type: kafka
    table: t
    topic: out
    bootstrap.servers: "127.0.0.1:9"
    kafka_config: {linger.ms: 5}
)",
                              "p.yaml");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const SinkSpec& k = parsed->sinks.at(0);
  EXPECT_EQ(k.kafka.kafka_config.at("bootstrap.servers"), "127.0.0.1:9");
  EXPECT_EQ(k.kafka.kafka_config.at("linger.ms"), "5");
  EXPECT_EQ(k.given.size(), 5u);  // as written, without `type`
}

TEST(PipelineSinks, OptionErrorsKeepTheSqlStateOfTheOptionTable) {
  const std::string t = kTables;
  auto unknown = ParsePipeline(t + "sinks:\n  - {name: a, type: file, table: t, path: x, "
                                   "topic: y}\n",
                               "p.yaml");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(pipeline::SqlStateOf(unknown.status()), pipeline::kSqlStateSyntax);
  auto bad = ParsePipeline(t + "sinks:\n  - {name: a, type: file, table: t, path: x, "
                               "roll_rows: many}\n",
                           "p.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(pipeline::SqlStateOf(bad.status()), pipeline::kSqlStateBadValue);
  EXPECT_NE(bad.status().message().find("p.yaml:16: sinks[0].roll_rows: expected an integer"),
            std::string::npos)
      << bad.status().message();
}

TEST(PipelineSinks, TheShippedExampleParses) {
  auto parsed = LoadPipeline(ExamplePath());
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  ASSERT_EQ(parsed->sinks.size(), 2u);
  EXPECT_EQ(parsed->sinks[0].file.partition_by, std::vector<std::string>{"region"});
  EXPECT_EQ(parsed->sinks[1].options.table, "revenue_by_region");
}

TEST(PipelineSinks, ApplyStartsSinksOfDeclaredTablesAndLaterThoseOfTaskOutputs) {
  const std::string dir =
      (std::filesystem::temp_directory_path() / "rill_pipeline_sinks_test").string();
  std::filesystem::remove_all(dir);
  auto parsed = ParsePipeline(std::string(kTables) + "sinks:\n"
                                  "  - {name: a, type: file, table: t, path: " + dir + "/t}\n"
                                  "  - {name: b, type: file, table: by_s, path: " + dir +
                                  "/by_s}\n",
                              "p.yaml");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  auto engine = Engine::Make().ValueOrDie();
  ASSERT_TRUE(ApplyPipeline(*parsed, *engine, nullptr).ok());
  SinkSet& sinks = SinkSet::For(engine.get());
  ASSERT_NE(sinks.Find("a"), nullptr);
  EXPECT_EQ(sinks.Find("a")->type(), std::string("file"));
  EXPECT_EQ(sinks.Find("b"), nullptr);  // by_s appears with the task's first run
  EXPECT_EQ(pipeline::Catalog::For(engine.get()).PendingSinks(),
            std::vector<std::string>{"b"});
  ASSERT_TRUE(engine->Step().ok());  // the task's first run creates by_s
  ASSERT_TRUE(engine->GetTable("by_s").ok());
  // The catalog's watcher starts it (it checks every 100 ms).
  for (int i = 0; i < 100 && sinks.Find("b") == nullptr; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(pipeline::Catalog::For(engine.get()).PendingSinks().empty());
  ASSERT_NE(sinks.Find("b"), nullptr);
  EXPECT_EQ(sinks.Find("b")->options().table, "by_s");
  EXPECT_EQ(sinks.List().size(), 2u);
  engine.reset();  // stops the sinks before their directories go
  std::filesystem::remove_all(dir);
}

TEST(PipelineSinks, AnEmptyPathIsAnErrorAtItsLine) {
  auto parsed = ParsePipeline(std::string(kTables) + "sinks:\n"
                                  "  - {name: a, type: file, table: by_s, path: x}\n"
                                  "  - {name: a2, type: file, table: t, path: \"\"}\n",
                              "p.yaml");
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.status().message().find("p.yaml:17: sinks[1].path: must not be empty"), std::string::npos)
      << parsed.status().message();
}

}  // namespace
}  // namespace rill::app
