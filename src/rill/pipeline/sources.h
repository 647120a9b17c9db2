// Declared sources (connectors): one option table per kind, shared by the
// pipeline file's `connectors:` and the DDL's `CREATE SOURCE ... WITH (...)`.
//
// Kinds and their options (each the keyword argument of the Python class of
// the same kind, rills.connectors.*):
//   common:       name, target_table (the YAML's `table`), max_buffer_records
//                 (max_records), max_buffer_bytes (max_bytes), on_overflow
//                 (drop_oldest | drop_newest | error)
//   decoding:     format (json | debezium; kafka: also avro), op_column,
//                 ts_ms_column, unexpected_field_behavior (ignore | error)
//                 — for json_stream, file, websocket and kafka
//   memory:       op_column
//   json_stream:  block_size, max_reject_bytes (rows pushed over HTTP ingest,
//                 POST /api/v1/ingest/{table})
//   file:         watch_path (required), file_pattern, delete_after_process,
//                 tail, poll_interval_seconds, stable_seconds, use_inotify
//   websocket:    uri (required), headers, reconnect_initial_seconds,
//                 reconnect_max_seconds, connect_timeout_seconds,
//                 max_message_bytes, tls_verify, ca_file
//   kafka:        topics (required), kafka_config (and every dotted name, e.g.
//                 "bootstrap.servers"), start (committed | earliest | latest |
//                 timestamp), start_timestamp_ms, metadata_columns,
//                 key_columns, key_format (json | string),
//                 schema_registry_url, schema_registry_user,
//                 schema_registry_password, avro_schema
//   postgres_cdc: dsn, table (the source table), slot_name (required),
//                 publication, snapshot, numeric_as (decimal | float64),
//                 status_interval_ms, lag_alert_bytes (target_table only: the
//                 CDC's `table` is PostgreSQL's; max_buffer_records only)
// The generator (apps/rill/generator.h) is declared by the binary itself.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <arrow/type_fwd.h>

#include "rill/common/status.h"
#include "rill/connector/bounded_buffer.h"
#include "rill/connector/connector.h"
#include "rill/connector/file_stream_connector.h"
#include "rill/connector/json_decoder.h"
#include "rill/connector/json_stream_connector.h"
#include "rill/connector/kafka_connector.h"
#include "rill/connector/postgres_cdc_connector.h"
#include "rill/connector/websocket_connector.h"
#include "rill/pipeline/options.h"

namespace rill::pipeline {

/// One declared source: its kind and the options of that kind's connector.
struct SourceDecl {
  std::string kind;  ///< memory, json_stream, file, websocket, kafka, postgres_cdc
  std::string name;  ///< unique among connectors; default: the target table
  std::string target_table;
  BufferLimits limits;
  JsonDecodeOptions decode;  ///< decoding kinds (schema: the target table's)
  std::string op_column;     ///< memory
  JsonStreamOptions json_stream;
  FileStreamOptions file;
  std::string uri;  ///< websocket
  WebSocketOptions websocket;
  KafkaOptions kafka;
  PostgresCDCOptions postgres_cdc;
  /// The options as given (for `rill pipeline dump` and SHOW SOURCES).
  Options given;
};

/// The kinds the table knows, in the docs' order.
const std::vector<std::string>& SourceKinds();

/// The option table of `kind`; null for an unknown kind.
const OptionTable<SourceDecl>* SourceOptionTable(std::string_view kind);

/// Read a declaration of `kind` from `options` (target_table may be given
/// among them, or set beforehand in `*decl`, as CREATE SOURCE ... INTO does).
/// `where` prefixes messages about the whole declaration. Errors carry their
/// SQLSTATE (options.h); an unknown kind is 22023 naming the kinds.
Result<SourceDecl> ReadSource(std::string_view kind, const Options& options,
                              const std::string& where, std::string target_table = "");

/// Every kind's options as Markdown (a heading and a table per kind), for
/// `rill pipeline options` and the docs (docs/pipelines.md holds its output).
std::string SourceOptionsMarkdown();

/// Make the connector `decl` declares, decoding into `schema` (the target
/// table's user columns; may be null for tables without declared columns).
Result<std::shared_ptr<Connector>> MakeSource(const SourceDecl& decl,
                                              const std::shared_ptr<arrow::Schema>& schema);

}  // namespace rill::pipeline
