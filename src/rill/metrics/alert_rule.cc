#include "rill/metrics/alert_rule.h"

#include <cmath>

#include <fmt/format.h>

namespace rill {

Result<CompareOp> ParseCompareOp(std::string_view text) {
  if (text == ">") return CompareOp::kGreater;
  if (text == ">=") return CompareOp::kGreaterEqual;
  if (text == "<") return CompareOp::kLess;
  if (text == "<=") return CompareOp::kLessEqual;
  if (text == "==" || text == "=") return CompareOp::kEqual;
  if (text == "!=" || text == "<>") return CompareOp::kNotEqual;
  return Status::Invalid("unknown comparison operator '", text,
                         "': expected one of > >= < <= == !=");
}

const char* CompareOpName(CompareOp op) {
  switch (op) {
    case CompareOp::kGreater:
      return ">";
    case CompareOp::kGreaterEqual:
      return ">=";
    case CompareOp::kLess:
      return "<";
    case CompareOp::kLessEqual:
      return "<=";
    case CompareOp::kEqual:
      return "==";
    case CompareOp::kNotEqual:
      return "!=";
  }
  return "?";
}

bool Compare(CompareOp op, double value, double threshold) {
  switch (op) {
    case CompareOp::kGreater:
      return value > threshold;
    case CompareOp::kGreaterEqual:
      return value >= threshold;
    case CompareOp::kLess:
      return value < threshold;
    case CompareOp::kLessEqual:
      return value <= threshold;
    case CompareOp::kEqual:
      return value == threshold;
    case CompareOp::kNotEqual:
      return value != threshold;
  }
  return false;
}

Status AlertRule::Validate() const {
  if (name.empty()) {
    return Status::Invalid("alert rule needs a name");
  }
  if (metric.empty()) {
    return Status::Invalid("alert rule '", name, "' needs a metric or KPI name");
  }
  if (!std::isfinite(threshold)) {
    return Status::Invalid("alert rule '", name, "': threshold must be finite");
  }
  if (!std::isfinite(cooldown_seconds) || cooldown_seconds < 0) {
    return Status::Invalid("alert rule '", name,
                           "': cooldown_seconds must be a non-negative number, got ",
                           cooldown_seconds);
  }
  if (webhook_format != "slack" && webhook_format != "google_chat" &&
      webhook_format != "custom") {
    return Status::Invalid("alert rule '", name, "': unknown webhook format '", webhook_format,
                           "': expected slack, google_chat or custom");
  }
  return Status::OK();
}

bool EvaluateRule(const AlertRule& rule, std::optional<double> value, double now,
                  AlertRuleState* state) {
  state->last_evaluated_at = now;
  state->last_value = value;
  if (!rule.enabled || !value.has_value() || !Compare(rule.op, *value, rule.threshold)) {
    return false;
  }
  if (state->last_fired_at.has_value() &&
      now - *state->last_fired_at < rule.cooldown_seconds) {
    return false;
  }
  state->last_fired_at = now;
  ++state->fire_count;
  return true;
}

std::string RuleAlertMessage(const AlertRule& rule, double value) {
  if (!rule.message.empty()) {
    return rule.message;
  }
  return fmt::format("{} {} {} (value {})", rule.metric, CompareOpName(rule.op),
                     rule.threshold, value);
}

}  // namespace rill
