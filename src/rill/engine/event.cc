#include "rill/engine/event.h"

namespace rill {

Result<Severity> ParseSeverity(std::string_view text) {
  if (text == "info") return Severity::kInfo;
  if (text == "warning" || text == "warn") return Severity::kWarning;
  if (text == "error") return Severity::kError;
  return Status::Invalid("Invalid severity '", text, "': expected 'info', 'warning' or 'error'");
}

const char* SeverityName(Severity severity) {
  switch (severity) {
    case Severity::kInfo: return "info";
    case Severity::kWarning: return "warning";
    case Severity::kError: return "error";
  }
  return "error";
}

Result<EventSource> ParseEventSource(std::string_view text) {
  if (text == "engine") return EventSource::kEngine;
  if (text == "user") return EventSource::kUser;
  if (text == "rule") return EventSource::kRule;
  return Status::Invalid("Invalid event source '", text,
                         "': expected 'engine', 'user' or 'rule'");
}

const char* EventSourceName(EventSource source) {
  switch (source) {
    case EventSource::kEngine: return "engine";
    case EventSource::kUser: return "user";
    case EventSource::kRule: return "rule";
  }
  return "engine";
}

EngineEvent EngineEvent::Engine(Severity severity, std::string component, std::string message,
                                std::string detail, double ts) {
  EngineEvent event;
  event.ts = ts;
  event.severity = severity;
  event.source = EventSource::kEngine;
  event.component = std::move(component);
  event.message = std::move(message);
  event.detail = std::move(detail);
  return event;
}

EngineEvent EngineEvent::User(Severity severity, std::string message, std::string detail,
                              double ts) {
  EngineEvent event;
  event.ts = ts;
  event.severity = severity;
  event.source = EventSource::kUser;
  event.message = std::move(message);
  event.detail = std::move(detail);
  return event;
}

EventRepeatKey RepeatKeyOf(const EngineEvent& event) {
  return EventRepeatKey(event.source, event.severity, event.component, event.message);
}

}  // namespace rill
