#include "rill/metrics/latency_window.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace rill {

void LatencyWindow::Add(double now, double latency_s) {
  samples_.emplace_back(now, latency_s);
  while (samples_.size() > max_samples_) {
    samples_.pop_front();
  }
}

void LatencyWindow::Expire(double now) {
  while (!samples_.empty() && now - samples_.front().first > window_seconds_) {
    samples_.pop_front();
  }
}

double LatencyWindow::Mean() const {
  if (samples_.empty()) {
    return 0;
  }
  double sum = 0;
  for (const auto& sample : samples_) {
    sum += sample.second;
  }
  return sum / static_cast<double>(samples_.size());
}

double LatencyWindow::Max() const {
  double max = 0;
  for (const auto& sample : samples_) {
    max = std::max(max, sample.second);
  }
  return max;
}

double LatencyWindow::Quantile(double q) const {
  if (samples_.empty()) {
    return 0;
  }
  std::vector<double> values;
  values.reserve(samples_.size());
  for (const auto& sample : samples_) {
    values.push_back(sample.second);
  }
  q = std::clamp(q, 0.0, 1.0);
  // Nearest rank: the smallest value with at least q of the samples <= it.
  size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(values.size())));
  rank = std::clamp<size_t>(rank, 1, values.size());
  std::nth_element(values.begin(), values.begin() + (rank - 1), values.end());
  return values[rank - 1];
}

}  // namespace rill
