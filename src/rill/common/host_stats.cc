#include "rill/common/host_stats.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

namespace rill {
namespace {

double MonotonicSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Sum of the first line of /proc/stat: "cpu user nice system idle iowait irq
// softirq steal ...". Idle time is idle + iowait.
bool ReadHostCpu(uint64_t* busy, uint64_t* total) {
  std::ifstream in("/proc/stat");
  std::string label;
  if (!(in >> label) || label != "cpu") {
    return false;
  }
  uint64_t fields[10] = {0};
  for (int i = 0; i < 10 && in >> fields[i]; ++i) {
  }
  // guest and guest_nice (fields 8, 9) are already counted in user and nice.
  uint64_t sum = 0;
  for (int i = 0; i < 8; ++i) {
    sum += fields[i];
  }
  const uint64_t idle = fields[3] + fields[4];
  *total = sum;
  *busy = sum - idle;
  return true;
}

// utime + stime of this process, in seconds (/proc/self/stat fields 14, 15).
bool ReadProcessCpuSeconds(double* seconds) {
  std::ifstream in("/proc/self/stat");
  std::string line;
  if (!std::getline(in, line)) {
    return false;
  }
  // The command name (field 2) may contain spaces; fields resume after ')'.
  const size_t close = line.rfind(')');
  if (close == std::string::npos) {
    return false;
  }
  std::istringstream rest(line.substr(close + 2));
  std::string field;
  uint64_t utime = 0;
  uint64_t stime = 0;
  // After ')' the next field is field 3 (state); utime is field 14.
  for (int index = 3; index <= 15 && rest >> field; ++index) {
    if (index == 14) {
      utime = std::strtoull(field.c_str(), nullptr, 10);
    } else if (index == 15) {
      stime = std::strtoull(field.c_str(), nullptr, 10);
    }
  }
  const long ticks = sysconf(_SC_CLK_TCK);
  if (ticks <= 0) {
    return false;
  }
  *seconds = static_cast<double>(utime + stime) / static_cast<double>(ticks);
  return true;
}

}  // namespace

int64_t ProcessRssBytes() {
  std::ifstream in("/proc/self/statm");
  int64_t size_pages = 0;
  int64_t resident_pages = 0;
  if (!(in >> size_pages >> resident_pages)) {
    return 0;
  }
  return resident_pages * static_cast<int64_t>(sysconf(_SC_PAGESIZE));
}

SystemMemory ReadSystemMemory() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t value_kb = 0;
  std::string unit;
  int64_t total_kb = -1;
  int64_t available_kb = -1;
  while (in >> key >> value_kb) {
    std::getline(in, unit);
    if (key == "MemTotal:") {
      total_kb = value_kb;
    } else if (key == "MemAvailable:") {
      available_kb = value_kb;
    }
    if (total_kb >= 0 && available_kb >= 0) {
      break;
    }
  }
  SystemMemory memory;
  if (total_kb < 0) {
    return memory;
  }
  memory.total_bytes = total_kb * 1024;
  memory.used_bytes = available_kb >= 0 ? (total_kb - available_kb) * 1024 : 0;
  return memory;
}

HostSampler::HostSampler(double min_interval_seconds)
    : min_interval_seconds_(min_interval_seconds) {
  std::lock_guard<std::mutex> lock(sample_mu_);
  latest_.Store(std::make_shared<const HostSample>(TakeReadingLocked(MonotonicSeconds())));
}

HostSample HostSampler::Latest() const { return *latest_.Load(); }

HostSample HostSampler::Sample(double max_age_seconds) {
  std::shared_ptr<const HostSample> latest = latest_.Load();
  const double now_s = MonotonicSeconds();
  const double age = now_s - latest->steady_s;
  if (age <= max_age_seconds || age < min_interval_seconds_) {
    return *latest;
  }
  std::unique_lock<std::mutex> lock(sample_mu_, std::try_to_lock);
  if (!lock.owns_lock()) {
    return *latest;  // another thread is taking a reading; do not wait for it
  }
  // Another thread may have published a reading between the load and the lock.
  latest = latest_.Load();
  if (now_s - latest->steady_s <= max_age_seconds) {
    return *latest;
  }
  auto reading = std::make_shared<const HostSample>(TakeReadingLocked(now_s));
  latest_.Store(reading);
  return *reading;
}

HostSample HostSampler::TakeReadingLocked(double now_s) {
  HostSample reading;
  reading.steady_s = now_s;
  uint64_t busy = 0;
  uint64_t total = 0;
  double process_s = 0;
  const bool host_ok = ReadHostCpu(&busy, &total);
  const bool process_ok = ReadProcessCpuSeconds(&process_s);
  if (primed_) {
    if (host_ok && total > last_total_ && busy >= last_busy_) {
      reading.cpu_usage_percent = 100.0 * static_cast<double>(busy - last_busy_) /
                                  static_cast<double>(total - last_total_);
    }
    if (process_ok && now_s > last_wall_s_) {
      reading.process_cpu_percent =
          100.0 * (process_s - last_process_s_) / (now_s - last_wall_s_);
    }
  }
  primed_ = host_ok || process_ok;
  last_busy_ = busy;
  last_total_ = total;
  last_process_s_ = process_s;
  last_wall_s_ = now_s;
  reading.process_rss_bytes = ProcessRssBytes();
  const SystemMemory memory = ReadSystemMemory();
  reading.used_memory_bytes = memory.used_bytes;
  reading.total_memory_bytes = memory.total_bytes;
  return reading;
}

}  // namespace rill
