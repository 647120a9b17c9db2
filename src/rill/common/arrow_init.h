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
/// The first call also calls DisableTransparentHugePagesUnlessAsked(). Any thread.
arrow::MemoryPool* TableMemoryPool();

/// Turn transparent huge pages off for this process (prctl PR_SET_THP_DISABLE),
/// unless RILL_TRANSPARENT_HUGE_PAGES=1. mimalloc marks its 1 GiB arena
/// MADV_HUGEPAGE and returns freed 64 KiB ranges to the kernel after 10 ms, so
/// a streaming tick that allocates and frees chunks keeps faulting in fresh
/// 2 MiB pages, each zeroed by the kernel: 44% of the CPU of a Nexmark q0 run
/// at 0.9M bids/s was clear_page_erms, and its 10 ms tick p99 was 184–394 ms
/// against 15 ms without huge pages (issue 15, 2026-12-01). The cost: upserts
/// into 1M integer keys run ~20% slower without them (10.0M vs 8.2M rows/s).
/// Process-wide and inherited by child processes; idempotent; any thread.
void DisableTransparentHugePagesUnlessAsked();

/// Bytes allocated by Arrow's default pool plus the table pool (if different).
int64_t ArrowAllocatedBytes();
/// Peak bytes of the same pools (summed).
int64_t ArrowPeakBytes();

/// Register Arrow's compute functions (Arrow >= 21 keeps them in a separate
/// library that must be initialized before use). Idempotent; any thread.
Status InitializeArrowCompute();

}  // namespace rill
