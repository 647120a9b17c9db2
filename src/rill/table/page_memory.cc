#include "rill/table/page_memory_internal.h"

#include <cstdint>
#include <cstdlib>
#include <new>

#include <sys/mman.h>
#include <unistd.h>

namespace rill::table_internal {

namespace {

constexpr size_t kHugePage = size_t{2} << 20;
constexpr int64_t kPopulateMin = int64_t{1} << 20;
// From <linux/mman.h> (5.14); older C library headers lack it.
#ifdef MADV_POPULATE_WRITE
constexpr int kPopulateWrite = MADV_POPULATE_WRITE;
#else
constexpr int kPopulateWrite = 23;
#endif

}  // namespace

ZeroedBlock AllocateZeroed(size_t bytes) {
  ZeroedBlock block;
  if (bytes == 0) return block;
  if (bytes < kHugePage) {
    block.data = std::calloc(1, bytes);
    if (block.data == nullptr) throw std::bad_alloc();
    block.bytes = bytes;
    return block;
  }
  // Map one huge page more than needed, then unmap what lies before the first
  // 2 MiB boundary and after the rounded size, so the mapping is exactly the
  // aligned range (munmap of the block then takes it all).
  const size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  void* raw = ::mmap(nullptr, rounded + kHugePage, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  const auto start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (start + kHugePage - 1) & ~(kHugePage - 1);
  if (aligned > start) ::munmap(raw, aligned - start);
  const size_t tail = start + rounded + kHugePage - (aligned + rounded);
  if (tail > 0) ::munmap(reinterpret_cast<void*>(aligned + rounded), tail);
  (void)::madvise(reinterpret_cast<void*>(aligned), rounded, MADV_HUGEPAGE);  // a hint
  block.data = reinterpret_cast<void*>(aligned);
  block.bytes = rounded;
  block.mapped = true;
  return block;
}

void FreeZeroed(const ZeroedBlock& block) {
  if (block.data == nullptr) return;
  if (block.mapped) {
    ::munmap(block.data, block.bytes);
  } else {
    std::free(block.data);
  }
}

void PopulateForWrite(void* data, int64_t bytes) {
  if (bytes < kPopulateMin) return;
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto start = reinterpret_cast<uintptr_t>(data);
  const uintptr_t begin = (start + page - 1) & ~(page - 1);
  const uintptr_t end = (start + static_cast<uintptr_t>(bytes)) & ~(page - 1);
  if (end <= begin) return;
  (void)::madvise(reinterpret_cast<void*>(begin), end - begin, kPopulateWrite);  // a hint
}

}  // namespace rill::table_internal
