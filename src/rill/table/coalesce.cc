// Coalescing a write's small batches into one chunk (gather_internal.h).
#include <arrow/record_batch.h>

#include "rill/table/gather_internal.h"

namespace rill::table_internal {

Result<std::vector<std::shared_ptr<arrow::RecordBatch>>> CoalesceSmallBatches(
    const std::shared_ptr<arrow::Schema>& schema,
    std::vector<std::shared_ptr<arrow::RecordBatch>> batches, int64_t max_rows,
    arrow::MemoryPool* pool) {
  const int64_t small = max_rows / 2;
  size_t smalls = 0;
  for (const auto& b : batches) smalls += b->num_rows() < small ? 1 : 0;
  if (smalls < 2) return batches;  // nothing to coalesce
  std::vector<std::shared_ptr<arrow::RecordBatch>> out;
  out.reserve(batches.size());
  std::vector<GatherPart> group;
  int64_t group_rows = 0;
  auto flush = [&]() -> Status {
    if (group.size() == 1) {
      out.push_back(std::move(group[0].batch));
    } else if (group.size() > 1) {
      RILL_ASSIGN_OR_RAISE(auto merged, GatherLiveRows(schema, group, pool));
      out.push_back(std::move(merged));
    }
    group.clear();
    group_rows = 0;
    return Status::OK();
  };
  for (auto& b : batches) {
    const int64_t n = b->num_rows();
    if (n >= small) {
      RILL_RETURN_NOT_OK(flush());
      out.push_back(std::move(b));
      continue;
    }
    if (group_rows + n > max_rows) RILL_RETURN_NOT_OK(flush());
    group.push_back({std::move(b), nullptr, n});
    group_rows += n;
  }
  RILL_RETURN_NOT_OK(flush());
  return out;
}

}  // namespace rill::table_internal
