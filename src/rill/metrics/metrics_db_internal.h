// MetricsDb: the metrics database file (private to src/rill/metrics).
//
// Owns a DuckDB database (a file, or ":memory:") holding the tables listed in
// README.md, and knows how to write rows into them, prune them by age and run
// read-only queries returning Arrow tables. DuckDB is hidden behind an Impl so
// this header stays free of DuckDB includes.
//
// Threads: Write, WriteConfig and Prune are called by one writer thread at a
// time. Query may run on any thread concurrently with the writer (each call
// opens its own connection). MemoryUsage and path may be called from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <arrow/type_fwd.h>

#include "rill/common/status.h"
#include "rill/engine/event.h"
#include "rill/metrics/alert_rule.h"
#include "rill/metrics/kpi_query.h"
#include "rill/sql/query_interrupt.h"

namespace rill::metrics_internal {

/// A row of rill_alerts.
struct AlertRow {
  double ts = 0;
  Severity severity = Severity::kWarning;
  EventSource source = EventSource::kEngine;
  std::string component;
  std::string message;
  std::string detail;
  std::string rule;
  std::optional<double> value;
  std::optional<double> threshold;
  int64_t count = 1;
};

/// Return the size in bytes of `path` plus its DuckDB write-ahead log
/// (`path.wal`); 0 for ":memory:" or a missing file. Any thread.
int64_t DatabaseFileBytes(const std::string& path);

/// One column of rill_telemetry (after `ts`).
struct TelemetryColumn {
  const char* name;
  bool integer;  ///< BIGINT when true, DOUBLE otherwise
};
/// The columns of rill_telemetry after `ts`, in table order.
const std::vector<TelemetryColumn>& TelemetryColumns();

/// A row of rill_telemetry: values aligned with TelemetryColumns() (nullopt = NULL).
struct TelemetryRow {
  double ts = 0;
  std::vector<std::optional<double>> values;
};

struct TableStatRow {
  double ts = 0;
  std::string table;
  int64_t rows = 0;
  int64_t bytes = 0;
  int64_t version = 0;
};

struct ConnectorStatRow {
  double ts = 0;
  std::string connector;
  std::string table;
  int64_t buffered_records = 0;
  int64_t buffered_bytes = 0;
  int64_t pushed_records = 0;
  int64_t dropped_records = 0;
  int64_t refused_records = 0;
  int64_t drained_records = 0;
  int64_t errors = 0;
  // Decoding connectors (columns added by ALTER TABLE, hence last).
  int64_t received_records = 0;
  int64_t parsed_records = 0;
  int64_t rejected_records = 0;
  int64_t lag = 0;
  // Change data capture (PostgresCDCConnector): slot lag, snapshot progress.
  int64_t lag_bytes = 0;
  int64_t snapshot_rows = 0;
  int64_t snapshot_rows_total = -1;
};

/// One sink's counters (sink/sink.h SinkStats) at one flush cycle.
struct SinkStatRow {
  double ts = 0;
  std::string sink;
  std::string type;
  std::string table;
  int64_t rows_written = 0;
  int64_t batches = 0;
  int64_t bytes = 0;
  int64_t errors = 0;
  int64_t retries = 0;
  int64_t dropped_rows = 0;
  int64_t snapshots = 0;
  int64_t committed_version = 0;
  int64_t lag_versions = 0;
  double lag_seconds = 0;
  bool backpressure = false;
};

struct TaskStatRow {
  double ts = 0;
  std::string task;
  int64_t runs = 0;
  int64_t errors = 0;
  double last_duration_s = 0;
  double avg_duration_s = 0;
  std::string last_error;
  std::string maintenance;  ///< "incremental", "recompute (<why>)" or "" (TaskStats)
  int64_t state_bytes = 0;
};

struct BusinessMetricRow {
  double ts = 0;
  std::string name;
  double value = 0;
};

struct KpiHistoryRow {
  double ts = 0;
  std::string query;
  KpiCell cell;
};

/// Everything one flush cycle writes, in one transaction.
struct WriteBatch {
  std::optional<TelemetryRow> telemetry;
  std::vector<AlertRow> alerts;
  std::vector<TableStatRow> tables;
  std::vector<ConnectorStatRow> connectors;
  std::vector<SinkStatRow> sinks;
  std::vector<TaskStatRow> tasks;
  std::vector<BusinessMetricRow> business;
  std::vector<KpiHistoryRow> kpis;

  int64_t num_rows() const;
};

/// A KPI query and its state, as listed in rill_kpi_queries.
struct KpiQueryRow {
  KpiQuery query;
  double created_at = 0;
  std::optional<double> last_run_at;
  std::optional<double> last_value;
  std::string last_error;
  int64_t runs = 0;
  int64_t errors = 0;
};

/// An alert rule and its state, as listed in rill_alert_rules.
struct AlertRuleRow {
  AlertRule rule;
  AlertRuleState state;
};

/// The full contents of the two configuration tables.
struct ConfigSnapshot {
  std::vector<KpiQueryRow> kpis;
  std::vector<AlertRuleRow> rules;
};

/// Age limits for Prune: rows with ts older than these are deleted.
struct PruneCutoffs {
  double telemetry_before = 0;  ///< telemetry, stats, business metrics, KPI history
  double alerts_before = 0;     ///< rill_alerts
};

class MetricsDb {
 public:
  /// Open (or create) the database at `path` (":memory:" allowed) and create
  /// the tables that are missing. IOError when the file cannot be opened.
  static Result<std::unique_ptr<MetricsDb>> Open(const std::string& path);
  ~MetricsDb();

  const std::string& path() const { return path_; }

  /// Append every row of `batch` in one transaction.
  Status Write(const WriteBatch& batch);
  /// Replace the contents of rill_kpi_queries and rill_alert_rules.
  Status WriteConfig(const ConfigSnapshot& config);
  /// Delete rows older than the cutoffs; return how many were deleted.
  Result<int64_t> Prune(const PruneCutoffs& cutoffs);

  /// Run one read-only statement (SELECT, or EXPLAIN of one) and return its
  /// result. Invalid for statements that could write, for several statements,
  /// and with DuckDB's message for failing queries.
  Result<std::shared_ptr<arrow::Table>> Query(std::string_view sql) const;
  /// As Query; `interrupt` (may be null) stops it from another thread
  /// (Cancelled).
  Result<std::shared_ptr<arrow::Table>> Query(std::string_view sql,
                                              QueryInterrupt* interrupt) const;
  /// DuckDB's type of each parameter of `sql` (see PreparedParameterTypes).
  Result<std::vector<std::string>> ParameterTypes(std::string_view sql) const;
  /// DuckDB's memory limit of this database (bytes > 0).
  Status SetMemoryLimit(int64_t bytes);

  /// Run CREATE statements, one per string (InvalidArgument for any other).
  Status DefineHelpers(const std::vector<std::string>& statements);

  /// Bytes held by this database's buffer manager.
  int64_t MemoryUsage() const;

 private:
  struct Impl;
  MetricsDb(std::string path, std::unique_ptr<Impl> impl);

  std::string path_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rill::metrics_internal
