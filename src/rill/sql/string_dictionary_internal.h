// Private to src/rill/sql: dictionary encoding of low-cardinality string
// columns, so that DuckDB scans them as dictionary vectors.
//
// DuckDB hashes and compares a dictionary vector's distinct values once instead
// of once per row (its aggregate hash table caches the group of every
// dictionary entry across vectors), and converts only the dictionary from
// Arrow. Its own storage hands dictionary-compressed strings over that way;
// these functions let live-table chunks do the same.
//
// Threads: pure functions; any thread.
#pragma once

#include <cstdint>
#include <memory>

#include <arrow/type_fwd.h>

#include "rill/common/status.h"

namespace rill::sql_internal {

/// Most distinct values a chunk's dictionary may hold (DuckDB's aggregate keeps
/// its dictionary fast path below 20,000 entries).
inline constexpr int64_t kMaxDictionaryValues = 4096;

/// Return the type of an encoded string column of type `value_type`:
/// dictionary<int16, value_type>.
std::shared_ptr<arrow::DataType> EncodedStringType(
    const std::shared_ptr<arrow::DataType>& value_type);

/// Return `strings` (utf8 or large_utf8) dictionary-encoded: int16 indices,
/// never null, into a dictionary holding each distinct value once in order of
/// first appearance, null included (as a null entry: DuckDB reads a row as
/// null when its entry is). Return nullptr when encoding does not pay: more
/// than kMaxDictionaryValues distinct values, or more than about half as many
/// distinct values as rows. Invalid for other types. Buffers come from `pool`.
Result<std::shared_ptr<arrow::Array>> EncodeStringDictionary(const arrow::Array& strings,
                                                             arrow::MemoryPool* pool);
// The live rows of an encoded column come from the table's GatherLiveRows,
// which keeps the dictionary object (table/gather_internal.h).


}  // namespace rill::sql_internal
