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

#include "rill/server/http_types.h"
#include "rill/server/server.h"

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
};

/// Route one request (auth included) and return the reply. Worker threads.
HttpReply HandleRequest(ServerContext& ctx, const HttpRequest& request);

// Route groups (api_*.cc). Each returns nullopt when the path is not its own.
std::optional<HttpReply> RouteQuery(ServerContext& ctx, const HttpRequest& request);
std::optional<HttpReply> RouteTables(ServerContext& ctx, const HttpRequest& request);
std::optional<HttpReply> RouteMetrics(ServerContext& ctx, const HttpRequest& request);
std::optional<HttpReply> RouteToolkit(ServerContext& ctx, const HttpRequest& request);

/// The Prometheus text exposition (GET /metrics).
std::string RenderPrometheus(ServerContext& ctx);

/// The JSON of GET /api/v1/telemetry (the engine's rill_metrics now), also the
/// data of the WebSocket `metrics` channel.
std::string TelemetryNowJson(ServerContext& ctx);

}  // namespace rill::server
