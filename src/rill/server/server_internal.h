// What the parts of the server share: the context handlers read, counters,
// histograms and the query watchdog. Private to src/rill/server.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "rill/connector/avro_source.h"
#include "rill/server/http_types.h"
#include "rill/sql/query_interrupt.h"
#include "rill/server/server.h"
#include "rill/server/static_assets.h"

namespace rill::server {

class WebhookSender;

class WsHub;

/// A Prometheus histogram with fixed buckets. Thread-safe.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void Observe(double value);
  /// Append the exposition lines of metric `name` with `labels` ("" or
  /// `key="value"`).
  void Render(const std::string& name, const std::string& labels, std::string* out) const;

 private:
  std::vector<double> bounds_;
  mutable std::mutex mu_;
  std::vector<int64_t> counts_;  // one per bound, plus +Inf
  double sum_ = 0;
  int64_t count_ = 0;
};

/// Runs callbacks at deadlines on its own thread (query timeouts). Cancel
/// before the callback's captures die.
class Watchdog {
 public:
  Watchdog();
  ~Watchdog();
  /// Call `fn` (on the watchdog thread) after `seconds`; returns an id.
  uint64_t Schedule(double seconds, std::function<void()> fn);
  /// Forget `id`; when it returns, the callback is not running and will not run.
  void Cancel(uint64_t id);

 private:
  void Loop();
  std::mutex mu_;
  std::condition_variable cv_;
  std::multimap<std::chrono::steady_clock::time_point, uint64_t> deadlines_;
  std::map<uint64_t, std::function<void()>> callbacks_;
  uint64_t next_id_ = 1;
  uint64_t running_id_ = 0;
  bool stop_ = false;
  std::thread thread_;
};

/// Counters kept as atomics (relaxed: independent statistics, read for display).
struct ServerCounters {
  std::atomic<int64_t> connections_accepted{0};
  std::atomic<int64_t> connections_refused{0};
  std::atomic<int64_t> http_open{0};
  std::atomic<int64_t> websocket_open{0};
  std::atomic<int64_t> pgwire_open{0};
  std::atomic<int64_t> requests{0};
  std::atomic<int64_t> queries{0};
  std::atomic<int64_t> query_timeouts{0};
  std::atomic<int64_t> ws_frames_sent{0};
  std::atomic<int64_t> ws_frames_dropped{0};
  std::atomic<int64_t> ws_frames_coalesced{0};
};

/// Everything a request handler may read. Owned by Server::Impl; lives while
/// the server runs.
struct ServerContext {
  Engine* engine = nullptr;
  MetricsStore* metrics = nullptr;  // may be null
  ServerOptions options;
  std::string token;
  /// The admin credential ("" when none): DDL over POST /api/v1/sql.
  std::string admin_token;
  std::string address;  // bound HOST:PORT
  double started_at = 0;
  ServerCounters counters;
  Histogram query_seconds{{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                           0.5, 1, 2.5, 5, 10, 30}};
  Histogram tick_seconds{{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                          0.5, 1, 2.5}};
  std::mutex alerts_mu;
  std::map<std::pair<std::string, std::string>, int64_t> alerts_by;  // (severity, source)
  Watchdog watchdog;
  WsHub* hub = nullptr;
  WebhookSender* webhooks = nullptr;  // owned by Server::Impl while it runs
  std::shared_ptr<toolkit::Toolkit> toolkit;  // queues and analytics (toolkit_routes.cc)
  std::shared_ptr<const StaticAssetMap> assets;  // this server's dashboard (set at Start)
  // Avro ingest with ServerOptions::schema_registry_url: made by the first
  // such request (ingest.cc), shared by later ones (its cache of schemas).
  std::mutex avro_mu;
  std::shared_ptr<AvroSource> avro_source;  // guarded by avro_mu
};

/// True for an Origin "http(s)://HOST[:PORT]" whose HOST is this machine:
/// localhost, an IPv4 literal in 127.0.0.0/8, or [::1]. Any thread.
bool IsLoopbackOrigin(std::string_view origin);

/// True when a request for `path` must carry the token: everything under
/// /api/ and /metrics except /api/v1/login. The HTTP session checks it on the
/// headers, before reading a body. Any thread.
bool RequiresToken(std::string_view path);

/// Route one request (auth included) and return the reply. Worker threads.
HttpReply HandleRequest(ServerContext& ctx, const HttpRequest& request);

// Route groups (api_*.cc). Each returns nullopt when the path is not its own.
std::optional<HttpReply> RouteQuery(ServerContext& ctx, const HttpRequest& request);
std::optional<HttpReply> RouteTables(ServerContext& ctx, const HttpRequest& request);
std::optional<HttpReply> RouteMetrics(ServerContext& ctx, const HttpRequest& request);
std::optional<HttpReply> RouteToolkit(ServerContext& ctx, const HttpRequest& request);
/// POST /api/v1/sql (DDL and queries), GET /api/v1/pipeline and /api/v1/pipeline/dump
/// (api_pipeline.cc).
std::optional<HttpReply> RoutePipeline(ServerContext& ctx, const HttpRequest& request);

/// The Prometheus text exposition (GET /metrics).
std::string RenderPrometheus(ServerContext& ctx);

/// The JSON of GET /api/v1/telemetry (the engine's rill_metrics now), also the
/// data of the WebSocket `metrics` channel.
std::string TelemetryNowJson(ServerContext& ctx);

/// Run `query(&interrupt)` with the server's query_timeout_seconds: Cancelled
/// (counted in query_timeouts) when it ran out. Worker threads.
template <typename Query>
auto RunWithQueryTimeout(ServerContext& ctx, Query&& query) {
  QueryInterrupt interrupt;
  uint64_t timer = 0;
  const double timeout = ctx.options.query_timeout_seconds;
  if (timeout > 0) {
    timer = ctx.watchdog.Schedule(timeout, [&interrupt] { interrupt.Interrupt(); });
  }
  auto result = query(&interrupt);
  if (timer != 0) {
    ctx.watchdog.Cancel(timer);
  }
  if (!result.ok() && interrupt.interrupted()) {
    ctx.counters.query_timeouts.fetch_add(1, std::memory_order_relaxed);
    return decltype(result)(Status::Cancelled("the query ran longer than query_timeout_seconds (",
                                              timeout, " s) and was interrupted"));
  }
  return result;
}

}  // namespace rill::server
