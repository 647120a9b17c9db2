// The seam for non-HTTP protocols on the server's one port.
//
// The server reads the first bytes of each connection. A PostgreSQL client
// starts with a 4-byte big-endian length whose first byte is 0 (startup
// message, SSLRequest 80877103, GSSENCRequest 80877104, CancelRequest
// 80877102); HTTP starts with a method name. Connections of the first kind go
// to the handler registered under kPgWireProtocol. Until the pgwire issue
// registers one, the server closes them.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include <boost/asio/ip/tcp.hpp>

namespace rill {
class Engine;
class MetricsStore;
}  // namespace rill

namespace rill::server {

inline constexpr const char* kPgWireProtocol = "pgwire";

/// What a protocol handler may use; valid while the server runs.
struct ProtocolContext {
  Engine* engine = nullptr;
  MetricsStore* metrics = nullptr;  ///< may be null
  std::string token;                ///< "" = authentication off
  /// The admin credential (ServerOptions::admin_token); "" when none.
  std::string admin_token;
  double query_timeout_seconds = 30;
  double idle_timeout_seconds = 60;
  /// ServerOptions::login_timeout_seconds (0 = none).
  double login_timeout_seconds = 10;
  /// The effective unauthenticated-connection limit (see
  /// ServerOptions::max_unauthenticated_connections).
  int64_t max_unauthenticated_connections = 16;
  /// Record one query's duration for GET /metrics (label protocol=<name>).
  std::function<void(double seconds)> observe_query;
};

/// Serves one protocol. Created once per Server::Start.
class ProtocolHandler {
 public:
  virtual ~ProtocolHandler() = default;
  /// Take over `socket` (on an io thread). `initial` holds the bytes already
  /// read from it (at least one). `done` must be kept alive while the
  /// connection is open and dropped when it closes: it counts the connection
  /// against max_connections. Must not block: use async operations on the
  /// socket's executor, and a worker thread for anything slow.
  virtual void Accept(boost::asio::ip::tcp::socket socket, std::string initial,
                      std::shared_ptr<void> done) = 0;
  /// Close every connection (Server::Stop). Called on a non-io thread.
  virtual void Stop() {}
};

using ProtocolHandlerFactory =
    std::function<std::unique_ptr<ProtocolHandler>(const ProtocolContext&)>;

/// Register the factory of protocol `name` (process-wide; replaces an earlier
/// one). Servers started afterwards use it. Any thread.
void RegisterProtocolHandler(const std::string& name, ProtocolHandlerFactory factory);
/// Return the factory of `name` or an empty function.
ProtocolHandlerFactory FindProtocolHandler(const std::string& name);

/// True when `bytes` (the first byte suffices) start a PostgreSQL message.
inline bool LooksLikePostgres(std::string_view bytes) {
  return !bytes.empty() && bytes[0] == '\0';
}

}  // namespace rill::server
