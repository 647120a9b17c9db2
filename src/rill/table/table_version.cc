#include "rill/table/live_table.h"

#include <arrow/array.h>
#include <arrow/buffer.h>
#include <arrow/record_batch.h>
#include <arrow/table.h>

#include "rill/common/arrow_init.h"
#include "rill/table/gather_internal.h"

namespace rill {

TableVersion::TableVersion(std::shared_ptr<arrow::Schema> schema,
                           std::vector<VersionChunk> chunks, uint64_t version,
                           double published_at)
    : schema_(std::move(schema)),
      chunks_(std::move(chunks)),
      version_(version),
      published_at_(published_at) {
  for (const auto& c : chunks_) num_rows_ += c.live_rows;
}

int64_t TableVersion::nbytes() const {
  int64_t total = 0;
  for (const auto& c : chunks_) {
    for (const auto& col : c.batch->columns()) {
      for (const auto& buf : col->data()->buffers) {
        if (buf) total += buf->size();
      }
    }
    if (c.alive) total += c.alive->size();
  }
  return total;
}

Result<std::shared_ptr<arrow::RecordBatch>> TableVersion::LiveBatch(const VersionChunk& chunk) {
  if (!chunk.alive || chunk.live_rows == chunk.batch->num_rows()) {
    return chunk.batch;
  }
  return table_internal::GatherLiveRows(chunk.batch->schema(),
                                        {{chunk.batch, chunk.alive, chunk.live_rows}},
                                        TableMemoryPool());
}

Result<std::shared_ptr<arrow::Table>> TableVersion::ToTable() const {
  std::vector<std::shared_ptr<arrow::RecordBatch>> batches;
  batches.reserve(chunks_.size());
  for (const auto& c : chunks_) {
    if (c.live_rows == 0) continue;
    RILL_ASSIGN_OR_RAISE(auto b, LiveBatch(c));
    batches.push_back(std::move(b));
  }
  return arrow::Table::FromRecordBatches(schema_, batches);
}

namespace {

/// Streams the live batches of one version; holds the version alive.
class VersionReader final : public arrow::RecordBatchReader {
 public:
  explicit VersionReader(std::shared_ptr<const TableVersion> version)
      : version_(std::move(version)) {}
  std::shared_ptr<arrow::Schema> schema() const override { return version_->schema(); }
  Status ReadNext(std::shared_ptr<arrow::RecordBatch>* out) override {
    const auto& chunks = version_->chunks();
    while (next_ < chunks.size() && chunks[next_].live_rows == 0) ++next_;
    if (next_ >= chunks.size()) {
      *out = nullptr;
      return Status::OK();
    }
    RILL_ASSIGN_OR_RAISE(*out, TableVersion::LiveBatch(chunks[next_++]));
    return Status::OK();
  }

 private:
  std::shared_ptr<const TableVersion> version_;
  size_t next_ = 0;
};

}  // namespace

Result<std::shared_ptr<arrow::RecordBatchReader>> TableVersion::MakeReader() const {
  // The caller owns a shared_ptr to this version (it came from snapshot()),
  // but we cannot reach it from `this`; copy the chunk list into a new version.
  auto copy = std::make_shared<TableVersion>(schema_, chunks_, version_, published_at_);
  return std::make_shared<VersionReader>(std::move(copy));
}

}  // namespace rill
