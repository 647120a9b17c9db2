// The limits remote clients get, resolved from ServerOptions: the DuckDB
// memory limit of remote SQL and the unauthenticated-connection limit of
// pgwire. Private to src/rill/server.
#pragma once

#include <cstdint>

#include "rill/common/status.h"
#include "rill/server/server.h"

namespace rill::server {

/// Return the memory limit in bytes that `query_memory_limit_bytes` stands
/// for: itself when > 0, a quarter of the host's physical memory for -1, 0
/// (leave DuckDB's) for 0. Any thread.
int64_t ResolveQueryMemoryLimit(int64_t query_memory_limit_bytes);

/// Set the resolved limit on the live tables' DuckDB and on the metrics
/// database (`metrics` may be null). No-op when it resolves to 0. Server::Start.
Status ApplyQueryMemoryLimit(const ServerOptions& options, Engine* engine,
                             MetricsStore* metrics);

/// Return the pgwire unauthenticated-connection limit: the option, at most
/// half of max_connections, at least 1.
int64_t EffectiveUnauthenticatedLimit(const ServerOptions& options);

}  // namespace rill::server
