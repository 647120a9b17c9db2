// AlertRateLimiter: folds repeated identical alerts into one alert with a count.
//
// Two alerts are identical when source, severity, component and message are
// equal (detail may differ). The first alert of a kind passes at once with
// count 1 and opens a window of `window_seconds`; repeats inside the window are
// held back and counted. When the window has passed, Sweep() (or the next
// repeat) emits one alert carrying the number of held-back repeats and the last
// repeat's detail, and a new window starts; a window without repeats ends the
// tracking, so the next occurrence passes at once again. A task failing every
// tick therefore writes one alert per window, not one per tick.
//
// Threads: not thread-safe; the metrics thread owns it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "rill/engine/event.h"

namespace rill {

/// An alert ready to be written, with the number of occurrences it stands for.
struct CountedAlert {
  EngineEvent event;
  int64_t count = 1;
};

class AlertRateLimiter {
 public:
  /// `window_seconds` <= 0 disables limiting. At most `max_tracked` distinct
  /// alerts are tracked; beyond that, new kinds pass unlimited.
  explicit AlertRateLimiter(double window_seconds, size_t max_tracked = 4096)
      : window_seconds_(window_seconds), max_tracked_(max_tracked) {}

  /// Offer `event` at time `now`; append what should be written to `out`.
  void Offer(const EngineEvent& event, double now, std::vector<CountedAlert>* out);
  /// Emit the held-back repeats of every window that ended by `now`.
  void Sweep(double now, std::vector<CountedAlert>* out);
  /// Emit every held-back repeat now (on shutdown).
  void FlushAll(std::vector<CountedAlert>* out);

  /// Alerts held back so far (for stats). Monotonic.
  int64_t suppressed() const { return suppressed_; }
  size_t tracked() const { return windows_.size(); }

 private:
  using Key = std::tuple<std::string, int, std::string, std::string>;
  struct Window {
    double start = 0;
    int64_t held = 0;   // repeats held back in this window
    EngineEvent last;   // the last held-back repeat
  };
  static Key KeyOf(const EngineEvent& event);

  double window_seconds_;
  size_t max_tracked_;
  std::map<Key, Window> windows_;
  int64_t suppressed_ = 0;
};

}  // namespace rill
