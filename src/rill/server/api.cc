// Request routing: the public routes (/healthz, static assets, login), the
// token check, and dispatch to the route groups of api_*.cc.
#include <chrono>

#include <boost/asio/ip/address.hpp>

#include "rill/engine/engine.h"
#include "rill/server/auth.h"
#include "rill/server/ingest.h"  // POST /api/v1/ingest/{table}
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

HttpReply Static(const ServerContext& ctx, const HttpRequest& request) {
  auto asset = FindStaticAsset(ctx.assets, request.path);
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
    return RelayWebhook(request.body, ctx.webhooks);
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
  for (auto* route :
       {&RouteQuery, &RouteTables, &RouteMetrics, &RouteIngest, &RouteToolkit, &RoutePipeline}) {
    std::optional<HttpReply> reply = (*route)(ctx, request);
    if (reply.has_value()) {
      return std::move(*reply);
    }
  }
  return ErrorReply(404, "no such route: " + request.method + " " + path);
}

}  // namespace

namespace {

/// True for a host that names this machine: "localhost", an IPv4 literal in
/// 127.0.0.0/8 (four decimal parts, nothing after) or the IPv6 literal ::1
/// ("[::1]" in a URL). Names that merely start like one ("127.evil.example",
/// "localhost.evil.example") are not.
bool IsLoopbackHost(std::string_view host) {
  if (host == "localhost") return true;
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host.empty() || host.size() > 64) return false;
  boost::system::error_code ec;
  auto address = boost::asio::ip::make_address(std::string(host), ec);
  if (ec) return false;
  if (address.is_v4()) {
    // make_address accepts only the dotted-quad form; still require exactly
    // four parts of digits, so no resolver-style shorthand slips through.
    int dots = 0;
    for (char c : host) {
      if (c == '.') {
        ++dots;
      } else if (c < '0' || c > '9') {
        return false;
      }
    }
    return dots == 3 && address.to_v4().to_bytes()[0] == 127;
  }
  return address.is_loopback();
}

/// Split an Origin "scheme://host[:port]" into scheme and host (IPv6 hosts
/// keep their brackets). False when it is not of that form (a path, user
/// info, an empty host or a non-numeric port).
bool ParseOrigin(std::string_view origin, std::string_view* scheme, std::string_view* host) {
  size_t sep = origin.find("://");
  if (sep == std::string_view::npos || sep == 0) return false;
  *scheme = origin.substr(0, sep);
  std::string_view rest = origin.substr(sep + 3);
  if (rest.empty() || rest.find_first_of("/?#@\\ ") != std::string_view::npos) return false;
  std::string_view port;
  if (rest.front() == '[') {
    size_t close = rest.find(']');
    if (close == std::string_view::npos) return false;
    *host = rest.substr(0, close + 1);
    std::string_view after = rest.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return false;
      port = after.substr(1);
      if (port.empty()) return false;
    }
  } else {
    size_t colon = rest.find(':');
    *host = rest.substr(0, colon);
    if (colon != std::string_view::npos) {
      port = rest.substr(colon + 1);
      if (port.empty()) return false;
    }
  }
  if (host->empty() || port.size() > 5 ||
      port.find_first_not_of("0123456789") != std::string_view::npos) {
    return false;
  }
  return true;
}

}  // namespace

bool IsLoopbackOrigin(std::string_view origin) {
  std::string_view scheme;
  std::string_view host;
  if (!ParseOrigin(origin, &scheme, &host)) return false;
  if (scheme != "http" && scheme != "https") return false;
  return IsLoopbackHost(host);
}

namespace {

/// The origin `request` may be answered to from a browser, or "" (no CORS).
std::string AllowedOrigin(const ServerContext& ctx, const HttpRequest& request) {
  std::string_view origin = request.header("origin");
  if (origin.empty() || origin.size() > 256) return {};
  for (const auto& allowed : ctx.options.cors_origins) {
    if (allowed == origin || allowed == "*") return std::string(origin);
  }
  // http(s)://HOST[:PORT] with a loopback HOST, while this server is on loopback.
  std::string_view own = ctx.address;
  size_t own_colon = own.rfind(':');
  std::string_view own_host = own_colon == std::string_view::npos ? own : own.substr(0, own_colon);
  if (IsLoopbackOrigin(origin) && IsLoopbackHost(own_host)) {
    return std::string(origin);
  }
  return {};
}

HttpReply Route(ServerContext& ctx, const HttpRequest& request);

}  // namespace

bool RequiresToken(std::string_view path) {
  if (path == "/healthz" || path == "/api/v1/login") return false;
  return StartsWith(path, "/api/") || path == "/api" || path == "/metrics";
}

HttpReply HandleRequest(ServerContext& ctx, const HttpRequest& request) {
  std::string origin = AllowedOrigin(ctx, request);
  if (request.method == "OPTIONS" && !origin.empty()) {
    HttpReply preflight;
    preflight.status = 204;
    preflight.content_type.clear();
    preflight.headers.emplace_back("Access-Control-Allow-Methods",
                                   "GET, POST, PATCH, PUT, DELETE, OPTIONS");
    preflight.headers.emplace_back("Access-Control-Allow-Headers",
                                   "Authorization, Content-Type");
    preflight.headers.emplace_back("Access-Control-Max-Age", "600");
    preflight.headers.emplace_back("Access-Control-Allow-Origin", origin);
    preflight.headers.emplace_back("Vary", "Origin");
    return preflight;
  }
  HttpReply reply = Route(ctx, request);
  if (!origin.empty()) {
    reply.headers.emplace_back("Access-Control-Allow-Origin", origin);
    reply.headers.emplace_back("Vary", "Origin");
  }
  return reply;
}

namespace {

HttpReply Route(ServerContext& ctx, const HttpRequest& request) {
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
  if (!RequiresToken(path)) {
    if (request.method != "GET" && request.method != "HEAD") {
      return ErrorReply(405, "static files accept GET only");
    }
    return Static(ctx, request);
  }
  if (!IsAuthorized(request, ctx.token, ctx.admin_token)) {
    HttpReply reply = ErrorReply(401, "unauthorized");
    reply.headers.emplace_back("WWW-Authenticate", "Bearer");
    return reply;
  }
  return Authorized(ctx, request);
}

}  // namespace

}  // namespace rill::server
