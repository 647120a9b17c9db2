// Engine: records a connector dropped (its buffer's drop_oldest / drop_newest)
// and rejects it could not keep (beyond its cap of pending rejects) -> counters
// in rill_metrics and a rate-limited warning event (an alert in rill_alerts).
#include <string>

#include "rill/connector/connector.h"
#include "rill/engine/engine.h"

namespace rill {

namespace {

/// At most one drop event per connector in this many seconds; the next one
/// says how many records were dropped meanwhile (none is lost: a tick after the
/// interval reports what is pending even when nothing more is dropped).
constexpr double kDropEventIntervalS = 10.0;

/// What a monotonic counter gained since `*seen` (a connector replaced under
/// the same name starts from zero again), and remember `now_value`.
int64_t Gained(int64_t now_value, int64_t* seen) {
  const int64_t gained = now_value >= *seen ? now_value - *seen : now_value;
  *seen = now_value;
  return gained;
}

std::string Records(int64_t n) {
  return std::to_string(n) + (n == 1 ? " record" : " records");
}

}  // namespace

void Engine::NoteConnectorDrops(const Connector& connector, double now) {
  const ConnectorStats stats = connector.stats();
  DropWatch& watch = drop_watch_[connector.name()];
  const int64_t dropped = Gained(stats.dropped_records, &watch.dropped_seen);
  const int64_t overflowed = Gained(stats.rejects_overflowed, &watch.overflowed_seen);
  if (dropped > 0 || overflowed > 0) {
    std::lock_guard<std::mutex> lock(mu_);
    metrics_.dropped_records += dropped;
    metrics_.rejects_overflowed += overflowed;
  }
  watch.dropped_pending += dropped;
  watch.overflowed_pending += overflowed;
  if (watch.dropped_pending == 0 && watch.overflowed_pending == 0) return;
  if (watch.last_event > 0 && now - watch.last_event < kDropEventIntervalS) return;
  const bool first = watch.last_event == 0;
  watch.last_event = now;
  std::string message = "Connector '" + connector.name() + "' (table '" +
                        connector.target_table() + "')";
  if (watch.dropped_pending > 0) {
    message += " dropped " + Records(watch.dropped_pending) +
               " by its buffer's overflow policy (on_overflow)";
  }
  if (watch.overflowed_pending > 0) {
    message += std::string(watch.dropped_pending > 0 ? " and" : "") + " could not keep " +
               Records(watch.overflowed_pending) +
               " of its rejects (over the cap of pending rejects; not in rill_rejects)";
  }
  message += first ? "" : " since the last alert";
  const std::string detail = "since start: dropped_records=" +
                             std::to_string(stats.dropped_records) +
                             ", rejects_overflowed=" + std::to_string(stats.rejects_overflowed) +
                             ", buffered_records=" + std::to_string(stats.buffered_records);
  watch.dropped_pending = 0;
  watch.overflowed_pending = 0;
  RecordEvent(EngineEvent::Engine(Severity::kWarning, connector.name(), std::move(message),
                                  detail, now));
}

}  // namespace rill
