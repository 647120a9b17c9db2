// The declared sources' option tables (src/rill/pipeline/sources.h): every
// kind reads the Python class's option names, with the checks and SQLSTATEs
// the YAML parser and the DDL share.
#include "rill/pipeline/sources.h"

#include <string>

#include <gtest/gtest.h>

#include "pipeline/options_test_util.h"

namespace rill::pipeline {
namespace {

void ExpectRefused(std::string_view kind, const Options& options, const char* sqlstate,
                   std::vector<std::string> parts, std::string target_table = "t") {
  auto decl = ReadSource(kind, options, "CREATE SOURCE s", target_table);
  ASSERT_FALSE(decl.ok()) << kind;
  ExpectRefusedWith(decl.status(), sqlstate, parts);
}

TEST(PipelineSources, KafkaTakesThePythonClassesOptionsAndDottedProperties) {
  auto decl = ReadSource("kafka",
                         Opts({{"topics", "orders, refunds"},
                               {"bootstrap.servers", "127.0.0.1:9092"},
                               {"group.id", "rill"},
                               {"format", "debezium"},
                               {"ts_ms_column", "ts"},
                               {"start", "earliest"},
                               {"on_overflow", "error"},
                               {"max_buffer_records", "500"},
                               {"key_columns", "id"},
                               {"metadata_columns", "true"}}),
                         "here", "orders");
  ASSERT_TRUE(decl.ok()) << decl.status().ToString();
  EXPECT_EQ(decl->name, "orders");
  EXPECT_EQ(decl->target_table, "orders");
  EXPECT_EQ(decl->kafka.topics, (std::vector<std::string>{"orders", "refunds"}));
  EXPECT_EQ(decl->kafka.config.at("bootstrap.servers"), "127.0.0.1:9092");
  EXPECT_EQ(decl->kafka.config.at("group.id"), "rill");
  EXPECT_EQ(decl->decode.format, JsonFormat::kDebezium);
  EXPECT_EQ(decl->decode.ts_ms_column, "ts");
  EXPECT_EQ(decl->kafka.start, KafkaStart::kEarliest);
  EXPECT_EQ(decl->limits.on_overflow, OverflowPolicy::kError);
  EXPECT_EQ(decl->limits.max_records, 500);
  EXPECT_EQ(decl->kafka.key_columns, (std::vector<std::string>{"id"}));
  EXPECT_TRUE(decl->kafka.metadata_columns);
}

TEST(PipelineSources, AMappingOptionAndItsDottedNamesMerge) {
  Options options = Opts({{"topics", "t"}, {"target_table", "orders"}, {"client.id", "c"}});
  OptionValue config;
  config.kind = OptionValue::Kind::kMap;
  config.items.push_back(OptionValue::Scalar("h:1"));
  config.items.back().key = "bootstrap.servers";
  options.emplace_back("kafka_config", config);
  auto decl = ReadSource("kafka", options, "here");
  ASSERT_TRUE(decl.ok()) << decl.status().ToString();
  EXPECT_EQ(decl->kafka.config.size(), 2u);
  EXPECT_EQ(decl->kafka.config.at("bootstrap.servers"), "h:1");
  EXPECT_EQ(decl->kafka.config.at("client.id"), "c");
}

TEST(PipelineSources, EveryKindReadsItsOptions) {
  auto file = ReadSource("file",
                         Opts({{"watch_path", "/data/in"},
                               {"file_pattern", "*.parquet"},
                               {"tail", "yes"},
                               {"poll_interval_seconds", "0.05"},
                               {"stable_seconds", "0"},
                               {"op_column", "_op"}}),
                         "here", "t");
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ(file->file.watch_path, "/data/in");
  EXPECT_EQ(file->file.file_pattern, "*.parquet");
  EXPECT_TRUE(file->file.tail);
  EXPECT_EQ(file->file.poll_interval_ms, 50);
  EXPECT_EQ(file->file.stable_ms, 0);
  EXPECT_EQ(file->decode.op_column, "_op");

  auto ws = ReadSource("websocket",
                       Opts({{"uri", "ws://127.0.0.1:9/feed"},
                             {"reconnect_initial_seconds", "0.5"},
                             {"tls_verify", "false"},
                             {"unexpected_field_behavior", "error"}}),
                       "here", "t");
  ASSERT_TRUE(ws.ok()) << ws.status().ToString();
  EXPECT_EQ(ws->uri, "ws://127.0.0.1:9/feed");
  EXPECT_DOUBLE_EQ(ws->websocket.reconnect_initial_seconds, 0.5);
  EXPECT_FALSE(ws->websocket.tls_verify);
  EXPECT_EQ(ws->decode.unknown_fields, UnknownFieldPolicy::kReject);

  auto cdc = ReadSource("postgres_cdc",
                        Opts({{"target_table", "orders"},
                              {"dsn", "host=x"},
                              {"table", "public.orders"},
                              {"slot_name", "s"},
                              {"snapshot", "off"},
                              {"numeric_as", "float64"}}),
                        "here");
  ASSERT_TRUE(cdc.ok()) << cdc.status().ToString();
  EXPECT_EQ(cdc->target_table, "orders");
  EXPECT_EQ(cdc->postgres_cdc.table, "public.orders");
  EXPECT_FALSE(cdc->postgres_cdc.snapshot);
  EXPECT_EQ(cdc->limits.on_overflow, OverflowPolicy::kError);

  auto js = ReadSource("json_stream", Opts({{"table", "t"}, {"max_reject_bytes", "16"}}), "here");
  ASSERT_TRUE(js.ok()) << js.status().ToString();
  EXPECT_EQ(js->target_table, "t");
  EXPECT_EQ(js->decode.max_raw_bytes, 16);

  auto mem = ReadSource("memory", Opts({{"table", "t"}, {"op_column", "op"}}), "here");
  ASSERT_TRUE(mem.ok()) << mem.status().ToString();
  EXPECT_EQ(mem->op_column, "op");
}

TEST(PipelineSources, RefusalsNameTheOptionWithTheirSqlState) {
  ExpectRefused("kafka", Opts({{"topics", "t"}, {"topcs", "x"}}), kSqlStateSyntax,
                {"option 'topcs': unknown option 'topcs' of a kafka source", "topics"});
  ExpectRefused("kafka", Opts({{"bootstrap.servers", "h"}}), kSqlStateSyntax,
                {"missing required option 'topics'"});
  ExpectRefused("kafka", Opts({{"topics", "t"}, {"max_buffer_records", "many"}}),
                kSqlStateBadValue, {"option 'max_buffer_records'", "expected an integer"});
  ExpectRefused("kafka", Opts({{"topics", "t"}, {"start", "yesterday"}}), kSqlStateBadValue,
                {"option 'start'", "yesterday"});
  ExpectRefused("kafka", Opts({{"topics", "t"}, {"format", "avro"}}), kSqlStateBadValue,
                {"schema_registry_url", "avro_schema"});
  ExpectRefused("kafka", Opts({{"topics", "t"}, {"topics", "u"}}), kSqlStateSyntax,
                {"given twice"});
  ExpectRefused("kafka", Opts({{"topics", "t"}, {"max_records", "1"}, {"max_buffer_records", "2"}}),
                kSqlStateSyntax, {"given twice", "max_records"});
  ExpectRefused("file", Opts({{"target_table", "t"}}), kSqlStateSyntax,
                {"missing required option 'watch_path' of a file source"});
  ExpectRefused("file", Opts({{"target_table", "t"}, {"watch_path", "/x"}, {"tail", "maybe"}}),
                kSqlStateBadValue, {"option 'tail'", "true or false"});
  ExpectRefused("websocket", Opts({{"target_table", "t"}, {"uri", "ws://h/"},
                                   {"connect_timeout_seconds", "-1"}}),
                kSqlStateBadValue, {"connect_timeout_seconds must be > 0"});
  ExpectRefused("json_stream", Opts({{"target_table", "t"}, {"ts_ms_column", "ts"}}),
                kSqlStateBadValue, {"ts_ms_column needs format = 'debezium'"});
  ExpectRefused("postgres_cdc", Opts({{"target_table", "t"}, {"dsn", "x"}, {"table", "t"}}),
                kSqlStateSyntax, {"missing required option 'slot_name'"});
  ExpectRefused("postgres_cdc",
                Opts({{"target_table", "t"}, {"dsn", "x"}, {"table", "t"}, {"slot_name", "s"},
                      {"on_overflow", "drop_oldest"}}),
                kSqlStateSyntax, {"unknown option 'on_overflow'"});
  ExpectRefused("mqtt", Opts({}), kSqlStateBadValue, {"unknown connector 'mqtt'", "kafka"});
  ExpectRefused("memory", Opts({}), kSqlStateSyntax,
                {"CREATE SOURCE s: missing required option 'target_table'"}, "");
}

TEST(PipelineSources, MakesTheDeclaredConnector) {
  auto decl = ReadSource("json_stream", Opts({{"name", "in"}, {"table", "t"}}), "here");
  ASSERT_TRUE(decl.ok());
  auto c = MakeSource(*decl, nullptr);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ((*c)->name(), "in");
  EXPECT_EQ((*c)->target_table(), "t");
  EXPECT_NE(std::dynamic_pointer_cast<JsonStreamConnector>(*c), nullptr);

  auto kafka = ReadSource("kafka", Opts({{"topics", "a"}, {"table", "t"}}), "here");
  ASSERT_TRUE(kafka.ok());
  auto k = MakeSource(*kafka, nullptr);
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  EXPECT_NE(std::dynamic_pointer_cast<KafkaConnector>(*k), nullptr);
}

TEST(PipelineSources, TheTablesListEveryKindsOptions) {
  for (const std::string& kind : SourceKinds()) {
    const auto* table = SourceOptionTable(kind);
    ASSERT_NE(table, nullptr) << kind;
    EXPECT_NE(OptionNames(*table).find("target_table"), std::string::npos) << kind;
    for (const auto& def : table->defs) {
      EXPECT_FALSE(def.description.empty()) << kind << "." << def.name;
    }
  }
  EXPECT_EQ(SourceOptionTable("generator"), nullptr);
}

}  // namespace
}  // namespace rill::pipeline
