#include "rill/metrics/alert_limiter.h"

namespace rill {

AlertRateLimiter::Key AlertRateLimiter::KeyOf(const EngineEvent& event) {
  return Key(event.source, static_cast<int>(event.severity), event.component, event.message);
}

void AlertRateLimiter::Offer(const EngineEvent& event, double now,
                             std::vector<CountedAlert>* out) {
  if (window_seconds_ <= 0) {
    out->push_back({event, 1});
    return;
  }
  Key key = KeyOf(event);
  auto it = windows_.find(key);
  if (it == windows_.end()) {
    if (windows_.size() < max_tracked_) {
      windows_.emplace(std::move(key), Window{now, 0, {}});
    }
    out->push_back({event, 1});
    return;
  }
  Window& window = it->second;
  if (now - window.start < window_seconds_) {
    ++window.held;
    ++suppressed_;
    window.last = event;
    return;
  }
  // The window ended without a Sweep: this repeat closes it and carries the
  // held-back count, and a new window starts now.
  out->push_back({event, window.held + 1});
  window = Window{now, 0, {}};
}

void AlertRateLimiter::Sweep(double now, std::vector<CountedAlert>* out) {
  for (auto it = windows_.begin(); it != windows_.end();) {
    Window& window = it->second;
    if (now - window.start < window_seconds_) {
      ++it;
      continue;
    }
    if (window.held == 0) {
      it = windows_.erase(it);
      continue;
    }
    // Repeats keep coming: report them and keep limiting in a new window, so a
    // steady failure writes one alert per window.
    out->push_back({window.last, window.held});
    window = Window{now, 0, {}};
    ++it;
  }
}

void AlertRateLimiter::FlushAll(std::vector<CountedAlert>* out) {
  for (auto& [key, window] : windows_) {
    if (window.held > 0) {
      out->push_back({window.last, window.held});
    }
  }
  windows_.clear();
}

}  // namespace rill
