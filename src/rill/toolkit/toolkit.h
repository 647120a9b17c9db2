// Toolkit: the seed-001 services one process shares — a QueueManager and a
// StreamAnalytics — as served by the network server under /api/v1/queues and
// /api/v1/analytics (docs/api.md).
//
// Threads: any thread (each member is thread-safe).
#pragma once

#include <memory>
#include <string>

#include "rill/common/status.h"
#include "rill/toolkit/queue_manager.h"
#include "rill/toolkit/stream_analytics.h"

namespace rill::toolkit {

struct ToolkitOptions {
  /// SQLite file persisting the queues (WAL); "" keeps them in memory only.
  std::string queue_db;
  StreamAnalyticsOptions analytics;
};

struct Toolkit {
  /// IOError when the queue database cannot be opened; Invalid for bad options.
  static Result<std::shared_ptr<Toolkit>> Make(ToolkitOptions options = {});

  std::unique_ptr<QueueManager> queues;
  std::unique_ptr<StreamAnalytics> analytics;
};

}  // namespace rill::toolkit
