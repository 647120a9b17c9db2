#include "rill/server/query_limits.h"

#include <unistd.h>

#include <algorithm>

#include "rill/engine/engine.h"
#include "rill/metrics/metrics_store.h"
#include "rill/sql/sql_engine.h"

namespace rill::server {

int64_t ResolveQueryMemoryLimit(int64_t query_memory_limit_bytes) {
  if (query_memory_limit_bytes >= 0) {
    return query_memory_limit_bytes;
  }
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page_size <= 0) {
    return 0;
  }
  return static_cast<int64_t>(pages) * page_size / 4;
}

Status ApplyQueryMemoryLimit(const ServerOptions& options, Engine* engine,
                             MetricsStore* metrics) {
  const int64_t limit = ResolveQueryMemoryLimit(options.query_memory_limit_bytes);
  if (limit <= 0) {
    return Status::OK();
  }
  RILL_RETURN_NOT_OK(engine->sql().SetMemoryLimit(limit));
  if (metrics != nullptr) {
    RILL_RETURN_NOT_OK(metrics->SetMemoryLimit(limit));
  }
  return Status::OK();
}

int64_t EffectiveUnauthenticatedLimit(const ServerOptions& options) {
  return std::max<int64_t>(
      1, std::min(options.max_unauthenticated_connections, options.max_connections / 2));
}

}  // namespace rill::server
