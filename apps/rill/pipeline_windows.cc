// The `windows:` section of a pipeline file: event-time window tasks, each read
// through the window option table (src/rill/pipeline/windows.h) that the SQL
// DDL's CREATE WINDOW reads too, so both take the same options with the same
// checks (the options of rills.WindowTask).
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
//                                 # or "orders=count(*), revenue=sum(amount)"
//       allowed_lateness_seconds: 5
//       idle_timeout_seconds: 0
//       emit: on_close            # on_close | on_update
//       retention: {max_rows, max_age_seconds}
//       late_table: ...  late_max_rows: 100000  interval_seconds: 0
#include "pipeline_parser_internal.h"
#include "rill/pipeline/windows.h"

namespace rill::app::pipeline_internal {

Status Parser::ParseWindow(const At& at, Pipeline* p) const {
  if (!at.node.IsMap()) return Error(at, "expected a mapping");
  WindowTaskSpec spec;
  spec.where = Ref(at);
  pipeline::Options options;
  for (const auto& kv : at.node) {
    const std::string key = kv.first.Scalar();
    if (kv.second.IsNull()) continue;  // `key:` with no value is as if absent
    options.emplace_back(key, ToOption(At{kv.second, at.path + "." + key}));
  }
  RILL_ASSIGN_OR_RAISE(pipeline::WindowDecl decl,
                       pipeline::ReadWindow(options, spec.where.ToString()));
  for (const WindowTaskSpec& other : p->window_tasks) {
    if (other.options.name == decl.options.name) {
      return Error(Child(at, "name"), "window '", decl.options.name,
                   "' is declared twice (first at line ", other.where.line, ")");
    }
  }
  spec.options = std::move(decl.options);
  spec.given = std::move(decl.given);
  p->window_tasks.push_back(std::move(spec));
  return Status::OK();
}

}  // namespace rill::app::pipeline_internal
