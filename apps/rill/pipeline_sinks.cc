// The `sinks:` section of a pipeline file: a table's changes written on to
// Kafka, PostgreSQL or files, with the options of rills.sinks (sink/*.h).
//
//   sinks:
//     - name: orders_files
//       type: file                # kafka | postgres | file
//       table: orders             # declared under tables, or a task's output
//       mode: changelog           # changelog | upsert | append
//       interval_seconds: 1       # common: max_batch_rows, on_error (retry | drop),
//                                 # retry_initial_seconds, retry_max_seconds,
//                                 # max_backlog_rows, emit_retention_deletes
//       path: out/orders          # file: format, partition_by, roll_rows, roll_seconds
//     - name: orders_topic
//       type: kafka
//       table: orders
//       topic: orders-out         # kafka: kafka_config, format, key_columns,
//       kafka_config: {bootstrap.servers: "127.0.0.1:9092"}  # key_format, exactly_once
//     - name: orders_pg
//       type: postgres            # postgres: dsn, target_table, create_table,
//       table: orders             # connect_timeout_seconds
//       dsn: "host=127.0.0.1 port=5432 dbname=app"
//       target_table: public.orders
#include <string>
#include <vector>

#include <arrow/type.h>

#include "pipeline_parser_internal.h"
#include "rill/sink/sink_set.h"

namespace rill::app::pipeline_internal {

namespace {

const std::vector<std::string> kCommonKeys = {
    "name", "type", "table", "mode", "interval_seconds", "max_batch_rows", "on_error",
    "retry_initial_seconds", "retry_max_seconds", "max_backlog_rows", "emit_retention_deletes"};

std::vector<std::string> KeysOf(const std::string& type) {
  std::vector<std::string> keys = kCommonKeys;
  std::vector<std::string> own;
  if (type == "kafka") {
    own = {"topic",      "kafka_config", "format",          "key_columns",
           "key_format", "exactly_once", "transactional_id", "schema_registry_url",
           "schema_registry_user", "schema_registry_password"};
  } else if (type == "postgres") {
    own = {"dsn", "target_table", "create_table", "connect_timeout_seconds"};
  } else {
    own = {"path", "format", "partition_by", "roll_rows", "roll_seconds"};
  }
  keys.insert(keys.end(), own.begin(), own.end());
  return keys;
}

}  // namespace

Status Parser::ParseSinkCommon(const At& at, SinkOptions* o) const {
  if (Has(at, "mode")) {
    At v = Child(at, "mode");
    RILL_ASSIGN_OR_RAISE(std::string text, Str(v));
    auto mode = ParseSinkMode(text);
    if (!mode.ok()) return Ref(v).Wrap(mode.status());
    o->mode = *mode;
  }
  if (Has(at, "on_error")) {
    At v = Child(at, "on_error");
    RILL_ASSIGN_OR_RAISE(std::string text, Str(v));
    auto policy = ParseSinkErrorPolicy(text);
    if (!policy.ok()) return Ref(v).Wrap(policy.status());
    o->on_error = *policy;
  }
  struct {
    const char* key;
    double* value;
  } positive[] = {{"interval_seconds", &o->interval_seconds},
                  {"retry_initial_seconds", &o->retry_initial_seconds},
                  {"retry_max_seconds", &o->retry_max_seconds}};
  for (auto& n : positive) {
    if (Has(at, n.key)) {
      At v = Child(at, n.key);
      RILL_ASSIGN_OR_RAISE(*n.value, Num(v));
      if (*n.value <= 0) return Error(v, "must be positive");
    }
  }
  if (o->retry_max_seconds < o->retry_initial_seconds) {
    return Error(Has(at, "retry_max_seconds") ? Child(at, "retry_max_seconds") : at,
                 "retry_max_seconds must not be below retry_initial_seconds");
  }
  struct {
    const char* key;
    int64_t* value;
  } counts[] = {{"max_batch_rows", &o->max_batch_rows},
                {"max_backlog_rows", &o->max_backlog_rows}};
  for (auto& n : counts) {
    if (Has(at, n.key)) {
      At v = Child(at, n.key);
      RILL_ASSIGN_OR_RAISE(*n.value, Int(v));
      if (*n.value < 0) return Error(v, "must not be negative");
    }
  }
  if (Has(at, "emit_retention_deletes")) {
    RILL_ASSIGN_OR_RAISE(o->emit_retention_deletes, Bool(Child(at, "emit_retention_deletes")));
  }
  return Status::OK();
}

Status Parser::ParseKafkaSink(const At& at, KafkaSinkOptions* o) const {
  RILL_ASSIGN_OR_RAISE(o->topic, RequiredStr(at, "topic"));
  if (!Has(at, "kafka_config")) {
    return Error(at, "missing required key 'kafka_config' (with bootstrap.servers)");
  }
  At config = Child(at, "kafka_config");
  if (!config.node.IsMap()) return Error(config, "expected a mapping of property: value");
  for (const auto& kv : config.node) {
    At v{kv.second, config.path + "." + kv.first.Scalar()};
    RILL_ASSIGN_OR_RAISE(std::string value, Str(v));
    o->kafka_config[kv.first.Scalar()] = value;
  }
  if (o->kafka_config["bootstrap.servers"].empty()) {
    return Error(config, "must set 'bootstrap.servers'");
  }
  if (Has(at, "format")) {
    At v = Child(at, "format");
    RILL_ASSIGN_OR_RAISE(o->format, Str(v));
    if (o->format != "json" && o->format != "avro") {
      return Error(v, "expected json or avro, got '", o->format, "'");
    }
  }
  for (auto [key, field] : {std::pair{"schema_registry_url", &o->schema_registry_url},
                            std::pair{"schema_registry_user", &o->schema_registry_user},
                            std::pair{"schema_registry_password", &o->schema_registry_password}}) {
    if (Has(at, key)) {
      RILL_ASSIGN_OR_RAISE(*field, RequiredStr(at, key));
    }
  }
  if (o->format == "avro" && o->schema_registry_url.empty()) {
    return Error(Child(at, "format"), "avro needs schema_registry_url (the registry the schema "
                                      "is registered in)");
  }
  if (Has(at, "key_columns")) {
    RILL_ASSIGN_OR_RAISE(o->key_columns, Names(Child(at, "key_columns")));
  }
  if (Has(at, "key_format")) {
    At v = Child(at, "key_format");
    RILL_ASSIGN_OR_RAISE(o->key_format, Str(v));
    if (o->key_format != "json" && o->key_format != "string") {
      return Error(v, "expected json or string, got '", o->key_format, "'");
    }
    if (o->key_format == "string" && o->key_columns.size() > 1) {
      return Error(v, "'string' needs one key column, key_columns has ",
                   o->key_columns.size());
    }
  }
  if (Has(at, "exactly_once")) {
    RILL_ASSIGN_OR_RAISE(o->exactly_once, Bool(Child(at, "exactly_once")));
  }
  if (Has(at, "transactional_id")) {
    RILL_ASSIGN_OR_RAISE(o->transactional_id, RequiredStr(at, "transactional_id"));
  }
  return Status::OK();
}

Status Parser::ParseFileSink(const At& at, FileSinkOptions* o) const {
  RILL_ASSIGN_OR_RAISE(o->path, RequiredStr(at, "path"));
  if (Has(at, "format")) {
    At v = Child(at, "format");
    RILL_ASSIGN_OR_RAISE(o->format, Str(v));
    if (o->format != "parquet" && o->format != "ndjson" && o->format != "csv" &&
        o->format != "arrow") {
      return Error(v, "expected parquet, ndjson, csv or arrow, got '", o->format, "'");
    }
  }
  if (Has(at, "partition_by")) {
    RILL_ASSIGN_OR_RAISE(o->partition_by, Names(Child(at, "partition_by")));
  }
  if (Has(at, "roll_rows")) {
    At v = Child(at, "roll_rows");
    RILL_ASSIGN_OR_RAISE(o->roll_rows, Int(v));
    if (o->roll_rows < 1) return Error(v, "must be at least 1");
  }
  if (Has(at, "roll_seconds")) {
    At v = Child(at, "roll_seconds");
    RILL_ASSIGN_OR_RAISE(o->roll_seconds, Num(v));
    if (o->roll_seconds <= 0) return Error(v, "must be positive");
  }
  return Status::OK();
}

Status Parser::ParseSink(const At& at, Pipeline* p) const {
  if (!at.node.IsMap()) return Error(at, "expected a mapping");
  SinkSpec spec;
  spec.where = Ref(at);
  RILL_ASSIGN_OR_RAISE(spec.type, RequiredStr(at, "type"));
  if (spec.type != "kafka" && spec.type != "postgres" && spec.type != "file") {
    return Error(Child(at, "type"), "expected kafka, postgres or file, got '", spec.type, "'");
  }
  RILL_RETURN_NOT_OK(Keys(at, KeysOf(spec.type)));
  SinkOptions& o = spec.options;
  RILL_ASSIGN_OR_RAISE(o.name, RequiredStr(at, "name"));
  for (const SinkSpec& other : p->sinks) {
    if (other.options.name == o.name) {
      return Error(Child(at, "name"), "sink '", o.name, "' is declared twice (first at line ",
                   other.where.line, ")");
    }
  }
  RILL_ASSIGN_OR_RAISE(o.table, RequiredStr(at, "table"));
  // The table: declared (its key and mode are known here) or a task's output.
  const TableSpec* declared = nullptr;
  for (const TableSpec& t : p->tables) {
    if (t.name == o.table) declared = &t;
  }
  bool output = false;
  for (const SqlTaskSpec& t : p->sql_tasks) output = output || t.output == o.table;
  for (const StreamTaskSpec& t : p->stream_tasks) output = output || t.output == o.table;
  for (const JoinTaskSpec& t : p->join_tasks) {
    output = output || t.options.output_table == o.table;
  }
  for (const WindowTaskSpec& t : p->window_tasks) {
    output = output || t.options.output_table == o.table;
  }
  if (declared == nullptr && !output) {
    return Error(Child(at, "table"), "unknown table '", o.table,
                 "' (declare it under 'tables' or as a task's or window's output)");
  }
  if (spec.type == "postgres") o.mode = SinkMode::kUpsert;  // rills.sinks.PostgresSink's default
  RILL_RETURN_NOT_OK(ParseSinkCommon(at, &o));
  if (declared != nullptr && o.mode == SinkMode::kUpsert &&
      declared->options.primary_key.empty()) {
    return Error(Has(at, "mode") ? Child(at, "mode") : at, "mode upsert needs a table with a ",
                 "primary_key; table '", o.table, "' has none (use changelog or append)");
  }
  if (spec.type == "file" && o.mode == SinkMode::kUpsert) {
    return Error(Child(at, "mode"), "a file sink cannot upsert (a file cannot replace a key's ",
                 "earlier row); use changelog or append");
  }
  if (spec.type == "kafka") {
    RILL_RETURN_NOT_OK(ParseKafkaSink(at, &spec.kafka));
    // Stable across restarts (exactly_once fences an earlier producer of the id).
    if (spec.kafka.transactional_id.empty()) spec.kafka.transactional_id = "rill-" + o.name;
  } else if (spec.type == "postgres") {
    RILL_ASSIGN_OR_RAISE(spec.postgres.dsn, RequiredStr(at, "dsn"));
    RILL_ASSIGN_OR_RAISE(spec.postgres.target_table, RequiredStr(at, "target_table"));
    if (Has(at, "create_table")) {
      RILL_ASSIGN_OR_RAISE(spec.postgres.create_table, Bool(Child(at, "create_table")));
    }
    if (Has(at, "connect_timeout_seconds")) {
      At v = Child(at, "connect_timeout_seconds");
      RILL_ASSIGN_OR_RAISE(spec.postgres.connect_timeout_seconds, Num(v));
      if (spec.postgres.connect_timeout_seconds <= 0) return Error(v, "must be positive");
    }
    spec.postgres.sink_name = o.name;
    spec.postgres.mode = o.mode;
  } else {
    RILL_RETURN_NOT_OK(ParseFileSink(at, &spec.file));
  }
  if (declared != nullptr) {
    const std::vector<std::string>& columns =
        spec.type == "file" ? spec.file.partition_by : spec.kafka.key_columns;
    const char* key = spec.type == "file" ? "partition_by" : "key_columns";
    for (const std::string& column : columns) {
      if (declared->schema->GetFieldIndex(column) < 0) {
        return Error(Child(at, key), "unknown column '", column, "' of table '", o.table, "'");
      }
    }
  }
  p->sinks.push_back(std::move(spec));
  return Status::OK();
}

}  // namespace rill::app::pipeline_internal

namespace rill::app {

namespace {

Result<std::unique_ptr<SinkWriter>> MakeWriter(const SinkSpec& spec) {
  if (spec.type == "kafka") return MakeKafkaSinkWriter(spec.kafka);
  if (spec.type == "postgres") return MakePostgresSinkWriter(spec.postgres);
  return MakeFileSinkWriter(spec.file);
}

}  // namespace

Result<int> AddPendingSinks(const Pipeline& pipeline, Engine& engine) {
  if (pipeline.sinks.empty()) return 0;
  SinkSet& sinks = SinkSet::For(&engine);
  int waiting = 0;
  for (const SinkSpec& spec : pipeline.sinks) {
    if (sinks.Find(spec.options.name) != nullptr) continue;
    if (!engine.GetTable(spec.options.table).ok()) {
      ++waiting;  // a task's output, before the task's first run
      continue;
    }
    auto writer = MakeWriter(spec);
    RILL_RETURN_NOT_OK(spec.where.Wrap(writer.status()));
    RILL_RETURN_NOT_OK(
        spec.where.Wrap(sinks.Add(spec.options, std::move(writer).ValueUnsafe()).status()));
  }
  return waiting;
}

}  // namespace rill::app
