// One-time initialization of Arrow's compute kernels.
#pragma once

#include <cstdint>

#include <arrow/memory_pool.h>

#include "rill/common/status.h"

namespace rill {

/// Return the memory pool that live tables allocate from (system timestamps,
/// alive bitmaps, compacted chunks, casts). It is the system allocator unless
/// RILL_TABLE_MEMORY_POOL=default selects Arrow's default pool: Arrow's default
/// (mimalloc) hands freed pages back to the OS and faults them in again (huge
/// pages are zeroed on every fault), which cost about a quarter of the upsert
/// throughput when compaction frees and allocates chunks every tick. Any thread.
arrow::MemoryPool* TableMemoryPool();

/// Bytes allocated by Arrow's default pool plus the table pool (if different).
int64_t ArrowAllocatedBytes();
/// Peak bytes of the same pools (summed).
int64_t ArrowPeakBytes();

/// Register Arrow's compute functions (Arrow >= 21 keeps them in a separate
/// library that must be initialized before use). Idempotent; any thread.
Status InitializeArrowCompute();

}  // namespace rill
