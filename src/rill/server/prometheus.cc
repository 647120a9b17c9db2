// GET /metrics: Prometheus text exposition format 0.0.4.
#include <cmath>
#include <cstdio>

#include "rill/connector/connector.h"
#include "rill/cluster/application.h"
#include "rill/connector/kafka_connector.h"
#include "rill/engine/engine.h"
#include "rill/server/server_internal.h"
#include "rill/sink/sink_set.h"

namespace rill::server {

namespace {

/// Escape a label value (backslash, quote, newline).
std::string LabelValue(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '\\' || c == '"') {
      out.push_back('\\');
      out.push_back(c);
    } else if (c == '\n') {
      out.append("\\n");
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::string Num(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

class Writer {
 public:
  explicit Writer(std::string* out) : out_(out) {}
  void Family(const std::string& name, const char* type, const char* help) {
    *out_ += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
  }
  void Sample(const std::string& name, double value, const std::string& labels = "") {
    *out_ += name;
    if (!labels.empty()) *out_ += "{" + labels + "}";
    *out_ += " " + Num(value) + "\n";
  }
  static std::string Label(const char* key, std::string_view value) {
    return std::string(key) + "=\"" + LabelValue(value) + "\"";
  }

 private:
  std::string* out_;
};

}  // namespace

std::string RenderPrometheus(ServerContext& ctx) {
  std::string out;
  Writer w(&out);
  EngineMetrics m = ctx.engine->GetMetrics();
  w.Family("rill_build_info", "gauge", "Always 1; rill version 0.1.0.");
  w.Sample("rill_build_info", 1);
  w.Family("rill_ingest_rows_total", "counter", "Rows written to tables by connectors.");
  w.Sample("rill_ingest_rows_total", static_cast<double>(m.total_records_processed));
  w.Family("rill_rejected_rows_total", "counter", "Rows rejected (written to rill_rejects).");
  w.Sample("rill_rejected_rows_total", static_cast<double>(m.rejected_records));
  w.Family("rill_engine_errors_total", "counter", "Error events recorded by the engine.");
  w.Sample("rill_engine_errors_total", static_cast<double>(m.errors));
  w.Family("rill_checkpoint_failures_total", "counter", "Checkpoint writes that failed.");
  w.Sample("rill_checkpoint_failures_total", static_cast<double>(m.checkpoint_failures));
  w.Family("rill_ticks_total", "counter", "Ticks run.");
  w.Sample("rill_ticks_total", static_cast<double>(m.ticks));
  w.Family("rill_memory_allocated_bytes", "gauge", "Arrow and DuckDB memory allocated.");
  w.Sample("rill_memory_allocated_bytes",
           static_cast<double>(m.arrow_allocated_bytes + m.duckdb_memory_bytes));

  auto connectors = ctx.engine->Connectors();
  w.Family("rill_connector_pushed_rows_total", "counter", "Rows accepted by each connector.");
  for (const auto& c : connectors) {
    w.Sample("rill_connector_pushed_rows_total", static_cast<double>(c->stats().pushed_records),
             Writer::Label("connector", c->name()));
  }
  w.Family("rill_connector_buffered_bytes", "gauge", "Bytes waiting in each connector buffer.");
  for (const auto& c : connectors) {
    w.Sample("rill_connector_buffered_bytes", static_cast<double>(c->stats().buffered_bytes),
             Writer::Label("connector", c->name()));
  }
  w.Family("rill_dropped_rows_total", "counter", "Rows dropped by backpressure.");
  for (const auto& c : connectors) {
    w.Sample("rill_dropped_rows_total", static_cast<double>(c->stats().dropped_records),
             Writer::Label("connector", c->name()));
  }
  // The decoding connectors' counters (ConnectorStats), one family each.
  struct ConnectorFamily {
    const char* name;
    const char* type;
    const char* help;
    int64_t ConnectorStats::*field;
  };
  static constexpr ConnectorFamily kFamilies[] = {
      {"rill_connector_received_bytes_total", "counter", "Raw bytes received.",
       &ConnectorStats::received_bytes},
      {"rill_connector_received_records_total", "counter", "Records received (lines, rows).",
       &ConnectorStats::received_records},
      {"rill_connector_parsed_records_total", "counter", "Records decoded into rows.",
       &ConnectorStats::parsed_records},
      {"rill_connector_rejected_records_total", "counter",
       "Records that failed to decode (in rill_rejects).", &ConnectorStats::rejected_records},
      {"rill_connector_rejects_overflowed_total", "counter",
       "Rejected records not kept for rill_rejects (over the cap of pending rejects).",
       &ConnectorStats::rejects_overflowed},
      {"rill_connector_refused_rows_total", "counter",
       "Rows refused with on_overflow=error (HTTP 429).", &ConnectorStats::refused_records},
      {"rill_connector_buffered_rows", "gauge", "Rows waiting in each connector buffer.",
       &ConnectorStats::buffered_records},
      {"rill_connector_errors_total", "counter", "Failed reads.", &ConnectorStats::errors},
      {"rill_connector_reconnects_total", "counter", "Reconnections after a drop.",
       &ConnectorStats::reconnects},
      {"rill_connector_lag_records", "gauge",
       "Records not yet read at the source (Kafka: sum of partition lags).",
       &ConnectorStats::lag},
      {"rill_connector_lag_bytes", "gauge",
       "WAL bytes a change-data-capture source holds for the connector (slot lag).",
       &ConnectorStats::lag_bytes},
      {"rill_connector_snapshot_rows", "gauge",
       "Rows copied by a change-data-capture connector's initial snapshot.",
       &ConnectorStats::snapshot_rows},
  };
  std::vector<ConnectorStats> stats;
  for (const auto& c : connectors) stats.push_back(c->stats());
  for (const auto& f : kFamilies) {
    w.Family(f.name, f.type, f.help);
    for (size_t i = 0; i < connectors.size(); ++i) {
      w.Sample(f.name, static_cast<double>(stats[i].*f.field),
               Writer::Label("connector", connectors[i]->name()));
    }
  }
  w.Family("rill_kafka_partition_lag", "gauge",
           "High watermark minus position per Kafka partition (last known).");
  for (const auto& c : connectors) {
    auto kafka = std::dynamic_pointer_cast<KafkaConnector>(c);
    if (!kafka) continue;
    for (const auto& [tp, lag] : kafka->lags()) {
      w.Sample("rill_kafka_partition_lag", static_cast<double>(lag),
               Writer::Label("connector", c->name()) + "," + Writer::Label("topic", tp.first) +
                   "," + Writer::Label("partition", std::to_string(tp.second)));
    }
  }

  // The sinks' counters (SinkStats), one family each.
  struct SinkFamily {
    const char* name;
    const char* type;
    const char* help;
    double (*value)(const SinkStats&);
  };
  static constexpr SinkFamily kSinkFamilies[] = {
      {"rill_sink_rows_written_total", "counter", "Change rows committed at the sink's target.",
       [](const SinkStats& s) { return static_cast<double>(s.rows_written); }},
      {"rill_sink_batches_total", "counter", "Commits at the sink's target.",
       [](const SinkStats& s) { return static_cast<double>(s.batches); }},
      {"rill_sink_bytes_total", "counter", "Bytes written by the sink (as its writer counts).",
       [](const SinkStats& s) { return static_cast<double>(s.bytes); }},
      {"rill_sink_errors_total", "counter", "Failed writes or commits.",
       [](const SinkStats& s) { return static_cast<double>(s.errors); }},
      {"rill_sink_retries_total", "counter", "Retries after a failure (on_error=retry).",
       [](const SinkStats& s) { return static_cast<double>(s.retries); }},
      {"rill_sink_dropped_rows_total", "counter", "Change rows dropped (on_error=drop).",
       [](const SinkStats& s) { return static_cast<double>(s.dropped_rows); }},
      {"rill_sink_snapshots_total", "counter", "Full-state writes after falling behind the log.",
       [](const SinkStats& s) { return static_cast<double>(s.snapshots); }},
      {"rill_sink_lag_versions", "gauge", "Table versions not yet committed at the target.",
       [](const SinkStats& s) { return static_cast<double>(s.lag_versions); }},
      {"rill_sink_lag_seconds", "gauge", "Age of the oldest change not yet committed.",
       [](const SinkStats& s) { return s.lag_seconds; }},
      {"rill_sink_backpressure", "gauge", "1 while the sink holds back its table's connectors.",
       [](const SinkStats& s) { return s.backpressure ? 1.0 : 0.0; }},
  };
  auto sinks = SinkSet::For(ctx.engine).List();
  std::vector<SinkStats> sink_stats;
  for (const auto& s : sinks) sink_stats.push_back(s->stats());
  for (const auto& f : kSinkFamilies) {
    w.Family(f.name, f.type, f.help);
    for (size_t i = 0; i < sinks.size(); ++i) {
      w.Sample(f.name, f.value(sink_stats[i]),
               Writer::Label("sink", sinks[i]->name()) + "," +
                   Writer::Label("type", sinks[i]->type()));
    }
  }

  // This instance in its scaled-out application (none outside one).
  if (cluster::Application* app = cluster::Application::For(ctx.engine)) {
    const cluster::ClusterStatus st = app->status();
    const std::string labels =
        Writer::Label("app_id", st.app_id) + "," + Writer::Label("instance_id", st.instance_id);
    struct Metric {
      const char* name;
      const char* type;
      const char* help;
      double value;
    };
    const Metric metrics[] = {
        {"rill_cluster_partitions_owned", "gauge",
         "Input partitions this instance owns.",
         static_cast<double>(st.partitions.size())},
        {"rill_cluster_generation", "gauge",
         "The consumer group generation this instance last joined (-1 before joining).",
         static_cast<double>(st.generation)},
        {"rill_cluster_rebalances_total", "counter",
         "Partition assignments received.",
         static_cast<double>(st.group.assigns)},
        {"rill_cluster_partitions_revoked_total", "counter",
         "Partitions handed back at rebalances.",
         static_cast<double>(st.group.partitions_revoked)},
        {"rill_cluster_last_rebalance_seconds", "gauge",
         "Revoke to assign of the last rebalance.",
         st.group.last_rebalance_seconds},
        {"rill_cluster_commits_total", "counter",
         "Transactions of the instance's producer that committed (exactly_once).",
         static_cast<double>(st.commits.commits)},
        {"rill_cluster_commit_seconds", "gauge",
         "Duration of the last transaction commit.",
         st.commits.last_commit_ms / 1000.0},
        {"rill_cluster_fenced", "gauge",
         "1 once the instance's producer was fenced (another took its transactional id).",
         st.commits.fenced ? 1.0 : 0.0},
        {"rill_cluster_partitions_restored_total", "counter",
         "Partition shards restored (keyed tables): from their input, changelog or checkpoint.",
         static_cast<double>(st.group.partitions_restored)},
        {"rill_cluster_restored_records_total", "counter",
         "Records read (input or changelog) to restore partition shards.",
         static_cast<double>(st.group.restored_records)},
        {"rill_cluster_restored_bytes_total", "counter",
         "Bytes read (input or changelog) to restore partition shards.",
         static_cast<double>(st.group.restored_bytes)},
        {"rill_cluster_partitions_from_checkpoint_total", "counter",
         "Partition shards restored from the instance's local checkpoint (only the records "
         "after it replayed).",
         static_cast<double>(st.group.partitions_from_checkpoint)},
        {"rill_cluster_partitions_from_changelog_total", "counter",
         "Partition shards restored from their table's changelog topic.",
         static_cast<double>(st.group.partitions_from_changelog)},
        {"rill_cluster_last_restore_seconds", "gauge",
         "Duration of the last partition shard restore (replay and apply).",
         st.group.last_restore_seconds},
    };
    for (const Metric& m : metrics) {
      w.Family(m.name, m.type, m.help);
      w.Sample(m.name, m.value, labels);
    }
  }

  w.Family("rill_table_rows", "gauge", "Live rows per table.");
  std::vector<std::pair<std::string, std::shared_ptr<const TableVersion>>> versions;
  for (const auto& name : ctx.engine->TableNames()) {
    if (auto t = ctx.engine->GetTable(name); t.ok()) {
      versions.emplace_back(name, (*t)->snapshot());
    }
  }
  for (const auto& [name, v] : versions) {
    w.Sample("rill_table_rows", static_cast<double>(v->num_rows()), Writer::Label("table", name));
  }
  w.Family("rill_table_bytes", "gauge", "Bytes held per table.");
  for (const auto& [name, v] : versions) {
    w.Sample("rill_table_bytes", static_cast<double>(v->nbytes()), Writer::Label("table", name));
  }

  w.Family("rill_task_failures_total", "counter", "Failed runs per task.");
  for (const auto& [name, s] : ctx.engine->TaskStatistics()) {
    w.Sample("rill_task_failures_total", static_cast<double>(s.errors),
             Writer::Label("task", name));
  }

  w.Family("rill_tick_duration_seconds", "histogram",
           "Tick durations, sampled every 50 ms while the server runs.");
  ctx.tick_seconds.Render("rill_tick_duration_seconds", "", &out);
  w.Family("rill_query_duration_seconds", "histogram", "SQL query durations by protocol.");
  ctx.query_seconds.Render("rill_query_duration_seconds", Writer::Label("protocol", "http"),
                           &out);

  w.Family("rill_alerts_total", "counter",
           "Alerts recorded since the server started, by severity and source.");
  {
    std::lock_guard<std::mutex> lock(ctx.alerts_mu);
    for (const auto& [key, count] : ctx.alerts_by) {
      w.Sample("rill_alerts_total", static_cast<double>(count),
               Writer::Label("severity", key.first) + "," + Writer::Label("source", key.second));
    }
  }

  w.Family("rill_open_connections", "gauge", "Open network connections by protocol.");
  const ServerCounters& c = ctx.counters;
  w.Sample("rill_open_connections", static_cast<double>(c.http_open.load()),
           Writer::Label("protocol", "http"));
  w.Sample("rill_open_connections", static_cast<double>(c.websocket_open.load()),
           Writer::Label("protocol", "websocket"));
  w.Sample("rill_open_connections", static_cast<double>(c.pgwire_open.load()),
           Writer::Label("protocol", "pgwire"));
  w.Family("rill_http_requests_total", "counter", "HTTP requests handled.");
  w.Sample("rill_http_requests_total", static_cast<double>(c.requests.load()));
  w.Family("rill_websocket_frames_dropped_total", "counter",
           "WebSocket frames dropped for slow clients.");
  w.Sample("rill_websocket_frames_dropped_total", static_cast<double>(c.ws_frames_dropped.load()));
  return out;
}

}  // namespace rill::server
