// Host and process resource readings from /proc (Linux): the one sampler of
// CPU and memory in Rill. The engine's `rill_metrics` table and the metrics
// store's `rill_telemetry` history both read the same HostSampler (the one an
// Engine owns), so their figures agree.
//
// Threads: the free functions and every HostSampler method may be called from
// any thread. Sample() does the /proc reads; it is called off the tick (by the
// metrics store's collector, and by Engine::Step before it takes the tick lock).
// Latest() is what the tick calls: one atomic load, no lock, no file read.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>

#include "rill/common/snapshot_cell.h"

namespace rill {

/// System-wide memory, from /proc/meminfo.
struct SystemMemory {
  int64_t total_bytes = 0;
  /// total - MemAvailable (what the kernel cannot hand out without swapping).
  int64_t used_bytes = 0;
};

/// Return the resident set size of this process in bytes (/proc/self/statm),
/// or 0 when it cannot be read.
int64_t ProcessRssBytes();

/// Return system memory, or zeros when /proc/meminfo cannot be read.
SystemMemory ReadSystemMemory();

/// One reading of the host and of this process.
struct HostSample {
  /// Monotonic time of the reading, in seconds (steady clock; not unix time).
  double steady_s = 0;
  /// Busy share of all host CPUs since the previous reading, 0-100 (/proc/stat).
  double cpu_usage_percent = 0;
  /// CPU time of this process per wall second since the previous reading, in
  /// percent of one core (may exceed 100 on several cores; /proc/self/stat).
  double process_cpu_percent = 0;
  /// Resident set size of this process.
  int64_t process_rss_bytes = 0;
  /// Host memory in use (MemTotal - MemAvailable) and in total, so that
  /// used / total is the host's memory use.
  int64_t used_memory_bytes = 0;
  int64_t total_memory_bytes = 0;
};

/// Samples host and process CPU and memory, and publishes the latest reading.
/// CPU percentages cover the interval between two successive readings, so
/// readings closer together than `min_interval_seconds` are not taken (the
/// latest is returned instead): several callers share one sampler without
/// producing percentages over meaninglessly short intervals.
class HostSampler {
 public:
  /// Take a first reading (its CPU percentages are 0: there is no interval yet).
  explicit HostSampler(double min_interval_seconds = 0.1);
  HostSampler(const HostSampler&) = delete;
  HostSampler& operator=(const HostSampler&) = delete;

  /// Return a reading no older than `max_age_seconds`: the latest one when it
  /// is young enough, a new one otherwise. Never waits: when another thread is
  /// sampling right now, return the latest. Any thread.
  HostSample Sample(double max_age_seconds);
  /// Return the latest reading without reading /proc. Any thread; lock-free
  /// for the caller (an atomic shared_ptr load).
  HostSample Latest() const;

 private:
  HostSample TakeReadingLocked(double now_s);

  const double min_interval_seconds_;
  std::mutex sample_mu_;  // serializes readings; guards the previous counters below
  bool primed_ = false;
  uint64_t last_busy_ = 0;
  uint64_t last_total_ = 0;
  double last_process_s_ = 0;
  double last_wall_s_ = 0;
  SnapshotCell<HostSample> latest_;
};

}  // namespace rill
