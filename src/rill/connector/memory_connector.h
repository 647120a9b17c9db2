// MemoryConnector: batches pushed by application code.
#pragma once

#include <memory>
#include <string>

#include "rill/connector/bounded_buffer.h"
#include "rill/connector/connector.h"

namespace rill {

/// A connector fed by Push() from any number of threads.
class MemoryConnector : public Connector {
 public:
  /// `schema` may be null (batches are then reconciled with the table's schema).
  MemoryConnector(std::string target_table, std::shared_ptr<arrow::Schema> schema = nullptr,
                  BufferLimits limits = {}, std::string name = "");

  /// Buffer a batch. CapacityError when on_overflow is kError and it does not
  /// fit (nothing already buffered is lost). Any thread.
  Status Push(const std::shared_ptr<arrow::RecordBatch>& batch);
  /// Buffer every batch of `table` as one push (all or nothing with kError).
  Status Push(const std::shared_ptr<arrow::Table>& table);

  Result<std::vector<std::shared_ptr<arrow::RecordBatch>>> Poll() override;
  Result<std::vector<std::shared_ptr<arrow::RecordBatch>>> PollAtMost(
      int64_t max_records) override;
  ConnectorStats stats() const override { return buffer_.stats(); }
  const BoundedBuffer& buffer() const { return buffer_; }

  /// The `op_column` option: a column of the pushed batches whose values
  /// (insert/upsert/update/delete or c/u/d/r/t) say what each row does; it is
  /// renamed to the operation column (common/row_ops.h) at Push. "" (default):
  /// every row is an upsert. Set before pushing.
  void set_op_column(std::string op_column) { op_column_ = std::move(op_column); }
  const std::string& op_column() const { return op_column_; }

 private:
  BoundedBuffer buffer_;
  std::string op_column_;
};

}  // namespace rill
