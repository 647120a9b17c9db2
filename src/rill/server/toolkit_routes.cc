// Seed 001's toolkit over HTTP (docs/api.md, "Queues, analytics and windows"):
//   GET  /api/v1/queues                      POST /api/v1/queues {name, max_size, on_overflow}
//   GET  /api/v1/queues/{name}[/stats]       DELETE /api/v1/queues/{name}
//   POST /api/v1/queues/{name}/enqueue {message | messages, priority}
//   POST /api/v1/queues/{name}/dequeue[?count=N]   GET /api/v1/queues/{name}/peek
//   GET  /api/v1/analytics/metrics           POST /api/v1/analytics/metrics {name, value, timestamp}
//   GET  /api/v1/analytics/metrics/{name}    DELETE /api/v1/analytics/metrics/{name}
//   GET  /api/v1/windows                     GET /api/v1/windows/{name}/results[?limit=N]
//   GET  /api/v1/windows/{name}/late[?limit=N]
// The queues and metrics live in the server's toolkit::Toolkit (ServerOptions::
// toolkit, or one the server makes); window results are the output tables of
// the engine's window tasks.
#include <cmath>
#include <type_traits>

#include "rill/engine/engine.h"
#include "rill/engine/window_task.h"
#include "rill/server/json_body.h"
#include "rill/server/json_writer.h"
#include "rill/server/server_internal.h"
#include "rill/sql/sql_engine.h"
#include "rill/toolkit/toolkit.h"

namespace rill::server {

namespace {

namespace json = boost::json;
using toolkit::MessageQueue;
using toolkit::QueueStats;

constexpr std::string_view kQueues = "/api/v1/queues";
constexpr std::string_view kMetrics = "/api/v1/analytics/metrics";
constexpr std::string_view kWindows = "/api/v1/windows";

json::value Optional(const std::optional<double>& v) {
  return v.has_value() ? JsonNumber(*v) : json::value(nullptr);
}

json::object StatsJson(const QueueStats& s) {
  json::object o;
  s.ForEachField([&](const char* name, const auto& value) {
    using T = std::decay_t<decltype(value)>;
    if constexpr (std::is_same_v<T, std::optional<double>>) {
      o[name] = Optional(value);
    } else if constexpr (std::is_same_v<T, double>) {
      o[name] = JsonNumber(value);
    } else {
      o[name] = value;
    }
  });
  return o;
}

HttpReply Json(const json::value& v, int status = 200) {
  return JsonReply(json::serialize(v), status);
}

/// Parse an integer field; nullopt when absent.
Result<std::optional<int64_t>> GetInt(const json::object& obj, std::string_view key) {
  RILL_ASSIGN_OR_RAISE(auto number, GetNumber(obj, key));
  if (!number.has_value()) return std::optional<int64_t>();
  if (std::floor(*number) != *number || std::fabs(*number) > 9e15) {
    return Status::Invalid("field '", std::string(key), "' must be an integer");
  }
  return std::optional<int64_t>(static_cast<int64_t>(*number));
}

Result<int64_t> IntParam(const HttpRequest& request, const std::string& name, int64_t fallback,
                         int64_t max) {
  auto text = request.param(name);
  if (!text || text->empty()) return fallback;
  char* end = nullptr;
  long long v = std::strtoll(text->c_str(), &end, 10);
  if (end != text->c_str() + text->size() || v < 1 || v > max) {
    return Status::Invalid("query parameter '", name, "' must be an integer from 1 to ", max);
  }
  return static_cast<int64_t>(v);
}

HttpReply CreateQueue(ServerContext& ctx, const HttpRequest& request) {
  auto obj = ParseJsonObject(request.body);
  if (!obj.ok()) return StatusReply(obj.status());
  auto name = GetString(*obj, "name");
  if (!name.ok()) return StatusReply(name.status());
  if (!name->has_value()) return ErrorReply(400, "field 'name' is required");
  toolkit::QueueOptions options;
  options.name = **name;
  auto max_size = GetInt(*obj, "max_size");
  if (!max_size.ok()) return StatusReply(max_size.status());
  if (max_size->has_value()) options.max_size = **max_size;
  auto overflow = GetString(*obj, "on_overflow");
  if (!overflow.ok()) return StatusReply(overflow.status());
  if (overflow->has_value()) {
    auto parsed = toolkit::ParseQueueOverflow(**overflow);
    if (!parsed.ok()) return StatusReply(parsed.status());
    options.on_overflow = *parsed;
  }
  auto queue = ctx.toolkit->queues->CreateQueue(options);
  if (!queue.ok()) return StatusReply(queue.status());
  return Json(StatsJson((*queue)->stats()), 201);
}

HttpReply ListQueues(ServerContext& ctx) {
  toolkit::QueueManagerStats s = ctx.toolkit->queues->stats();
  json::array queues;
  for (const auto& q : s.queues) queues.push_back(StatsJson(q));
  json::object o;
  o["queues"] = std::move(queues);
  o["total_queues"] = s.total_queues;
  o["total_messages"] = s.total_messages;
  o["total_enqueued"] = s.total_enqueued;
  o["total_dequeued"] = s.total_dequeued;
  o["persistent"] = ctx.toolkit->queues->persistent();
  return Json(o);
}

HttpReply Enqueue(MessageQueue& queue, const HttpRequest& request) {
  auto obj = ParseJsonObject(request.body);
  if (!obj.ok()) return StatusReply(obj.status());
  auto priority = GetInt(*obj, "priority");
  if (!priority.ok()) return StatusReply(priority.status());
  std::vector<std::string> bodies;
  if (const json::value* one = obj->if_contains("message")) {
    bodies.push_back(json::serialize(*one));
  } else if (const json::value* many = obj->if_contains("messages")) {
    if (!many->is_array()) return ErrorReply(400, "field 'messages' must be an array");
    for (const auto& m : many->as_array()) bodies.push_back(json::serialize(m));
  } else {
    return ErrorReply(400, "field 'message' (or 'messages') is required");
  }
  size_t asked = bodies.size();
  auto queued = queue.EnqueueBatch(std::move(bodies), *priority);
  if (!queued.ok()) {
    if (queued.status().IsCapacityError()) return ErrorReply(429, queued.status().message());
    return StatusReply(queued.status());
  }
  json::object o;
  o["queued"] = *queued;
  o["dropped"] = static_cast<int64_t>(asked) - *queued;
  o["size"] = queue.size();
  return Json(o, 201);
}

HttpReply Dequeue(MessageQueue& queue, const HttpRequest& request) {
  json::object o;
  if (request.param("count").has_value()) {
    auto count = IntParam(request, "count", 1, 100000);
    if (!count.ok()) return StatusReply(count.status());
    auto taken = queue.DequeueBatch(*count);
    if (!taken.ok()) return StatusReply(taken.status());
    json::array messages;
    for (const auto& body : *taken) messages.push_back(json::parse(body));
    o["messages"] = std::move(messages);
  } else {
    auto taken = queue.Dequeue();
    if (!taken.ok()) return StatusReply(taken.status());
    o["message"] = taken->has_value() ? json::parse(**taken) : json::value(nullptr);
  }
  o["size"] = queue.size();
  return Json(o);
}

std::optional<HttpReply> RouteQueues(ServerContext& ctx, const HttpRequest& request) {
  const std::string& m = request.method;
  std::string_view rest = std::string_view(request.path).substr(kQueues.size());
  if (rest.empty() || rest == "/") {
    if (m == "GET") return ListQueues(ctx);
    if (m == "POST") return CreateQueue(ctx, request);
    return ErrorReply(405, "use GET or POST");
  }
  if (rest[0] != '/') return std::nullopt;
  rest.remove_prefix(1);
  std::string_view action;
  if (size_t slash = rest.rfind('/'); slash != std::string_view::npos) {
    action = rest.substr(slash + 1);
    rest = rest.substr(0, slash);
  }
  std::string name(rest);
  if (action.empty() && m == "DELETE") {
    Status st = ctx.toolkit->queues->DeleteQueue(name);
    if (!st.ok()) return StatusReply(st);
    return Json(json::object{{"deleted", name}});
  }
  auto queue = ctx.toolkit->queues->GetQueue(name);
  if (!queue.ok()) return StatusReply(queue.status());
  if (action.empty() || action == "stats") {
    if (m != "GET") return ErrorReply(405, "use GET (or DELETE on the queue)");
    return Json(StatsJson((*queue)->stats()));
  }
  if (action == "enqueue") {
    if (m != "POST") return ErrorReply(405, "use POST");
    return Enqueue(**queue, request);
  }
  if (action == "dequeue") {
    if (m != "POST") return ErrorReply(405, "use POST");
    return Dequeue(**queue, request);
  }
  if (action == "peek") {
    if (m != "GET") return ErrorReply(405, "use GET");
    auto next = (*queue)->Peek();
    return Json(json::object{{"message", next ? json::parse(*next) : json::value(nullptr)},
                             {"size", (*queue)->size()}});
  }
  return ErrorReply(404, "no such queue action: " + std::string(action));
}

json::object MetricJson(const toolkit::MetricSnapshot& s) {
  json::object o;
  o["name"] = s.name;
  o["count"] = s.count;
  o["sum"] = JsonNumber(s.sum);
  o["avg"] = JsonNumber(s.avg);
  o["min"] = Optional(s.min);
  o["max"] = Optional(s.max);
  o["last"] = Optional(s.last);
  o["first_timestamp"] = Optional(s.first_timestamp);
  o["last_timestamp"] = Optional(s.last_timestamp);
  o["rate_per_second"] = JsonNumber(s.rate_per_second);
  return o;
}

HttpReply TrackMetric(ServerContext& ctx, const HttpRequest& request) {
  auto obj = ParseJsonObject(request.body);
  if (!obj.ok()) return StatusReply(obj.status());
  auto name = GetString(*obj, "name");
  if (!name.ok()) return StatusReply(name.status());
  if (!name->has_value()) return ErrorReply(400, "field 'name' is required");
  auto value = GetNumber(*obj, "value");
  if (!value.ok()) return StatusReply(value.status());
  auto ts = GetNumber(*obj, "timestamp");
  if (!ts.ok()) return StatusReply(ts.status());
  Status st = ctx.toolkit->analytics->Track(**name, value->value_or(1.0), *ts);
  if (!st.ok()) return StatusReply(st);
  return Json(MetricJson(*ctx.toolkit->analytics->Get(**name)), 201);
}

std::optional<HttpReply> RouteAnalytics(ServerContext& ctx, const HttpRequest& request) {
  std::string_view rest = std::string_view(request.path).substr(kMetrics.size());
  const std::string& m = request.method;
  if (rest.empty() || rest == "/") {
    if (m == "POST") return TrackMetric(ctx, request);
    if (m != "GET") return ErrorReply(405, "use GET or POST");
    json::object metrics;
    for (const auto& s : ctx.toolkit->analytics->All()) metrics[s.name] = MetricJson(s);
    return Json(json::object{{"metrics", std::move(metrics)}});
  }
  if (rest[0] != '/') return std::nullopt;
  std::string name(rest.substr(1));
  if (m == "DELETE") {
    if (ctx.toolkit->analytics->Reset(name) == 0) {
      return ErrorReply(404, "no metric named '" + name + "'");
    }
    return Json(json::object{{"deleted", name}});
  }
  if (m != "GET") return ErrorReply(405, "use GET or DELETE");
  auto s = ctx.toolkit->analytics->Get(name);
  if (!s.has_value()) return ErrorReply(404, "no metric named '" + name + "'");
  return Json(MetricJson(*s));
}

std::vector<std::shared_ptr<WindowTask>> WindowTasks(ServerContext& ctx) {
  std::vector<std::shared_ptr<WindowTask>> out;
  for (const auto& task : ctx.engine->Tasks()) {
    if (auto w = std::dynamic_pointer_cast<WindowTask>(task)) out.push_back(std::move(w));
  }
  return out;
}

json::object WindowJson(const WindowTask& task) {
  const WindowTaskOptions& o = task.options();
  WindowTaskStats s = task.stats_snapshot();
  json::object j;
  j["name"] = o.name;
  j["source_table"] = o.source_table;
  j["output_table"] = o.output_table;
  j["late_table"] = task.late_table();
  j["window"] = WindowKindName(o.spec.kind);
  j["time_column"] = o.spec.time_column;
  j["size_seconds"] = JsonNumber(o.spec.size_seconds);
  j["slide_seconds"] = JsonNumber(o.spec.slide_seconds);
  j["gap_seconds"] = JsonNumber(o.spec.gap_seconds);
  j["emit"] = EmitModeName(o.spec.emit);
  json::array group_by;
  for (const auto& g : o.spec.group_by) group_by.emplace_back(g);
  j["group_by"] = std::move(group_by);
  json::object aggs;
  for (const auto& a : o.spec.aggregations) aggs[a.output] = a.expression;
  j["aggregations"] = std::move(aggs);
  j["rows_in"] = s.window.rows_in;
  j["late_rows"] = s.window.late_rows;
  j["windows_open"] = s.window.windows_open;
  j["groups_emitted"] = s.window.groups_emitted;
  j["state_bytes"] = s.window.state_bytes;
  j["watermark"] = JsonNumber(s.window.watermark);
  return j;
}

std::string QuoteIdent(const std::string& name) {
  std::string out = "\"";
  for (char c : name) {
    out.push_back(c);
    if (c == '"') out.push_back('"');
  }
  return out + "\"";
}

HttpReply TableRows(ServerContext& ctx, const HttpRequest& request, const std::string& table,
                    const std::string& order) {
  auto limit = IntParam(request, "limit", 100, 100000);
  if (!limit.ok()) return StatusReply(limit.status());
  if (!ctx.engine->GetTable(table).ok()) {
    // Created on the task's first run: nothing emitted yet.
    return JsonReply("{\"columns\":[],\"rows\":[],\"row_count\":0}");
  }
  std::string sql = "SELECT * FROM " + QuoteIdent(table) + " ORDER BY " + order + " LIMIT " +
                    std::to_string(*limit);
  auto result = ctx.engine->sql().Query(sql);
  if (!result.ok()) return StatusReply(result.status());
  auto text = TableToJson(**result, ctx.options.max_json_result_bytes);
  if (!text.ok()) return StatusReply(text.status());
  return JsonReply(std::move(*text));
}

std::optional<HttpReply> RouteWindows(ServerContext& ctx, const HttpRequest& request) {
  std::string_view rest = std::string_view(request.path).substr(kWindows.size());
  if (request.method != "GET") return ErrorReply(405, "use GET");
  auto tasks = WindowTasks(ctx);
  if (rest.empty() || rest == "/") {
    json::array list;
    for (const auto& t : tasks) list.push_back(WindowJson(*t));
    return Json(json::object{{"windows", std::move(list)}});
  }
  if (rest[0] != '/') return std::nullopt;
  rest.remove_prefix(1);
  std::string_view action;
  if (size_t slash = rest.rfind('/'); slash != std::string_view::npos) {
    action = rest.substr(slash + 1);
    rest = rest.substr(0, slash);
  }
  for (const auto& t : tasks) {
    if (t->options().name != rest) continue;
    if (action.empty()) return Json(WindowJson(*t));
    if (action == "results") {
      return TableRows(ctx, request, t->options().output_table,
                       "window_start DESC, window_end DESC");
    }
    if (action == "late") {
      return TableRows(ctx, request, t->late_table(), "z_insert_ts DESC");
    }
    return ErrorReply(404, "no such window action: " + std::string(action));
  }
  return ErrorReply(404, "no window task named '" + std::string(rest) + "'");
}

bool Under(const std::string& path, std::string_view prefix) {
  return path.compare(0, prefix.size(), prefix) == 0 &&
         (path.size() == prefix.size() || path[prefix.size()] == '/');
}

}  // namespace

std::optional<HttpReply> RouteToolkit(ServerContext& ctx, const HttpRequest& request) {
  if (Under(request.path, kWindows)) return RouteWindows(ctx, request);
  bool queues = Under(request.path, kQueues);
  bool metrics = Under(request.path, kMetrics);
  if (!queues && !metrics) return std::nullopt;
  if (ctx.toolkit == nullptr) return ErrorReply(503, "the toolkit is not available");
  return queues ? RouteQueues(ctx, request) : RouteAnalytics(ctx, request);
}

}  // namespace rill::server
