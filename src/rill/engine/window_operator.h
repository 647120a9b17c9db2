// WindowOperator: event-time windows over a stream of record batches.
//
// The operator is the state machine behind WindowTask (and the Python
// toolkit's TumblingWindow / SlidingWindow): feed it batches with Consume,
// then call Emit once per run. It keeps, per open (window, key) group, only
// the incremental aggregate state (a few words per aggregation), so the cost
// of Consume is proportional to the rows consumed and the cost of Emit to the
// groups emitted, never to the window contents. DuckDB aggregate expressions
// with no incremental form keep references to their groups' rows (the input
// batches stay alive while a group refers to them) and are computed by DuckDB
// when the group is emitted.
//
// Time: event times are read as unix seconds (see WindowSpec::time_column)
// and handled as integer microseconds, so window bounds are exact.
//
// Watermark: Emit sets watermark = max(watermark, max event time consumed -
// allowed lateness) (and, with idle_timeout_seconds, lets it follow
// processing time while no rows arrive), then closes every window whose end
// is <= watermark. A row whose event time is below the watermark of the last
// Emit when it is consumed is late: it is not added to any window but
// reported to the caller (LateRows) with its reason; so is a row without an
// event time. Every window a row on time belongs to is still open, so no
// result is ever revised after it closed.
//
// Output columns: window_start, window_end (timestamp[us] with the time
// column's zone when the time column is a timestamp or date, float64 unix
// seconds otherwise), the group_by columns (their input types; dictionary and
// large strings as utf8), one column per aggregation (count*: int64; sum:
// int64 for integer input, float64 otherwise; avg: float64; min/max/first/last:
// the input type; DuckDB expressions: DuckDB's result type), and with
// EmitMode::kOnUpdate `is_final` (bool).
//
// Threads: not thread-safe; one owner (the tick thread for a WindowTask).
// stats() may be called from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <arrow/type_fwd.h>

#include "rill/common/status.h"
#include "rill/engine/window_options.h"

namespace rill {

class SqlEngine;

/// Why a row was not added to any window.
enum class LateReason : uint8_t { kBehindWatermark, kNullTime };
const char* LateReasonName(LateReason reason);

/// Rows of one consumed batch that were not added to windows.
struct LateRows {
  std::vector<int64_t> rows;          ///< row indices in the batch
  std::vector<LateReason> reasons;
  std::vector<double> event_times;    ///< seconds; NaN when null
  double watermark = 0;               ///< seconds, the watermark they were behind
};

/// Counters and state size of a window operator.
struct WindowStats {
  int64_t rows_in = 0;           ///< rows consumed
  int64_t late_rows = 0;         ///< rows behind the watermark
  int64_t null_time_rows = 0;    ///< rows without an event time
  int64_t windows_open = 0;      ///< open windows (sessions: open sessions)
  int64_t groups_open = 0;       ///< open (window, key) groups
  int64_t groups_emitted = 0;    ///< rows written on close
  int64_t updates_emitted = 0;   ///< rows written early (on_update)
  int64_t state_bytes = 0;       ///< approximate bytes of the open state
  double watermark = 0;          ///< seconds; -inf before the first row
  double max_event_time = 0;     ///< seconds; -inf before the first row
};

class WindowOperator {
 public:
  /// Create an operator for input batches of `input_schema`. `sql` runs the
  /// DuckDB aggregations (kSql) and may be null when there are none; it must
  /// outlive the operator. Invalid for a bad spec; KeyError for a column that
  /// `input_schema` lacks; TypeError for a time column that is no time or an
  /// aggregate over a column it cannot take.
  static Result<std::unique_ptr<WindowOperator>> Make(
      WindowSpec spec, std::shared_ptr<arrow::Schema> input_schema, SqlEngine* sql);
  ~WindowOperator();

  const WindowSpec& spec() const { return spec_; }
  /// The schema of Emit's tables (available after Make).
  const std::shared_ptr<arrow::Schema>& output_schema() const { return output_schema_; }

  /// Add the rows of `batch` (columns found by name) to their windows at
  /// processing time `now`; rows that are late or have no event time go to
  /// `late` (may be null to drop them; they are counted either way).
  Status Consume(const std::shared_ptr<arrow::RecordBatch>& batch, double now,
                 LateRows* late);
  /// Add the rows of `batch` as moved state (an application's instance took
  /// over their partition, engine/window_task.h): each goes to its windows
  /// that are still open at the current watermark (sessions: to its
  /// session), none is late, and the counters do not count them as input.
  Status ConsumeRestored(const std::shared_ptr<arrow::RecordBatch>& batch, double now);
  /// Unix seconds before which a consumed row belongs to no open window any
  /// more (tumbling and hopping: the start of the first window open at the
  /// watermark; sessions: the start of the oldest open session, or the
  /// watermark when none is open); -inf before the first Emit.
  double StateHorizon() const;

  /// Advance the watermark at processing time `now` and return the rows to
  /// write: the groups that closed (and with kOnUpdate, first the groups that
  /// changed since the last Emit). Closed groups are freed.
  Result<std::shared_ptr<arrow::Table>> Emit(double now);
  /// Close every open window now, whatever the watermark, and return them.
  Result<std::shared_ptr<arrow::Table>> Flush();
  /// Return the current value of every open group (is_final false), without
  /// closing anything.
  Result<std::shared_ptr<arrow::Table>> Peek();

  /// Return the [start, end) bounds (unix seconds) of the tumbling or hopping
  /// windows a row at event time `t` would be added to now: those containing
  /// it whose end is past the watermark (none for sessions).
  std::vector<std::pair<double, double>> OpenWindowsOf(double t) const;

  /// Raise the watermark to at least `seconds` (processing-time closing: the
  /// next Emit closes every window that ends by then).
  void AdvanceWatermark(double seconds);

  /// Current watermark in unix seconds (-inf before the first row).
  double watermark() const;
  /// A copy of the counters. Any thread.
  WindowStats stats() const;

 private:
  struct Impl;
  explicit WindowOperator(std::unique_ptr<Impl> impl, WindowSpec spec);
  std::unique_ptr<Impl> impl_;
  WindowSpec spec_;
  std::shared_ptr<arrow::Schema> output_schema_;
};

}  // namespace rill
