// RepeatLimiter: folds repeats of the same thing within a time window into one
// report with a count. Used for alerts (metrics/alert_limiter.h) and for the
// engine's log lines, so that something failing on every tick is reported once
// per window, not once per tick.
//
// The first occurrence of a key passes at once with count 1 and opens a window
// of `window_seconds`; repeats inside the window are held back and counted
// (the last one is kept). When the window has passed, Sweep() (or the next
// repeat) emits one report carrying the number of held-back repeats and the
// last repeat, and a new window starts; a window without repeats ends the
// tracking, so the next occurrence passes at once again.
//
// Threads: not thread-safe; the owner serializes calls (the metrics collector
// owns the alert limiter; the engine guards its log limiter with a mutex).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

namespace rill {

/// One report: `item` stands for `count` occurrences.
template <typename Item>
struct Counted {
  Item item;
  int64_t count = 1;
};

template <typename Key, typename Item>
class RepeatLimiter {
 public:
  /// `window_seconds` <= 0 disables limiting. At most `max_tracked` distinct
  /// keys are tracked; beyond that, new keys pass unlimited.
  explicit RepeatLimiter(double window_seconds, size_t max_tracked = 4096)
      : window_seconds_(window_seconds), max_tracked_(max_tracked) {}

  double window_seconds() const { return window_seconds_; }

  /// Offer `item` (of kind `key`) at time `now`; append what should be
  /// reported to `out`.
  void Offer(Key key, const Item& item, double now, std::vector<Counted<Item>>* out) {
    if (window_seconds_ <= 0) {
      out->push_back({item, 1});
      return;
    }
    auto it = windows_.find(key);
    if (it == windows_.end()) {
      if (windows_.size() < max_tracked_) {
        windows_.emplace(std::move(key), Window{now, 0, {}});
      }
      out->push_back({item, 1});
      return;
    }
    Window& window = it->second;
    if (now - window.start < window_seconds_) {
      ++window.held;
      ++suppressed_;
      window.last = item;
      return;
    }
    // The window ended without a Sweep: this repeat closes it and carries the
    // held-back count, and a new window starts now.
    out->push_back({item, window.held + 1});
    window = Window{now, 0, {}};
  }

  /// Emit the held-back repeats of every window that ended by `now`.
  void Sweep(double now, std::vector<Counted<Item>>* out) {
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
      // Repeats keep coming: report them and keep limiting in a new window, so
      // a steady failure is reported once per window.
      out->push_back({window.last, window.held});
      window = Window{now, 0, {}};
      ++it;
    }
  }

  /// Emit every held-back repeat now (on shutdown) and forget every window.
  void FlushAll(std::vector<Counted<Item>>* out) {
    for (auto& [key, window] : windows_) {
      if (window.held > 0) {
        out->push_back({window.last, window.held});
      }
    }
    windows_.clear();
  }

  /// Occurrences held back so far. Monotonic.
  int64_t suppressed() const { return suppressed_; }
  /// Keys with an open window.
  size_t tracked() const { return windows_.size(); }

 private:
  struct Window {
    double start = 0;
    int64_t held = 0;  // repeats held back in this window
    Item last;         // the last held-back repeat
  };

  double window_seconds_;
  size_t max_tracked_;
  std::map<Key, Window> windows_;
  int64_t suppressed_ = 0;
};

}  // namespace rill
