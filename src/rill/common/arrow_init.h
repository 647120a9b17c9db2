// One-time initialization of Arrow's compute kernels.
#pragma once

#include <cstdint>

#include <arrow/memory_pool.h>

#include "rill/common/status.h"

namespace rill {

/// Return the memory pool that live tables allocate from (system timestamps,
/// alive bitmaps, compacted chunks, casts). RILL_TABLE_MEMORY_POOL chooses:
/// `jemalloc` (the default when the Arrow build has it, as pyarrow's does),
/// `mimalloc`, `system` (the C library's allocator) or `default` (Arrow's
/// default pool, mimalloc in pyarrow's build). Why jemalloc (issue 29): the
/// tables' buffers must neither be zeroed again by the kernel nor sit on
/// transparent huge pages. mimalloc marks its 1 GiB arena MADV_HUGEPAGE and
/// returns freed ranges to the kernel after 10 ms, so a streaming tick that
/// allocates and frees chunks kept faulting in fresh 2 MiB pages, each zeroed
/// by the kernel (44% of a Nexmark q0 run's CPU in clear_page_erms, issue 15).
/// Arrow's jemalloc never asks for huge pages and keeps freed pages for 1 s.
/// With it, huge pages stay on for the process, so the key maps' own
/// MADV_HUGEPAGE probe arrays (int_location_map_internal.h) keep them. The
/// system allocator was slower on every table benchmark (issue 16: glibc
/// handed the chunks' pages back and faulted them in again).
/// The first call also calls ApplyTransparentHugePagesSetting(). Any thread.
arrow::MemoryPool* TableMemoryPool();

/// RILL_TRANSPARENT_HUGE_PAGES=0 turns transparent huge pages off for the
/// whole process (prctl PR_SET_THP_DISABLE), as Rill did before issue 29 when
/// the tables used mimalloc: that fixed the tick tail but cost the key maps
/// ~20% on 1M integer-key upserts. Unset or any other value: the system's
/// setting stands. Process-wide and inherited by child processes; idempotent;
/// any thread.
void ApplyTransparentHugePagesSetting();

/// Bytes allocated by Arrow's default pool plus the table pool (if different).
int64_t ArrowAllocatedBytes();
/// Peak bytes of the same pools (summed).
int64_t ArrowPeakBytes();

/// Register Arrow's compute functions (Arrow >= 21 keeps them in a separate
/// library that must be initialized before use). Idempotent; any thread.
Status InitializeArrowCompute();

}  // namespace rill
