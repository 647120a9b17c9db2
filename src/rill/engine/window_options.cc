#include "rill/engine/window_options.h"

#include <cctype>
#include <cmath>
#include <set>

namespace rill {
namespace {

std::string Lower(std::string_view text) {
  std::string out;
  for (char c : text) {
    out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool IsIdentifier(std::string_view s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) {
    return false;
  }
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  }
  return true;
}

// Return the column an argument names: a bare identifier or a double-quoted
// one (inner "" unescaped); nullopt for anything else (an expression).
std::optional<std::string> ColumnArgument(std::string_view arg) {
  arg = Trim(arg);
  if (IsIdentifier(arg)) return std::string(arg);
  if (arg.size() >= 2 && arg.front() == '"' && arg.back() == '"') {
    std::string out;
    for (size_t i = 1; i + 1 < arg.size(); ++i) {
      if (arg[i] == '"') {
        if (i + 2 < arg.size() && arg[i + 1] == '"') {
          out.push_back('"');
          ++i;
          continue;
        }
        return std::nullopt;
      }
      out.push_back(arg[i]);
    }
    if (!out.empty()) return out;
  }
  return std::nullopt;
}

}  // namespace

Result<WindowKind> ParseWindowKind(std::string_view text) {
  const std::string t = Lower(Trim(text));
  if (t == "tumbling") return WindowKind::kTumbling;
  if (t == "hopping" || t == "sliding") return WindowKind::kHopping;
  if (t == "session") return WindowKind::kSession;
  return Status::Invalid("unknown window '", text,
                         "': expected tumbling, hopping (sliding) or session");
}

const char* WindowKindName(WindowKind kind) {
  switch (kind) {
    case WindowKind::kTumbling:
      return "tumbling";
    case WindowKind::kHopping:
      return "hopping";
    case WindowKind::kSession:
      return "session";
  }
  return "tumbling";
}

Result<EmitMode> ParseEmitMode(std::string_view text) {
  const std::string t = Lower(Trim(text));
  if (t == "on_close" || t == "close") return EmitMode::kOnClose;
  if (t == "on_update" || t == "update") return EmitMode::kOnUpdate;
  return Status::Invalid("unknown emit mode '", text, "': expected on_close or on_update");
}

const char* EmitModeName(EmitMode mode) {
  return mode == EmitMode::kOnUpdate ? "on_update" : "on_close";
}

Result<WindowAggregation> ParseWindowAggregation(std::string output, std::string expression) {
  if (output.empty()) {
    return Status::Invalid("window aggregation '", expression, "' needs an output name");
  }
  std::string_view e = Trim(expression);
  if (e.empty()) {
    return Status::Invalid("window aggregation '", output, "' has an empty expression");
  }
  WindowAggregation agg{std::move(output), std::string(e), WindowAggKind::kSql, ""};
  const size_t open = e.find('(');
  if (open == std::string_view::npos || e.back() != ')') return agg;
  const std::string fn = Lower(Trim(e.substr(0, open)));
  std::string_view arg = Trim(e.substr(open + 1, e.size() - open - 2));
  if (fn == "count" && arg == "*") {
    agg.kind = WindowAggKind::kCountStar;
    return agg;
  }
  if (fn == "count" && arg.size() > 9 && Lower(arg.substr(0, 9)) == "distinct ") {
    if (auto column = ColumnArgument(arg.substr(9))) {
      agg.kind = WindowAggKind::kCountDistinct;
      agg.column = *column;
    }
    return agg;
  }
  auto column = ColumnArgument(arg);
  if (!column) return agg;
  static const std::pair<const char*, WindowAggKind> kNames[] = {
      {"count", WindowAggKind::kCount},
      {"sum", WindowAggKind::kSum},
      {"avg", WindowAggKind::kAvg},
      {"mean", WindowAggKind::kAvg},
      {"min", WindowAggKind::kMin},
      {"max", WindowAggKind::kMax},
      {"first", WindowAggKind::kFirst},
      {"last", WindowAggKind::kLast},
      {"count_distinct", WindowAggKind::kCountDistinct},
      {"approx_count_distinct", WindowAggKind::kApproxCountDistinct},
  };
  for (const auto& [name, kind] : kNames) {
    if (fn == name) {
      agg.kind = kind;
      agg.column = *column;
      return agg;
    }
  }
  return agg;
}

Status WindowSpec::Validate() const {
  auto positive = [](double v) { return std::isfinite(v) && v > 0; };
  if (kind != WindowKind::kSession && !positive(size_seconds)) {
    return Status::Invalid("size_seconds must be > 0 for a ", WindowKindName(kind),
                           " window, got ", size_seconds);
  }
  if (kind == WindowKind::kHopping && slide_seconds != 0 && !positive(slide_seconds)) {
    return Status::Invalid("slide_seconds must be > 0, got ", slide_seconds);
  }
  if (kind == WindowKind::kSession && !positive(gap_seconds)) {
    return Status::Invalid("gap_seconds must be > 0 for a session window, got ", gap_seconds);
  }
  if (!std::isfinite(allowed_lateness_seconds) || allowed_lateness_seconds < 0) {
    return Status::Invalid("allowed_lateness_seconds must be >= 0, got ",
                           allowed_lateness_seconds);
  }
  if (!std::isfinite(idle_timeout_seconds) || idle_timeout_seconds < 0) {
    return Status::Invalid("idle_timeout_seconds must be >= 0, got ", idle_timeout_seconds);
  }
  if (aggregations.empty()) {
    return Status::Invalid("a window needs at least one aggregation");
  }
  std::set<std::string> names = {"window_start", "window_end"};
  if (emit == EmitMode::kOnUpdate) names.insert("is_final");
  for (const auto& key : group_by) {
    if (key.empty()) return Status::Invalid("group_by has an empty column name");
    if (!names.insert(key).second) {
      return Status::Invalid("group_by column '", key, "' is repeated or reserved");
    }
  }
  for (const auto& agg : aggregations) {
    if (!names.insert(agg.output).second) {
      return Status::Invalid("aggregation output '", agg.output,
                             "' clashes with another output column");
    }
  }
  return Status::OK();
}

}  // namespace rill
