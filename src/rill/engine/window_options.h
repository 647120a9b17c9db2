// Window options: what a window task or a window operator computes.
//
// A window groups the rows of a stream by an event-time column (or by
// processing time) into
//   tumbling windows  [k*size, (k+1)*size): each row in exactly one window;
//   hopping windows   [k*slide, k*slide + size): each row in every window that
//                     contains it (size/slide of them; none when it falls in a
//                     gap because slide > size);
//   session windows   per key, maximal runs of rows whose consecutive event
//                     times are less than `gap` apart; a session spans
//                     [first event, last event + gap).
// and by the group_by columns, and computes aggregations per (window, key).
//
// Aggregations are written as SQL-like expressions, one per output column:
//   count(*), count(x), sum(x), avg(x) (alias mean), min(x), max(x),
//   first(x), last(x)                the non-null value of x with the smallest /
//                                    largest event time (ties: arrival order),
//   count_distinct(x) or count(DISTINCT x)       exact,
//   approx_count_distinct(x)          HyperLogLog (p = 12, ~1.6% error; exact
//                                    below 64 distinct values),
// which are maintained incrementally (O(1) per row), and any other DuckDB
// aggregate expression (`median(x)`, `quantile_cont(x, 0.9)`, `sum(x*y)`,
// `string_agg(s, ',')`, ...), for which the window keeps references to its
// rows and DuckDB computes the value when the window is emitted.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rill/common/status.h"
#include "rill/table/retention.h"

namespace rill {

enum class WindowKind { kTumbling, kHopping, kSession };
/// Parse "tumbling", "hopping" (alias "sliding") or "session" (case-insensitive).
Result<WindowKind> ParseWindowKind(std::string_view text);
const char* WindowKindName(WindowKind kind);

/// When results are written.
enum class EmitMode {
  /// Once per (window, key), when the watermark passes the window's end, to an
  /// append table.
  kOnClose,
  /// Every run, for each (window, key) that changed, to a snapshot table keyed by
  /// (window_start, window_end, group_by...), with `is_final` true on the last
  /// write (when the window closed). A session whose bounds move (it grew or
  /// merged) is written under its new bounds; rows under its earlier bounds
  /// stay, with is_final false, until retention removes them.
  kOnUpdate,
};
/// Parse "on_close" or "on_update" (case-insensitive).
Result<EmitMode> ParseEmitMode(std::string_view text);
const char* EmitModeName(EmitMode mode);

/// The incremental aggregate functions; kSql is any other DuckDB expression.
enum class WindowAggKind {
  kCountStar,
  kCount,
  kSum,
  kAvg,
  kMin,
  kMax,
  kFirst,
  kLast,
  kCountDistinct,
  kApproxCountDistinct,
  kSql,
};

/// One output column of a window.
struct WindowAggregation {
  std::string output;      ///< output column name
  std::string expression;  ///< as written, e.g. "sum(amount)"
  WindowAggKind kind = WindowAggKind::kSql;
  std::string column;      ///< the argument column (empty for count(*) and kSql)
};

/// Parse `expression` into a WindowAggregation named `output`. Expressions of
/// the form fn(column) (column bare or double-quoted) with fn among the
/// incremental functions are incremental; everything else is kSql. Invalid for
/// an empty output name or expression.
Result<WindowAggregation> ParseWindowAggregation(std::string output,
                                                 std::string expression);

/// The window computation, shared by WindowTask and the Python toolkit.
struct WindowSpec {
  WindowKind kind = WindowKind::kTumbling;
  /// Event-time column of the input: float/integer unix seconds, timestamp of
  /// any unit, or date. Empty: processing time (the rows' z_update_ts).
  std::string time_column;
  double size_seconds = 60;    ///< tumbling and hopping
  double slide_seconds = 0;    ///< hopping; 0 means size (tumbling)
  double gap_seconds = 0;      ///< session
  std::vector<std::string> group_by;
  std::vector<WindowAggregation> aggregations;
  /// watermark = max event time seen - allowed_lateness_seconds.
  double allowed_lateness_seconds = 0;
  /// When > 0 and no row arrived for this many seconds of processing time, the
  /// watermark advances with processing time as if events kept arriving.
  double idle_timeout_seconds = 0;
  EmitMode emit = EmitMode::kOnClose;
  /// Tumbling and hopping: a row behind the watermark is still added to those
  /// of its windows that have not closed (end > watermark), and is late only
  /// when all of them closed (the seed toolkit's TumblingWindow /
  /// SlidingWindow). Default false: any row behind the watermark is late.
  bool late_by_window = false;

  /// Invalid naming the field for non-positive sizes, a session without gap,
  /// negative lateness, duplicate output names or names clashing with
  /// window_start / window_end / is_final / group_by columns.
  Status Validate() const;
};

/// Options of a WindowTask (see window_task.h).
struct WindowTaskOptions {
  std::string name;
  std::string source_table;
  std::string output_table;
  WindowSpec spec;
  /// Output retention; default max_rows 1,000,000 (append tables need one).
  std::optional<RetentionPolicy> retention;
  /// Side table of late rows; default "<output_table>_late".
  std::string late_table;
  /// Rows kept in the late table (they are all counted either way).
  int64_t late_max_rows = 100000;
  /// 0: run every tick.
  double interval_seconds = 0;
};

}  // namespace rill
