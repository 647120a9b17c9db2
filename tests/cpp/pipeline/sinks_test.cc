// The declared sinks' option tables (src/rill/pipeline/sinks.h): every kind
// reads rills.sinks' option names with the checks and SQLSTATEs that the YAML
// parser and CREATE SINK share, and StartSink runs a declaration on an engine.
#include "rill/pipeline/sinks.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <arrow/api.h>
#include <gtest/gtest.h>

#include "rill/engine/engine.h"

#include "pipeline/options_test_util.h"

namespace rill::pipeline {
namespace {

namespace fs = std::filesystem;

void ExpectRefused(std::string_view kind, const Options& options, const char* sqlstate,
                   std::vector<std::string> parts, std::string name = "s",
                   std::string table = "t") {
  auto decl = ReadSink(kind, options, "CREATE SINK s", name, table);
  ASSERT_FALSE(decl.ok()) << kind;
  ExpectRefusedWith(decl.status(), sqlstate, parts);
}

TEST(PipelineSinks, KafkaTakesItsOptionsAndGathersDottedPropertiesIntoKafkaConfig) {
  Options options = Opts({{"topic", "revenue"},
                          {"bootstrap.servers", "127.0.0.1:9092"},
                          {"compression.type", "lz4"},
                          {"mode", "upsert"},
                          {"format", "avro"},
                          {"schema_registry_url", "http://127.0.0.1:8081"},
                          {"schema_registry_user", "u"},
                          {"schema_registry_password", "p"},
                          {"key_columns", "region"},
                          {"key_format", "string"},
                          {"exactly_once", "true"}});
  OptionValue
      config;  // kafka_config as a mapping too (YAML), merged with the dotted names
  config.kind = OptionValue::Kind::kMap;
  config.items.push_back(OptionValue::Scalar("5", "option 'kafka_config.linger.ms'"));
  config.items.back().key = "linger.ms";
  options.emplace_back("kafka_config", config);
  auto decl =
      ReadSink("kafka", options, "CREATE SINK revenue_out", "revenue_out", "by_region");
  ASSERT_TRUE(decl.ok()) << decl.status().ToString();
  EXPECT_EQ(decl->kind, "kafka");
  EXPECT_EQ(decl->options.name, "revenue_out");
  EXPECT_EQ(decl->options.table, "by_region");
  EXPECT_EQ(decl->options.mode, SinkMode::kUpsert);
  EXPECT_EQ(decl->kafka.topic, "revenue");
  EXPECT_EQ(decl->kafka.kafka_config,
            (std::map<std::string, std::string>{{"bootstrap.servers", "127.0.0.1:9092"},
                                                {"compression.type", "lz4"},
                                                {"linger.ms", "5"}}));
  EXPECT_EQ(decl->kafka.format, "avro");
  EXPECT_EQ(decl->kafka.schema_registry_url, "http://127.0.0.1:8081");
  EXPECT_EQ(decl->kafka.schema_registry_user, "u");
  EXPECT_EQ(decl->kafka.schema_registry_password, "p");
  EXPECT_EQ(decl->kafka.key_columns, std::vector<std::string>{"region"});
  EXPECT_EQ(decl->kafka.key_format, "string");
  EXPECT_TRUE(decl->kafka.exactly_once);
  EXPECT_EQ(decl->kafka.transactional_id, "rill-revenue_out");  // stable across restarts
  EXPECT_EQ(decl->given.size(), options.size());
  EXPECT_EQ(decl->given.front().first, "topic");
}

TEST(PipelineSinks, KafkaKeepsAGivenTransactionalId) {
  auto decl = ReadSink(
      "kafka",
      Opts({{"topic", "o"}, {"bootstrap.servers", "h:1"}, {"transactional_id", "mine"}}),
      "here", "s", "t");
  ASSERT_TRUE(decl.ok()) << decl.status().ToString();
  EXPECT_EQ(decl->kafka.transactional_id, "mine");
  EXPECT_EQ(decl->options.mode, SinkMode::kChangelog);  // the default
}

TEST(PipelineSinks, PostgresTakesItsOptionsAndUpsertsByDefault) {
  auto decl = ReadSink("postgres",
                       Opts({{"dsn", "host=127.0.0.1 dbname=app"},
                             {"target_table", "public.orders"},
                             {"create_table", "yes"},
                             {"connect_timeout_seconds", "3.5"}}),
                       "here", "pg", "orders");
  ASSERT_TRUE(decl.ok()) << decl.status().ToString();
  EXPECT_EQ(decl->options.mode, SinkMode::kUpsert);
  EXPECT_EQ(decl->postgres.dsn, "host=127.0.0.1 dbname=app");
  EXPECT_EQ(decl->postgres.target_table, "public.orders");
  EXPECT_TRUE(decl->postgres.create_table);
  EXPECT_EQ(decl->postgres.connect_timeout_seconds, 3.5);
  EXPECT_EQ(decl->postgres.sink_name, "pg");
  ASSERT_TRUE(decl->postgres.mode.has_value());
  EXPECT_EQ(*decl->postgres.mode, SinkMode::kUpsert);
}

TEST(PipelineSinks, FileTakesItsOptionsAndTheCommonOnes) {
  // name and table among the options, as the pipeline file gives them.
  auto decl = ReadSink("file",
                       Opts({{"name", "files"},
                             {"table", "orders"},
                             {"mode", "append"},
                             {"interval_seconds", "0.5"},
                             {"max_batch_rows", "10"},
                             {"on_error", "drop"},
                             {"retry_initial_seconds", "0.2"},
                             {"retry_max_seconds", "3"},
                             {"max_backlog_rows", "50"},
                             {"emit_retention_deletes", "on"},
                             {"path", "out/orders"},
                             {"format", "csv"},
                             {"partition_by", "region, day"},
                             {"roll_rows", "7"},
                             {"roll_seconds", "2.5"}}),
                       "sinks[0]");
  ASSERT_TRUE(decl.ok()) << decl.status().ToString();
  const SinkOptions& o = decl->options;
  EXPECT_EQ(o.name, "files");
  EXPECT_EQ(o.table, "orders");
  EXPECT_EQ(o.mode, SinkMode::kAppend);
  EXPECT_EQ(o.interval_seconds, 0.5);
  EXPECT_EQ(o.max_batch_rows, 10);
  EXPECT_EQ(o.on_error, SinkErrorPolicy::kDrop);
  EXPECT_EQ(o.retry_initial_seconds, 0.2);
  EXPECT_EQ(o.retry_max_seconds, 3);
  EXPECT_EQ(o.max_backlog_rows, 50);
  EXPECT_TRUE(o.emit_retention_deletes);
  EXPECT_EQ(decl->file.path, "out/orders");
  EXPECT_EQ(decl->file.format, "csv");
  EXPECT_EQ(decl->file.partition_by, (std::vector<std::string>{"region", "day"}));
  EXPECT_EQ(decl->file.roll_rows, 7);
  EXPECT_EQ(decl->file.roll_seconds, 2.5);
}

TEST(PipelineSinks, RefusesAnUnknownKindNamingTheKinds) {
  ExpectRefused("s3", Opts({}), kSqlStateBadValue,
                {"CREATE SINK s", "'s3'", "kafka, postgres, file"});
  EXPECT_EQ(SinkOptionTable("s3"), nullptr);
  for (const std::string& kind : SinkKinds()) EXPECT_NE(SinkOptionTable(kind), nullptr);
}

TEST(PipelineSinks, RefusesUnknownAndMissingOptionsWith42601) {
  ExpectRefused(
      "file", Opts({{"path", "x"}, {"topic", "y"}}), kSqlStateSyntax,
      {"option 'topic'", "unknown option 'topic' of a file sink", "roll_seconds"});
  // A dotted name is a librdkafka property only for kafka.
  ExpectRefused("file", Opts({{"path", "x"}, {"bootstrap.servers", "h"}}),
                kSqlStateSyntax, {"unknown option 'bootstrap.servers'"});
  ExpectRefused("kafka", Opts({{"bootstrap.servers", "h"}}), kSqlStateSyntax,
                {"CREATE SINK s", "missing required option 'topic' of a kafka sink"});
  ExpectRefused("kafka", Opts({{"topic", "o"}}), kSqlStateSyntax,
                {"missing required option 'bootstrap.servers'"});
  ExpectRefused("kafka", Opts({{"topic", "o"}, {"acks", "all"}}), kSqlStateSyntax,
                {"unknown option 'acks'"});
  ExpectRefused("postgres", Opts({{"dsn", "d"}}), kSqlStateSyntax,
                {"missing required option 'target_table'"});
  ExpectRefused("file", Opts({}), kSqlStateSyntax, {"missing required option 'path'"});
  ExpectRefused("file", Opts({{"path", "x"}}), kSqlStateSyntax,
                {"missing required option 'name'"}, /*name=*/"");
  ExpectRefused("file", Opts({{"path", "x"}}), kSqlStateSyntax,
                {"missing required option 'table'"}, "s", /*table=*/"");
  ExpectRefused("file", Opts({{"path", "x"}, {"path", "y"}}), kSqlStateSyntax,
                {"given twice"});
  // The statement's FROM and a `table` option must agree.
  ExpectRefused("file", Opts({{"path", "x"}, {"table", "u"}}), kSqlStateSyntax,
                {"option 'table'", "'u'", "'t'"});
}

TEST(PipelineSinks, RefusesBadValuesWith22023NamingTheOption) {
  ExpectRefused("file", Opts({{"path", "x"}, {"interval_seconds", "soon"}}),
                kSqlStateBadValue, {"option 'interval_seconds'", "expected a number"});
  ExpectRefused("file", Opts({{"path", "x"}, {"interval_seconds", "0"}}),
                kSqlStateBadValue, {"option 'interval_seconds': must be positive"});
  ExpectRefused("file", Opts({{"path", "x"}, {"max_batch_rows", "-1"}}),
                kSqlStateBadValue, {"option 'max_batch_rows': must not be negative"});
  ExpectRefused("file", Opts({{"path", "x"}, {"max_backlog_rows", "0"}}),
                kSqlStateBadValue, {"option 'max_backlog_rows': must be positive"});
  ExpectRefused("file", Opts({{"path", "x"}, {"mode", "merge"}}), kSqlStateBadValue,
                {"option 'mode'", "merge"});
  ExpectRefused("file", Opts({{"path", "x"}, {"on_error", "skip"}}), kSqlStateBadValue,
                {"option 'on_error'", "skip"});
  ExpectRefused("file", Opts({{"path", "x"}, {"format", "xlsx"}}), kSqlStateBadValue,
                {"option 'format'", "expected parquet, ndjson, csv or arrow"});
  ExpectRefused("file", Opts({{"path", "x"}, {"roll_rows", "0"}}), kSqlStateBadValue,
                {"option 'roll_rows'", "at least 1"});
  ExpectRefused("file", Opts({{"path", ""}}), kSqlStateBadValue,
                {"option 'path': must not be empty"});
  ExpectRefused("file", Opts({{"path", "x"}, {"emit_retention_deletes", "maybe"}}),
                kSqlStateBadValue, {"option 'emit_retention_deletes'", "true or false"});
  ExpectRefused("kafka",
                Opts({{"topic", "o"}, {"bootstrap.servers", "h"}, {"format", "xml"}}),
                kSqlStateBadValue, {"expected json or avro"});
  ExpectRefused(
      "kafka",
      Opts({{"topic", "o"}, {"bootstrap.servers", "h"}, {"key_format", "bytes"}}),
      kSqlStateBadValue, {"expected json or string"});
  ExpectRefused(
      "postgres",
      Opts({{"dsn", "d"}, {"target_table", "x"}, {"connect_timeout_seconds", "-2"}}),
      kSqlStateBadValue, {"option 'connect_timeout_seconds': must be positive"});
}

TEST(PipelineSinks, RefusesOptionsThatDoNotGoTogether) {
  ExpectRefused("file", Opts({{"path", "x"}, {"mode", "upsert"}}), kSqlStateBadValue,
                {"option 'mode'", "a file sink cannot upsert"});
  ExpectRefused(
      "file",
      Opts({{"path", "x"}, {"retry_initial_seconds", "5"}, {"retry_max_seconds", "1"}}),
      kSqlStateBadValue,
      {"option 'retry_max_seconds'", "must not be below retry_initial_seconds"});
  ExpectRefused("kafka",
                Opts({{"topic", "o"}, {"bootstrap.servers", "h"}, {"format", "avro"}}),
                kSqlStateBadValue, {"option 'format'", "avro needs schema_registry_url"});
  ExpectRefused("kafka",
                Opts({{"topic", "o"},
                      {"bootstrap.servers", "h"},
                      {"key_columns", "a, b"},
                      {"key_format", "string"}}),
                kSqlStateBadValue, {"option 'key_format'", "needs one key column"});
  ExpectRefused("kafka", Opts({{"topic", "o"}, {"bootstrap.servers", ""}}),
                kSqlStateSyntax, {"bootstrap.servers"});
}

TEST(PipelineSinks, MarkdownListsEveryKindAndOption) {
  const std::string md = SinkOptionsMarkdown();
  for (const std::string& kind : SinkKinds()) {
    EXPECT_NE(md.find("#### `type: " + kind + "`"), std::string::npos) << kind;
    for (const auto& d : SinkOptionTable(kind)->defs) {
      EXPECT_NE(md.find("`" + d.name + "`"), std::string::npos) << d.name;
    }
  }
  EXPECT_NE(md.find("| `topic` (required) | string |"), std::string::npos) << md;
  EXPECT_NE(md.find("goes into `kafka_config`"), std::string::npos);
}

class StartSinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() /
            ("rill_pipeline_sinks_" + std::to_string(::getpid())))
               .string();
    fs::remove_all(dir_);
    engine_ = Engine::Make().ValueOrDie();
    TableOptions keyed;
    keyed.primary_key = {"id"};
    table_ = engine_->RegisterTable("t", Schema(), keyed).ValueOrDie();
    TableOptions append;
    append.mode = TableMode::kAppend;
    RetentionPolicy retention;
    retention.max_rows = 100;
    append.retention = retention;
    ASSERT_TRUE(engine_->RegisterTable("log", Schema(), append).ok());
  }
  void TearDown() override {
    engine_.reset();  // stops the sinks before their directory goes
    fs::remove_all(dir_);
  }

  static std::shared_ptr<arrow::Schema> Schema() {
    return arrow::schema({arrow::field("id", arrow::int64(), /*nullable=*/false),
                          arrow::field("region", arrow::utf8())});
  }

  SinkDecl FileDecl(std::initializer_list<std::pair<const char*, const char*>> extra,
                    const std::string& name = "files", const std::string& table = "t") {
    Options options = Opts({{"path", dir_.c_str()}, {"format", "ndjson"}});
    for (const auto& [k, v] : extra) {
      options.emplace_back(k, OptionValue::Scalar(v, std::string("option '") + k + "'"));
    }
    auto decl = ReadSink("file", options, "CREATE SINK " + name, name, table);
    EXPECT_TRUE(decl.ok()) << decl.status().ToString();
    return *decl;
  }

  std::string dir_;
  std::unique_ptr<Engine> engine_;
  std::shared_ptr<LiveTable> table_;
};

TEST_F(StartSinkTest, AFileSinkWritesTheTablesChangesIntoFiles) {
  auto sink = StartSink(FileDecl({{"partition_by", "region"}}), engine_.get());
  ASSERT_TRUE(sink.ok()) << sink.status().ToString();
  EXPECT_EQ((*sink)->name(), "files");
  EXPECT_EQ((*sink)->type(), std::string("file"));
  ASSERT_NE(SinkSet::For(engine_.get()).Find("files"), nullptr);

  arrow::Int64Builder id;
  arrow::StringBuilder region;
  ASSERT_TRUE(id.AppendValues({1, 2}).ok());
  ASSERT_TRUE(region.AppendValues({"eu", "us"}).ok());
  auto batch = arrow::RecordBatch::Make(
      Schema(), 2, {id.Finish().ValueOrDie(), region.Finish().ValueOrDie()});
  ASSERT_TRUE(table_->Write(batch).ok());
  ASSERT_TRUE((*sink)->Flush(10).ok());
  EXPECT_EQ((*sink)->stats().rows_written, 2);

  // One ndjson file per Hive partition, holding that partition's row.
  std::map<std::string, std::string> contents;  // partition directory -> file text
  for (const auto& entry : fs::recursive_directory_iterator(dir_)) {
    const std::string file = entry.path().filename().string();
    if (!entry.is_regular_file() || file.rfind("part-", 0) != 0) continue;
    EXPECT_EQ(entry.path().extension(), ".ndjson");
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    contents[entry.path().parent_path().filename().string()] += text.str();
  }
  ASSERT_EQ(contents.size(), 2u);
  EXPECT_NE(contents["region=eu"].find("\"id\":1"), std::string::npos)
      << contents["region=eu"];
  EXPECT_EQ(contents["region=eu"].find("\"id\":2"), std::string::npos);
  EXPECT_NE(contents["region=us"].find("\"id\":2"), std::string::npos)
      << contents["region=us"];
}

TEST_F(StartSinkTest, RefusesWhatTheEngineCannotRunWithItsSqlState) {
  auto refused = [&](const SinkDecl& decl, const char* sqlstate,
                     const std::string& part) {
    auto sink = StartSink(decl, engine_.get());
    ASSERT_FALSE(sink.ok());
    EXPECT_EQ(SqlStateOf(sink.status()), sqlstate) << sink.status().ToString();
    EXPECT_NE(sink.status().message().find(part), std::string::npos)
        << sink.status().message();
  };
  refused(FileDecl({}, "a", "nope"), kSqlStateUndefined, "table 'nope' does not exist");
  refused(FileDecl({{"partition_by", "zone"}}), "42703", "no column 'zone'");
  auto keyless =
      ReadSink("postgres", Opts({{"dsn", "host=127.0.0.1"}, {"target_table", "x"}}),
               "here", "pg", "log");
  ASSERT_TRUE(keyless.ok()) << keyless.status().ToString();
  refused(*keyless, kSqlStateBadValue, "mode upsert needs a table with a primary key");
  EXPECT_TRUE(SinkSet::For(engine_.get()).List().empty());  // nothing half-started

  ASSERT_TRUE(StartSink(FileDecl({}), engine_.get()).ok());
  refused(FileDecl({}), kSqlStateDuplicate, "sink 'files' exists");
  EXPECT_EQ(SinkSet::For(engine_.get()).List().size(), 1u);
}

}  // namespace
}  // namespace rill::pipeline
