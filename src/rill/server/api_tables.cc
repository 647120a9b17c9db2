// Tables and telemetry routes:
//   GET /api/v1/tables, GET /api/v1/tables/{name}
//   GET /api/v1/telemetry                 engine metrics now (rill_metrics) + rule values
//   GET /api/v1/telemetry/history         rill_telemetry rows (?since ?until ?points)
//   GET /api/v1/telemetry/{tables,connectors,tasks,sinks}   per-object stats now
#include <cmath>
#include <map>

#include <arrow/scalar.h>
#include <arrow/table.h>
#include <arrow/type.h>

#include "rill/cluster/application.h"
#include "rill/connector/connector.h"
#include "rill/connector/kafka_connector.h"
#include "rill/common/host_stats.h"
#include "rill/engine/engine.h"
#include "rill/metrics/metrics_store.h"
#include "rill/server/json_body.h"
#include "rill/server/json_writer.h"
#include "rill/server/server_internal.h"
#include "rill/sink/sink_set.h"
#include "rill/table/schema.h"

namespace rill::server {

namespace {

namespace json = boost::json;

json::object TableJson(const LiveTable& table) {
  json::object t;
  t["name"] = table.name();
  json::array columns;
  for (const auto& field : table.schema()->fields()) {
    json::object c;
    c["name"] = field->name();
    c["type"] = field->type()->ToString();
    c["nullable"] = field->nullable();
    columns.push_back(std::move(c));
  }
  t["schema"] = std::move(columns);
  json::array key;
  for (const auto& k : table.primary_key()) {
    key.emplace_back(k);
  }
  t["primary_key"] = std::move(key);
  t["mode"] = TableModeName(table.mode());
  json::value retention = nullptr;
  if (table.retention().has_value() && table.retention()->enabled()) {
    const RetentionPolicy& policy = *table.retention();
    json::object r;
    r["max_rows"] = policy.max_rows ? json::value(*policy.max_rows) : json::value(nullptr);
    r["max_age_seconds"] =
        policy.max_age_seconds ? json::value(*policy.max_age_seconds) : json::value(nullptr);
    r["time_column"] = policy.time_column;
    retention = std::move(r);
  }
  t["retention"] = std::move(retention);
  auto version = table.snapshot();
  t["rows"] = version->num_rows();
  t["bytes"] = version->nbytes();
  t["version"] = version->version();
  t["published_at"] = version->published_at();
  return t;
}

HttpReply Tables(ServerContext& ctx) {
  json::array tables;
  for (const auto& name : ctx.engine->TableNames()) {
    auto table = ctx.engine->GetTable(name);
    if (table.ok()) {  // dropped meanwhile: skip
      tables.push_back(TableJson(**table));
    }
  }
  json::object out;
  out["tables"] = std::move(tables);
  return JsonReply(json::serialize(out));
}

HttpReply OneTable(ServerContext& ctx, const std::string& name) {
  auto table = ctx.engine->GetTable(name);
  if (!table.ok()) {
    return ErrorReply(404, "no table named '" + name + "'");
  }
  return JsonReply(json::serialize(TableJson(**table)));
}

Result<std::optional<double>> NumberParam(const HttpRequest& request, const std::string& name) {
  auto text = request.param(name);
  if (!text.has_value() || text->empty()) {
    return std::nullopt;
  }
  char* end = nullptr;
  double value = std::strtod(text->c_str(), &end);
  if (end != text->c_str() + text->size() || !std::isfinite(value)) {
    return Status::Invalid("query parameter '", name, "' must be a number, got '", *text,
                           "'");
  }
  return value;
}

HttpReply TelemetryHistory(ServerContext& ctx, const HttpRequest& request,
                           const std::string& table, const std::string& extra_filter) {
  if (ctx.metrics == nullptr) {
    return ErrorReply(503, "this engine has no metrics database");
  }
  auto since = NumberParam(request, "since");
  auto until = NumberParam(request, "until");
  auto points = NumberParam(request, "points");
  for (const auto* r : {&since, &until, &points}) {
    if (!r->ok()) {
      return StatusReply(r->status());
    }
  }
  if (points->has_value() && (**points < 1 || **points > 1e6)) {
    return ErrorReply(400, "query parameter 'points' must be between 1 and 1000000");
  }
  std::string where = "WHERE ts >= " + std::to_string(since->value_or(0)) +
                      " AND ts <= " + std::to_string(until->value_or(1e12)) + extra_filter;
  int64_t step = 1;
  if (points->has_value()) {
    auto count = ctx.metrics->QueryMetrics("SELECT count(*) AS n FROM " + table + " " + where);
    if (!count.ok()) {
      return StatusReply(count.status());
    }
    auto scalar = (*count)->column(0)->GetScalar(0);
    int64_t n = scalar.ok() ? std::static_pointer_cast<arrow::Int64Scalar>(*scalar)->value : 0;
    step = std::max<int64_t>(1, (n + static_cast<int64_t>(**points) - 1) /
                                    static_cast<int64_t>(**points));
  }
  std::string sql = "SELECT * EXCLUDE (rill_rn) FROM (SELECT *, row_number() OVER (ORDER BY ts) - 1 "
                    "AS rill_rn FROM " + table + " " + where + ") WHERE rill_rn % " +
                    std::to_string(step) + " = 0 ORDER BY ts";
  auto result = ctx.metrics->QueryMetrics(sql);
  if (!result.ok()) {
    return StatusReply(result.status());
  }
  auto text = TableToJson(**result, ctx.options.max_json_result_bytes);
  if (!text.ok()) {
    return StatusReply(text.status());
  }
  return JsonReply(std::move(*text));
}

HttpReply TableStats(ServerContext& ctx) {
  json::array out;
  for (const auto& name : ctx.engine->TableNames()) {
    auto table = ctx.engine->GetTable(name);
    if (!table.ok()) {
      continue;
    }
    auto version = (*table)->snapshot();
    json::object t;
    t["table"] = name;
    t["rows"] = version->num_rows();
    t["bytes"] = version->nbytes();
    t["version"] = version->version();
    t["chunks"] = (*table)->num_chunks();
    out.push_back(std::move(t));
  }
  return JsonReply(json::serialize(json::object{{"tables", std::move(out)}}));
}

HttpReply ConnectorStatsReply(ServerContext& ctx) {
  json::array out;
  for (const auto& connector : ctx.engine->Connectors()) {
    ConnectorStats s = connector->stats();
    json::object c;
    c["connector"] = connector->name();
    c["table"] = connector->target_table();
    c["buffered_records"] = s.buffered_records;
    c["buffered_bytes"] = s.buffered_bytes;
    c["pushed_records"] = s.pushed_records;
    c["dropped_records"] = s.dropped_records;
    c["refused_records"] = s.refused_records;
    c["drained_records"] = s.drained_records;
    c["errors"] = s.errors;
    c["received_bytes"] = s.received_bytes;
    c["received_records"] = s.received_records;
    c["parsed_records"] = s.parsed_records;
    c["rejected_records"] = s.rejected_records;
    c["unknown_fields"] = s.unknown_fields;
    c["tombstones"] = s.tombstones;
    c["reconnects"] = s.reconnects;
    c["lag"] = s.lag;
    if (s.snapshot_done >= 0) {  // change data capture (PostgresCDCConnector)
      c["lag_bytes"] = s.lag_bytes;
      c["snapshot_rows"] = s.snapshot_rows;
      c["snapshot_rows_total"] = s.snapshot_rows_total;
      c["snapshot_rows_per_s"] = s.snapshot_rows_per_s;
      c["snapshot_eta_seconds"] = s.snapshot_eta_seconds;
      c["snapshot_done"] = s.snapshot_done == 1;
    }
    if (auto kafka = std::dynamic_pointer_cast<KafkaConnector>(connector)) {
      json::array partitions;
      for (const auto& [tp, lag] : kafka->lags()) {
        partitions.push_back(
            json::object{{"topic", tp.first}, {"partition", tp.second}, {"lag", lag}});
      }
      c["partitions"] = std::move(partitions);
    }
    out.push_back(std::move(c));
  }
  return JsonReply(json::serialize(json::object{{"connectors", std::move(out)}}));
}

HttpReply SinkStatsReply(ServerContext& ctx) {
  json::array out;
  for (const auto& sink : SinkSet::For(ctx.engine).List()) {
    const SinkStats s = sink->stats();
    const SinkOptions& o = sink->options();
    json::object j;
    j["sink"] = o.name;
    j["type"] = sink->type();
    j["table"] = o.table;
    j["mode"] = SinkModeName(o.mode);
    j["on_error"] = SinkErrorPolicyName(o.on_error);
    j["rows_written"] = s.rows_written;
    j["batches"] = s.batches;
    j["bytes"] = s.bytes;
    j["errors"] = s.errors;
    j["retries"] = s.retries;
    j["dropped_rows"] = s.dropped_rows;
    j["snapshots"] = s.snapshots;
    j["committed_version"] = s.committed_version;
    j["lag_versions"] = s.lag_versions;
    j["lag_seconds"] = s.lag_seconds;
    j["backpressure"] = s.backpressure;
    j["last_error"] = s.last_error;
    out.push_back(std::move(j));
  }
  return JsonReply(json::serialize(json::object{{"sinks", std::move(out)}}));
}

/// This instance in its scaled-out application; {"app_id": null} outside one.
HttpReply ClusterReply(ServerContext& ctx) {
  cluster::Application* app = cluster::Application::For(ctx.engine);
  if (app == nullptr) return JsonReply(json::serialize(json::object{{"app_id", nullptr}}));
  return JsonReply(cluster::ClusterStatusJson(*app));
}

HttpReply TaskStatsReply(ServerContext& ctx) {
  json::array out;
  for (const auto& [name, s] : ctx.engine->TaskStatistics()) {
    json::object t;
    t["task"] = name;
    t["runs"] = s.runs;
    t["errors"] = s.errors;
    t["last_duration_s"] = s.last_duration_s;
    t["avg_duration_s"] = s.runs > 0 ? s.total_duration_s / static_cast<double>(s.runs) : 0.0;
    t["last_run_at"] = s.last_run_at;
    t["last_error"] = s.last_error;
    t["maintenance"] = s.maintenance;
    t["state_bytes"] = s.state_bytes;
    t["changes_read"] = s.changes_read;
    t["rows_upserted"] = s.rows_upserted;
    t["rows_deleted"] = s.rows_deleted;
    out.push_back(std::move(t));
  }
  return JsonReply(json::serialize(json::object{{"tasks", std::move(out)}}));
}

}  // namespace

std::string TelemetryNowJson(ServerContext& ctx) {
  // The names and meanings of rill_metrics (src/rill/engine/README.md).
  EngineMetrics m = ctx.engine->GetMetrics();
  HostSample host = ctx.engine->host_sampler()->Latest();
  json::object e;
  e["timestamp"] = m.timestamp;
  e["ticks"] = m.ticks;
  e["total_records_processed"] = m.total_records_processed;
  e["last_batch_records"] = m.last_batch_records;
  e["last_batch_latency_ms"] = m.last_batch_latency_s * 1e3;
  e["avg_batch_latency_ms"] = m.avg_batch_latency_s * 1e3;
  e["max_batch_latency_ms"] = m.max_batch_latency_s * 1e3;
  e["records_per_second"] = m.records_per_second;
  e["cpu_usage"] = host.cpu_usage_percent;
  e["used_memory"] = host.used_memory_bytes;
  e["total_memory"] = host.total_memory_bytes;
  e["process_cpu_percent"] = host.process_cpu_percent;
  e["process_rss_bytes"] = host.process_rss_bytes;
  e["rejected_batches"] = m.rejected_batches;
  e["rejected_records"] = m.rejected_records;
  e["engine_errors"] = m.errors;
  e["memory_warnings"] = m.memory_warnings;
  e["arrow_allocated_bytes"] = m.arrow_allocated_bytes;
  e["arrow_peak_allocated_bytes"] = m.arrow_peak_allocated_bytes;
  e["duckdb_memory_bytes"] = m.duckdb_memory_bytes;
  // The metrics database's own size (rill_telemetry names, as of its last flush).
  std::map<std::string, double> current;
  if (ctx.metrics != nullptr) current = ctx.metrics->CurrentValues();
  for (const char* name : {"metrics_duckdb_memory_bytes", "metrics_db_file_bytes"}) {
    auto it = current.find(name);
    e[name] = it == current.end() ? json::value(nullptr) : JsonNumber(it->second);
  }
  json::object business;
  for (const auto& b : m.business_metrics) {
    business[b.name] = json::object{{"value", JsonNumber(b.value)}, {"ok", b.ok},
                                    {"error", b.error}};
  }
  e["business_metrics"] = std::move(business);
  json::object values;
  for (const auto& [name, value] : current) {
    values[name] = JsonNumber(value);
  }
  e["values"] = std::move(values);
  return json::serialize(e);
}

std::optional<HttpReply> RouteTables(ServerContext& ctx, const HttpRequest& request) {
  const std::string& path = request.path;
  constexpr std::string_view kTables = "/api/v1/tables";
  constexpr std::string_view kTelemetry = "/api/v1/telemetry";
  bool tables = path.rfind(kTables, 0) == 0;
  bool telemetry = path.rfind(kTelemetry, 0) == 0;
  if (!tables && !telemetry) {
    return std::nullopt;
  }
  if (request.method != "GET") {
    return ErrorReply(405, "use GET");
  }
  if (path == kTables || path == std::string(kTables) + "/") {
    return Tables(ctx);
  }
  if (tables && path.size() > kTables.size() + 1 && path[kTables.size()] == '/') {
    return OneTable(ctx, path.substr(kTables.size() + 1));
  }
  if (path == kTelemetry) {
    return JsonReply(TelemetryNowJson(ctx));
  }
  if (path == "/api/v1/telemetry/history") {
    return TelemetryHistory(ctx, request, "rill_telemetry", "");
  }
  if (path == "/api/v1/telemetry/tables") return TableStats(ctx);
  if (path == "/api/v1/telemetry/connectors") return ConnectorStatsReply(ctx);
  if (path == "/api/v1/telemetry/tasks") return TaskStatsReply(ctx);
  if (path == "/api/v1/telemetry/sinks") return SinkStatsReply(ctx);
  if (path == "/api/v1/telemetry/cluster") return ClusterReply(ctx);
  return std::nullopt;
}

/// Shared with the KPI history route (api_metrics.cc).
HttpReply HistoryReply(ServerContext& ctx, const HttpRequest& request, const std::string& table,
                       const std::string& extra_filter) {
  return TelemetryHistory(ctx, request, table, extra_filter);
}

}  // namespace rill::server
