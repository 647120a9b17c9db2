#include "rill/metrics/alert_rule.h"

#include <cmath>

#include <gtest/gtest.h>

namespace rill {
namespace {

TEST(CompareOp, ParsesEveryOperatorAndRejectsOthers) {
  for (const char* op : {">", ">=", "<", "<=", "==", "!="}) {
    auto parsed = ParseCompareOp(op);
    ASSERT_TRUE(parsed.ok()) << op;
    EXPECT_STREQ(CompareOpName(*parsed), op);
  }
  EXPECT_EQ(*ParseCompareOp("="), CompareOp::kEqual);
  EXPECT_EQ(*ParseCompareOp("<>"), CompareOp::kNotEqual);
  auto bad = ParseCompareOp("=>");
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(bad.status().IsInvalid());
}

TEST(CompareOp, ComparesLikeTheOperatorReads) {
  EXPECT_TRUE(Compare(CompareOp::kGreater, 2, 1));
  EXPECT_FALSE(Compare(CompareOp::kGreater, 1, 1));
  EXPECT_TRUE(Compare(CompareOp::kGreaterEqual, 1, 1));
  EXPECT_TRUE(Compare(CompareOp::kLess, 0, 1));
  EXPECT_TRUE(Compare(CompareOp::kLessEqual, 1, 1));
  EXPECT_TRUE(Compare(CompareOp::kEqual, 1, 1));
  EXPECT_TRUE(Compare(CompareOp::kNotEqual, 1, 2));
  EXPECT_FALSE(Compare(CompareOp::kGreater, std::nan(""), 1));
}

TEST(AlertRule, ValidatesNameMetricThresholdAndCooldown) {
  AlertRule rule{"r", "cpu_usage"};
  EXPECT_TRUE(rule.Validate().ok());
  AlertRule no_name = rule;
  no_name.name = "";
  EXPECT_TRUE(no_name.Validate().IsInvalid());
  AlertRule no_metric = rule;
  no_metric.metric = "";
  EXPECT_TRUE(no_metric.Validate().IsInvalid());
  AlertRule negative = rule;
  negative.cooldown_seconds = -1;
  EXPECT_TRUE(negative.Validate().IsInvalid());
  AlertRule nan = rule;
  nan.threshold = std::nan("");
  EXPECT_TRUE(nan.Validate().IsInvalid());
}

TEST(AlertRule, DoesNotFireAgainWithinItsCooldown) {
  AlertRule rule{"hot", "cpu_usage", CompareOp::kGreater, /*threshold=*/90,
                 /*cooldown_seconds=*/10};
  AlertRuleState state;
  EXPECT_TRUE(EvaluateRule(rule, 95, 100, &state));
  EXPECT_FALSE(EvaluateRule(rule, 99, 105, &state));    // in cooldown
  EXPECT_FALSE(EvaluateRule(rule, 99, 109.9, &state));  // still in cooldown
  EXPECT_TRUE(EvaluateRule(rule, 99, 110, &state));      // cooldown over
  EXPECT_EQ(state.fire_count, 2);
  EXPECT_EQ(*state.last_fired_at, 110);
  EXPECT_EQ(*state.last_value, 99);
}

TEST(AlertRule, NeverFiresOnAMissingValueOrWhenDisabled) {
  AlertRule rule{"r", "x", CompareOp::kLess, 1, 0};
  AlertRuleState state;
  EXPECT_FALSE(EvaluateRule(rule, std::nullopt, 1, &state));
  EXPECT_FALSE(state.last_value.has_value());
  rule.enabled = false;
  EXPECT_FALSE(EvaluateRule(rule, 0, 2, &state));
  rule.enabled = true;
  EXPECT_TRUE(EvaluateRule(rule, 0, 3, &state));
  EXPECT_TRUE(EvaluateRule(rule, 0, 3, &state));  // cooldown 0: every evaluation
}

TEST(AlertRule, MessageNamesMetricOperatorThresholdAndValue) {
  AlertRule rule{"r", "window_p99_batch_latency_ms", CompareOp::kGreaterEqual, 0.5};
  EXPECT_EQ(RuleAlertMessage(rule, 0.75), "window_p99_batch_latency_ms >= 0.5 (value 0.75)");
  rule.message = "latency is high";
  EXPECT_EQ(RuleAlertMessage(rule, 0.75), "latency is high");
}

}  // namespace
}  // namespace rill
