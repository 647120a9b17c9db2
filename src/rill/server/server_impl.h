// Server::Impl and the HTTP session: private to src/rill/server.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include "rill/server/protocol_handler.h"
#include "rill/server/rule_webhooks.h"
#include "rill/server/webhook.h"
#include "rill/server/server.h"
#include "rill/server/server_internal.h"

namespace rill::server {

/// A connection the server can close on Stop (HTTP and WebSocket sessions).
class Closable {
 public:
  virtual ~Closable() = default;
  /// Close the connection (posts to its executor; any thread).
  virtual void Close() = 0;
};

struct Server::Impl {
  Engine* engine = nullptr;
  MetricsStore* metrics = nullptr;
  ServerOptions options;
  std::string token;
  std::string host;
  uint16_t port = 0;

  std::unique_ptr<ServerContext> ctx;
  std::unique_ptr<boost::asio::io_context> ioc;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work;
  std::vector<std::thread> io_threads;
  std::unique_ptr<boost::asio::thread_pool> workers;
  std::atomic<int64_t> pending{0};  // requests queued or running on workers
  std::unique_ptr<boost::asio::ip::tcp::acceptor> acceptor;
  std::unique_ptr<WsHub> hub;
  std::unique_ptr<ProtocolHandler> pgwire;
  // POST /api/webhook/send and alert-rule webhooks (the relay needs metrics).
  std::unique_ptr<WebhookSender> webhooks;
  std::unique_ptr<RuleWebhookRelay> relay;
  std::atomic<int64_t> open_connections{0};
  std::atomic<bool> stopping{false};
  bool running = false;

  std::mutex sessions_mu;
  std::map<uint64_t, std::weak_ptr<Closable>> sessions;
  uint64_t next_session = 1;

  /// Track a session for Stop; returns its id.
  uint64_t AddSession(std::weak_ptr<Closable> session);
  void RemoveSession(uint64_t id);
  /// Run `job` on a worker; false (nothing run) when max_pending_requests are queued.
  bool Submit(std::function<void()> job);
  /// A token counting one open connection until dropped.
  std::shared_ptr<void> ConnectionSlot(std::atomic<int64_t>* per_protocol);

  void DoAccept();
  void OnAccept(boost::asio::ip::tcp::socket socket);
  void RefuseConnection(std::shared_ptr<boost::asio::ip::tcp::socket> socket);
};

/// Convert a Beast request (its body is moved out) into an HttpRequest.
/// Invalid for a malformed target.
Status FillHttpRequest(
    boost::beast::http::request<boost::beast::http::string_body>& req, HttpRequest* out);

/// Start serving HTTP on a fresh connection (after the first bytes were read
/// by the sniffer, which passes them in `initial`).
void StartHttpSession(Server::Impl& server, boost::asio::ip::tcp::socket socket,
                      std::string initial, std::shared_ptr<void> slot);

}  // namespace rill::server
