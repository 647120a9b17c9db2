// End-to-end latency and overload runs of nexmark_bench.
//
// A producer thread pushes Nexmark bids at a target rate into a MemoryConnector
// (cycling a pool of bids generated once, so that it can outrun the engine;
// pushes of up to 8 generator batches, ~2.2k bids, as a network reader would),
// stamping each bid's date_time with the wall clock (ms) as it pushes, and the engine's
// own background loop (trigger 100 ms or 10 ms) writes them into `bid` and runs
// q0 as a StreamSqlTask. The engine takes at most 2 tick intervals' worth of
// the offered rate per tick (EngineOptions::max_records_per_tick), so a
// backlog is worked off in short ticks back to back; DuckDB runs on the tick
// thread (sql_threads = 1).
//
// Sustainable rate: the highest rate the engine keeps up with, offered the
// same way at a 10 ms tick, found by doubling from 2M bids/s and bisecting 4
// times; a 5 s probe keeps up when >= 98% of the input is processed, nothing
// is dropped and the buffer never holds 100 ms of input (sampled every 20 ms). A subscriber of the output table reads each new
// version's new rows: latency = the time the version is published (subscriber
// call) − the bid's date_time, i.e. event pushed → visible in a query result.
// The resolution is 1 ms (date_time is in ms, truncated: latencies are
// overestimated by up to 1 ms).
//
// WebSocket (same run, same rows): the engine's Server runs in-process on
// 127.0.0.1:0 and a Beast WebSocket client on its own thread (ws_frames.h)
// subscribes to table:q0_out over a real socket. The table frame carries the
// version, not the rows: a row's latency to the frame = the receive time of the
// first frame announcing its version (or a later one, when the server
// coalesced frames) − the bid's date_time.
//
// Overload: 3× the sustainable rate, offered by `producers` threads, for
// overload_seconds (10 min; --soak: 30 min) with a bounded ingest buffer (1 s
// of input, drop_oldest), 2 intervals of the sustainable rate per tick at most,
// and a memory budget; reports the rate offered, drops,
// ticks and the longest gap between tick ends, peak RSS against the budget
// and budget warnings, then the seconds until the p99 of 200 ms slices
// returns to max(2 × the normal (half-rate) p99, 50 ms).
//
// Threads: RunLatencySuite runs everything itself (producer + engine loop threads).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace rill::nexmark {

struct LatencyOptions {
  /// Events/s the engine sustains; 0: measured first (saturating producer).
  double sustainable_rate = 0;
  /// Seconds per latency point.
  double seconds = 5;
  /// Seconds of 3× overload (0: skip the overload run).
  double overload_seconds = 60;
  /// Producer threads offering the overload rate.
  int producers = 2;
  /// Engine memory budget, bytes.
  int64_t memory_budget_bytes = int64_t{2} << 30;
  /// (tick ms, % of the sustainable rate) points to measure; empty: all six
  /// (100 and 10 ms × 10, 50, 90 %).
  std::vector<std::pair<int64_t, double>> points;
};

/// One latency point's figures (ms; NaN when there were no samples).
struct LatencyPointResult {
  /// Event pushed -> visible in the query result (output table version).
  double p50 = 0, p99 = 0, p999 = 0;
  int64_t samples = 0;
  /// Event pushed -> WebSocket frame received (NaN without `websocket`).
  double ws_p50 = 0, ws_p99 = 0, ws_p999 = 0;
  int64_t ws_samples = 0;
  int64_t ws_frames = 0;              ///< table:q0_out frames received in the window
  int64_t ws_versions_coalesced = 0;  ///< sampled versions with no frame of their own
  double achieved_bids_per_s = 0;
  int64_t dropped_records = 0;
};

/// Run q0 with the engine's own loop at `tick_ms` and `rate` bids/s: 1 s of
/// warm-up, then `seconds` of samples (every 16th row). With `websocket`, the
/// server and a WebSocket client run too (see above).
LatencyPointResult MeasureLatencyPoint(int64_t tick_ms, double rate, double seconds,
                                       bool websocket = true);

/// Print two JSON lines per (tick, rate) latency point (nexmark_e2e_latency_ms_*,
/// nexmark_e2e_ws_latency_ms_*) and one for the overload run.
void RunLatencySuite(const LatencyOptions& options);

}  // namespace rill::nexmark
