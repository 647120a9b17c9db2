#include "rill/common/arrow_init.h"

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string_view>

#include <sys/prctl.h>

#include <arrow/compute/initialize.h>

namespace rill {

Status InitializeArrowCompute() {
  static std::once_flag once;
  static Status status;
  std::call_once(once, [] { status = arrow::compute::Initialize(); });
  return status;
}

void ApplyTransparentHugePagesSetting() {
  static std::once_flag once;
  std::call_once(once, [] {
    const char* setting = std::getenv("RILL_TRANSPARENT_HUGE_PAGES");
    if (setting && std::strcmp(setting, "0") == 0) {
      (void)prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0);  // best effort: a refusal changes nothing
    }
  });
}

namespace {

arrow::MemoryPool* JemallocPoolOrNull() {
  arrow::MemoryPool* pool = nullptr;
  if (!arrow::jemalloc_memory_pool(&pool).ok()) return nullptr;
  return pool;
}

arrow::MemoryPool* ChooseTablePool() {
  const char* env = std::getenv("RILL_TABLE_MEMORY_POOL");
  const std::string_view choice = env ? env : "";
  if (choice == "system") return arrow::system_memory_pool();
  if (choice == "default") return arrow::default_memory_pool();
  if (choice == "mimalloc") {
    arrow::MemoryPool* pool = nullptr;
    if (arrow::mimalloc_memory_pool(&pool).ok()) return pool;
    return arrow::default_memory_pool();
  }
  if (arrow::MemoryPool* pool = JemallocPoolOrNull()) return pool;
  return arrow::default_memory_pool();
}

}  // namespace

arrow::MemoryPool* TableMemoryPool() {
  static arrow::MemoryPool* pool = [] {
    ApplyTransparentHugePagesSetting();
    return ChooseTablePool();
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
