// The PostgreSQL wire protocol (server/pgwire) as the server's "pgwire"
// protocol handler.
#pragma once

namespace rill::server {

/// Register the pgwire protocol handler unless a handler is registered under
/// that name already (any thread). Server::Start calls it, so every server
/// speaks PostgreSQL on its port.
void RegisterPgWire();

}  // namespace rill::server
