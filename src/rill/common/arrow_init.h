// One-time initialization of Arrow's compute kernels.
#pragma once

#include <cstdint>

#include <arrow/memory_pool.h>

#include "rill/common/status.h"

namespace rill {

/// Return the memory pool that live tables allocate from (system timestamps,
/// alive bitmaps, compacted chunks, casts): Arrow's default pool (mimalloc in
/// the pyarrow build we link), unless RILL_TABLE_MEMORY_POOL=system selects the
/// C library's allocator. The system allocator was the default until issue 16:
/// with compaction's bounded merges, glibc now hands the chunks' pages back and
/// faults them in again (a quarter of a 1M-product Python upsert tick was the
/// kernel zeroing pages), and on 2026-12-01 the default pool was faster on every
/// table benchmark (upsert 1M int keys 15.2M vs 13.2M rows/s, string keys 9.0M vs
/// 7.1M, append 482M vs 460M, Python 1M-product upsert tick 2.2 vs 4.3 ms).
/// Any thread.
arrow::MemoryPool* TableMemoryPool();

/// Bytes allocated by Arrow's default pool plus the table pool (if different).
int64_t ArrowAllocatedBytes();
/// Peak bytes of the same pools (summed).
int64_t ArrowPeakBytes();

/// Register Arrow's compute functions (Arrow >= 21 keeps them in a separate
/// library that must be initialized before use). Idempotent; any thread.
Status InitializeArrowCompute();

}  // namespace rill
