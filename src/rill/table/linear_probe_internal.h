// Shared pieces of the open-addressing key maps (private to table/).
//
// Threads: stateless helpers; callers hold their own locks.
#pragma once

#include <cstddef>

namespace rill {

/// Backward-shift deletion for a linear-probing table (a vector of slots) of
/// power-of-two size (`mask` = size - 1): removes the entry in slot `i` by
/// moving the later entries of its probe run into the hole, so lookups need no
/// tombstones. `home(slot)` gives an occupied slot's home index and
/// `empty(slot)` tells an empty one. Returns the index of the slot left over,
/// which the caller marks empty.
template <typename Slots, typename HomeFn, typename EmptyFn>
size_t BackwardShiftErase(Slots& slots, size_t mask, size_t i, HomeFn home,
                          EmptyFn empty) {
  size_t hole = i;
  size_t j = i;
  while (true) {
    j = (j + 1) & mask;
    const auto& s = slots[j];
    if (empty(s)) break;
    const size_t h = home(s);
    // Move s into the hole if its home is not in (hole, j] (cyclically).
    const bool between = hole <= j ? (hole < h && h <= j) : (hole < h || h <= j);
    if (!between) {
      slots[hole] = s;
      hole = j;
    }
  }
  return hole;
}

/// Return the capacity (a power of two, at least `capacity`) of a table kept
/// at most half full that holds `keys` keys: what a map grows to at once for a
/// batch larger than itself, instead of doubling through every size between.
inline size_t CapacityFor(size_t capacity, size_t keys) {
  while ((keys + 1) * 2 > capacity) capacity *= 2;
  return capacity;
}

}  // namespace rill
