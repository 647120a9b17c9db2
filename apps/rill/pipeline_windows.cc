// The `windows:` section of a pipeline file: event-time window tasks with the
// options of rills.WindowTask (window_task.h).
//
//   windows:
//     - name: per_minute
//       source: orders            # or source_table
//       output: orders_per_minute # or output_table (default: the name)
//       time_column: ts           # omit for processing time
//       window: tumbling          # tumbling | hopping (sliding) | session
//       size_seconds: 60
//       slide_seconds: 10         # hopping
//       gap_seconds: 30           # session
//       group_by: product         # "a", "a,b" or [a, b]
//       aggregations: {orders: "count(*)", revenue: "sum(amount)"}
//                                 # or [{column, function}] (output column_function)
//       allowed_lateness_seconds: 5
//       idle_timeout_seconds: 0
//       emit: on_close            # on_close | on_update
//       retention: {max_rows, max_age_seconds}
//       late_table: ...  late_max_rows: 100000  interval_seconds: 0
#include "pipeline_parser_internal.h"
#include "rill/engine/window_task.h"

namespace rill::app::pipeline_internal {

namespace {

/// "sliding" is the seed's name of a hopping window.
Result<WindowKind> ParseKind(std::string text) {
  for (auto& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (text == "sliding") return WindowKind::kHopping;
  return ParseWindowKind(text);
}

std::string Quoted(const std::string& column) {
  std::string out = "\"";
  for (char c : column) {
    out.push_back(c);
    if (c == '"') out.push_back('"');
  }
  return out + "\"";
}

}  // namespace

Status Parser::ParseWindowAggregations(const At& aggs, WindowSpec* spec) const {
  auto add = [&](const At& where, std::string output, std::string expression) -> Status {
    auto parsed = ParseWindowAggregation(std::move(output), std::move(expression));
    if (!parsed.ok()) return Ref(where).Wrap(parsed.status());
    spec->aggregations.push_back(std::move(*parsed));
    return Status::OK();
  };
  // [{column, function}] as rills.WindowTask's (column, function) pairs.
  RILL_RETURN_NOT_OK(ForEachAggregation(
      aggs, "{output: expression}",
      [&](const At& where, const std::string& output, const std::string& expression) {
        return add(where, output, expression);
      },
      [&](const At& item, const std::string& column, const std::string& fn) {
        if (column == "*") return add(item, fn, fn + "(*)");
        return add(item, column + "_" + fn, fn + "(" + Quoted(column) + ")");
      }));
  if (spec->aggregations.empty()) return Error(aggs, "a window needs at least one aggregation");
  return Status::OK();
}

Status Parser::ParseWindow(const At& at, Pipeline* p) const {
  RILL_RETURN_NOT_OK(Keys(at, {"name", "source", "source_table", "output", "output_table",
                               "time_column", "window", "size_seconds", "slide_seconds",
                               "gap_seconds", "group_by", "aggregations",
                               "allowed_lateness_seconds", "idle_timeout_seconds", "emit",
                               "retention", "late_table", "late_max_rows",
                               "interval_seconds"}));
  WindowTaskSpec spec;
  spec.where = Ref(at);
  WindowTaskOptions& o = spec.options;
  RILL_ASSIGN_OR_RAISE(o.name, RequiredStr(at, "name"));
  const char* source_key = Has(at, "source_table") ? "source_table" : "source";
  RILL_ASSIGN_OR_RAISE(o.source_table, RequiredStr(at, source_key));
  o.output_table = o.name;
  for (const char* key : {"output", "output_table"}) {
    if (Has(at, key)) {
      RILL_ASSIGN_OR_RAISE(o.output_table, Str(Child(at, key)));
    }
  }
  WindowSpec& w = o.spec;
  if (Has(at, "time_column")) {
    RILL_ASSIGN_OR_RAISE(w.time_column, Str(Child(at, "time_column")));
  }
  if (Has(at, "window")) {
    At v = Child(at, "window");
    RILL_ASSIGN_OR_RAISE(std::string text, Str(v));
    auto kind = ParseKind(text);
    if (!kind.ok()) return Ref(v).Wrap(kind.status());
    w.kind = *kind;
  }
  struct NumKey {
    const char* key;
    double* field;
  };
  for (NumKey k : {NumKey{"size_seconds", &w.size_seconds},
                   NumKey{"slide_seconds", &w.slide_seconds},
                   NumKey{"gap_seconds", &w.gap_seconds},
                   NumKey{"allowed_lateness_seconds", &w.allowed_lateness_seconds},
                   NumKey{"idle_timeout_seconds", &w.idle_timeout_seconds},
                   NumKey{"interval_seconds", &o.interval_seconds}}) {
    if (Has(at, k.key)) {
      RILL_ASSIGN_OR_RAISE(*k.field, Num(Child(at, k.key)));
    }
  }
  if (Has(at, "group_by")) {
    RILL_ASSIGN_OR_RAISE(w.group_by, Names(Child(at, "group_by")));
  }
  if (Has(at, "aggregations")) {
    RILL_RETURN_NOT_OK(ParseWindowAggregations(Child(at, "aggregations"), &w));
  } else {
    w.aggregations.push_back(ParseWindowAggregation("count", "count(*)").ValueOrDie());
  }
  if (Has(at, "emit")) {
    At v = Child(at, "emit");
    RILL_ASSIGN_OR_RAISE(std::string text, Str(v));
    auto emit = ParseEmitMode(text);
    if (!emit.ok()) return Ref(v).Wrap(emit.status());
    w.emit = *emit;
  }
  if (Has(at, "retention")) {
    RILL_ASSIGN_OR_RAISE(o.retention, ParseRetention(Child(at, "retention")));
  }
  if (Has(at, "late_table")) {
    RILL_ASSIGN_OR_RAISE(o.late_table, Str(Child(at, "late_table")));
  }
  if (Has(at, "late_max_rows")) {
    RILL_ASSIGN_OR_RAISE(o.late_max_rows, Int(Child(at, "late_max_rows")));
  }
  // Checked now (sizes, names, lateness), so the error has the line.
  if (auto made = WindowTask::Make(o); !made.ok()) return spec.where.Wrap(made.status());
  for (const WindowTaskSpec& other : p->window_tasks) {
    if (other.options.name == o.name) {
      return Error(Child(at, "name"), "window '", o.name, "' is declared twice (first at line ",
                   other.where.line, ")");
    }
  }
  p->window_tasks.push_back(std::move(spec));
  return Status::OK();
}

}  // namespace rill::app::pipeline_internal
