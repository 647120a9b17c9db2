// EngineEvent: a structured record of something that went wrong (or that a
// user wants recorded). The alerts pipeline persists them; until then the
// engine logs them and keeps the latest in memory.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "rill/common/status.h"

namespace rill {

enum class Severity { kInfo, kWarning, kError };
/// Parse "info", "warning" (alias "warn"), "error". Invalid otherwise.
Result<Severity> ParseSeverity(std::string_view text);
const char* SeverityName(Severity severity);

struct EngineEvent {
  double ts = 0;
  Severity severity = Severity::kError;
  std::string source = "engine";  ///< "engine", "user" or "rule"
  std::string component;           ///< connector / task / table / callback name
  std::string message;
  std::string detail;
  std::string rule;                ///< the rule's name for source "rule"
};

}  // namespace rill
