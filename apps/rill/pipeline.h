// Pipeline files: the YAML that `rill serve pipeline.yaml` runs.
//
// A pipeline file declares, at the top level (every key optional):
//
//   engine:      trigger_interval_ms, memory_budget_mb, memory_budget_policy, max_reject_rows,
//                max_records_per_tick
//   metrics:     path, flush_interval_seconds, telemetry_retention_seconds,
//                alert_retention_seconds
//   server:      listen, token, admin_token, allow_private_webhooks, queue_db (flags
//                override)
//   checkpoint:  dir, interval_seconds (60), format (parquet | arrow), keep (3):
//                restored at start, written periodically and at stop
//   cluster:     app_id, instance_id, bootstrap_servers, partitions_per_table,
//                commit_interval_ms (100), session_timeout_ms (10000): this
//                process is one instance of a scaled-out application (one Kafka
//                consumer group; docs/scale-out.md); `rill serve --instance-id`
//                and `--app-id` override
//   tables:      - name, columns (a list of {name, type, nullable} or a map
//                  name: type), primary_key ("a" / "a,b" / [a, b]),
//                  mode (snapshot | append), retention {max_rows,
//                  max_age_seconds, time_column}
//   connectors:  - type (generator | memory | json_stream | file | websocket |
//                  kafka | postgres_cdc) and the options of that kind: the
//                  keyword arguments of its Python class (src/rill/pipeline/
//                  sources.h has the one table of them, shared with CREATE
//                  SOURCE; docs/pipelines.md lists them). A generator has
//                  name, table, max_records, max_bytes, on_overflow,
//                  rows_per_second, interval_ms, seed and columns: {column:
//                  spec} (see generator.h).
//   tasks:       - name, type (sql | join), interval_seconds, output,
//                  primary_key; sql: `sql`, incremental (auto | true |
//                  false) (src/rill/pipeline/tasks.h has the
//                  option tables of sql tasks, stream tasks, KPIs and alert
//                  rules, shared with the DDL); join: left, right, keys,
//                  right_keys, join_type, group_by, aggregations
//                  ({column: function} or [{column, function}]),
//                  incremental, retention
//   stream_tasks: - name, sql (over the rows `source` received since the
//                  previous run, named as the table), source, output (default:
//                  the name; an append table), retention {max_rows,
//                  max_age_seconds} or max_rows / max_age_seconds (required,
//                  as append tables need), interval_seconds (0: every tick)
//                  (engine/stream_sql_task.h)
//   windows:     - name, source, output, time_column, window (tumbling |
//                  hopping | sliding | session), size_seconds, slide_seconds,
//                  gap_seconds, group_by, aggregations ({output: expression}
//                  or [{column, function}]), allowed_lateness_seconds,
//                  idle_timeout_seconds, emit (on_close | on_update),
//                  retention, late_table, late_max_rows, interval_seconds
//                  (pipeline_windows.cc; the options of rills.WindowTask)
//   kpis:        - name, sql, interval_seconds, chart_type (line | bar |
//                  scatter), x_col, y_col
//   alert_rules: - name, metric, op, threshold, cooldown_seconds, severity,
//                  message, enabled, webhook (a URL, or {url, format:
//                  slack | google_chat | custom}), webhook_format (the same
//                  format, as the DDL writes it)
//   sinks:       - name, type (kafka | postgres | file), table (declared under
//                  tables, or a task's or window's output), mode (changelog |
//                  upsert | append), interval_seconds, max_batch_rows,
//                  on_error (retry | drop), retry_initial_seconds,
//                  retry_max_seconds, max_backlog_rows, emit_retention_deletes;
//                  kafka: topic, kafka_config {property: value}, format (json |
//                  avro), key_columns, key_format (json | string), exactly_once,
//                  transactional_id (default rill-<name>);
//                  postgres: dsn, target_table, create_table,
//                  connect_timeout_seconds; file: path, format (parquet |
//                  ndjson | csv | arrow), partition_by, roll_rows, roll_seconds
//                  (pipeline_sinks.cc; the options of rills.sinks, docs/sinks.md)
//
// Types: int8..int64, uint8..uint64, float32 (float), float64 (double),
// bool, string (utf8), large_string, binary, date32 (date), timestamp
// (microseconds), timestamp[s|ms|us|ns] and timestamp[UNIT, TZ].
//
// Every error names the file, the line and the key, e.g.
//   orders.yaml:14: tables[0].primary_key: unknown column 'order'
// Unknown keys are errors too (a typo never silently does nothing).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <arrow/type_fwd.h>

#include "generator.h"
#include "rill/common/status.h"
#include "rill/connector/bounded_buffer.h"
#include "rill/pipeline/sinks.h"
#include "rill/pipeline/sources.h"
#include "rill/cluster/application.h"
#include "rill/engine/checkpoint.h"
#include "rill/engine/engine.h"
#include "rill/engine/task.h"
#include "rill/engine/window_options.h"
#include "rill/metrics/alert_rule.h"
#include "rill/metrics/kpi_query.h"
#include "rill/metrics/metrics_store.h"
#include "rill/sink/file_sink.h"
#include "rill/sink/kafka_sink.h"
#include "rill/sink/postgres_sink.h"
#include "rill/sink/sink.h"
#include "rill/table/live_table.h"

namespace rill::app {

/// Where a declaration came from, for error messages.
struct SourceRef {
  std::string file;
  int line = 0;     ///< 1-based
  std::string key;  ///< e.g. "tables[0]"
  /// Return "FILE:LINE: KEY".
  std::string ToString() const;
  /// Return `status` with "FILE:LINE: KEY: " in front of its message.
  Status Wrap(const Status& status) const;
};

struct TableSpec {
  SourceRef where;
  std::string name;
  std::shared_ptr<arrow::Schema> schema;  ///< user columns
  TableOptions options;
};

struct ConnectorSpec {
  SourceRef where;
  std::string name;
  std::string type;   ///< "generator" or a kind of pipeline::SourceKinds()
  std::string table;  ///< the target table
  BufferLimits limits;
  GeneratorSpec generator;       ///< for type "generator"
  pipeline::SourceDecl source;   ///< every other type (src/rill/pipeline/sources.h)
};

struct SqlTaskSpec {
  SourceRef where;
  std::string name;
  std::string sql;
  std::string output;
  double interval_seconds = 1.0;
  std::vector<std::string> primary_key;
  /// The options as given, without name and sql (src/rill/pipeline/tasks.h).
  pipeline::Options given;
  IncrementalMode incremental = IncrementalMode::kAuto;
  std::string scope = "local";  ///< local | global (cluster/global_view.h)
  std::string app_id;             ///< scope global, read-only (pipeline/global_reader.h)
  std::string bootstrap_servers;  ///< with app_id
};

struct JoinTaskSpec {
  SourceRef where;
  JoinTaskOptions options;
};

struct StreamTaskSpec {
  SourceRef where;
  std::string name;
  std::string sql;
  std::string source;
  std::string output;
  RetentionPolicy retention;
  double interval_seconds = 0;
  /// The options as given, without name and sql (src/rill/pipeline/tasks.h).
  pipeline::Options given;
};

/// One entry of `windows:`, read by pipeline::ReadWindow (rill/pipeline/windows.h).
struct WindowTaskSpec {
  SourceRef where;
  WindowTaskOptions options;
  pipeline::Options given;  ///< the options as written (for `rill pipeline dump`)
};

struct KpiSpec {
  SourceRef where;
  KpiQuery query;
  /// The options as given, without name and sql (src/rill/pipeline/tasks.h).
  pipeline::Options given;
};

struct RuleSpec {
  SourceRef where;
  AlertRule rule;
  /// The options as given, without name (src/rill/pipeline/tasks.h).
  pipeline::Options given;
};

/// One entry of `sinks:`: the declaration (kind = the entry's `type`, the
/// common options and those of its kind; src/rill/pipeline/sinks.h) and its place.
struct SinkSpec : pipeline::SinkDecl {
  SourceRef where;
};

/// Settings of the `server:` section; unset values take the CLI's defaults.
struct PipelineServerSettings {
  std::optional<std::string> listen;
  std::optional<std::string> token;
  /// The admin credential: DDL over pgwire (user admin) and POST /api/v1/sql.
  std::optional<std::string> admin_token;
  std::optional<bool> allow_private_webhooks;
  /// SQLite file persisting the toolkit's queues (/api/v1/queues).
  std::optional<std::string> queue_db;
};

/// A parsed pipeline file.
struct Pipeline {
  std::string file;
  EngineOptions engine;
  /// `metrics:` settings; `metrics.path` stays the default unless given.
  MetricsOptions metrics;
  bool metrics_path_given = false;
  PipelineServerSettings server;
  /// `checkpoint:`; none: no checkpoints.
  std::optional<CheckpointOptions> checkpoint;
  /// `cluster:`; none: a single instance.
  std::optional<cluster::ClusterOptions> cluster;
  std::vector<TableSpec> tables;
  std::vector<ConnectorSpec> connectors;
  std::vector<SqlTaskSpec> sql_tasks;
  std::vector<JoinTaskSpec> join_tasks;
  std::vector<StreamTaskSpec> stream_tasks;
  std::vector<WindowTaskSpec> window_tasks;
  std::vector<KpiSpec> kpis;
  std::vector<RuleSpec> rules;
  std::vector<SinkSpec> sinks;
};

/// Read and check the pipeline file at `path`. IOError when it cannot be
/// read; Invalid for YAML syntax errors and for every bad key or value, the
/// message naming the file, line and key.
Result<Pipeline> LoadPipeline(const std::string& path);

/// Parse pipeline YAML given as text; `file` names it in messages.
Result<Pipeline> ParsePipeline(const std::string& yaml, const std::string& file);

/// Create the pipeline's tables, connectors and tasks in `engine`, and its
/// KPI queries and alert rules in `metrics` (required when the pipeline has
/// any; may be null otherwise), and its sinks, through the engine's catalog
/// (pipeline/catalog.h: a sink of a task's output waits there until the table
/// appears). Stops at the first error, returned with the
/// file, line and key of the declaration that failed. Call before
/// Engine::Start; any thread.
Status ApplyPipeline(const Pipeline& pipeline, Engine& engine, MetricsStore* metrics);


}  // namespace rill::app
