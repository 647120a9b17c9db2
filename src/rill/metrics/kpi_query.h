// KPI queries: SQL over the live tables run on a schedule, whose results feed
// KPI cards, charts and alert rules.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <arrow/type_fwd.h>

#include "rill/common/status.h"

namespace rill {

/// How the dashboard draws a KPI query's history.
enum class ChartType { kLine, kBar, kScatter };
/// Parse "line", "bar", "scatter". Invalid otherwise.
Result<ChartType> ParseChartType(std::string_view text);
const char* ChartTypeName(ChartType type);

/// A scheduled KPI query (the seed's add_dashboard_scheduled_query).
struct KpiQuery {
  /// Unique name; the key of its history rows and of its KPI card.
  std::string name;
  /// SQL over the live tables (run with Engine::Query).
  std::string sql;
  double interval_seconds = 1.0;
  ChartType chart_type = ChartType::kLine;
  /// Chart axes. x_col "ts" means the time the result was taken.
  std::string x_col = "ts";
  /// The column whose first value is the KPI value; empty = the first numeric
  /// column of the result.
  std::string y_col;

  /// Invalid for an empty name or SQL, or a non-positive or non-finite interval.
  Status Validate() const;
};

/// One cell of a KPI result in the long form stored in `rill_kpi_history`.
struct KpiCell {
  int64_t row_index = 0;
  std::string column;
  /// Set for numeric and boolean columns (as float64) when not null.
  std::optional<double> value;
  /// Set for other columns (their text form) when not null.
  std::optional<std::string> text;
};

/// Return the KPI value of `result`: the first row of `y_col`, or of the first
/// numeric column when `y_col` is empty. nullopt when the result has no rows or
/// the value is null; Invalid when the column is missing or not numeric.
Result<std::optional<double>> ExtractKpiValue(const arrow::Table& result,
                                              const std::string& y_col);

/// Return the cells of the first `max_rows` rows of `result`, row by row.
Result<std::vector<KpiCell>> KpiCells(const std::shared_ptr<arrow::Table>& result,
                                      int64_t max_rows);

}  // namespace rill
