#include "rill/metrics/alert_limiter.h"

#include <gtest/gtest.h>

namespace rill {
namespace {

EngineEvent Failure(std::string detail = "boom") {
  EngineEvent e;
  e.severity = Severity::kError;
  e.source = EventSource::kEngine;
  e.component = "task_a";
  e.message = "Task 'task_a' failed";
  e.detail = std::move(detail);
  return e;
}

TEST(AlertRateLimiter, PassesTheFirstAlertAtOnce) {
  AlertRateLimiter limiter(60);
  std::vector<CountedAlert> out;
  limiter.Offer(Failure(), 0, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].count, 1);
}

TEST(AlertRateLimiter, FoldsRepeatsWithinTheWindowIntoOneAlertWithACount) {
  AlertRateLimiter limiter(60);
  std::vector<CountedAlert> out;
  for (int i = 0; i < 100; ++i) {
    limiter.Offer(Failure("attempt " + std::to_string(i)), i * 0.5, &out);
  }
  ASSERT_EQ(out.size(), 1u);  // only the first so far
  limiter.Sweep(30, &out);
  EXPECT_EQ(out.size(), 1u);  // window not over
  limiter.Sweep(60, &out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].count, 99);
  EXPECT_EQ(out[1].item.detail, "attempt 99");  // the last repeat's detail
  EXPECT_EQ(limiter.suppressed(), 99);
}

TEST(AlertRateLimiter, WritesOneAlertPerWindowForASteadyFailure) {
  AlertRateLimiter limiter(10);
  std::vector<CountedAlert> out;
  for (int tick = 0; tick < 1000; ++tick) {  // 100 s of failures every 0.1 s
    const double now = tick * 0.1;
    limiter.Offer(Failure(), now, &out);
    limiter.Sweep(now, &out);
  }
  EXPECT_GE(out.size(), 9u);
  EXPECT_LE(out.size(), 11u);
  limiter.FlushAll(&out);
  int64_t total = 0;
  for (const auto& a : out) total += a.count;
  EXPECT_EQ(total, 1000);  // every occurrence is accounted for
}

TEST(AlertRateLimiter, KeepsDifferentAlertsApart) {
  AlertRateLimiter limiter(60);
  std::vector<CountedAlert> out;
  EngineEvent other = Failure();
  other.component = "task_b";
  EngineEvent warning = Failure();
  warning.severity = Severity::kWarning;
  limiter.Offer(Failure(), 0, &out);
  limiter.Offer(other, 0, &out);
  limiter.Offer(warning, 0, &out);
  EXPECT_EQ(out.size(), 3u);
}

TEST(AlertRateLimiter, PassesAtOnceAgainAfterAQuietWindow) {
  AlertRateLimiter limiter(10);
  std::vector<CountedAlert> out;
  limiter.Offer(Failure(), 0, &out);
  limiter.Sweep(11, &out);  // no repeats: tracking ends
  EXPECT_EQ(limiter.tracked(), 0u);
  limiter.Offer(Failure(), 12, &out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].count, 1);
}

TEST(AlertRateLimiter, ZeroWindowDisablesLimiting) {
  AlertRateLimiter limiter(0);
  std::vector<CountedAlert> out;
  for (int i = 0; i < 5; ++i) limiter.Offer(Failure(), 0, &out);
  EXPECT_EQ(out.size(), 5u);
}

TEST(AlertRateLimiter, FlushAllEmitsHeldRepeats) {
  AlertRateLimiter limiter(60);
  std::vector<CountedAlert> out;
  for (int i = 0; i < 3; ++i) limiter.Offer(Failure(), i, &out);
  limiter.FlushAll(&out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].count, 2);
}

}  // namespace
}  // namespace rill
