// StreamAnalytics: seed 001's named metrics with running statistics and rates.
//
// track_metric(name, value) updates count, sum, min, max, last and the first
// and last timestamps; rate_per_second is the number of values tracked in the
// last `rate_window_seconds` divided by that window, or by the time since the
// metric's first value when that is shorter (at least 1 s). The semantics are
// those of the Python rills.analytics.stream_analytics.StreamAnalytics.
//
// Threads: any thread (one mutex). Memory: per metric a few words plus one
// timestamp per value of the last rate window, and at most `max_metrics`
// metrics (Track returns CapacityError beyond).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "rill/common/status.h"

namespace rill::toolkit {

/// get_metric() of seed 001.
struct MetricSnapshot {
  std::string name;
  int64_t count = 0;
  double sum = 0;
  double avg = 0;
  std::optional<double> min;
  std::optional<double> max;
  std::optional<double> last;
  std::optional<double> first_timestamp;
  std::optional<double> last_timestamp;
  double rate_per_second = 0;
};

struct StreamAnalyticsOptions {
  double rate_window_seconds = 60;
  int64_t max_metrics = 10000;
  /// Unix seconds now; the wall clock when empty (tests inject one).
  std::function<double()> clock;
};

class StreamAnalytics {
 public:
  /// Invalid when rate_window_seconds <= 0 or max_metrics < 1.
  static Result<std::unique_ptr<StreamAnalytics>> Make(StreamAnalyticsOptions options = {});

  /// Record `value` for `name` at `timestamp` (now when empty). Invalid for an
  /// empty name or a non-finite value; CapacityError beyond max_metrics.
  Status Track(const std::string& name, double value,
               std::optional<double> timestamp = std::nullopt);
  /// The metric's statistics; nullopt when unknown.
  std::optional<MetricSnapshot> Get(const std::string& name) const;
  /// Every metric, by name.
  std::vector<MetricSnapshot> All() const;
  /// Forget one metric (or all when `name` is empty); return how many.
  int64_t Reset(const std::string& name = "");

 private:
  explicit StreamAnalytics(StreamAnalyticsOptions options) : options_(std::move(options)) {}
  struct Metric {
    int64_t count = 0;
    double sum = 0;
    double min = 0;
    double max = 0;
    double last = 0;
    double first_ts = 0;
    double last_ts = 0;
    std::deque<double> recent;  // timestamps within the rate window
  };
  double Now() const;
  void Trim(Metric& m, double now) const;
  MetricSnapshot Snapshot(const std::string& name, Metric& m, double now) const;

  const StreamAnalyticsOptions options_;
  mutable std::mutex mu_;
  mutable std::map<std::string, Metric> metrics_;  // guarded by mu_; Trim mutates
};

}  // namespace rill::toolkit
