// Bindings of rill::server::Server: the engine's network server (quack_address).
//
// The server is owned by the engine object (EngineAccess::server_slot), so it
// always stops before the engine and its metrics store are destroyed.
#include <memory>
#include <optional>
#include <string>

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include "bind_common.h"
#include "bind_toolkit.h"
#include "py_status.h"
#include "rill/server/server.h"

namespace rills {

namespace {

using rill::server::Server;

Server* CurrentServer(const EngineAccess& access) {
  return static_cast<Server*>(access.server_slot->get());
}

nb::dict Describe(const Server& server) {
  nb::dict d;
  d["address"] = server.address();
  d["token"] = server.token();
  d["dashboard_url"] = server.dashboard_url();
  return d;
}

/// Start serving `engine` on `listen` (stopping a previous server first).
nb::dict Serve(nb::handle core, const std::string& listen, std::optional<std::string> token,
               bool allow_private_webhooks, std::optional<double> query_timeout_seconds,
               std::optional<double> idle_timeout_seconds,
               std::optional<int64_t> max_connections, PyToolkit* toolkit) {
  EngineAccess access = AccessEngine(core);
  rill::server::ServerOptions options;
  options.listen = listen;
  options.token = std::move(token);
  options.allow_private_webhooks = allow_private_webhooks;
  // Limits (ServerOptions' defaults when not given).
  if (query_timeout_seconds) options.query_timeout_seconds = *query_timeout_seconds;
  if (idle_timeout_seconds) options.idle_timeout_seconds = *idle_timeout_seconds;
  if (max_connections) options.max_connections = *max_connections;
  // The toolkit Python's queues live in (engine.queue_manager), so both see one set.
  if (toolkit != nullptr) options.toolkit = toolkit->toolkit;
  std::shared_ptr<Server> server;
  rill::Status status;
  {
    nb::gil_scoped_release release;
    access.server_slot->reset();
    auto made = Server::Make(access.engine, access.metrics, std::move(options));
    if (made.ok()) {
      server = std::move(*made);
      status = server->Start();
    } else {
      status = made.status();
    }
  }
  ThrowIfError(status);
  *access.server_slot = server;
  return Describe(*server);
}

void StopServing(nb::handle core) {
  EngineAccess access = AccessEngine(core);
  std::shared_ptr<void> server = std::move(*access.server_slot);
  nb::gil_scoped_release release;
  server.reset();  // ~Server stops it
}

std::optional<nb::dict> ServerInfo(nb::handle core) {
  EngineAccess access = AccessEngine(core);
  Server* server = CurrentServer(access);
  if (server == nullptr || !server->running()) {
    return std::nullopt;
  }
  return Describe(*server);
}

}  // namespace

void BindServer(nb::module_& m) {
  m.def("serve", &Serve, nb::arg("engine"), nb::arg("listen"), nb::arg("token").none(),
        nb::arg("allow_private_webhooks") = false, nb::kw_only(),
        nb::arg("query_timeout_seconds").none() = nb::none(),
        nb::arg("idle_timeout_seconds").none() = nb::none(),
        nb::arg("max_connections").none() = nb::none(), nb::arg("toolkit").none() = nb::none(),
        "Serve the engine on `listen` (HOST:PORT or quack:HOST:PORT); token None "
        "generates one, \"\" disables auth (loopback only); the limits default to "
        "ServerOptions'; `toolkit` (a Toolkit) is served under /api/v1/queues and "
        "/api/v1/analytics instead of a new one. Returns {address, token, "
        "dashboard_url}. Raises OSError when the address is taken, ValueError for a bad "
        "address or an unauthenticated non-loopback address.");
  m.def("stop_serving", &StopServing, nb::arg("engine"),
        "Stop the engine's server (no-op if none).");
  m.def("server_info", &ServerInfo, nb::arg("engine"),
        "Return {address, token, dashboard_url} of the running server, or None.");
}

}  // namespace rills
