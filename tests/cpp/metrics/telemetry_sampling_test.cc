#include <unistd.h>

#include <fstream>

#include <gtest/gtest.h>

#include "rill/common/host_stats.h"
#include "rill/metrics/latency_window.h"
#include "rill/metrics/metrics_db_internal.h"

namespace rill {
namespace {

TEST(HostStats, ReadsProcessAndSystemMemory) {
  EXPECT_GT(ProcessRssBytes(), 0);
  const SystemMemory memory = ReadSystemMemory();
  EXPECT_GT(memory.total_bytes, 0);
  EXPECT_GT(memory.used_bytes, 0);
  EXPECT_LE(memory.used_bytes, memory.total_bytes);
}

TEST(HostSampler, CpuPercentagesAreWithinRange) {
  HostSampler sampler(/*min_interval_seconds=*/0);
  EXPECT_EQ(sampler.Latest().cpu_usage_percent, 0);  // the first reading primes
  volatile double sink = 0;
  for (int i = 0; i < 20000000; ++i) sink = sink + i * 0.5;
  const HostSample reading = sampler.Sample(/*max_age_seconds=*/0);
  EXPECT_GE(reading.cpu_usage_percent, 0);
  EXPECT_LE(reading.cpu_usage_percent, 100);
  EXPECT_GT(reading.process_cpu_percent, 0);
  EXPECT_GT(reading.process_rss_bytes, 0);
  EXPECT_GT(reading.total_memory_bytes, 0);
  EXPECT_LE(reading.used_memory_bytes, reading.total_memory_bytes);
}

TEST(HostSampler, ReusesAReadingYoungerThanTheMaximumAge) {
  HostSampler sampler(/*min_interval_seconds=*/0);
  const HostSample first = sampler.Sample(/*max_age_seconds=*/0);
  const HostSample reused = sampler.Sample(/*max_age_seconds=*/3600);
  EXPECT_EQ(reused.steady_s, first.steady_s);
  EXPECT_EQ(sampler.Latest().steady_s, first.steady_s);
  const HostSample fresh = sampler.Sample(/*max_age_seconds=*/0);
  EXPECT_GT(fresh.steady_s, first.steady_s);
}

TEST(HostSampler, NeverMeasuresCpuOverLessThanTheMinimumInterval) {
  HostSampler sampler(/*min_interval_seconds=*/3600);
  const HostSample first = sampler.Latest();
  EXPECT_EQ(sampler.Sample(/*max_age_seconds=*/0).steady_s, first.steady_s);
}

TEST(HostStats, DatabaseFileBytesCountsFileAndWal) {
  EXPECT_EQ(metrics_internal::DatabaseFileBytes(":memory:"), 0);
  EXPECT_EQ(metrics_internal::DatabaseFileBytes("/nonexistent/x.db"), 0);
  const std::string path = testing::TempDir() + "/host_stats_" + std::to_string(getpid());
  std::ofstream(path) << "12345";
  std::ofstream(path + ".wal") << "678";
  EXPECT_EQ(metrics_internal::DatabaseFileBytes(path), 8);
  std::remove(path.c_str());
  std::remove((path + ".wal").c_str());
}

TEST(LatencyWindow, ComputesMeanMaxAndP99OverTheWindow) {
  LatencyWindow window(/*window_seconds=*/10, /*max_samples=*/1000);
  EXPECT_EQ(window.Quantile(0.99), 0);
  for (int i = 1; i <= 100; ++i) window.Add(i * 0.01, i / 1000.0);  // 1..100 ms
  EXPECT_DOUBLE_EQ(window.Max(), 0.1);
  EXPECT_NEAR(window.Mean(), 0.0505, 1e-9);
  EXPECT_DOUBLE_EQ(window.Quantile(0.99), 0.099);
  EXPECT_DOUBLE_EQ(window.Quantile(1.0), 0.1);
  window.Expire(/*now=*/10.5);  // drops samples older than 0.5 s
  EXPECT_EQ(window.size(), 51u);
  EXPECT_DOUBLE_EQ(window.Quantile(0.0), 0.05);
}

TEST(LatencyWindow, KeepsAtMostMaxSamples) {
  LatencyWindow window(1e9, 3);
  for (int i = 0; i < 10; ++i) window.Add(i, i);
  EXPECT_EQ(window.size(), 3u);
  EXPECT_EQ(window.Max(), 9);
}

}  // namespace
}  // namespace rill
