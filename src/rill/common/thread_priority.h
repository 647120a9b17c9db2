// Background threads yield the CPU to the engine's tick thread.
//
// Linux nice values are per thread: a thread that calls
// LowerThisThreadPriority() gets a smaller share of a busy CPU than the tick
// thread (nice 10 weighs about a tenth of nice 0 under CFS), while an idle CPU
// still runs it at full speed. Used by the HTTP server's workers, the
// checkpoint writer and the metrics store's collector and writer (issue 16:
// the metrics store must not contend with the tick).
#pragma once

namespace rill {

/// The nice value background threads run at (relative to the process's 0).
inline constexpr int kBackgroundNice = 10;

/// Set the calling thread's nice value to `nice` (default kBackgroundNice).
/// Failure (no permission) is ignored: it changes nothing else.
void LowerThisThreadPriority(int nice = kBackgroundNice);

}  // namespace rill
