#include "rill/metrics/metrics_checkpoint.h"

#include <simdjson.h>

#include "rill/common/json_text.h"
#include "rill/engine/checkpoint.h"
#include "rill/metrics/metrics_store.h"

namespace rill {

namespace {

std::string SaveDefinitions(MetricsStore* store) {
  std::string j = "{\"kpi_queries\":[";
  if (!store) return j + "],\"alert_rules\":[]}";
  bool first = true;
  for (const auto& k : store->LatestKpis()) {
    const KpiQuery& q = k.query;
    j += first ? "" : ",";
    first = false;
    j += "{\"name\":" + JsonString(q.name) + ",\"sql\":" + JsonString(q.sql) +
         ",\"interval_seconds\":";
    AppendJsonNumber(&j, q.interval_seconds);
    j += ",\"chart_type\":" + JsonString(ChartTypeName(q.chart_type)) +
         ",\"x_col\":" + JsonString(q.x_col) + ",\"y_col\":" + JsonString(q.y_col) + "}";
  }
  j += "],\"alert_rules\":[";
  first = true;
  for (const auto& info : store->AlertRules()) {
    const AlertRule& r = info.rule;
    j += first ? "" : ",";
    first = false;
    j += "{\"name\":" + JsonString(r.name) + ",\"metric\":" + JsonString(r.metric) +
         ",\"op\":" + JsonString(CompareOpName(r.op)) + ",\"threshold\":";
    AppendJsonNumber(&j, r.threshold);
    j += ",\"cooldown_seconds\":";
    AppendJsonNumber(&j, r.cooldown_seconds);
    j += ",\"severity\":" + JsonString(SeverityName(r.severity)) +
         ",\"message\":" + JsonString(r.message) +
         ",\"webhook\":" + (r.webhook ? JsonString(*r.webhook) : std::string("null")) +
         ",\"webhook_format\":" + JsonString(r.webhook_format) +
         ",\"enabled\":" + (r.enabled ? "true" : "false") + "}";
  }
  return j + "]}";
}

Status RestoreDefinitions(MetricsStore* store, std::string_view text) {
  if (!store) return Status::OK();
  simdjson::dom::parser parser;
  simdjson::padded_string padded(text);
  simdjson::dom::element doc;
  simdjson::dom::array kpis, rules;
  if (parser.parse(padded).get(doc) || doc["kpi_queries"].get_array().get(kpis) ||
      doc["alert_rules"].get_array().get(rules)) {
    return Status::Invalid("checkpoint section 'metrics' is not {kpi_queries, alert_rules}");
  }
  for (simdjson::dom::element k : kpis) {
    KpiQuery q;
    std::string_view name, sql, chart, x, y;
    if (k["name"].get_string().get(name) || k["sql"].get_string().get(sql) ||
        k["interval_seconds"].get_double().get(q.interval_seconds) ||
        k["chart_type"].get_string().get(chart) || k["x_col"].get_string().get(x) ||
        k["y_col"].get_string().get(y)) {
      return Status::Invalid("checkpoint section 'metrics': a KPI query entry is incomplete");
    }
    q.name = std::string(name);
    q.sql = std::string(sql);
    RILL_ASSIGN_OR_RAISE(q.chart_type, ParseChartType(chart));
    q.x_col = std::string(x);
    q.y_col = std::string(y);
    RILL_RETURN_NOT_OK(store->AddKpiQuery(std::move(q)));
  }
  for (simdjson::dom::element e : rules) {
    AlertRule r;
    std::string_view name, metric, op, severity, message, format;
    bool enabled = true;
    if (e["name"].get_string().get(name) || e["metric"].get_string().get(metric) ||
        e["op"].get_string().get(op) || e["threshold"].get_double().get(r.threshold) ||
        e["cooldown_seconds"].get_double().get(r.cooldown_seconds) ||
        e["severity"].get_string().get(severity) || e["message"].get_string().get(message) ||
        e["webhook_format"].get_string().get(format) || e["enabled"].get_bool().get(enabled)) {
      return Status::Invalid("checkpoint section 'metrics': an alert rule entry is incomplete");
    }
    r.name = std::string(name);
    r.metric = std::string(metric);
    RILL_ASSIGN_OR_RAISE(r.op, ParseCompareOp(op));
    RILL_ASSIGN_OR_RAISE(r.severity, ParseSeverity(severity));
    r.message = std::string(message);
    r.webhook_format = std::string(format);
    r.enabled = enabled;
    std::string_view webhook;
    if (!e["webhook"].get_string().get(webhook)) r.webhook = std::string(webhook);
    RILL_RETURN_NOT_OK(store->AddAlertRule(std::move(r)));
  }
  return Status::OK();
}

}  // namespace

void AddMetricsCheckpointSection(Checkpointer& checkpointer,
                                 std::function<MetricsStore*()> store) {
  checkpointer.AddSection(
      kMetricsCheckpointSection,
      [store]() -> Result<std::string> { return SaveDefinitions(store()); },
      [store](std::string_view text) { return RestoreDefinitions(store(), text); });
}

}  // namespace rill
