// Memory by the page for the tables' large buffers (private to table/):
// ZeroedArray, the key maps' probe arrays, and PopulateForWrite, for fresh
// buffers about to be written in full.
//
// ZeroedArray is a fixed-size array whose bytes start at zero.
// A map that marks its empty slots with zero bytes gets a new, larger probe
// array without writing it: arrays of 2 MiB and more are fresh anonymous
// mappings (the kernel hands out zeroed pages, faulted in on first touch),
// aligned to 2 MiB and marked MADV_HUGEPAGE so that random probes over a
// multi-megabyte map miss the TLB far less often; smaller ones come from
// calloc. Filling a 32 MiB array with an "empty" pattern was a third of the
// first 1M-row load's index build (issue 29): the kernel zeroes the pages
// anyway.
//
// Threads: not thread-safe; one owner.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

namespace rill {

namespace table_internal {

/// Memory from AllocateZeroed: `data` is what the caller uses; the rest is
/// for FreeZeroed.
struct ZeroedBlock {
  void* data = nullptr;
  size_t bytes = 0;
  bool mapped = false;  // an anonymous mapping of exactly `bytes` (else calloc)
};

/// Return `bytes` of zeroed memory as described above. Throws std::bad_alloc
/// when there is none.
ZeroedBlock AllocateZeroed(size_t bytes);
/// Release a block from AllocateZeroed (no-op for an empty block).
void FreeZeroed(const ZeroedBlock& block);

/// Fault in, writable, the pages that lie wholly inside [data, data + bytes)
/// with one madvise(MADV_POPULATE_WRITE) (Linux 5.14 and later), for a buffer
/// the caller is about to write in full: fresh pages then cost one call
/// instead of a page fault per 4 KiB page (each ~2 µs on a virtual machine),
/// and pages already there cost a walk of their page table entries. Does
/// nothing below 1 MiB or where the kernel refuses.
void PopulateForWrite(void* data, int64_t bytes);

}  // namespace table_internal

/// A fixed-size array of `T` (trivially copyable) that starts with every byte
/// zero. Move-only.
template <typename T>
class ZeroedArray {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  ZeroedArray() = default;
  explicit ZeroedArray(size_t n) : block_(table_internal::AllocateZeroed(n * sizeof(T))), size_(n) {}
  ~ZeroedArray() { table_internal::FreeZeroed(block_); }
  ZeroedArray(ZeroedArray&& other) noexcept
      : block_(std::exchange(other.block_, {})), size_(std::exchange(other.size_, 0)) {}
  ZeroedArray& operator=(ZeroedArray&& other) noexcept {
    if (this != &other) {
      table_internal::FreeZeroed(block_);
      block_ = std::exchange(other.block_, {});
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }
  ZeroedArray(const ZeroedArray&) = delete;
  ZeroedArray& operator=(const ZeroedArray&) = delete;

  size_t size() const { return size_; }
  T* data() { return static_cast<T*>(block_.data); }
  const T* data() const { return static_cast<const T*>(block_.data); }
  T& operator[](size_t i) { return data()[i]; }
  const T& operator[](size_t i) const { return data()[i]; }
  T* begin() { return data(); }
  T* end() { return data() + size_; }
  const T* begin() const { return data(); }
  const T* end() const { return data() + size_; }

 private:
  table_internal::ZeroedBlock block_;
  size_t size_ = 0;
};

}  // namespace rill
