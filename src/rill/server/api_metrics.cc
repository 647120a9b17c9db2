// Alerts, KPI queries and alert rules over HTTP (the metrics database):
//   GET  /api/v1/alerts?since=&until=&severity=&source=&limit=    POST /api/v1/alerts
//   GET  /api/v1/kpis   POST /api/v1/kpis   DELETE /api/v1/kpis/{name}
//   GET  /api/v1/kpis/{name}/history?since=&until=&points=&column=
//   GET  /api/v1/rules  POST /api/v1/rules  PATCH /api/v1/rules/{name}  DELETE /api/v1/rules/{name}
#include <cmath>

#include "rill/engine/engine.h"
#include "rill/metrics/metrics_store.h"
#include "rill/server/json_body.h"
#include "rill/server/json_writer.h"
#include "rill/server/server_internal.h"
#include "rill/sql/query_interrupt.h"
#include "rill/sql/sql_engine.h"

namespace rill::server {

HttpReply HistoryReply(ServerContext& ctx, const HttpRequest& request, const std::string& table,
                       const std::string& extra_filter);

/// Run `sql` on the metrics database with the server's query timeout
/// (Cancelled, counted in query_timeouts, when it ran out). Worker threads.
Result<std::shared_ptr<arrow::Table>> RunMetricsQuery(ServerContext& ctx,
                                                      const std::string& sql) {
  return RunWithQueryTimeout(ctx,
                             [&](QueryInterrupt* interrupt) {
                               return ctx.metrics->QueryMetrics(sql, interrupt);
                             });
}

namespace {

namespace json = boost::json;

std::string SqlString(std::string_view text) {
  std::string out = "'";
  for (char c : text) {
    out.push_back(c);
    if (c == '\'') {
      out.push_back('\'');
    }
  }
  out.push_back('\'');
  return out;
}

Result<std::string> AlertsSql(const HttpRequest& request) {
  std::string where = "WHERE TRUE";
  for (const char* bound : {"since", "until"}) {
    if (auto text = request.param(bound); text && !text->empty()) {
      char* end = nullptr;
      double v = std::strtod(text->c_str(), &end);
      if (end != text->c_str() + text->size() || !std::isfinite(v)) {
        return Status::Invalid("query parameter '", bound, "' must be a number");
      }
      where += std::string(" AND ts ") + (bound[0] == 's' ? ">= " : "<= ") + std::to_string(v);
    }
  }
  if (auto severity = request.param("severity"); severity && !severity->empty()) {
    RILL_ASSIGN_OR_RAISE(Severity parsed, ParseSeverity(*severity));
    where += std::string(" AND severity = '") + SeverityName(parsed) + "'";
  }
  if (auto source = request.param("source"); source && !source->empty()) {
    if (*source != "user" && *source != "engine" && *source != "rule") {
      return Status::Invalid("query parameter 'source' must be user, engine or rule");
    }
    where += " AND source = " + SqlString(*source);
  }
  int64_t limit = 100;
  if (auto text = request.param("limit"); text && !text->empty()) {
    char* end = nullptr;
    long long v = std::strtoll(text->c_str(), &end, 10);
    if (end != text->c_str() + text->size() || v < 1 || v > 100000) {
      return Status::Invalid("query parameter 'limit' must be an integer from 1 to 100000");
    }
    limit = v;
  }
  return "SELECT * FROM rill_alerts " + where + " ORDER BY ts DESC LIMIT " +
         std::to_string(limit);
}

HttpReply TableReply(ServerContext& ctx, Result<std::shared_ptr<arrow::Table>> result) {
  if (!result.ok()) {
    return StatusReply(result.status());
  }
  auto text = TableToJson(**result, ctx.options.max_json_result_bytes);
  if (!text.ok()) {
    return StatusReply(text.status());
  }
  return JsonReply(std::move(*text));
}

HttpReply PostAlert(ServerContext& ctx, const HttpRequest& request) {
  auto obj = ParseJsonObject(request.body);
  if (!obj.ok()) return StatusReply(obj.status());
  auto message = GetString(*obj, "message");
  auto severity = GetString(*obj, "severity");
  auto detail = GetString(*obj, "detail");
  auto component = GetString(*obj, "component");
  for (const auto* r : {&message, &severity, &detail, &component}) {
    if (!r->ok()) return StatusReply(r->status());
  }
  if (!message->has_value() || (*message)->empty()) {
    return ErrorReply(400, "field 'message' is required");
  }
  auto parsed = ParseSeverity(severity->value_or("warning"));
  if (!parsed.ok()) return StatusReply(parsed.status());
  EngineEvent event;
  event.ts = ctx.engine->Now();
  event.severity = *parsed;
  event.source = EventSource::kUser;
  event.component = component->value_or("");
  event.message = **message;
  event.detail = detail->value_or("");
  ctx.engine->RecordEvent(std::move(event));
  // Written before the reply, so a following GET sees it.
  Status flushed = ctx.metrics->Flush();
  if (!flushed.ok()) return StatusReply(flushed);
  return JsonReply("{\"ok\":true}", 201);
}

json::object KpiJson(const KpiSnapshot& k) {
  json::object o;
  o["name"] = k.query.name;
  o["sql"] = k.query.sql;
  o["interval_seconds"] = k.query.interval_seconds;
  o["chart_type"] = ChartTypeName(k.query.chart_type);
  o["x_col"] = k.query.x_col;
  o["y_col"] = k.query.y_col;
  o["last_run_at"] = k.last_run_at ? JsonNumber(*k.last_run_at) : json::value(nullptr);
  o["value"] = k.value ? JsonNumber(*k.value) : json::value(nullptr);
  o["last_error"] = k.last_error;
  o["runs"] = k.runs;
  o["errors"] = k.errors;
  return o;
}

/// Bind and plan `sql` (one read statement) without running it: DuckDB's
/// Prepare, which reads no table. A slow query is accepted here; its runs are
/// bounded by the metrics store's query_timeout_seconds.
Status CheckKpiSql(ServerContext& ctx, const std::string& sql) {
  RILL_ASSIGN_OR_RAISE(auto parameters, ctx.engine->sql().ParameterTypes(sql));
  if (!parameters.empty()) {
    return Status::Invalid("a KPI query takes no parameters ($1, ...)");
  }
  return Status::OK();
}

HttpReply PostKpi(ServerContext& ctx, const HttpRequest& request) {
  auto obj = ParseJsonObject(request.body);
  if (!obj.ok()) return StatusReply(obj.status());
  auto name = GetString(*obj, "name");
  auto sql = GetString(*obj, "sql");
  auto interval = GetNumber(*obj, "interval_seconds");
  auto chart = GetString(*obj, "chart_type");
  auto x = GetString(*obj, "x_col");
  auto y = GetString(*obj, "y_col");
  for (const auto* r : {&name, &sql, &chart, &x, &y}) {
    if (!r->ok()) return StatusReply(r->status());
  }
  if (!interval.ok()) return StatusReply(interval.status());
  if (!name->has_value() || !sql->has_value()) {
    return ErrorReply(400, "fields 'name' and 'sql' are required");
  }
  // Check the SQL now, so a typo is a 400 and not a failing card.
  if (auto checked = CheckKpiSql(ctx, **sql); !checked.ok()) {
    return StatusReply(checked);
  }
  Status st = ctx.metrics->AddKpiQuery(**name, **sql, interval->value_or(1.0),
                                       chart->value_or("line"), x->value_or("ts"),
                                       y->value_or(""));
  if (!st.ok()) return StatusReply(st);
  return JsonReply("{\"ok\":true}", 201);
}

json::object RuleJson(const AlertRuleInfo& info) {
  const AlertRule& r = info.rule;
  json::object o;
  o["name"] = r.name;
  o["metric"] = r.metric;
  o["op"] = CompareOpName(r.op);
  o["threshold"] = JsonNumber(r.threshold);
  o["cooldown_seconds"] = r.cooldown_seconds;
  o["severity"] = SeverityName(r.severity);
  o["message"] = r.message;
  o["webhook"] = r.webhook ? json::value(*r.webhook) : json::value(nullptr);
  o["webhook_format"] = r.webhook_format;
  o["enabled"] = r.enabled;
  o["created_at"] = info.state.created_at;
  o["last_fired_at"] =
      info.state.last_fired_at ? JsonNumber(*info.state.last_fired_at) : json::value(nullptr);
  o["fire_count"] = info.state.fire_count;
  o["last_value"] =
      info.state.last_value ? JsonNumber(*info.state.last_value) : json::value(nullptr);
  return o;
}

/// Apply the fields present in `obj` to `rule`.
Status ApplyRuleFields(const json::object& obj, AlertRule* rule) {
  RILL_ASSIGN_OR_RAISE(auto metric, GetString(obj, "metric"));
  RILL_ASSIGN_OR_RAISE(auto op, GetString(obj, "op"));
  RILL_ASSIGN_OR_RAISE(auto threshold, GetNumber(obj, "threshold"));
  RILL_ASSIGN_OR_RAISE(auto cooldown, GetNumber(obj, "cooldown_seconds"));
  RILL_ASSIGN_OR_RAISE(auto severity, GetString(obj, "severity"));
  RILL_ASSIGN_OR_RAISE(auto message, GetString(obj, "message"));
  RILL_ASSIGN_OR_RAISE(auto webhook, GetString(obj, "webhook"));
  RILL_ASSIGN_OR_RAISE(auto webhook_format, GetString(obj, "webhook_format"));
  RILL_ASSIGN_OR_RAISE(auto enabled, GetBool(obj, "enabled"));
  if (metric) rule->metric = *metric;
  if (op) {
    RILL_ASSIGN_OR_RAISE(rule->op, ParseCompareOp(*op));
  }
  if (threshold) rule->threshold = *threshold;
  if (cooldown) rule->cooldown_seconds = *cooldown;
  if (severity) {
    RILL_ASSIGN_OR_RAISE(rule->severity, ParseSeverity(*severity));
  }
  if (message) rule->message = *message;
  if (webhook) rule->webhook = webhook->empty() ? std::nullopt : webhook;
  if (webhook_format) rule->webhook_format = *webhook_format;
  if (enabled) rule->enabled = *enabled;
  return rule->Validate();
}

HttpReply PostRule(ServerContext& ctx, const HttpRequest& request) {
  auto obj = ParseJsonObject(request.body);
  if (!obj.ok()) return StatusReply(obj.status());
  auto name = GetString(*obj, "name");
  if (!name.ok()) return StatusReply(name.status());
  if (!name->has_value() || !obj->contains("metric") || !obj->contains("threshold")) {
    return ErrorReply(400, "fields 'name', 'metric' and 'threshold' are required");
  }
  AlertRule rule;
  rule.name = **name;
  Status st = ApplyRuleFields(*obj, &rule);
  if (st.ok()) st = ctx.metrics->AddAlertRule(std::move(rule));
  if (!st.ok()) return StatusReply(st);
  return JsonReply("{\"ok\":true}", 201);
}

HttpReply PatchRule(ServerContext& ctx, const HttpRequest& request, const std::string& name) {
  auto obj = ParseJsonObject(request.body);
  if (!obj.ok()) return StatusReply(obj.status());
  for (const auto& info : ctx.metrics->AlertRules()) {
    if (info.rule.name == name) {
      AlertRule rule = info.rule;
      Status st = ApplyRuleFields(*obj, &rule);
      if (st.ok()) st = ctx.metrics->AddAlertRule(std::move(rule));
      if (!st.ok()) return StatusReply(st);
      return JsonReply("{\"ok\":true}");
    }
  }
  return ErrorReply(404, "no alert rule named '" + name + "'");
}

HttpReply Kpis(ServerContext& ctx, const HttpRequest& request, std::string_view rest) {
  if (rest.empty()) {
    if (request.method == "GET") {
      json::array out;
      for (const auto& k : ctx.metrics->LatestKpis()) out.push_back(KpiJson(k));
      return JsonReply(json::serialize(json::object{{"kpis", std::move(out)}}));
    }
    if (request.method == "POST") return PostKpi(ctx, request);
    return ErrorReply(405, "use GET or POST");
  }
  constexpr std::string_view kHistory = "/history";
  if (rest.size() > kHistory.size() && rest.substr(rest.size() - kHistory.size()) == kHistory) {
    std::string name(rest.substr(0, rest.size() - kHistory.size()));
    std::string filter = " AND query = " + SqlString(name);
    if (auto column = request.param("column"); column && !column->empty()) {
      filter += " AND column_name = " + SqlString(*column);
    }
    return HistoryReply(ctx, request, "rill_kpi_history", filter);
  }
  if (request.method != "DELETE") return ErrorReply(405, "use DELETE");
  Status st = ctx.metrics->RemoveKpiQuery(std::string(rest));
  return st.ok() ? JsonReply("{\"ok\":true}") : StatusReply(st);
}

HttpReply Rules(ServerContext& ctx, const HttpRequest& request, std::string_view rest) {
  if (rest.empty()) {
    if (request.method == "GET") {
      json::array out;
      for (const auto& r : ctx.metrics->AlertRules()) out.push_back(RuleJson(r));
      return JsonReply(json::serialize(json::object{{"rules", std::move(out)}}));
    }
    if (request.method == "POST") return PostRule(ctx, request);
    return ErrorReply(405, "use GET or POST");
  }
  std::string name(rest);
  if (request.method == "PATCH" || request.method == "PUT") {
    return PatchRule(ctx, request, name);
  }
  if (request.method != "DELETE") return ErrorReply(405, "use PATCH or DELETE");
  Status st = ctx.metrics->RemoveAlertRule(name);
  return st.ok() ? JsonReply("{\"ok\":true}") : StatusReply(st);
}

/// "/api/v1/kpis/x" with prefix "/api/v1/kpis" -> "x"; nullopt when not under it.
std::optional<std::string_view> Under(std::string_view path, std::string_view prefix) {
  if (path == prefix) return std::string_view();
  if (path.size() > prefix.size() + 1 && path.substr(0, prefix.size()) == prefix &&
      path[prefix.size()] == '/') {
    return path.substr(prefix.size() + 1);
  }
  return std::nullopt;
}

}  // namespace

std::optional<HttpReply> RouteMetrics(ServerContext& ctx, const HttpRequest& request) {
  const std::string& path = request.path;
  auto alerts = Under(path, "/api/v1/alerts");
  auto kpis = Under(path, "/api/v1/kpis");
  auto rules = Under(path, "/api/v1/rules");
  if (!alerts && !kpis && !rules) {
    return std::nullopt;
  }
  if (ctx.metrics == nullptr) {
    return ErrorReply(503, "this engine has no metrics database");
  }
  if (alerts) {
    if (!alerts->empty()) return ErrorReply(404, "no such route");
    if (request.method == "POST") return PostAlert(ctx, request);
    if (request.method != "GET") return ErrorReply(405, "use GET or POST");
    auto sql = AlertsSql(request);
    if (!sql.ok()) return StatusReply(sql.status());
    return TableReply(ctx, RunMetricsQuery(ctx, *sql));
  }
  if (kpis) return Kpis(ctx, request, *kpis);
  return Rules(ctx, request, *rules);
}

}  // namespace rill::server
