// KeyIndex: the primary-key hash index of a LiveTable (private to table/).
//
// Maps a key to a row location (slot << 32 | row). Specialized for a single
// integer-like key, a single string-like key (string, binary, views,
// dictionary-encoded strings) and a generic byte encoding (composite keys and
// any other fixed-width type).
//
// Nulls: a null key value is a key like any other and equal to other nulls
// (IS NOT DISTINCT FROM); in a composite key each column's null is encoded.
//
// Threads: not thread-safe; the owning table serializes access.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include <arrow/type_fwd.h>

#include "rill/common/status.h"

namespace rill {

class KeyIndex {
 public:
  static constexpr uint64_t kNone = ~uint64_t{0};

  /// Build an index over `key_columns` of `schema`. TypeError for key types
  /// that cannot be hashed (nested types).
  static Result<std::unique_ptr<KeyIndex>> Make(const arrow::Schema& schema,
                                                std::vector<int> key_columns);
  virtual ~KeyIndex() = default;

  /// Prepare to address the rows of `batch`, whose key columns sit at the
  /// positions given to Make. The batch must outlive the following calls.
  virtual Status Bind(const arrow::RecordBatch& batch) = 0;
  /// Map the key of bound row `row` to `location`; return the previous
  /// location or kNone if the key was new.
  virtual uint64_t Upsert(int64_t row, uint64_t location) = 0;
  /// Upsert rows [0, n) of the bound batch in order, row i to base + i;
  /// prev[i] receives what Upsert would return. Faster than n Upsert calls.
  virtual void UpsertAll(int64_t n, uint64_t base, uint64_t* prev) {
    for (int64_t i = 0; i < n; ++i) prev[i] = Upsert(i, base + static_cast<uint64_t>(i));
  }
  /// As UpsertAll, but append to `replaced` only the rows that had a previous
  /// location, as {row, previous location}, in row order, instead of one value
  /// per row: a first load of distinct keys writes nothing but the index.
  virtual void UpsertAllReplaced(int64_t n, uint64_t base,
                                 std::vector<std::pair<int64_t, uint64_t>>* replaced) {
    std::vector<uint64_t> prev(static_cast<size_t>(n));
    UpsertAll(n, base, prev.data());
    for (int64_t i = 0; i < n; ++i) {
      if (prev[i] != kNone) replaced->emplace_back(i, prev[i]);
    }
  }
  /// Rows [0, n) of the bound batch are copies of rows that moved (compaction):
  /// the key of row i maps to old[i] (kNone: not indexed); map it to base + i.
  /// Same result as UpsertAll; the string indexes find each key by its old
  /// location instead of comparing its bytes. `scratch` has room for n values.
  virtual void RelocateAll(int64_t n, const uint64_t* old, uint64_t base, uint64_t* scratch) {
    UpsertAll(n, base, scratch);
  }
  /// Remove the key of bound row `row` if it maps to `location`.
  virtual void Erase(int64_t row, uint64_t location) = 0;
  /// Write the location of the key of bound row i to out[i] for i in [0, n)
  /// (kNone for a key the index does not hold). Changes no mapping.
  virtual void FindAll(int64_t n, uint64_t* out) = 0;
  /// Remove every key.
  virtual void Clear() = 0;
  /// Number of keys.
  virtual size_t size() const = 0;
};

}  // namespace rill
