// The PostgreSQL wire protocol (server/pgwire) as the server's "pgwire"
// protocol handler.
#pragma once

#include <memory>

#include <boost/asio/ip/tcp.hpp>

namespace rill::server {

/// Refuse a PostgreSQL client when the server is at max_connections (any
/// thread; asynchronous on the socket's executor): an SSLRequest or
/// GSSENCRequest is answered 'N', the startup packet that follows is read
/// (at most 10,000 bytes, within 2 s), then ErrorResponse FATAL 53300 "sorry,
/// too many clients already" is sent and the socket closed. `first` is the
/// byte already read.
void RefusePgConnection(std::shared_ptr<boost::asio::ip::tcp::socket> socket, char first);

/// Register the pgwire protocol handler unless a handler is registered under
/// that name already (any thread). Server::Start calls it, so every server
/// speaks PostgreSQL on its port.
void RegisterPgWire();

}  // namespace rill::server
