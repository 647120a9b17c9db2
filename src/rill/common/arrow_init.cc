#include "rill/common/arrow_init.h"

#include <cstdlib>
#include <cstring>
#include <mutex>

#include <sys/prctl.h>

#include <arrow/compute/initialize.h>

namespace rill {

Status InitializeArrowCompute() {
  static std::once_flag once;
  static Status status;
  std::call_once(once, [] { status = arrow::compute::Initialize(); });
  return status;
}

void DisableTransparentHugePagesUnlessAsked() {
  static std::once_flag once;
  std::call_once(once, [] {
    const char* keep = std::getenv("RILL_TRANSPARENT_HUGE_PAGES");
    if (keep && std::strcmp(keep, "1") == 0) return;
    (void)prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0);  // best effort: a refusal changes nothing
  });
}

arrow::MemoryPool* TableMemoryPool() {
  static arrow::MemoryPool* pool = [] {
    DisableTransparentHugePagesUnlessAsked();
    const char* choice = std::getenv("RILL_TABLE_MEMORY_POOL");
    if (choice && std::strcmp(choice, "system") == 0) return arrow::system_memory_pool();
    return arrow::default_memory_pool();
  }();
  return pool;
}

int64_t ArrowAllocatedBytes() {
  auto* def = arrow::default_memory_pool();
  auto* table = TableMemoryPool();
  return def->bytes_allocated() + (table != def ? table->bytes_allocated() : 0);
}

int64_t ArrowPeakBytes() {
  auto* def = arrow::default_memory_pool();
  auto* table = TableMemoryPool();
  return def->max_memory() + (table != def ? table->max_memory() : 0);
}

}  // namespace rill
