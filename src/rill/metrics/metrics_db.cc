// The only file of src/rill/metrics that includes DuckDB. DuckDB throws; every
// entry point catches and returns a Status carrying DuckDB's message.
#include "rill/metrics/metrics_db_internal.h"
#include "rill/sql/duckdb_result.h"
#include "rill/common/logging.h"

#include <chrono>
#include <exception>
#include <filesystem>

#include <arrow/api.h>
#include <duckdb.hpp>
#include <duckdb/parser/sql_statement.hpp>
#include <duckdb/storage/buffer_manager.hpp>
#include <fmt/format.h>

namespace rill::metrics_internal {
namespace {

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS rill_alerts (
  ts DOUBLE NOT NULL, severity VARCHAR NOT NULL, source VARCHAR NOT NULL,
  component VARCHAR, message VARCHAR NOT NULL, detail VARCHAR, rule VARCHAR,
  value DOUBLE, threshold DOUBLE, count BIGINT NOT NULL DEFAULT 1);
CREATE TABLE IF NOT EXISTS rill_table_stats (
  ts DOUBLE NOT NULL, table_name VARCHAR NOT NULL, num_rows BIGINT, nbytes BIGINT,
  version BIGINT);
CREATE TABLE IF NOT EXISTS rill_connector_stats (
  ts DOUBLE NOT NULL, connector VARCHAR NOT NULL, table_name VARCHAR,
  buffered_records BIGINT, buffered_bytes BIGINT, pushed_records BIGINT,
  dropped_records BIGINT, refused_records BIGINT, drained_records BIGINT, errors BIGINT);
CREATE TABLE IF NOT EXISTS rill_sink_stats (
  ts DOUBLE NOT NULL, sink VARCHAR NOT NULL, type VARCHAR, table_name VARCHAR,
  rows_written BIGINT, batches BIGINT, bytes BIGINT, errors BIGINT, retries BIGINT,
  dropped_rows BIGINT, snapshots BIGINT, committed_version BIGINT, lag_versions BIGINT,
  lag_seconds DOUBLE, backpressure BOOLEAN);
CREATE TABLE IF NOT EXISTS rill_task_stats (
  ts DOUBLE NOT NULL, task VARCHAR NOT NULL, runs BIGINT, errors BIGINT,
  last_duration_s DOUBLE, avg_duration_s DOUBLE, last_error VARCHAR);
CREATE TABLE IF NOT EXISTS rill_business_metrics (
  ts DOUBLE NOT NULL, name VARCHAR NOT NULL, value DOUBLE);
CREATE TABLE IF NOT EXISTS rill_kpi_history (
  ts DOUBLE NOT NULL, query VARCHAR NOT NULL, row_index BIGINT NOT NULL,
  column_name VARCHAR NOT NULL, value DOUBLE, text VARCHAR);
CREATE TABLE IF NOT EXISTS rill_kpi_queries (
  name VARCHAR PRIMARY KEY, sql VARCHAR NOT NULL, interval_seconds DOUBLE NOT NULL,
  chart_type VARCHAR NOT NULL, x_col VARCHAR, y_col VARCHAR, created_at DOUBLE,
  last_run_at DOUBLE, last_value DOUBLE, last_error VARCHAR, runs BIGINT, errors BIGINT);
CREATE TABLE IF NOT EXISTS rill_alert_rules (
  name VARCHAR PRIMARY KEY, metric VARCHAR NOT NULL, op VARCHAR NOT NULL,
  threshold DOUBLE NOT NULL, cooldown_seconds DOUBLE NOT NULL, severity VARCHAR NOT NULL,
  message VARCHAR, webhook VARCHAR, enabled BOOLEAN NOT NULL, created_at DOUBLE,
  last_fired_at DOUBLE, fire_count BIGINT, last_value DOUBLE, last_evaluated_at DOUBLE);
ALTER TABLE rill_alert_rules ADD COLUMN IF NOT EXISTS webhook_format VARCHAR;
ALTER TABLE rill_connector_stats ADD COLUMN IF NOT EXISTS received_records BIGINT;
ALTER TABLE rill_connector_stats ADD COLUMN IF NOT EXISTS parsed_records BIGINT;
ALTER TABLE rill_connector_stats ADD COLUMN IF NOT EXISTS rejected_records BIGINT;
ALTER TABLE rill_connector_stats ADD COLUMN IF NOT EXISTS lag BIGINT;
ALTER TABLE rill_connector_stats ADD COLUMN IF NOT EXISTS lag_bytes BIGINT;
ALTER TABLE rill_connector_stats ADD COLUMN IF NOT EXISTS snapshot_rows BIGINT;
ALTER TABLE rill_connector_stats ADD COLUMN IF NOT EXISTS snapshot_rows_total BIGINT;
ALTER TABLE rill_task_stats ADD COLUMN IF NOT EXISTS maintenance VARCHAR;
ALTER TABLE rill_task_stats ADD COLUMN IF NOT EXISTS state_bytes BIGINT;
)sql";

// Tables pruned by telemetry age (all carry a `ts` column).
constexpr const char* kHistoryTables[] = {"rill_telemetry",       "rill_table_stats",
                                          "rill_connector_stats", "rill_sink_stats",
                                          "rill_task_stats",
                                          "rill_business_metrics", "rill_kpi_history"};

duckdb::Value Text(const std::string& text) {
  return text.empty() ? duckdb::Value() : duckdb::Value(text);
}
duckdb::Value Double(std::optional<double> value) {
  return value.has_value() ? duckdb::Value::DOUBLE(*value) : duckdb::Value();
}
duckdb::Value BigInt(int64_t value) { return duckdb::Value::BIGINT(value); }

std::string TelemetryDdl() {
  std::string ddl = "CREATE TABLE IF NOT EXISTS rill_telemetry (ts DOUBLE NOT NULL";
  for (const TelemetryColumn& column : TelemetryColumns()) {
    ddl += fmt::format(", {} {}", column.name, column.integer ? "BIGINT" : "DOUBLE");
  }
  return ddl + ")";
}

// A database written by an older Rill may hold rill_telemetry with other
// columns (they were renamed to match rill_metrics). Keep that history under
// rill_telemetry_before_<unix seconds> and let Open create the current table.
Status SetAsideOutdatedTelemetry(duckdb::Connection& con) {
  auto columns = con.Query(
      "SELECT column_name FROM information_schema.columns WHERE table_name = "
      "'rill_telemetry' AND table_schema = 'main' ORDER BY ordinal_position");
  if (columns->HasError()) {
    return Status::Invalid(columns->GetError());
  }
  if (columns->RowCount() == 0) {
    return Status::OK();  // a new database
  }
  std::vector<std::string> expected = {"ts"};
  for (const TelemetryColumn& column : TelemetryColumns()) expected.push_back(column.name);
  bool same = columns->RowCount() == expected.size();
  for (size_t i = 0; same && i < expected.size(); ++i) {
    same = columns->GetValue(0, i).ToString() == expected[i];
  }
  if (same) {
    return Status::OK();
  }
  const std::string old_name = fmt::format(
      "rill_telemetry_before_{}",
      std::chrono::duration_cast<std::chrono::seconds>(
          std::chrono::system_clock::now().time_since_epoch())
          .count());
  auto renamed = con.Query("ALTER TABLE rill_telemetry RENAME TO " + old_name);
  if (renamed->HasError()) {
    return Status::Invalid(renamed->GetError());
  }
  Logger("metrics")->warn("rill_telemetry had the columns of an older version; kept as {}",
                          old_name);
  return Status::OK();
}

Status CheckResult(duckdb::QueryResult& result, std::string_view what) {
  if (result.HasError()) {
    return Status::Invalid(what, ": ", result.GetError());
  }
  return Status::OK();
}

// Run `body` inside a transaction on `con`; roll back on any failure.
template <typename Body>
Status InTransaction(duckdb::Connection& con, std::string_view what, Body&& body) {
  try {
    con.BeginTransaction();
    Status status = body();
    if (!status.ok()) {
      con.Rollback();
      return status;
    }
    con.Commit();
    return Status::OK();
  } catch (const std::exception& e) {
    try {
      if (con.HasActiveTransaction()) {
        con.Rollback();
      }
    } catch (const std::exception&) {
      // The connection is unusable; the next call reports it.
    }
    return Status::IOError(what, ": ", e.what());
  }
}

}  // namespace

const std::vector<TelemetryColumn>& TelemetryColumns() {
  static const std::vector<TelemetryColumn> kColumns = {
      // Host and process (the engine's HostSampler): same names and meanings
      // as in rill_metrics (engine/README.md).
      {"cpu_usage", false},
      {"process_cpu_percent", false},
      {"process_rss_bytes", true},
      {"used_memory", true},
      {"total_memory", true},
      {"arrow_allocated_bytes", true},
      {"arrow_peak_allocated_bytes", true},
      {"duckdb_memory_bytes", true},
      {"metrics_duckdb_memory_bytes", true},
      {"metrics_db_file_bytes", true},
      {"records_per_second", false},
      {"last_batch_latency_ms", false},
      {"avg_batch_latency_ms", false},
      // Over the trailing latency_window_seconds, from sampled tick latencies.
      {"window_avg_batch_latency_ms", false},
      {"window_p99_batch_latency_ms", false},
      {"window_max_batch_latency_ms", false},
      {"window_batch_latency_samples", true},
      {"ticks", true},
      {"total_records_processed", true},
      {"rejected_batches", true},
      {"rejected_records", true},
      {"engine_errors", true},
      {"memory_warnings", true},
      {"table_count", true},
      {"table_rows", true},
      {"table_bytes", true},
      {"connector_buffered_records", true},
      {"connector_dropped_records", true},
      {"connector_errors", true},
      {"task_runs", true},
      {"task_errors", true},
      {"metrics_events_dropped", true},
      {"metrics_rows_dropped", true},
      {"metrics_queue_depth", true},
  };
  return kColumns;
}

int64_t DatabaseFileBytes(const std::string& path) {
  if (path.empty() || path == ":memory:") {
    return 0;
  }
  int64_t bytes = 0;
  std::error_code error;
  for (const std::string& file : {path, path + ".wal"}) {
    const auto size = std::filesystem::file_size(file, error);
    if (!error) {
      bytes += static_cast<int64_t>(size);
    }
  }
  return bytes;
}

int64_t WriteBatch::num_rows() const {
  return (telemetry.has_value() ? 1 : 0) + static_cast<int64_t>(alerts.size()) +
         static_cast<int64_t>(tables.size()) + static_cast<int64_t>(connectors.size()) +
         static_cast<int64_t>(sinks.size()) + static_cast<int64_t>(tasks.size()) + static_cast<int64_t>(business.size()) +
         static_cast<int64_t>(kpis.size());
}

struct MetricsDb::Impl {
  std::unique_ptr<duckdb::DuckDB> db;
  std::unique_ptr<duckdb::Connection> writer;  // used by the writer thread only
};

MetricsDb::MetricsDb(std::string path, std::unique_ptr<Impl> impl)
    : path_(std::move(path)), impl_(std::move(impl)) {}

MetricsDb::~MetricsDb() = default;

Result<std::unique_ptr<MetricsDb>> MetricsDb::Open(const std::string& path) {
  auto impl = std::make_unique<Impl>();
  try {
    duckdb::DBConfig config;
    // Queries on the metrics database must not reach the file system; the
    // database file itself stays accessible.
    config.options.enable_external_access = false;
    // No spilling (it could not reach the file system anyway): a query over
    // the memory limit fails with "Out of Memory Error".
    config.options.use_temporary_directory = false;
    config.options.autoinstall_known_extensions = false;
    config.options.autoload_known_extensions = false;
    impl->db = std::make_unique<duckdb::DuckDB>(path == ":memory:" ? nullptr : path.c_str(),
                                                &config);
    impl->writer = std::make_unique<duckdb::Connection>(*impl->db);
  } catch (const std::exception& e) {
    return Status::IOError("cannot open metrics database '", path, "': ", e.what());
  }
  if (Status moved = SetAsideOutdatedTelemetry(*impl->writer); !moved.ok()) {
    return Status::IOError("cannot upgrade rill_telemetry in '", path, "': ", moved.message());
  }
  for (const std::string& ddl : {std::string(kSchema), TelemetryDdl()}) {
    auto result = impl->writer->Query(ddl);
    if (result->HasError()) {
      return Status::IOError("cannot create metrics tables in '", path,
                             "': ", result->GetError());
    }
  }
  return std::unique_ptr<MetricsDb>(new MetricsDb(path, std::move(impl)));
}

Status MetricsDb::Write(const WriteBatch& batch) {
  duckdb::Connection& con = *impl_->writer;
  return InTransaction(con, "metrics write", [&]() -> Status {
    if (batch.telemetry.has_value()) {
      duckdb::Appender appender(con, "rill_telemetry");
      appender.BeginRow();
      appender.Append(duckdb::Value::DOUBLE(batch.telemetry->ts));
      const auto& columns = TelemetryColumns();
      for (size_t i = 0; i < columns.size(); ++i) {
        const std::optional<double>& v =
            i < batch.telemetry->values.size() ? batch.telemetry->values[i] : std::nullopt;
        if (!v.has_value()) {
          appender.Append(duckdb::Value());
        } else if (columns[i].integer) {
          appender.Append(BigInt(static_cast<int64_t>(*v)));
        } else {
          appender.Append(duckdb::Value::DOUBLE(*v));
        }
      }
      appender.EndRow();
      appender.Close();
    }
    if (!batch.alerts.empty()) {
      duckdb::Appender appender(con, "rill_alerts");
      for (const AlertRow& a : batch.alerts) {
        appender.BeginRow();
        appender.Append(duckdb::Value::DOUBLE(a.ts));
        appender.Append(duckdb::Value(SeverityName(a.severity)));
        appender.Append(duckdb::Value(EventSourceName(a.source)));
        appender.Append(Text(a.component));
        appender.Append(duckdb::Value(a.message));
        appender.Append(Text(a.detail));
        appender.Append(Text(a.rule));
        appender.Append(Double(a.value));
        appender.Append(Double(a.threshold));
        appender.Append(BigInt(a.count));
        appender.EndRow();
      }
      appender.Close();
    }
    if (!batch.tables.empty()) {
      duckdb::Appender appender(con, "rill_table_stats");
      for (const TableStatRow& t : batch.tables) {
        appender.AppendRow(duckdb::Value::DOUBLE(t.ts), duckdb::Value(t.table),
                           BigInt(t.rows), BigInt(t.bytes), BigInt(t.version));
      }
      appender.Close();
    }
    if (!batch.connectors.empty()) {
      duckdb::Appender appender(con, "rill_connector_stats");
      for (const ConnectorStatRow& c : batch.connectors) {
        appender.AppendRow(duckdb::Value::DOUBLE(c.ts), duckdb::Value(c.connector),
                           Text(c.table), BigInt(c.buffered_records),
                           BigInt(c.buffered_bytes), BigInt(c.pushed_records),
                           BigInt(c.dropped_records), BigInt(c.refused_records),
                           BigInt(c.drained_records), BigInt(c.errors),
                           BigInt(c.received_records), BigInt(c.parsed_records),
                           BigInt(c.rejected_records), BigInt(c.lag), BigInt(c.lag_bytes),
                           BigInt(c.snapshot_rows), BigInt(c.snapshot_rows_total));
      }
      appender.Close();
    }
    if (!batch.sinks.empty()) {
      duckdb::Appender appender(con, "rill_sink_stats");
      for (const SinkStatRow& k : batch.sinks) {
        appender.AppendRow(duckdb::Value::DOUBLE(k.ts), duckdb::Value(k.sink), Text(k.type),
                           Text(k.table), BigInt(k.rows_written), BigInt(k.batches),
                           BigInt(k.bytes), BigInt(k.errors), BigInt(k.retries),
                           BigInt(k.dropped_rows), BigInt(k.snapshots),
                           BigInt(k.committed_version), BigInt(k.lag_versions),
                           duckdb::Value::DOUBLE(k.lag_seconds),
                           duckdb::Value::BOOLEAN(k.backpressure));
      }
      appender.Close();
    }
    if (!batch.tasks.empty()) {
      duckdb::Appender appender(con, "rill_task_stats");
      for (const TaskStatRow& t : batch.tasks) {
        appender.AppendRow(duckdb::Value::DOUBLE(t.ts), duckdb::Value(t.task),
                           BigInt(t.runs), BigInt(t.errors),
                           duckdb::Value::DOUBLE(t.last_duration_s),
                           duckdb::Value::DOUBLE(t.avg_duration_s), Text(t.last_error),
                           Text(t.maintenance), BigInt(t.state_bytes));
      }
      appender.Close();
    }
    if (!batch.business.empty()) {
      duckdb::Appender appender(con, "rill_business_metrics");
      for (const BusinessMetricRow& b : batch.business) {
        appender.AppendRow(duckdb::Value::DOUBLE(b.ts), duckdb::Value(b.name),
                           duckdb::Value::DOUBLE(b.value));
      }
      appender.Close();
    }
    if (!batch.kpis.empty()) {
      duckdb::Appender appender(con, "rill_kpi_history");
      for (const KpiHistoryRow& k : batch.kpis) {
        appender.AppendRow(duckdb::Value::DOUBLE(k.ts), duckdb::Value(k.query),
                           BigInt(k.cell.row_index), duckdb::Value(k.cell.column),
                           Double(k.cell.value),
                           k.cell.text.has_value() ? duckdb::Value(*k.cell.text)
                                                   : duckdb::Value());
      }
      appender.Close();
    }
    return Status::OK();
  });
}

Status MetricsDb::WriteConfig(const ConfigSnapshot& config) {
  duckdb::Connection& con = *impl_->writer;
  return InTransaction(con, "metrics config write", [&]() -> Status {
    for (const char* table : {"rill_kpi_queries", "rill_alert_rules"}) {
      auto result = con.Query(fmt::format("DELETE FROM {}", table));
      RILL_RETURN_NOT_OK(CheckResult(*result, "metrics config write"));
    }
    {
      duckdb::Appender appender(con, "rill_kpi_queries");
      for (const KpiQueryRow& k : config.kpis) {
        appender.AppendRow(
            duckdb::Value(k.query.name), duckdb::Value(k.query.sql),
            duckdb::Value::DOUBLE(k.query.interval_seconds),
            duckdb::Value(ChartTypeName(k.query.chart_type)), Text(k.query.x_col),
            Text(k.query.y_col), duckdb::Value::DOUBLE(k.created_at), Double(k.last_run_at),
            Double(k.last_value), Text(k.last_error), BigInt(k.runs), BigInt(k.errors));
      }
      appender.Close();
    }
    {
      duckdb::Appender appender(con, "rill_alert_rules");
      for (const AlertRuleRow& r : config.rules) {
        appender.AppendRow(
            duckdb::Value(r.rule.name), duckdb::Value(r.rule.metric),
            duckdb::Value(CompareOpName(r.rule.op)), duckdb::Value::DOUBLE(r.rule.threshold),
            duckdb::Value::DOUBLE(r.rule.cooldown_seconds),
            duckdb::Value(SeverityName(r.rule.severity)), Text(r.rule.message),
            r.rule.webhook.has_value() ? duckdb::Value(*r.rule.webhook) : duckdb::Value(),
            duckdb::Value::BOOLEAN(r.rule.enabled),
            duckdb::Value::DOUBLE(r.state.created_at), Double(r.state.last_fired_at),
            BigInt(r.state.fire_count), Double(r.state.last_value),
            duckdb::Value::DOUBLE(r.state.last_evaluated_at),
            r.rule.webhook.has_value() ? duckdb::Value(r.rule.webhook_format) : duckdb::Value());
      }
      appender.Close();
    }
    return Status::OK();
  });
}

Result<int64_t> MetricsDb::Prune(const PruneCutoffs& cutoffs) {
  duckdb::Connection& con = *impl_->writer;
  int64_t deleted = 0;
  auto delete_before = [&](const char* table, double cutoff) -> Status {
    auto result = con.Query(fmt::format("DELETE FROM {} WHERE ts < {:.6f}", table, cutoff));
    RILL_RETURN_NOT_OK(CheckResult(*result, "metrics retention"));
    auto chunk = result->Fetch();
    if (chunk && chunk->size() > 0) {
      deleted += chunk->GetValue(0, 0).GetValue<int64_t>();
    }
    return Status::OK();
  };
  RILL_RETURN_NOT_OK(InTransaction(con, "metrics retention", [&]() -> Status {
    for (const char* table : kHistoryTables) {
      RILL_RETURN_NOT_OK(delete_before(table, cutoffs.telemetry_before));
    }
    return delete_before("rill_alerts", cutoffs.alerts_before);
  }));
  return deleted;
}

Status MetricsDb::DefineHelpers(const std::vector<std::string>& statements) {
  try {
    duckdb::Connection con(*impl_->db);
    for (const auto& sql : statements) {
      auto parsed = con.ExtractStatements(sql);
      if (parsed.size() != 1 || parsed[0]->type != duckdb::StatementType::CREATE_STATEMENT) {
        return Status::Invalid("DefineHelpers runs one CREATE statement at a time [query: ",
                               sql, "]");
      }
      auto result = con.Query(std::move(parsed[0]));
      if (result->HasError()) {
        return Status::Invalid("metrics database: ", result->GetError(), " [query: ", sql, "]");
      }
    }
  } catch (const std::exception& e) {
    return Status::Invalid("metrics database: ", e.what());
  }
  return Status::OK();
}

Result<std::shared_ptr<arrow::Table>> MetricsDb::Query(std::string_view sql) const {
  return Query(sql, nullptr);
}

Result<std::shared_ptr<arrow::Table>> MetricsDb::Query(std::string_view sql,
                                                       QueryInterrupt* interrupt) const {
  const std::string text(sql);
  try {
    duckdb::Connection con(*impl_->db);
    std::vector<duckdb::unique_ptr<duckdb::SQLStatement>> statements;
    try {
      statements = con.ExtractStatements(text);
    } catch (const std::exception& e) {
      return Status::Invalid("query_metrics: ", e.what());
    }
    if (statements.size() != 1) {
      return Status::Invalid("query_metrics runs exactly one statement, got ",
                             statements.size());
    }
    const auto type = statements[0]->type;
    if (!IsReadStatement(*statements[0])) {
      return Status::Invalid("query_metrics is read-only: ",
                             duckdb::StatementTypeToString(type),
                             " statements are not allowed");
    }
    if (interrupt != nullptr) {
      if (interrupt->interrupted()) {
        return Status::Cancelled("query_metrics: interrupted before it started");
      }
      interrupt->Attach([&con] { con.Interrupt(); });
    }
    // Detach whatever way this ends: the connection dies with this scope.
    struct Detach {
      QueryInterrupt* interrupt;
      ~Detach() {
        if (interrupt != nullptr) interrupt->Detach();
      }
    } detach{interrupt};
    // A read-only transaction also stops table functions that would write.
    auto begin = con.Query("BEGIN TRANSACTION READ ONLY");
    RILL_RETURN_NOT_OK(CheckResult(*begin, "query_metrics"));
    auto result = con.Query(text);
    if (result->HasError()) {
      con.Query("ROLLBACK");
      if (interrupt != nullptr && interrupt->interrupted()) {
        return Status::Cancelled("query_metrics: interrupted: ", result->GetError());
      }
      return Status::Invalid("query_metrics: ", result->GetError());
    }
    auto table = ResultToArrowTable(std::move(result), /*batch_rows=*/1 << 16);
    con.Query("ROLLBACK");
    if (!table.ok() && interrupt != nullptr && interrupt->interrupted()) {
      return Status::Cancelled("query_metrics: interrupted: ", table.status().message());
    }
    return table;
  } catch (const std::exception& e) {
    return Status::Invalid("query_metrics: ", e.what());
  }
}

Result<std::vector<std::string>> MetricsDb::ParameterTypes(std::string_view sql) const {
  try {
    duckdb::Connection con(*impl_->db);
    auto statements = con.ExtractStatements(std::string(sql));
    if (statements.size() != 1) {
      return Status::Invalid("query_metrics runs exactly one statement, got ",
                             statements.size());
    }
    if (!IsReadStatement(*statements[0])) {
      return Status::Invalid("query_metrics is read-only");
    }
    auto types = PreparedParameterTypes(con, std::move(statements[0]));
    if (!types.ok()) {
      return Status::Invalid("query_metrics: ", types.status().message());
    }
    return types;
  } catch (const std::exception& e) {
    return Status::Invalid("query_metrics: ", e.what());
  }
}

Status MetricsDb::SetMemoryLimit(int64_t bytes) {
  return SetDuckMemoryLimit(*impl_->db->instance, bytes);
}

int64_t MetricsDb::MemoryUsage() const {
  try {
    return static_cast<int64_t>(
        duckdb::BufferManager::GetBufferManager(*impl_->db->instance).GetUsedMemory());
  } catch (const std::exception&) {
    return 0;
  }
}

}  // namespace rill::metrics_internal
