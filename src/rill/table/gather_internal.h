// Private to src/rill/table: copy the live rows of several chunks into one
// batch in a single pass, the work behind compaction.
//
// Arrow's Filter followed by ConcatenateRecordBatches copies every live row
// twice and walks the alive bitmap once per column. GatherLiveRows turns each
// chunk's bitmap into row indices once, then writes every column straight into
// its final buffer: fixed-width values (integers, floats, temporal, decimal),
// booleans, strings/binaries with 32- or 64-bit offsets, and dictionary
// columns whose parts share one dictionary object (the indices are gathered,
// the dictionary kept), with or without nulls, from sliced inputs too. Columns
// of any other type (nested, views, dictionaries that differ between parts)
// fall back to Filter + Concatenate, column by column.
//
// Threads: a pure function; any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <arrow/type_fwd.h>

#include "rill/common/status.h"

namespace rill::table_internal {

/// One input of GatherLiveRows.
struct GatherPart {
  std::shared_ptr<arrow::RecordBatch> batch;
  /// Bit i set = row i alive (bit 0 of the first byte is row 0). Null: all alive.
  std::shared_ptr<arrow::Buffer> alive;
  /// Number of set bits in `alive` (the batch's row count when `alive` is null).
  int64_t live_rows = 0;
};

/// Return one batch with the live rows of `parts` in order, allocated from
/// `pool`. Every part's batch must have `schema`'s columns and types. Invalid
/// when a part's `alive` bitmap does not have `live_rows` bits set.
Result<std::shared_ptr<arrow::RecordBatch>> GatherLiveRows(
    const std::shared_ptr<arrow::Schema>& schema, const std::vector<GatherPart>& parts,
    arrow::MemoryPool* pool);

}  // namespace rill::table_internal

namespace rill::table_internal {

/// Coalesce runs of adjacent small batches (each under `max_rows` / 2 rows)
/// into batches of at most `max_rows` rows, one copy each (GatherLiveRows);
/// larger batches and lone small ones pass through uncopied, order kept. An
/// unkeyed table's write uses it so that a tick's many small pushes become one
/// chunk, instead of many tiny chunks that compaction merges later, copying a
/// growing chunk again on every tick (the Nexmark latency tail, issue 15).
Result<std::vector<std::shared_ptr<arrow::RecordBatch>>> CoalesceSmallBatches(
    const std::shared_ptr<arrow::Schema>& schema,
    std::vector<std::shared_ptr<arrow::RecordBatch>> batches, int64_t max_rows,
    arrow::MemoryPool* pool);

}  // namespace rill::table_internal
