// RetentionPolicy: how long rows stay in a table.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <arrow/type_fwd.h>

#include "rill/common/status.h"
#include "rill/table/schema.h"

namespace rill {

/// Rows older than `max_age_seconds` (measured on `time_column`) are removed
/// on every write and every tick; then, of the rows left, all but the newest
/// `max_rows` writes (an upsert counts as a write) are removed. Rows whose time
/// is null never expire by age.
struct RetentionPolicy {
  std::optional<int64_t> max_rows;
  std::optional<double> max_age_seconds;
  std::string time_column = "z_insert_ts";

  /// Return true if the policy limits anything.
  bool enabled() const { return max_rows.has_value() || max_age_seconds.has_value(); }
  /// Invalid for negative limits or an empty time column name.
  Status Validate() const;
};

/// The rule that an append table needs a retention policy enabling max_rows or
/// max_age_seconds (else it grows without bound). OK for snapshot tables;
/// Invalid, naming the table, otherwise. LiveTable::Make and
/// Engine::DeclareTable check it here, and nowhere else.
Status CheckAppendRetention(const std::string& name, TableMode mode,
                            const std::optional<RetentionPolicy>& retention);

/// Read a column as unix seconds: float and integer columns are seconds already;
/// timestamp columns of any unit and time zone, date32 and date64 are converted.
/// The returned function reads row `i` and sets `*valid` to false for nulls.
using TimeReader = std::function<double(int64_t i, bool* valid)>;

/// Return a TimeReader over `array`, or TypeError for a type that is no time.
Result<TimeReader> MakeTimeReader(const std::shared_ptr<arrow::Array>& array);

/// Return true if `type` can be read by MakeTimeReader.
bool IsTimeLike(const arrow::DataType& type);

}  // namespace rill
