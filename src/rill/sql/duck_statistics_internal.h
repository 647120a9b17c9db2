// Private to src/rill/sql: ColumnSummary (DuckDB-free bounds) turned into the
// statistics DuckDB's optimizer consumes.
//
// Threads: pure functions; any thread.
#pragma once

#include <arrow/type_fwd.h>

#include <duckdb.hpp>
#include <duckdb/storage/statistics/base_statistics.hpp>

#include "rill/sql/column_stats_internal.h"

namespace rill::sql_internal {

/// Return statistics that say what `summary` says about a column whose Arrow
/// type is `arrow_type` and which DuckDB's arrow scan reads as `type`, or
/// nullptr when the scan changes the values on the way (a timestamp rescaled,
/// a dictionary, any type summaries do not cover). Never claims more than the
/// summary: unknown parts stay unknown.
duckdb::unique_ptr<duckdb::BaseStatistics> DuckStatistics(const ColumnSummary& summary,
                                                          const arrow::DataType& arrow_type,
                                                          const duckdb::LogicalType& type);

}  // namespace rill::sql_internal
