#include "rill/connector/memory_connector.h"

#include <arrow/record_batch.h>
#include <arrow/table.h>

#include "rill/common/row_ops.h"

namespace rill {

MemoryConnector::MemoryConnector(std::string target_table, std::shared_ptr<arrow::Schema> schema,
                                 BufferLimits limits, std::string name)
    : Connector(std::move(name), std::move(target_table), std::move(schema)), buffer_(limits) {}

Status MemoryConnector::Push(const std::shared_ptr<arrow::RecordBatch>& batch) {
  if (!batch) return Status::Invalid("MemoryConnector.push: null batch");
  if (!op_column_.empty()) {
    RILL_ASSIGN_OR_RAISE(auto renamed, RenameOpColumn(batch, op_column_));
    return buffer_.Push({renamed});
  }
  return buffer_.Push({batch});
}

Status MemoryConnector::Push(const std::shared_ptr<arrow::Table>& table) {
  if (!table) return Status::Invalid("MemoryConnector.push: null table");
  arrow::TableBatchReader reader(*table);
  RILL_ASSIGN_OR_RAISE(auto batches, reader.ToRecordBatches());
  if (!op_column_.empty()) {
    for (auto& b : batches) {
      RILL_ASSIGN_OR_RAISE(b, RenameOpColumn(b, op_column_));
    }
  }
  return buffer_.Push(batches);
}

Result<std::vector<std::shared_ptr<arrow::RecordBatch>>> MemoryConnector::Poll() {
  return buffer_.Drain();
}

Result<std::vector<std::shared_ptr<arrow::RecordBatch>>> MemoryConnector::PollAtMost(
    int64_t max_records) {
  return buffer_.Drain(max_records);
}

}  // namespace rill
