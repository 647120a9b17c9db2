// MetricsStore's private state (private to src/rill/metrics): shared by
// metrics_store.cc (construction, lifecycle, writer, public API) and
// metrics_cycle.cc (the collector cycle).
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "rill/engine/event.h"
#include "rill/metrics/alert_limiter.h"
#include "rill/metrics/latency_window.h"
#include "rill/metrics/metrics_db_internal.h"
#include "rill/metrics/metrics_store.h"

namespace rill {

// Engine events waiting for the collector. Shared with the engine listener so
// that a listener call racing with the store's destruction stays safe.
struct MetricsStore::EventInbox {
  explicit EventInbox(int64_t capacity) : capacity(capacity) {}

  // Called on the tick thread (and others): O(1), never blocks on I/O.
  void Push(const EngineEvent& event) {
    std::lock_guard<std::mutex> lock(mu);
    ++received;
    if (static_cast<int64_t>(events.size()) >= capacity) {
      ++dropped;
      return;
    }
    events.push_back(event);
  }

  std::deque<EngineEvent> Drain() {
    std::deque<EngineEvent> out;
    std::lock_guard<std::mutex> lock(mu);
    out.swap(events);
    return out;
  }

  const int64_t capacity;
  std::mutex mu;
  std::deque<EngineEvent> events;  // guarded by mu
  int64_t received = 0;            // guarded by mu
  int64_t dropped = 0;             // guarded by mu
};

struct MetricsStore::QueuedBatch {
  metrics_internal::WriteBatch batch;
  uint64_t covers = 0;  // Flush() requests satisfied once this batch is handled
  double now = 0;
};

// A KPI query and its state; fields guarded by state_mu_.
struct MetricsStore::KpiEntry {
  KpiQuery query;
  double created_at = 0;
  std::optional<double> last_run_at;
  std::optional<double> value;
  std::shared_ptr<arrow::Table> result;
  std::string last_error;
  int64_t runs = 0;
  int64_t errors = 0;
  /// Incremental maintenance (issue 27): the engine task that keeps the
  /// query's result in `view` (both "__rill_kpi_<name>"), once the query
  /// is known to be maintainable; `maintenance` says which path the KPI
  /// takes ("incremental", "recompute (<why>)", empty until decided).
  std::string view;
  std::string maintenance;
};

// A rule and its state; guarded by state_mu_.
struct MetricsStore::RuleEntry {
  AlertRule rule;
  AlertRuleState state;
};

// What the collector keeps between cycles; guarded by cycle_mu_.
struct MetricsStore::CollectorState {
  explicit CollectorState(const MetricsOptions& o)
      : latency(o.latency_window_seconds, /*max_samples=*/100000),
        limiter(o.rate_limit_window_seconds) {}

  LatencyWindow latency;
  AlertRateLimiter limiter;
  /// Position in the engine's TickLog: every tick's duration goes into
  /// `latency`, read without a lock the tick thread takes.
  uint64_t tick_cursor = 0;
  int64_t lost_ticks = 0;  ///< overwritten in the TickLog before being read
  uint64_t requests_seen = 0;
  int64_t unreported_dropped_rows = 0;
  int64_t unreported_dropped_batches = 0;
};

// Counts of one cycle, added to stats() at its end.
struct MetricsStore::CycleCounts {
  int64_t kpi_runs = 0;
  int64_t kpi_errors = 0;
  int64_t rule_fires = 0;
};

}  // namespace rill
