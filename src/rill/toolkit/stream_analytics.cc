#include "rill/toolkit/stream_analytics.h"

#include <algorithm>
#include <chrono>
#include <cmath>

namespace rill::toolkit {

Result<std::unique_ptr<StreamAnalytics>> StreamAnalytics::Make(StreamAnalyticsOptions options) {
  if (!(options.rate_window_seconds > 0)) {
    return Status::Invalid("rate_window_seconds must be > 0");
  }
  if (options.max_metrics < 1) {
    return Status::Invalid("max_metrics must be >= 1");
  }
  return std::unique_ptr<StreamAnalytics>(new StreamAnalytics(std::move(options)));
}

double StreamAnalytics::Now() const {
  if (options_.clock) return options_.clock();
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void StreamAnalytics::Trim(Metric& m, double now) const {
  while (!m.recent.empty() && m.recent.front() < now - options_.rate_window_seconds) {
    m.recent.pop_front();
  }
}

Status StreamAnalytics::Track(const std::string& name, double value,
                              std::optional<double> timestamp) {
  if (name.empty() || name.size() > 200) {
    return Status::Invalid("metric name must be 1 to 200 bytes");
  }
  if (!std::isfinite(value)) {
    return Status::Invalid("metric '", name, "': value must be a finite number");
  }
  double now = Now();
  double ts = timestamp.value_or(now);
  if (!std::isfinite(ts)) {
    return Status::Invalid("metric '", name, "': timestamp must be a finite number");
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto it = metrics_.find(name);
  if (it == metrics_.end()) {
    if (static_cast<int64_t>(metrics_.size()) >= options_.max_metrics) {
      return Status::CapacityError("too many metrics (max_metrics=", options_.max_metrics,
                                   ")");
    }
    it = metrics_.emplace(name, Metric{}).first;
  }
  Metric& m = it->second;
  if (m.count == 0) {
    m.min = m.max = value;
    m.first_ts = m.last_ts = ts;
  }
  ++m.count;
  m.sum += value;
  m.min = std::min(m.min, value);
  m.max = std::max(m.max, value);
  m.first_ts = std::min(m.first_ts, ts);
  m.last_ts = std::max(m.last_ts, ts);
  m.last = value;
  m.recent.push_back(ts);
  Trim(m, now);
  return Status::OK();
}

MetricSnapshot StreamAnalytics::Snapshot(const std::string& name, Metric& m,
                                         double now) const {
  Trim(m, now);
  MetricSnapshot s;
  s.name = name;
  s.count = m.count;
  s.sum = m.sum;
  if (m.count > 0) {
    s.avg = m.sum / static_cast<double>(m.count);
    s.min = m.min;
    s.max = m.max;
    s.last = m.last;
    s.first_timestamp = m.first_ts;
    s.last_timestamp = m.last_ts;
    double span = std::min(options_.rate_window_seconds, std::max(now - m.first_ts, 1e-9));
    span = std::max(span, 1.0);
    s.rate_per_second = static_cast<double>(m.recent.size()) / span;
  }
  return s;
}

std::optional<MetricSnapshot> StreamAnalytics::Get(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = metrics_.find(name);
  if (it == metrics_.end()) return std::nullopt;
  return Snapshot(name, it->second, Now());
}

std::vector<MetricSnapshot> StreamAnalytics::All() const {
  std::lock_guard<std::mutex> lock(mu_);
  double now = Now();
  std::vector<MetricSnapshot> out;
  for (auto& [name, m] : metrics_) out.push_back(Snapshot(name, m, now));
  return out;
}

int64_t StreamAnalytics::Reset(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  if (name.empty()) {
    int64_t n = static_cast<int64_t>(metrics_.size());
    metrics_.clear();
    return n;
  }
  return static_cast<int64_t>(metrics_.erase(name));
}

}  // namespace rill::toolkit
