// Request routing: the public routes (/healthz, static assets, login), the
// token check, and dispatch to the route groups of api_*.cc.
#include <chrono>

#include "rill/engine/engine.h"
#include "rill/server/auth.h"
#include "rill/server/json_body.h"
#include "rill/server/json_writer.h"
#include "rill/server/server_internal.h"
#include "rill/server/static_assets.h"
#include "rill/server/webhook_route.h"

namespace rill::server {

namespace {

constexpr const char* kVersion = "0.1.0";

double WallNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

HttpReply Login(ServerContext& ctx, const HttpRequest& request) {
  auto obj = ParseJsonObject(request.body);
  if (!obj.ok()) {
    return StatusReply(obj.status());
  }
  auto token = GetString(*obj, "token");
  if (!token.ok()) {
    return StatusReply(token.status());
  }
  if (!token->has_value() ||
      (!ctx.token.empty() && !ConstantTimeEquals(**token, ctx.token))) {
    return ErrorReply(401, "unauthorized");
  }
  HttpReply reply = JsonReply("{\"ok\":true}");
  reply.headers.emplace_back("Set-Cookie", std::string(kTokenCookie) + "=" + ctx.token +
                                               "; Path=/; HttpOnly; SameSite=Strict");
  return reply;
}

HttpReply Logout() {
  HttpReply reply = JsonReply("{\"ok\":true}");
  reply.headers.emplace_back("Set-Cookie", std::string(kTokenCookie) +
                                               "=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0");
  return reply;
}

HttpReply Info(ServerContext& ctx) {
  boost::json::object info;
  info["name"] = "rill";
  info["version"] = kVersion;
  double now = WallNow();
  info["started_at"] = ctx.started_at;
  info["uptime_seconds"] = now - ctx.started_at;
  info["address"] = ctx.address;
  info["auth"] = !ctx.token.empty();
  info["metrics_database"] = ctx.metrics != nullptr;
  boost::json::array tables;
  for (const auto& name : ctx.engine->TableNames()) {
    tables.emplace_back(name);
  }
  info["tables"] = std::move(tables);
  info["engine_running"] = ctx.engine->running();
  return JsonReply(boost::json::serialize(info));
}

HttpReply Static(const HttpRequest& request) {
  auto asset = FindStaticAsset(request.path);
  if (asset == nullptr) {
    return ErrorReply(404, "not found");
  }
  HttpReply reply;
  reply.content_type = asset->content_type;
  reply.body = asset->body;
  reply.headers.emplace_back("Cache-Control", "no-cache");
  reply.headers.emplace_back("X-Content-Type-Options", "nosniff");
  return reply;
}

bool StartsWith(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

HttpReply Authorized(ServerContext& ctx, const HttpRequest& request) {
  const std::string& path = request.path;
  if (path == "/metrics") {
    if (request.method != "GET") {
      return ErrorReply(405, "use GET");
    }
    HttpReply reply;
    reply.content_type = "text/plain; version=0.0.4; charset=utf-8";
    reply.body = RenderPrometheus(ctx);
    return reply;
  }
  if (path == "/api/webhook/send" || path == "/api/v1/webhook/send") {
    if (request.method != "POST") {
      return ErrorReply(405, "use POST");
    }
    return HandleWebhookSend(request.body, ctx.options.allow_private_webhooks);
  }
  if (path == "/api/v1/info") {
    return Info(ctx);
  }
  if (path == "/api/v1/logout") {
    return Logout();
  }
  if (path == "/api/v1/stream") {
    return ErrorReply(426, "GET /api/v1/stream needs a WebSocket upgrade");
  }
  for (auto* route : {&RouteQuery, &RouteTables, &RouteMetrics}) {
    std::optional<HttpReply> reply = (*route)(ctx, request);
    if (reply.has_value()) {
      return std::move(*reply);
    }
  }
  return ErrorReply(404, "no such route: " + request.method + " " + path);
}

}  // namespace

HttpReply HandleRequest(ServerContext& ctx, const HttpRequest& request) {
  ctx.counters.requests.fetch_add(1, std::memory_order_relaxed);
  const std::string& path = request.path;
  if (path == "/healthz") {
    return JsonReply("{\"status\":\"ok\"}");
  }
  if (path == "/api/v1/login") {
    if (request.method != "POST") {
      return ErrorReply(405, "use POST");
    }
    return Login(ctx, request);
  }
  bool api = StartsWith(path, "/api/") || path == "/api" || path == "/metrics";
  if (!api) {
    if (request.method != "GET" && request.method != "HEAD") {
      return ErrorReply(405, "static files accept GET only");
    }
    return Static(request);
  }
  if (!IsAuthorized(request, ctx.token)) {
    HttpReply reply = ErrorReply(401, "unauthorized");
    reply.headers.emplace_back("WWW-Authenticate", "Bearer");
    return reply;
  }
  return Authorized(ctx, request);
}

}  // namespace rill::server
