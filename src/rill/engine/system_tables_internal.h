// The engine's system tables (private to src/rill/engine): `rill_rejects`, one
// row per rejected batch, and `rill_metrics`, one row replaced every tick. Their
// columns are documented in engine/README.md; this file is their one
// definition.
//
// Threads: pure functions of their arguments; any thread.
#pragma once

#include <memory>
#include <string>

#include <arrow/type_fwd.h>

#include "rill/common/host_stats.h"
#include "rill/common/status.h"

namespace rill {

struct EngineMetrics;

namespace engine_internal {

inline constexpr char kRejectsTable[] = "rill_rejects";
inline constexpr char kMetricsTable[] = "rill_metrics";

/// Return the schema of `rill_rejects`.
std::shared_ptr<arrow::Schema> RejectsSchema();
/// Return the schema of `rill_metrics`.
std::shared_ptr<arrow::Schema> MetricsSchema();

/// Return the one-row batch of `rill_rejects` for `batch`, rejected at `now`
/// from `source` for `table` because of `reason`.
Result<std::shared_ptr<arrow::RecordBatch>> MakeRejectRow(
    double now, const std::string& table, const std::string& source, const Status& reason,
    const std::shared_ptr<arrow::RecordBatch>& batch);

/// Return the one-row table of `rill_metrics` for the engine's counters `m`
/// and the host reading `host`.
Result<std::shared_ptr<arrow::Table>> MakeMetricsRow(const EngineMetrics& m,
                                                     const HostSample& host);

}  // namespace engine_internal
}  // namespace rill
