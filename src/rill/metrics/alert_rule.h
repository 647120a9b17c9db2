// Alert rules: threshold checks on system metrics and KPI values.
//
// A rule compares the current value of one named metric with a threshold on
// every metrics flush; when the comparison holds it fires (writes a "rule"
// alert) and then stays silent for `cooldown_seconds`. The types here are plain
// values plus pure functions; MetricsStore owns the rules and their state.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "rill/common/status.h"
#include "rill/engine/event.h"

namespace rill {

/// A comparison operator of an alert rule.
enum class CompareOp { kGreater, kGreaterEqual, kLess, kLessEqual, kEqual, kNotEqual };

/// Parse ">", ">=", "<", "<=", "==" (alias "="), "!=" (alias "<>"). Invalid otherwise.
Result<CompareOp> ParseCompareOp(std::string_view text);
/// Return the canonical spelling (">", ">=", "<", "<=", "==", "!=").
const char* CompareOpName(CompareOp op);
/// Return `value <op> threshold`. False when either side is NaN (except for !=).
bool Compare(CompareOp op, double value, double threshold);

/// The definition of a rule, as the user gives it.
struct AlertRule {
  /// Unique name; written to the `rule` column of the alerts it fires.
  std::string name;
  /// Which value to watch: a KPI query name, a business metric name, or a
  /// system metric (a column of `rill_telemetry`, e.g. "cpu_usage",
  /// "window_p99_batch_latency_ms"; or "table.<name>.rows" / "table.<name>.bytes",
  /// "connector.<name>.buffered_records" / "connector.<name>.dropped_records",
  /// "task.<name>.errors"). Looked up in that order.
  std::string metric;
  CompareOp op = CompareOp::kGreater;
  double threshold = 0;
  /// After firing, the rule does not fire again for this long.
  double cooldown_seconds = 60;
  Severity severity = Severity::kWarning;
  /// Optional alert message; default "<metric> <op> <threshold> (value <v>)".
  std::string message;
  /// Optional URL the alert is POSTed to when the rule fires. The metrics
  /// layer only stores it; the server delivers it (server/rule_webhooks.h)
  /// through an alert listener.
  std::optional<std::string> webhook;
  /// Shape of the webhook message: "slack", "google_chat" or "custom".
  std::string webhook_format = "custom";
  bool enabled = true;

  /// Invalid for an empty name or metric, a negative or non-finite cooldown,
  /// a non-finite threshold, or an unknown webhook_format.
  Status Validate() const;
};

/// What happened to a rule so far. Updated by the metrics thread.
struct AlertRuleState {
  double created_at = 0;
  /// Time of the last firing; unset if it never fired.
  std::optional<double> last_fired_at;
  int64_t fire_count = 0;
  /// The value seen at the last evaluation; unset when the metric was missing.
  std::optional<double> last_value;
  double last_evaluated_at = 0;
};

/// Evaluate `rule` against `value` at `now`: update `state` and return true when
/// the rule fires (the comparison holds and the cooldown since the last firing
/// has passed). A missing value (nullopt) never fires.
bool EvaluateRule(const AlertRule& rule, std::optional<double> value, double now,
                  AlertRuleState* state);

/// Return the message of an alert fired by `rule` for `value`.
std::string RuleAlertMessage(const AlertRule& rule, double value);

}  // namespace rill
