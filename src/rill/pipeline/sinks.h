// Declared sinks: one option table per kind, shared by the pipeline file's
// `sinks:` and the DDL's `CREATE SINK name FROM table WITH (connector = ...)`.
//
// Kinds and their options (the names of rills.sinks and sink/*.h):
//   common:   name, table (the table whose changes are written; the DDL's
//             name and FROM), mode (changelog | upsert | append; postgres:
//             upsert by default), interval_seconds, max_batch_rows, on_error
//             (retry | drop), retry_initial_seconds, retry_max_seconds,
//             max_backlog_rows, emit_retention_deletes
//   kafka:    topic (required), kafka_config (and every dotted name, e.g.
//             "bootstrap.servers", which is required), format (json | avro),
//             key_columns, key_format (json | string), exactly_once,
//             transactional_id (default rill-<name>), schema_registry_url
//             (required by avro), schema_registry_user, schema_registry_password
//   postgres: dsn (required), target_table (required), create_table,
//             connect_timeout_seconds
//   file:     path (required), format (parquet | ndjson | csv | arrow),
//             partition_by, roll_rows, roll_seconds; never mode upsert
//
// ReadSink checks everything a declaration alone can tell (names, types,
// ranges, required options, options that need each other); StartSink checks
// what needs the engine (the table exists, the columns named are its, upsert
// has a key) and starts the sink.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "rill/common/status.h"
#include "rill/pipeline/options.h"
#include "rill/sink/file_sink.h"
#include "rill/sink/kafka_sink.h"
#include "rill/sink/postgres_sink.h"
#include "rill/sink/sink.h"
#include "rill/sink/sink_set.h"

namespace rill::pipeline {

/// One declared sink: its kind and the options of that kind.
struct SinkDecl {
  std::string kind;              ///< "kafka", "postgres" or "file"
  SinkOptions options;           ///< options.name and options.table (the FROM table) set
  KafkaSinkOptions kafka;        ///< kind "kafka"
  PostgresSinkOptions postgres;  ///< kind "postgres" (sink_name, mode: from options)
  FileSinkOptions file;          ///< kind "file"
  Options given;                 ///< the options as given (for dump and SHOW SINKS)
};

/// The kinds the table knows, in the docs' order: kafka, postgres, file.
const std::vector<std::string>& SinkKinds();

/// The option table of `kind`; null for an unknown kind.
const OptionTable<SinkDecl>* SinkOptionTable(std::string_view kind);

/// Read a declaration of `kind`. `name` / `table` may be given here (DDL: the
/// statement's name and FROM table) or among the options (YAML: `name`,
/// `table`); both at once must agree. `options` does not hold the kind (the
/// YAML's `type`, the DDL's `connector`). `where` prefixes messages about the
/// whole declaration; a message about one option carries that option's place
/// (OptionValue::where). Errors carry SQLSTATEs (options.h): an unknown kind is
/// 22023 naming the kinds; an unknown or missing option 42601; a bad value, or
/// options that do not go together, 22023. Any thread.
Result<SinkDecl> ReadSink(std::string_view kind, const Options& options,
                          const std::string& where, std::string name = "",
                          std::string table = "");

/// Every kind's options as Markdown (a heading and a table per kind), like
/// SourceOptionsMarkdown(), for the docs.
std::string SinkOptionsMarkdown();

/// Make the writer of `decl` and add the sink to SinkSet::For(engine), which
/// starts it. Refused, with nothing started: a table that does not exist
/// (42704), a sink of that name (42710), key_columns / partition_by naming no
/// column of the table (42703), mode upsert on a table without a primary key
/// and options the writer refuses (22023). Any thread but the tick's
/// (SinkSet::Add).
Result<std::shared_ptr<Sink>> StartSink(const SinkDecl& decl, Engine* engine);

}  // namespace rill::pipeline
