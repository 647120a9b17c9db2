// Incremental aggregate state of window groups, by group id (gid). Private to
// the window operator.
//
// count(*), count, sum, avg, min and max of numeric columns live in one record
// of words per gid (NumericRecords: a row updates one cache line); every other
// aggregate keeps one slot per gid in flat vectors of its own (AggState). Either
// way updating a group is O(1) and freeing one is a reset of its slot.
// Values are read through InputColumn, which views an input array as one of
// three kinds: integers (every integer type, bool, timestamps, dates: int64),
// floats (float64) and strings (utf8).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <arrow/type_fwd.h>

#include "rill/common/huge_page_allocator.h"
#include "rill/common/status.h"
#include "rill/engine/window_options.h"

namespace rill::window_internal {

enum class ValueKind { kInt, kDouble, kString };

/// Return the kind `type` is aggregated as; TypeError for other types.
Result<ValueKind> KindOf(const arrow::DataType& type);

/// A read view of one input column for one batch.
struct InputColumn {
  ValueKind kind = ValueKind::kInt;
  std::shared_ptr<arrow::Array> array;  // int64, float64 or utf8
  const int64_t* i64 = nullptr;
  const double* f64 = nullptr;
  const arrow::StringArray* str = nullptr;
  bool has_nulls = false;

  bool IsValid(int64_t i) const;
};

/// View `array` as its kind (casting to int64 / float64 / utf8 when needed).
Result<InputColumn> MakeInputColumn(const std::shared_ptr<arrow::Array>& array);

/// A 64-bit hash of row `i` (for distinct counting and sketches).
uint64_t HashValue(const InputColumn& in, int64_t i);

/// One aggregate over every group. Tick-thread (owner) only.
class AggState {
 public:
  virtual ~AggState() = default;
  /// Make room for gids below `n`.
  virtual void Grow(size_t n) = 0;
  /// Forget group `gid` (its slot may be reused).
  virtual void Reset(uint32_t gid) = 0;
  /// Forget groups [first, first + n).
  virtual void ResetRange(uint32_t first, uint32_t n) = 0;
  /// Add rows[i] of `in` (event time times[rows[i]], arrival seq0 + rows[i]) to
  /// group gids[i], for i < n. `in` is null for count(*).
  virtual void Update(const uint32_t* gids, const int64_t* rows, size_t n,
                      const InputColumn* in, const int64_t* times, int64_t seq0) = 0;
  /// Fold group `from` into `into` (session merges); `from` is reset after.
  virtual void Merge(uint32_t into, uint32_t from) = 0;
  /// Return the values of `gids`, in order, allocated from `pool`.
  virtual Result<std::shared_ptr<arrow::Array>> Finish(const std::vector<uint32_t>& gids,
                                                       arrow::MemoryPool* pool) = 0;
  /// Approximate bytes held beyond the per-group slots (sets, sketches, strings).
  virtual int64_t variable_bytes() const = 0;
  /// Bytes of one group's fixed slot.
  virtual int64_t slot_bytes() const = 0;
};

/// count(*), count, sum, avg, min and max over numeric columns, stored by
/// group in one record of 8-byte words, so that a row updates all of its
/// group's values in one cache line (one array per aggregate would take one
/// line each). Aggregates over one column share its words: one non-null count
/// (count(col), avg's divisor, whether min / max / sum have a value) and one
/// double sum (sum of a float column and avg). Records of free groups are
/// zero. Tick-thread (owner) only.
class NumericRecords {
 public:
  /// Whether aggregation `fn` over a column of `kind` can be kept here.
  static bool Fits(WindowAggKind fn, ValueKind kind);
  /// Keep aggregation `fn` over the column read through input `input` (an
  /// index into the inputs Update gets; ignored for count(*)) of `kind`.
  /// Return the aggregation's AggState: its Finish reads the records; its
  /// other methods do nothing (Grow, Reset, ResetRange, Update and Merge of
  /// this class do the work). Call before the first Grow.
  std::unique_ptr<AggState> Add(WindowAggKind fn, ValueKind kind, int input);
  bool empty() const { return stride_ == 0; }
  /// Make room for gids below `n`.
  void Grow(size_t n);
  void Reset(uint32_t g);
  void ResetRange(uint32_t first, uint32_t n);
  /// Add rows[i] to group gids[i], for i < n; inputs[k] is the column of
  /// input k (see Add).
  void Update(const uint32_t* gids, const int64_t* rows, size_t n,
              const std::vector<std::unique_ptr<InputColumn>>& inputs);
  /// Fold group `from` into `into` (session merges); `from` is reset after.
  void Merge(uint32_t into, uint32_t from);
  /// Bytes of one group's record.
  int64_t slot_bytes() const { return static_cast<int64_t>(stride_ * sizeof(Word)); }

  /// One value: a column's words hold integers or doubles, never both.
  union Word {
    int64_t i;
    double d;
  };
  /// The words of one column; -1 where no aggregation needs one.
  struct Column {
    int input = -1;
    ValueKind kind = ValueKind::kInt;
    int nn = -1, sum_i = -1, sum_d = -1, min = -1, max = -1;
  };
  const Word* record(uint32_t g) const { return &words_[size_t{g} * stride_]; }
  const Column& column(size_t i) const { return columns_[i]; }
  /// The word of count(*), or -1.
  int count_word() const { return count_; }

 private:
  int NewWord() { return stride_++; }
  Word* record(uint32_t g) { return &words_[size_t{g} * stride_]; }
  template <ValueKind kKind>
  void UpdateColumn(const Column& c, const uint32_t* gids, const int64_t* rows, size_t n,
                    const InputColumn& in, int count);
  int stride_ = 0;
  int count_ = -1;  // count(*)
  std::vector<Column> columns_;
  std::vector<Word, HugePageAllocator<Word>> words_;
};

/// Create the state of an incremental aggregation over a column of `kind`
/// (ignored for count(*)). Invalid for kSql or a kind the function does not
/// take (sum/avg of strings).
Result<std::unique_ptr<AggState>> MakeAggState(WindowAggKind fn, ValueKind kind);

/// HyperLogLog with 2^12 registers; exact (a small list of hashes) below 64
/// distinct hashes.
class HyperLogLog {
 public:
  void Add(uint64_t hash);
  void Merge(const HyperLogLog& other);
  int64_t Estimate() const;
  int64_t bytes() const;

 private:
  void Promote();
  std::vector<uint64_t> small_;
  std::unique_ptr<uint8_t[]> registers_;
};

}  // namespace rill::window_internal
