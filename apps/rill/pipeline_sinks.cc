// The `sinks:` section of a pipeline file: a table's changes written on to
// Kafka, PostgreSQL or files, with the options of rills.sinks (sink/*.h), read
// by the option table CREATE SINK shares (src/rill/pipeline/sinks.h).
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
#include "rill/pipeline/sinks.h"
#include "rill/sink/sink_set.h"

namespace rill::app::pipeline_internal {

// The options are read by the sink kinds' option table (src/rill/pipeline/
// sinks.h), the one CREATE SINK uses too; what needs the rest of the file (the
// table is declared or a task's output, its key and columns, unique names) is
// checked here.
Status Parser::ParseSink(const At& at, Pipeline* p) const {
  if (!at.node.IsMap()) return Error(at, "expected a mapping");
  RILL_ASSIGN_OR_RAISE(std::string type, RequiredStr(at, "type"));
  if (pipeline::SinkOptionTable(type) == nullptr) {
    return Error(Child(at, "type"), "expected kafka, postgres or file, got '", type, "'");
  }
  pipeline::Options options;
  for (const auto& kv : at.node) {
    const std::string key = kv.first.Scalar();
    if (key == "type") continue;
    options.emplace_back(key, ToOption(At{kv.second, at.path + "." + key}));
  }
  RILL_ASSIGN_OR_RAISE(pipeline::SinkDecl decl,
                       pipeline::ReadSink(type, options, Ref(at).ToString()));
  SinkSpec spec{std::move(decl), Ref(at)};
  const SinkOptions& o = spec.options;
  for (const SinkSpec& other : p->sinks) {
    if (other.options.name == o.name) {
      return Error(Child(at, "name"), "sink '", o.name,
                   "' is declared twice (first at line ", other.where.line, ")");
    }
  }
  // The table: declared (its key and columns are known here) or a task's output.
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
  if (declared != nullptr && o.mode == SinkMode::kUpsert &&
      declared->options.primary_key.empty()) {
    return Error(Has(at, "mode") ? Child(at, "mode") : at,
                 "mode upsert needs a table with a primary_key; table '", o.table,
                 "' has none (use changelog or append)");
  }
  if (declared != nullptr) {
    const bool file = spec.kind == "file";
    const std::vector<std::string>& columns =
        file ? spec.file.partition_by : spec.kafka.key_columns;
    const char* key = file ? "partition_by" : "key_columns";
    for (const std::string& column : columns) {
      if (declared->schema->GetFieldIndex(column) < 0) {
        return Error(Child(at, key), "unknown column '", column, "' of table '", o.table,
                     "'");
      }
    }
  }
  p->sinks.push_back(std::move(spec));
  return Status::OK();
}

}  // namespace rill::app::pipeline_internal

namespace rill::app {


}  // namespace rill::app
