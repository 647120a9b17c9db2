// Wall-clock time as float64 unix seconds, injectable for tests.
#pragma once

#include <functional>

namespace rill {

/// A source of wall-clock time in unix seconds. Must be callable from any thread.
using Clock = std::function<double()>;

/// Return the current wall-clock time in unix seconds (microsecond resolution).
double UnixNow();

/// Return `clock` if set, else the system clock.
inline Clock OrSystemClock(Clock clock) { return clock ? std::move(clock) : Clock(UnixNow); }

}  // namespace rill
