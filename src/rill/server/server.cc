// Server: lifecycle, listener, connection limit, protocol sniffing.
#include "rill/server/server.h"

#include <pthread.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>

#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>

#include "rill/common/logging.h"
#include "rill/common/thread_priority.h"
#include "rill/pipeline/catalog.h"
#include "rill/server/auth.h"
#include "rill/server/pgwire_handler.h"
#include "rill/server/query_limits.h"
#include "rill/server/server_impl.h"
#include "rill/server/static_assets.h"
#include "rill/server/ws_hub.h"
#include "rill/toolkit/toolkit.h"

namespace rill::server {

namespace {

/// Serve the dashboard's bundle from `dir`, $RILL_DASHBOARD_DIR or the
/// build's dashboard/dist, whichever is given first and holds index.html; the
/// placeholder page otherwise.
std::shared_ptr<const StaticAssetMap> LoadDashboard(const std::string& dir) {
  std::vector<std::string> candidates;
  if (!dir.empty()) candidates.push_back(dir);
  if (const char* env = std::getenv("RILL_DASHBOARD_DIR"); env != nullptr && *env != 0) {
    candidates.push_back(env);
  }
#ifdef RILL_DASHBOARD_DIST
  candidates.push_back(RILL_DASHBOARD_DIST);
#endif
  for (const auto& folder : candidates) {
    std::error_code ec;
    if (std::filesystem::exists(std::filesystem::path(folder) / "index.html", ec)) {
      return LoadStaticAssetFolder(folder);
    }
  }
  return DefaultStaticAssets();
}

}  // namespace

namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

constexpr std::string_view kBusyReply =
    "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
    "Connection: close\r\nContent-Length: 83\r\n\r\n"
    "{\"code\":\"Service Unavailable\",\"status\":503,\"message\":\"too many open connections\"}";

std::mutex& RegistryMutex() {
  static std::mutex mu;
  return mu;
}
std::map<std::string, ProtocolHandlerFactory>& Registry() {
  static std::map<std::string, ProtocolHandlerFactory> registry;
  return registry;
}

bool IsLoopback(const std::string& host) {
  boost::system::error_code ec;
  auto address = net::ip::make_address(host, ec);
  if (ec) {
    return host == "localhost";
  }
  return address.is_loopback();
}

double WallNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

void RegisterProtocolHandler(const std::string& name, ProtocolHandlerFactory factory) {
  std::lock_guard<std::mutex> lock(RegistryMutex());
  Registry()[name] = std::move(factory);
}

ProtocolHandlerFactory FindProtocolHandler(const std::string& name) {
  std::lock_guard<std::mutex> lock(RegistryMutex());
  auto it = Registry().find(name);
  return it == Registry().end() ? ProtocolHandlerFactory() : it->second;
}

Result<std::pair<std::string, uint16_t>> ParseListenAddress(std::string_view text) {
  std::string_view rest = text;
  if (rest.substr(0, 6) == "quack:") {
    rest.remove_prefix(6);
  }
  std::string host;
  std::string_view port_text;
  if (!rest.empty() && rest[0] == '[') {
    size_t close = rest.find(']');
    if (close == std::string_view::npos || close + 1 >= rest.size() || rest[close + 1] != ':') {
      return Status::Invalid("listen address '", text, "' must be HOST:PORT or [IPv6]:PORT");
    }
    host = std::string(rest.substr(1, close - 1));
    port_text = rest.substr(close + 2);
  } else {
    size_t colon = rest.rfind(':');
    if (colon == std::string_view::npos || colon == 0) {
      return Status::Invalid("listen address '", text,
                             "' must be HOST:PORT (or quack:HOST:PORT)");
    }
    host = std::string(rest.substr(0, colon));
    port_text = rest.substr(colon + 1);
  }
  if (port_text.empty() || port_text.size() > 5 ||
      port_text.find_first_not_of("0123456789") != std::string_view::npos) {
    return Status::Invalid("listen address '", text, "': port must be a number 0-65535");
  }
  int port = std::stoi(std::string(port_text));
  if (port > 65535) {
    return Status::Invalid("listen address '", text, "': port must be a number 0-65535");
  }
  if (host == "localhost") {
    host = "127.0.0.1";
  }
  return std::make_pair(host, static_cast<uint16_t>(port));
}

// Impl helpers ---------------------------------------------------------------------

uint64_t Server::Impl::AddSession(std::weak_ptr<Closable> session) {
  std::lock_guard<std::mutex> lock(sessions_mu);
  uint64_t id = next_session++;
  sessions[id] = std::move(session);
  return id;
}

void Server::Impl::RemoveSession(uint64_t id) {
  std::lock_guard<std::mutex> lock(sessions_mu);
  sessions.erase(id);
}

bool Server::Impl::Submit(std::function<void()> job) {
  if (pending.fetch_add(1) >= options.max_pending_requests) {
    pending.fetch_sub(1);
    return false;
  }
  net::post(*workers, [this, job = std::move(job)] {
    // Worker threads yield the CPU to the engine's tick thread (Linux nice is
    // per thread): queries must not delay ticks on a busy machine.
    static thread_local bool niced = [] {
      LowerThisThreadPriority();
      return true;
    }();
    (void)niced;
    job();
    pending.fetch_sub(1);
  });
  return true;
}

std::shared_ptr<void> Server::Impl::ConnectionSlot(std::atomic<int64_t>* per_protocol) {
  per_protocol->fetch_add(1, std::memory_order_relaxed);
  // The deleter runs when the last owner (a session) goes away.
  return std::shared_ptr<void>(nullptr, [this, per_protocol](void*) {
    per_protocol->fetch_sub(1, std::memory_order_relaxed);
    open_connections.fetch_sub(1);
  });
}

void Server::Impl::DoAccept() {
  acceptor->async_accept(net::make_strand(*ioc),
                         [this](boost::system::error_code ec, tcp::socket socket) {
                           if (ec) {
                             if (ec == net::error::operation_aborted || stopping.load()) {
                               return;
                             }
                           } else {
                             OnAccept(std::move(socket));
                           }
                           DoAccept();
                         });
}

// Over max_connections: answer in the client's protocol (its first byte
// tells: 0 starts a PostgreSQL packet), then close.
void Server::Impl::RefuseConnection(std::shared_ptr<tcp::socket> sock) {
  auto first = std::make_shared<char>(0);
  auto timer = std::make_shared<net::steady_timer>(sock->get_executor());
  timer->expires_after(std::chrono::seconds(2));
  timer->async_wait([sock](boost::system::error_code ec) {
    if (!ec) sock->cancel(ec);
  });
  net::async_read(*sock, net::buffer(first.get(), 1),
                  [sock, first, timer](boost::system::error_code ec, size_t n) {
                    timer->cancel();
                    if (!ec && n == 1 && LooksLikePostgres(std::string(1, *first))) {
                      RefusePgConnection(sock, *first);
                      return;
                    }
                    net::async_write(*sock, net::buffer(kBusyReply.data(), kBusyReply.size()),
                                     [sock](boost::system::error_code, size_t) {
                      boost::system::error_code ignored;
                      sock->shutdown(tcp::socket::shutdown_both, ignored);
                      sock->close(ignored);
                    });
                  });
}

void Server::Impl::OnAccept(tcp::socket socket) {
  boost::system::error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);
  if (open_connections.fetch_add(1) >= options.max_connections) {
    open_connections.fetch_sub(1);
    ctx->counters.connections_refused.fetch_add(1, std::memory_order_relaxed);
    RefuseConnection(std::make_shared<tcp::socket>(std::move(socket)));
    return;
  }
  ctx->counters.connections_accepted.fetch_add(1, std::memory_order_relaxed);
  // Sniff the first byte: 0 starts a PostgreSQL message, anything else HTTP.
  auto sock = std::make_shared<tcp::socket>(std::move(socket));
  auto first = std::make_shared<char>(0);
  auto timer = std::make_shared<net::steady_timer>(sock->get_executor());
  timer->expires_after(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(options.header_timeout_seconds)));
  timer->async_wait([sock](boost::system::error_code ec) {
    if (!ec) {
      sock->close(ec);  // nothing arrived in time
    }
  });
  net::async_read(*sock, net::buffer(first.get(), 1),
                  [this, sock, first, timer](boost::system::error_code ec, size_t) {
                    timer->cancel();
                    if (ec) {
                      open_connections.fetch_sub(1);
                      return;
                    }
                    std::string initial(1, *first);
                    if (LooksLikePostgres(initial)) {
                      auto slot = ConnectionSlot(&ctx->counters.pgwire_open);
                      if (pgwire != nullptr) {
                        pgwire->Accept(std::move(*sock), std::move(initial), std::move(slot));
                      } else {
                        sock->close(ec);
                      }
                      return;
                    }
                    StartHttpSession(*this, std::move(*sock), std::move(initial),
                                     ConnectionSlot(&ctx->counters.http_open));
                  });
}

// Server ---------------------------------------------------------------------------

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() { Stop(); }

Result<std::unique_ptr<Server>> Server::Make(Engine* engine, MetricsStore* metrics,
                                             ServerOptions options) {
  if (engine == nullptr) {
    return Status::Invalid("Server::Make: engine is null");
  }
  RILL_ASSIGN_OR_RAISE(auto hp, ParseListenAddress(options.listen));
  if (options.io_threads < 1 || options.worker_threads < 1 || options.max_connections < 1 ||
      options.max_header_bytes < 256 || options.max_body_bytes < 0 ||
      options.max_pending_requests < 1 || options.ws_queue_frames < 1) {
    return Status::Invalid(
        "server options: io_threads, worker_threads, max_connections, max_pending_requests "
        "and ws_queue_frames must be >= 1, max_header_bytes >= 256");
  }
  if (options.max_unauthenticated_connections < 1 || !(options.login_timeout_seconds >= 0) ||
      options.query_memory_limit_bytes < -1) {
    return Status::Invalid(
        "server options: max_unauthenticated_connections must be >= 1, "
        "login_timeout_seconds >= 0, query_memory_limit_bytes >= -1");
  }
  auto impl = std::make_unique<Impl>();
  impl->engine = engine;
  impl->metrics = metrics;
  impl->host = hp.first;
  impl->port = hp.second;
  if (!options.token.has_value()) {
    RILL_ASSIGN_OR_RAISE(impl->token, GenerateToken());
  } else {
    impl->token = *options.token;
  }
  if (!options.admin_token.empty() && options.admin_token == impl->token) {
    return Status::Invalid("server options: admin_token must differ from the token (the "
                           "token is read-only, the admin token may change the pipeline)");
  }
  if (impl->token.empty() && !IsLoopback(impl->host)) {
    return Status::Invalid("refusing to serve without authentication on ", impl->host,
                           ": an empty token is allowed only on a loopback address "
                           "(127.0.0.1, ::1); give a token or listen on 127.0.0.1");
  }
  impl->options = std::move(options);
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

Status Server::Start() {
  Impl& s = *impl_;
  if (s.running) {
    return Status::Invalid("the server is already running on ", address());
  }
  s.stopping = false;
  s.ctx = std::make_unique<ServerContext>();
  s.ctx->engine = s.engine;
  s.ctx->metrics = s.metrics;
  s.ctx->options = s.options;
  s.ctx->token = s.token;
  s.ctx->admin_token = s.options.admin_token;
  if (s.metrics != nullptr) pipeline::Catalog::For(s.engine).SetMetricsStore(s.metrics);
  s.ctx->started_at = WallNow();
  s.ioc = std::make_unique<net::io_context>(s.options.io_threads);
  boost::system::error_code ec;
  auto ip = net::ip::make_address(s.host, ec);
  if (ec) {
    return Status::Invalid("listen address '", s.options.listen, "': '", s.host,
                           "' is not an IP address");
  }
  tcp::endpoint endpoint(ip, s.port);
  auto acceptor = std::make_unique<tcp::acceptor>(*s.ioc);
  acceptor->open(endpoint.protocol(), ec);
  if (!ec) acceptor->set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor->bind(endpoint, ec);
  if (!ec) acceptor->listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    acceptor.reset();  // before its io_context
    s.ioc.reset();
    s.ctx.reset();
    return Status::IOError("cannot listen on ", s.host, ":", s.port, ": ", ec.message());
  }
  s.acceptor = std::move(acceptor);
  auto bound = s.acceptor->local_endpoint();
  s.port = bound.port();
  s.ctx->address = address();
  s.workers = std::make_unique<net::thread_pool>(s.options.worker_threads);
  WebhookOptions webhook_options;
  webhook_options.allow_private = s.options.allow_private_webhooks;
  RILL_ASSIGN_OR_RAISE(s.webhooks, WebhookSender::Make(webhook_options));
  s.ctx->webhooks = s.webhooks.get();
  s.ctx->toolkit = s.options.toolkit;
  if (s.ctx->toolkit == nullptr) {
    RILL_ASSIGN_OR_RAISE(s.ctx->toolkit, toolkit::Toolkit::Make());
  }
  if (s.metrics != nullptr) {
    RILL_ASSIGN_OR_RAISE(s.relay, RuleWebhookRelay::Make(s.metrics, s.engine, s.webhooks.get(),
                                                         address()));
  }
  s.ctx->assets = LoadDashboard(s.options.dashboard_dir);
  if (Status limited = ApplyQueryMemoryLimit(s.options, s.engine, s.metrics); !limited.ok()) {
    // DuckDB holds more than the limit now; serve under its current limit.
    Logger("server")->warn("query_memory_limit_bytes not applied: {}", limited.ToString());
  }
  RegisterPgWire();
  if (auto factory = FindProtocolHandler(kPgWireProtocol)) {
    ProtocolContext pc;
    pc.engine = s.engine;
    pc.metrics = s.metrics;
    pc.token = s.token;
    pc.admin_token = s.options.admin_token;
    pc.query_timeout_seconds = s.options.query_timeout_seconds;
    pc.idle_timeout_seconds = s.options.idle_timeout_seconds;
    pc.login_timeout_seconds = s.options.login_timeout_seconds;
    pc.max_unauthenticated_connections = EffectiveUnauthenticatedLimit(s.options);
    ServerContext* ctx = s.ctx.get();
    pc.observe_query = [ctx](double seconds) { ctx->query_seconds.Observe(seconds); };
    s.pgwire = factory(pc);
  }
  s.hub = std::make_unique<WsHub>(s);
  s.ctx->hub = s.hub.get();
  s.hub->Start();
  s.work.emplace(s.ioc->get_executor());
  s.DoAccept();
  for (int i = 0; i < s.options.io_threads; ++i) {
    s.io_threads.emplace_back([&s, i] {
      pthread_setname_np(pthread_self(), ("rill-io-" + std::to_string(i)).c_str());
      s.ioc->run();
    });
  }
  s.running = true;
  return Status::OK();
}

void Server::Stop() {
  Impl& s = *impl_;
  if (!s.running) {
    return;
  }
  s.running = false;
  s.stopping = true;
  s.relay.reset();  // no new rule deliveries; queued ones finish below
  net::post(*s.ioc, [&s] {
    boost::system::error_code ec;
    s.acceptor->close(ec);
  });
  s.hub->Stop();
  if (s.pgwire != nullptr) {
    s.pgwire->Stop();
  }
  std::vector<std::shared_ptr<Closable>> open;
  {
    std::lock_guard<std::mutex> lock(s.sessions_mu);
    for (auto& [id, weak] : s.sessions) {
      if (auto session = weak.lock()) open.push_back(std::move(session));
    }
  }
  for (auto& session : open) {
    session->Close();
  }
  open.clear();
  // Give the closes (and WebSocket close frames) a moment to go out.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (s.open_connections.load() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  s.work.reset();
  s.ioc->stop();
  for (auto& t : s.io_threads) {
    t.join();
  }
  s.io_threads.clear();
  s.workers->join();  // running handlers finish; their replies are dropped
  s.workers.reset();
  s.hub->ReleaseTimers();
  s.acceptor.reset();
  s.pgwire.reset();
  if (s.webhooks != nullptr) {
    s.webhooks->Stop();
    s.webhooks.reset();
  }
  s.ioc.reset();  // destroys pending handlers (and the sessions they hold)
  s.hub.reset();
  {
    std::lock_guard<std::mutex> lock(s.sessions_mu);
    s.sessions.clear();
  }
  s.ctx.reset();
  s.open_connections = 0;
}

bool Server::running() const { return impl_->running; }

HttpReply Server::Handle(const HttpRequest& request) {
  if (!impl_->running) {
    return ErrorReply(503, "the server is not running");
  }
  return HandleRequest(*impl_->ctx, request);
}

std::string Server::address() const {
  const std::string& h = impl_->host;
  std::string host = h.find(':') != std::string::npos ? "[" + h + "]" : h;
  return host + ":" + std::to_string(impl_->port);
}

const std::string& Server::token() const { return impl_->token; }

std::string Server::dashboard_url() const {
  std::string url = "http://" + address() + "/";
  if (!impl_->token.empty()) {
    url += "?token=" + impl_->token;
  }
  return url;
}

const ServerOptions& Server::options() const { return impl_->options; }

ServerStats Server::stats() const {
  ServerStats out;
  if (impl_->ctx == nullptr) {
    return out;
  }
  const ServerCounters& c = impl_->ctx->counters;
  out.connections_accepted = c.connections_accepted.load();
  out.connections_refused = c.connections_refused.load();
  out.http_open = c.http_open.load();
  out.websocket_open = c.websocket_open.load();
  out.pgwire_open = c.pgwire_open.load();
  out.requests = c.requests.load();
  out.queries = c.queries.load();
  out.query_timeouts = c.query_timeouts.load();
  out.ws_frames_sent = c.ws_frames_sent.load();
  out.ws_frames_dropped = c.ws_frames_dropped.load();
  out.ws_frames_coalesced = c.ws_frames_coalesced.load();
  return out;
}

}  // namespace rill::server
