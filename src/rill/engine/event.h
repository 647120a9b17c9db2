// EngineEvent: a structured record of something that went wrong, or that a
// user or an alert rule wants recorded.
//
// Who makes them: the engine (a connector that cannot read, a rejected batch,
// a failing task, subscriber, business metric or memory budget), users
// (MetricsStore::PushAlert, Python's push_alert) and alert rules (the metrics
// store). Engine::RecordEvent logs each event (repeats rate-limited), counts
// errors, keeps the latest in memory and hands a copy to every event listener;
// the metrics store turns them into rows of `rill_alerts`.
//
// Ownership: an EngineEvent is a plain value; every listener gets its own
// const reference to the recorder's copy, valid for the call only.
//
// Threads: values only; the free functions may be called from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>

#include "rill/common/status.h"

namespace rill {

enum class Severity { kInfo, kWarning, kError };
/// Parse "info", "warning" (alias "warn"), "error". Invalid otherwise.
Result<Severity> ParseSeverity(std::string_view text);
/// Return "info", "warning" or "error".
const char* SeverityName(Severity severity);

/// Who recorded an event; written to `rill_alerts.source` by EventSourceName.
enum class EventSource {
  kEngine,  ///< an internal failure (connector, task, table, callback, metrics store)
  kUser,    ///< a user alert (push_alert / alert / warn / error)
  kRule,    ///< an alert rule that fired
};
/// Parse "engine", "user", "rule". Invalid otherwise.
Result<EventSource> ParseEventSource(std::string_view text);
/// Return "engine", "user" or "rule".
const char* EventSourceName(EventSource source);

/// One recorded event. Build it with the factories below (EngineEvent::Engine,
/// ::User), or by setting named fields:
///   EngineEvent e = EngineEvent::Engine(Severity::kError, "orders", "Read failed");
///   e.detail = status.ToString();
struct EngineEvent {
  /// When it happened (unix seconds); 0 means "now" to Engine::RecordEvent.
  double ts = 0;
  Severity severity = Severity::kError;
  EventSource source = EventSource::kEngine;
  /// What it concerns: for engine events the connector, task or table name,
  /// `subscriber:<table>`, `metric:<name>`, `kpi:<name>`, `memory_budget`,
  /// `on_memory_warning` or `metrics`; for rule events the watched metric;
  /// empty for user events.
  std::string component;
  /// One line.
  std::string message;
  /// Error text, traceback or SQL; may span lines.
  std::string detail;
  /// The rule's name, for source kRule.
  std::string rule;

  /// Return an engine event (source kEngine) about `component`.
  static EngineEvent Engine(Severity severity, std::string component, std::string message,
                            std::string detail = {}, double ts = 0);
  /// Return a user event (source kUser).
  static EngineEvent User(Severity severity, std::string message, std::string detail = {},
                          double ts = 0);
};

/// What makes two events "the same" for rate limiting: source, severity,
/// component and message (the detail and the time may differ).
using EventRepeatKey = std::tuple<EventSource, Severity, std::string, std::string>;
/// Return the rate-limiting key of `event`.
EventRepeatKey RepeatKeyOf(const EngineEvent& event);

}  // namespace rill
