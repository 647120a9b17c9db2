// Declared windows: the one option table of a window task (WindowTask,
// rill/engine/window_task.h), shared by the pipeline file's `windows:` and the
// DDL's `CREATE WINDOW name WITH (...)`.
//
//   name                      the task's name (DDL: the statement's name)
//   source (source_table)     the input table (required)
//   output (output_table)     the output table (default: the name)
//   time_column               event-time column (omit: processing time)
//   window                    tumbling | hopping (sliding) | session
//   size_seconds, slide_seconds (hopping), gap_seconds (session)
//   group_by                  "a", "a, b" or a list
//   aggregations              'n=count(*),revenue=sum(price)' (commas inside
//                             parentheses or quotes belong to the expression),
//                             a mapping {output: expression}, or a list of
//                             {column, function} (output column_function;
//                             column "*": output function, function(*));
//                             default count = count(*)
//   allowed_lateness_seconds, idle_timeout_seconds
//   emit                      on_close | on_update
//   retention                 a mapping {max_rows, max_age_seconds, time_column};
//   max_rows, max_age_seconds the same, flat (as SQL writes them)
//   late_table, late_max_rows, interval_seconds
//
// Reading a declaration also makes the checks WindowTask::Make makes (sizes,
// names, lateness), so a bad declaration is refused before anything runs.
#pragma once

#include <memory>
#include <string>

#include "rill/common/status.h"
#include "rill/engine/window_options.h"
#include "rill/engine/window_task.h"
#include "rill/pipeline/options.h"

namespace rill::pipeline {

/// One declared window task.
struct WindowDecl {
  /// name, source_table, output_table (default: the name), spec, ...
  WindowTaskOptions options;
  Options given;  ///< the options as given (for dump and SHOW WINDOWS)
};

/// The window's option table (the docs' list and the DDL's and YAML's checks).
const OptionTable<WindowDecl>& WindowOptionTable();

/// Read a declaration; `name` may be given here (DDL: the statement's name) or
/// among the options (YAML `name`; a different one is refused). Errors carry
/// SQLSTATEs (options.h): unknown/missing option 42601, bad value 22023 (e.g.
/// an unknown window kind, a bad aggregation). `where` prefixes messages about
/// the whole declaration. Any thread.
Result<WindowDecl> ReadWindow(const Options& options, const std::string& where,
                              std::string name = "");

/// The options as Markdown (a heading and a table), like SourceOptionsMarkdown().
std::string WindowOptionsMarkdown();

/// Make the task (WindowTask::Make) the declaration describes; add it with
/// Engine::AddWindowTask.
Result<std::shared_ptr<WindowTask>> MakeWindow(const WindowDecl& decl);

}  // namespace rill::pipeline
