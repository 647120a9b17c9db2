// CoalesceByKey and the other transformations a sink applies to change
// batches (table/change_feed.h's ChangeSchema rows) before its writer sees
// them. Pure functions on immutable Arrow data.
//
// Threads: any.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <arrow/type_fwd.h>

#include "rill/common/status.h"
#include "rill/table/change_feed.h"

namespace rill {

class TableVersion;

/// Return the last change per key of `batches` (ChangeSchema rows in version
/// order), in the order of those last changes; update_before rows are left
/// out. The op of a key is the op of its last change (an insert then a delete
/// is a delete; a delete then an insert is an insert). KeyError for a key
/// column the schema lacks. Key columns may be of any type (values compared by
/// their bytes; nulls equal to nulls).
Result<std::vector<std::shared_ptr<arrow::RecordBatch>>> CoalesceByKey(
    const std::vector<std::shared_ptr<arrow::RecordBatch>>& batches,
    const std::vector<std::string>& key_columns);

/// Return the rows of `batches` whose _op is one of `ops`.
Result<std::vector<std::shared_ptr<arrow::RecordBatch>>> KeepOps(
    const std::vector<std::shared_ptr<arrow::RecordBatch>>& batches,
    const std::vector<ChangeOp>& ops);

/// Return the rows of `batches` with min_version < _version <= max_version
/// (batches in version order: sliced, not copied).
Result<std::vector<std::shared_ptr<arrow::RecordBatch>>> KeepVersions(
    const std::vector<std::shared_ptr<arrow::RecordBatch>>& batches, uint64_t min_version,
    uint64_t max_version);

/// Return the rows of `batches` whose _version is in none of the ranges
/// (after, through] of `ranges` (sliced, not copied).
Result<std::vector<std::shared_ptr<arrow::RecordBatch>>> DropVersions(
    const std::vector<std::shared_ptr<arrow::RecordBatch>>& batches,
    const std::vector<std::pair<uint64_t, uint64_t>>& ranges);

/// Return `batches` with `delta` added to every _version (0: unchanged).
Result<std::vector<std::shared_ptr<arrow::RecordBatch>>> ShiftVersions(
    const std::vector<std::shared_ptr<arrow::RecordBatch>>& batches, int64_t delta);

/// Return the live rows of `state` as change batches: every row an insert
/// whose _version is `version`.
Result<std::vector<std::shared_ptr<arrow::RecordBatch>>> SnapshotChangeBatches(
    const TableVersion& state, uint64_t version);

/// Split `batches` into groups of at most `max_rows` rows (slices, no copy);
/// 0: one group. Empty batches are left out; no rows: no group.
std::vector<std::vector<std::shared_ptr<arrow::RecordBatch>>> SplitRows(
    const std::vector<std::shared_ptr<arrow::RecordBatch>>& batches, int64_t max_rows);

/// Rows of `batches`.
int64_t CountRows(const std::vector<std::shared_ptr<arrow::RecordBatch>>& batches);

}  // namespace rill
