// End-to-end latency and overload runs of nexmark_bench.
//
// A producer thread generates Nexmark bids at a target rate (the generator runs
// on the producer's core, not the engine's), stamps each bid's date_time with
// the wall clock (ms) as it pushes it into a MemoryConnector, and the engine's
// own background loop (trigger 100 ms or 10 ms) writes them into `bid` and runs
// q0 as a StreamSqlTask. A subscriber of the output table reads each new
// version's new rows: latency = the time the version is published (subscriber
// call) − the bid's date_time, i.e. event pushed → visible in a query result.
// The resolution is 1 ms (date_time is in ms, truncated: latencies are
// overestimated by up to 1 ms). Not measured: the WebSocket frame.
//
// Overload: 3× the sustainable rate for overload_seconds with a bounded ingest
// buffer (1 s of input, drop_oldest) and a memory budget; reports drops,
// ticks, peak RSS and budget warnings, then the seconds until the p99 of
// 200 ms slices returns to the normal (half-rate) p99 bound.
//
// Threads: RunLatencySuite runs everything itself (producer + engine loop threads).
#pragma once

#include <cstdint>

namespace rill::nexmark {

struct LatencyOptions {
  /// Events/s the engine sustains; 0: measured first (saturating producer).
  double sustainable_rate = 0;
  /// Seconds per latency point.
  double seconds = 5;
  /// Seconds of 3× overload (0: skip the overload run).
  double overload_seconds = 60;
  /// Engine memory budget, bytes.
  int64_t memory_budget_bytes = int64_t{2} << 30;
};

/// Print one JSON line per (tick, rate) latency point and one for the overload run.
void RunLatencySuite(const LatencyOptions& options);

}  // namespace rill::nexmark
