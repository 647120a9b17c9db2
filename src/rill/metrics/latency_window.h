// LatencyWindow: tick latencies of the recent past, for average and p99.
//
// Threads: not thread-safe; the metrics thread owns it.
#pragma once

#include <cstddef>
#include <deque>
#include <utility>

namespace rill {

/// Latency samples within a sliding time window.
class LatencyWindow {
 public:
  /// Keep samples younger than `window_seconds`, at most `max_samples`.
  LatencyWindow(double window_seconds, size_t max_samples)
      : window_seconds_(window_seconds), max_samples_(max_samples) {}

  /// Add one tick's latency observed at `now`.
  void Add(double now, double latency_s);
  /// Drop samples older than the window.
  void Expire(double now);

  size_t size() const { return samples_.size(); }
  /// Mean of the samples (0 when empty).
  double Mean() const;
  /// Largest sample (0 when empty).
  double Max() const;
  /// The q-quantile (0 <= q <= 1) by the nearest-rank method (0 when empty).
  double Quantile(double q) const;

 private:
  double window_seconds_;
  size_t max_samples_;
  std::deque<std::pair<double, double>> samples_;  // (time, latency), oldest first
};

}  // namespace rill
