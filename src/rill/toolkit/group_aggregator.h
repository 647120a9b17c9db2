// GroupAggregator: the built-in aggregates of seed 001's aggregation pipelines
// (count, count(*), sum, avg, min, max) over Arrow batches, grouped by key
// columns, without per-row calls into Python.
//
// Keys: integer and boolean columns group as int64, floating columns as
// float64, string columns as utf8 (nulls form their own group). Values: any
// numeric column (as float64); nulls are skipped by every aggregate except
// count(*), as in rills.aggregation.aggregators. Sums add in row order, so a
// result equals a plain sequential sum. Result() holds one row per group in
// first-seen order: the key columns, then one column per aggregate (count:
// int64; sum, avg, min, max: float64, null when the group had no value).
//
// Threads: one thread at a time (the Python class holds its lock).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <arrow/type_fwd.h>

#include "rill/common/status.h"

namespace rill::toolkit {

enum class GroupAggFn { kCountStar, kCount, kSum, kAvg, kMin, kMax };

/// Parse "count" (with column "*": count(*)), "sum", "avg" / "mean", "min", "max".
/// Invalid for other names and for sum/avg/min/max of "*".
Result<GroupAggFn> ParseGroupAggFn(std::string_view name, std::string_view column);

struct GroupAggSpec {
  std::string output;
  GroupAggFn fn = GroupAggFn::kCountStar;
  std::string column;  ///< "*" for count(*)
};

class GroupAggregator {
 public:
  /// Invalid for no aggregates, an empty or duplicate output name.
  static Result<std::unique_ptr<GroupAggregator>> Make(std::vector<std::string> group_by,
                                                       std::vector<GroupAggSpec> aggs);

  /// Add the rows of `batch` to the running groups. KeyError naming a missing
  /// column; TypeError for a key or value column of an unsupported type.
  Status Consume(const arrow::RecordBatch& batch);
  /// The groups so far (see the file comment).
  Result<std::shared_ptr<arrow::Table>> Finish() const;
  /// Forget every group.
  void Reset();
  int64_t groups() const { return static_cast<int64_t>(keys_.size()); }
  int64_t rows() const { return rows_; }

 private:
  GroupAggregator(std::vector<std::string> group_by, std::vector<GroupAggSpec> aggs)
      : group_by_(std::move(group_by)), aggs_(std::move(aggs)) {}
  struct State {
    int64_t count = 0;  // values seen (count(*): rows)
    double sum = 0;
    double min = 0;
    double max = 0;
  };

  std::vector<std::string> group_by_;
  std::vector<GroupAggSpec> aggs_;
  /// Canonical key types, fixed by the first batch (int64, float64 or utf8).
  std::vector<std::shared_ptr<arrow::DataType>> key_types_;
  std::unordered_map<std::string, int64_t> index_;  // encoded key -> group
  std::vector<std::string> keys_;                   // encoded keys, first-seen order
  std::vector<State> states_;                       // groups x aggs
  int64_t rows_ = 0;
};

}  // namespace rill::toolkit
