// `rill demo`: a zero-configuration console demo of the engine.
//
// A producer thread simulates an orders stream (new orders plus status updates
// that re-use existing order ids) and pushes it into a MemoryConnector feeding
// the snapshot table `orders` (primary key order_id). A ScheduledSqlTask
// computes revenue by region every second into `revenue_by_region`. Once per
// second the demo prints one line: rows, rows/s, tick latency and the SQL result.
#pragma once

#include <cstdint>
#include <string>

namespace rill::app {

struct DemoOptions {
  /// Seconds to run; 0 runs until SIGINT/SIGTERM.
  double duration_s = 0;
  /// Rows per second pushed by the producer (new orders and status updates).
  int64_t rate = 5000;
  /// Engine tick interval.
  int64_t interval_ms = 100;
  /// Fraction of pushed rows that update an existing order's status.
  double update_fraction = 0.3;
  uint64_t seed = 0;  ///< 0: random
  /// Serve the API, psql and the dashboard here ("" = no server). When the
  /// address is taken, a free port on the same host is used.
  std::string listen = "127.0.0.1:9494";
  /// Token; empty generates one.
  std::string token;
};

/// Run the demo on the calling thread until the duration elapses or SIGINT /
/// SIGTERM arrives; return the process exit code (0 on a clean stop). Installs
/// signal handlers for SIGINT and SIGTERM for its lifetime.
int RunDemo(const DemoOptions& options);

}  // namespace rill::app
