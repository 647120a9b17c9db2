// LiveTableSource: the scan side of a live table's view. A query pins one
// version; scans of it stream the version's chunks, projected to the columns
// the query reads, with low-cardinality string columns replaced by their cached
// dictionary encodings, and only the live rows of chunks with dead rows.
#include <arrow/array.h>
#include <arrow/record_batch.h>
#include <arrow/util/key_value_metadata.h>

#include "rill/common/arrow_init.h"
#include "rill/sql/arrow_scan_internal.h"
#include "rill/sql/string_dictionary_internal.h"  // EncodedStringType
#include "rill/table/live_table.h"

namespace rill::sql_internal {

struct LiveTableSource::ScanPlan {
  std::shared_ptr<const TableVersion> version;
  std::shared_ptr<arrow::Schema> schema;  // ScanSchema()
  std::vector<bool> encoded;              // per schema column
};

namespace {

bool IsString(const arrow::DataType& type) {
  return type.id() == arrow::Type::STRING || type.id() == arrow::Type::LARGE_STRING;
}

// Streams the non-empty chunks of one version, projected to `columns` of the
// plan's schema. Holds the plan (and so the version) alive.
class LiveScanReader final : public arrow::RecordBatchReader {
 public:
  LiveScanReader(std::shared_ptr<const void> plan_owner, const TableVersion& version,
                 std::vector<int> columns, std::vector<bool> encoded,
                 std::shared_ptr<arrow::Schema> schema, std::shared_ptr<ChunkCache> cache)
      : plan_owner_(std::move(plan_owner)),
        chunks_(version.chunks()),
        columns_(std::move(columns)),
        encoded_(std::move(encoded)),
        schema_(std::move(schema)),
        cache_(std::move(cache)) {}

  std::shared_ptr<arrow::Schema> schema() const override { return schema_; }

  arrow::Status ReadNext(std::shared_ptr<arrow::RecordBatch>* out) override {
    while (next_ < chunks_.size() && chunks_[next_].live_rows == 0) {
      ++next_;
    }
    if (next_ >= chunks_.size()) {
      *out = nullptr;
      return arrow::Status::OK();
    }
    const VersionChunk& chunk = chunks_[next_++];
    std::vector<std::shared_ptr<arrow::Array>> arrays(columns_.size());
    for (size_t i = 0; i < columns_.size(); ++i) {
      if (!encoded_[i]) {
        arrays[i] = chunk.batch->column(columns_[i]);
        continue;
      }
      arrays[i] = cache_->Dictionary(chunk.batch, columns_[i]);
      if (arrays[i] == nullptr) {
        return arrow::Status::Invalid("no cached dictionary for column ", columns_[i]);
      }
    }
    // The table's own gather drops dead rows, on the projected columns only;
    // encoded columns keep the cache's dictionary object.
    VersionChunk projected{
        arrow::RecordBatch::Make(schema_, chunk.batch->num_rows(), std::move(arrays)),
        chunk.alive, chunk.live_rows};
    return TableVersion::LiveBatch(projected).Value(out);
  }

 private:
  std::shared_ptr<const void> plan_owner_;
  const std::vector<VersionChunk>& chunks_;  // owned through plan_owner_
  std::vector<int> columns_;                 // schema indices
  std::vector<bool> encoded_;                // per entry of columns_
  std::shared_ptr<arrow::Schema> schema_;    // output
  std::shared_ptr<ChunkCache> cache_;
  size_t next_ = 0;
};

}  // namespace

LiveTableSource::LiveTableSource(std::shared_ptr<LiveTable> table,
                                 std::shared_ptr<ChunkCache> cache)
    : table_(std::move(table)), cache_(std::move(cache)) {}
LiveTableSource::~LiveTableSource() = default;

std::shared_ptr<arrow::Schema> LiveTableSource::schema() const {
  if (auto rows = substitute()) return rows->schema();
  return table_->schema();
}

std::shared_ptr<ScanSource> LiveTableSource::substitute() const {
  std::lock_guard<std::mutex> lock(mu_);
  return substitute_;
}

void LiveTableSource::Substitute(std::shared_ptr<ScanSource> rows) {
  std::shared_ptr<ScanSource> old;  // released outside the lock
  std::lock_guard<std::mutex> lock(mu_);
  old.swap(substitute_);
  substitute_ = std::move(rows);
}

std::shared_ptr<const TableVersion> LiveTableSource::pinned() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pinned_;
}

std::shared_ptr<const LiveTableSource::ScanPlan> LiveTableSource::Plan() const {
  std::shared_ptr<const TableVersion> version;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (plan_ != nullptr) {
      return plan_;
    }
    version = pinned_;
  }
  const bool is_pinned = version != nullptr;
  if (!is_pinned) {
    version = table_->snapshot();
  }
  auto plan = std::make_shared<ScanPlan>();
  plan->version = version;
  const auto& schema = version->schema();
  plan->encoded.assign(static_cast<size_t>(schema->num_fields()), false);
  arrow::FieldVector fields = schema->fields();
  // Encode a string column only if every chunk the scan reads has a cached
  // encoding: the stream's type is one for all batches.
  bool any_rows = false;
  for (const auto& chunk : version->chunks()) {
    any_rows = any_rows || chunk.live_rows > 0;
  }
  for (int i = 0; is_pinned && any_rows && cache_ != nullptr && i < schema->num_fields(); ++i) {
    if (!IsString(*schema->field(i)->type())) {
      continue;
    }
    bool all = true;
    for (const auto& chunk : version->chunks()) {
      if (chunk.live_rows > 0 && cache_->Dictionary(chunk.batch, i) == nullptr) {
        all = false;
        break;
      }
    }
    if (all) {
      plan->encoded[i] = true;
      fields[i] = fields[i]
                      ->WithType(EncodedStringType(fields[i]->type()))
                      ->WithMergedMetadata(arrow::key_value_metadata(
                          {kCachedDictionaryKey}, {"true"}));
    }
  }
  plan->schema = arrow::schema(std::move(fields), schema->metadata());
  if (!is_pinned) {
    return plan;
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (pinned_ == version && plan_ == nullptr) {
    plan_ = plan;
  }
  return plan;
}

std::shared_ptr<arrow::Schema> LiveTableSource::ScanSchema() const {
  if (auto rows = substitute()) return rows->ScanSchema();
  // Unpinned (a view being created), the plain schema; DuckDB sees the same
  // column types either way.
  if (pinned() == nullptr) {
    return schema();
  }
  return Plan()->schema;
}

Result<std::shared_ptr<arrow::RecordBatchReader>> LiveTableSource::Open(
    const std::vector<std::string>& columns) const {
  if (auto rows = substitute()) return rows->Open(columns);
  // The plan keeps the version alive until DuckDB releases the stream, so
  // writes published meanwhile never show up half-way through a scan.
  auto plan = Plan();
  std::vector<int> indices;
  std::vector<bool> encoded;
  arrow::FieldVector fields;
  for (const auto& name : columns) {
    const int index = plan->schema->GetFieldIndex(name);
    if (index < 0) {
      return Status::KeyError("column '", name, "' not found in ", plan->schema->ToString());
    }
    indices.push_back(index);
    encoded.push_back(plan->encoded[index]);
    fields.push_back(plan->schema->field(index));
  }
  const TableVersion& version = *plan->version;
  return std::make_shared<LiveScanReader>(std::move(plan), version, std::move(indices),
                                          std::move(encoded), arrow::schema(std::move(fields)),
                                          cache_);
}

std::optional<int64_t> LiveTableSource::FixedNumRows() const {
  if (auto rows = substitute()) return rows->FixedNumRows();
  auto version = pinned();
  if (version == nullptr || cache_ == nullptr) {  // no cache: plans must not depend on the version
    return std::nullopt;
  }
  return version->num_rows();
}

std::optional<ColumnSummary> LiveTableSource::FixedColumnSummary(int column) const {
  if (auto rows = substitute()) return rows->FixedColumnSummary(column);
  // Only a pinned version is what the next scans read; unpinned, a write may
  // publish a different version before they start.
  auto version = pinned();
  if (version == nullptr || cache_ == nullptr || version->num_rows() == 0 || column < 0 ||
      column >= version->schema()->num_fields()) {
    return std::nullopt;
  }
  const auto& type = version->schema()->field(column)->type();
  std::optional<ColumnSummary> merged;
  // Every row of every chunk, dead rows included: a superset of what the scan
  // reads, so the merged bounds hold for it.
  for (const auto& chunk : version->chunks()) {
    if (chunk.batch->num_columns() != version->schema()->num_fields() ||
        !chunk.batch->column(column)->type()->Equals(*type)) {
      return std::nullopt;
    }
    auto summary = cache_->Summary(chunk.batch, column);
    if (!summary.has_value()) {
      return std::nullopt;
    }
    if (merged.has_value()) {
      MergeSummary(*merged, *summary);
    } else {
      merged = summary;
    }
  }
  return merged;
}

void LiveTableSource::Pin() {
  auto version = table_->snapshot();
  std::shared_ptr<const ScanPlan> old_plan;
  std::lock_guard<std::mutex> lock(mu_);
  pinned_ = std::move(version);
  old_plan.swap(plan_);
}

void LiveTableSource::Unpin() {
  std::shared_ptr<const TableVersion> old;
  std::shared_ptr<const ScanPlan> old_plan;
  std::lock_guard<std::mutex> lock(mu_);
  old.swap(pinned_);
  old_plan.swap(plan_);
}

}  // namespace rill::sql_internal
