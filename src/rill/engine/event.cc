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

}  // namespace rill
