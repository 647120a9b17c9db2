// AlertRateLimiter: folds repeated identical alerts into one alert with a count.
//
// Two alerts are identical when source, severity, component and message are
// equal (detail may differ). The windowing is RepeatLimiter's
// (common/repeat_limiter.h): the first alert of a kind passes at once with
// count 1; repeats within `window_seconds` are held back and written as one
// alert carrying their count and the last repeat's detail when the window
// ends. A task failing every tick therefore writes one alert per window, not
// one per tick.
//
// Threads: not thread-safe; the metrics collector owns it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "rill/common/repeat_limiter.h"
#include "rill/engine/event.h"

namespace rill {

/// An alert ready to be written (`item`), with the occurrences it stands for.
using CountedAlert = Counted<EngineEvent>;

class AlertRateLimiter {
 public:
  /// `window_seconds` <= 0 disables limiting. At most `max_tracked` distinct
  /// alerts are tracked; beyond that, new kinds pass unlimited.
  explicit AlertRateLimiter(double window_seconds, size_t max_tracked = 4096)
      : limiter_(window_seconds, max_tracked) {}

  /// Offer `event` at time `now`; append what should be written to `out`.
  void Offer(const EngineEvent& event, double now, std::vector<CountedAlert>* out) {
    limiter_.Offer(RepeatKeyOf(event), event, now, out);
  }
  /// Emit the held-back repeats of every window that ended by `now`.
  void Sweep(double now, std::vector<CountedAlert>* out) { limiter_.Sweep(now, out); }
  /// Emit every held-back repeat now (on shutdown).
  void FlushAll(std::vector<CountedAlert>* out) { limiter_.FlushAll(out); }

  /// Alerts held back so far (for stats). Monotonic.
  int64_t suppressed() const { return limiter_.suppressed(); }
  size_t tracked() const { return limiter_.tracked(); }

 private:
  RepeatLimiter<EventRepeatKey, EngineEvent> limiter_;
};

}  // namespace rill
