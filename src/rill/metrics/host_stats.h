// Host and process resource readings from /proc (Linux).
//
// Threads: the free functions may be called from any thread. A CpuSampler keeps
// the previous reading to compute percentages over the interval between calls;
// it is not thread-safe (the metrics thread owns one).
#pragma once

#include <cstdint>
#include <string>

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

/// Return the size in bytes of `path` plus its DuckDB write-ahead log
/// (`path.wal`); 0 for ":memory:" or a missing file.
int64_t DatabaseFileBytes(const std::string& path);

/// CPU utilisation between successive Sample() calls.
class CpuSampler {
 public:
  struct Reading {
    /// Busy share of all host CPUs, 0-100 (from /proc/stat).
    double host_percent = 0;
    /// CPU time of this process per wall second, in percent of one core
    /// (may exceed 100 on several cores; from /proc/self/stat).
    double process_percent = 0;
  };

  /// Return the utilisation since the previous call (zeros on the first call).
  Reading Sample();

 private:
  bool primed_ = false;
  uint64_t last_busy_ = 0;
  uint64_t last_total_ = 0;
  double last_process_s_ = 0;
  double last_wall_s_ = 0;
};

}  // namespace rill
