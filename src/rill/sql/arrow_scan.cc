// The stream factory behind every view: DuckDB's arrow_scan calls Produce at
// each scan and GetSchema at each bind, passing back the ScanSource pointer the
// view was created with.
#include "rill/sql/arrow_scan_internal.h"

#include <arrow/c/bridge.h>
#include <arrow/record_batch.h>
#include <arrow/table.h>

#include <duckdb.hpp>
#include <duckdb/common/arrow/arrow_wrapper.hpp>
#include <duckdb/function/table/arrow.hpp>
#include <duckdb/main/extension/extension_loader.hpp>

#include "rill/table/live_table.h"

namespace rill::sql_internal {
namespace {

class TableSource : public ScanSource {
 public:
  explicit TableSource(std::shared_ptr<arrow::Table> table) : table_(std::move(table)) {}
  std::shared_ptr<arrow::Schema> schema() const override { return table_->schema(); }
  Result<std::shared_ptr<arrow::RecordBatchReader>> Open() const override {
    return std::make_shared<arrow::TableBatchReader>(table_);
  }

 private:
  std::shared_ptr<arrow::Table> table_;
};

// Passes on the chosen columns of each batch (zero copy: the batches share
// the column arrays). An empty selection keeps the row counts, which DuckDB
// needs for count(*).
class ProjectingReader : public arrow::RecordBatchReader {
 public:
  ProjectingReader(std::shared_ptr<arrow::RecordBatchReader> input, std::vector<int> indices,
                   std::shared_ptr<arrow::Schema> schema)
      : input_(std::move(input)), indices_(std::move(indices)), schema_(std::move(schema)) {}

  std::shared_ptr<arrow::Schema> schema() const override { return schema_; }

  arrow::Status ReadNext(std::shared_ptr<arrow::RecordBatch>* out) override {
    std::shared_ptr<arrow::RecordBatch> batch;
    ARROW_RETURN_NOT_OK(input_->ReadNext(&batch));
    if (batch == nullptr) {
      *out = nullptr;
      return arrow::Status::OK();
    }
    return batch->SelectColumns(indices_).Value(out);
  }

  arrow::Status Close() override { return input_->Close(); }

 private:
  std::shared_ptr<arrow::RecordBatchReader> input_;
  std::vector<int> indices_;
  std::shared_ptr<arrow::Schema> schema_;
};

[[noreturn]] void ThrowStatus(const char* what, const arrow::Status& status) {
  throw duckdb::IOException(std::string(what) + ": " + status.ToString());
}

Result<std::shared_ptr<arrow::RecordBatchReader>> Project(
    std::shared_ptr<arrow::RecordBatchReader> reader, const std::vector<std::string>& columns) {
  const auto& schema = reader->schema();
  std::vector<int> indices;
  indices.reserve(columns.size());
  for (const auto& name : columns) {
    int index = schema->GetFieldIndex(name);
    if (index < 0) {
      return Status::KeyError("column '", name, "' not found in ", schema->ToString());
    }
    indices.push_back(index);
  }
  if (static_cast<int>(indices.size()) == schema->num_fields()) {
    bool identity = true;
    for (size_t i = 0; i < indices.size(); ++i) {
      identity = identity && indices[i] == static_cast<int>(i);
    }
    if (identity) {
      return reader;
    }
  }
  arrow::FieldVector fields;
  fields.reserve(indices.size());
  for (int index : indices) {
    fields.push_back(schema->field(index));
  }
  return std::make_shared<ProjectingReader>(std::move(reader), std::move(indices),
                                            arrow::schema(std::move(fields)));
}

// duckdb::stream_factory_produce_t
duckdb::unique_ptr<duckdb::ArrowArrayStreamWrapper> Produce(
    uintptr_t factory, duckdb::ArrowStreamParameters& parameters) {
  const auto* source = reinterpret_cast<const ScanSource*>(factory);
  auto reader = source->Open();
  if (!reader.ok()) {
    ThrowStatus("rill: cannot open table for scanning", reader.status());
  }
  auto projected = Project(std::move(reader).ValueUnsafe(),
                           parameters.projected_columns.columns);
  if (!projected.ok()) {
    ThrowStatus("rill: cannot project table scan", projected.status());
  }
  auto wrapper = duckdb::make_uniq<duckdb::ArrowArrayStreamWrapper>();
  wrapper->number_of_rows = -1;
  auto status = arrow::ExportRecordBatchReader(std::move(projected).ValueUnsafe(),
                                               &wrapper->arrow_array_stream);
  if (!status.ok()) {
    ThrowStatus("rill: cannot export table scan", status);
  }
  return wrapper;
}

// duckdb::stream_factory_get_schema_t; DuckDB passes the factory pointer
// disguised as a stream.
void GetSchema(ArrowArrayStream* factory, ArrowSchema& schema) {
  const auto* source = reinterpret_cast<const ScanSource*>(factory);
  auto status = arrow::ExportSchema(*source->schema(), &schema);
  if (!status.ok()) {
    ThrowStatus("rill: cannot export table schema", status);
  }
}

// Derives from ArrowTableFunction only to reach its protected callbacks.
struct RillArrowScan : duckdb::ArrowTableFunction {
  static duckdb::TableFunction Make() {
    using duckdb::LogicalType;
    duckdb::TableFunction fn(kScanFunctionName,
                             {LogicalType::POINTER, LogicalType::POINTER, LogicalType::POINTER},
                             ArrowScanFunction, ArrowScanBind, ArrowScanInitGlobal,
                             ArrowScanInitLocal);
    fn.cardinality = ArrowScanCardinality;
    fn.get_partition_data = ArrowGetPartitionData;
    fn.projection_pushdown = true;
    // arrow_scan leaves pushed-down filters to the producer; ours applies none,
    // so DuckDB must keep every filter in its own plan.
    fn.filter_pushdown = false;
    fn.filter_prune = false;
    return fn;
  }
};

}  // namespace

LiveTableSource::LiveTableSource(std::shared_ptr<LiveTable> table) : table_(std::move(table)) {}
LiveTableSource::~LiveTableSource() = default;

std::shared_ptr<arrow::Schema> LiveTableSource::schema() const { return table_->schema(); }

Result<std::shared_ptr<arrow::RecordBatchReader>> LiveTableSource::Open() const {
  std::shared_ptr<const TableVersion> version;
  {
    std::lock_guard<std::mutex> lock(mu_);
    version = pinned_;
  }
  if (version == nullptr) {
    version = table_->snapshot();
  }
  // The reader keeps the version alive until DuckDB releases the stream, so
  // writes published meanwhile never show up half-way through a scan.
  return version->MakeReader();
}

void LiveTableSource::Pin() {
  auto version = table_->snapshot();
  std::lock_guard<std::mutex> lock(mu_);
  pinned_ = std::move(version);
}

void LiveTableSource::Unpin() {
  std::shared_ptr<const TableVersion> old;
  std::lock_guard<std::mutex> lock(mu_);
  old.swap(pinned_);
}

std::shared_ptr<ScanSource> MakeTableSource(std::shared_ptr<arrow::Table> table) {
  return std::make_shared<TableSource>(std::move(table));
}

void RegisterScanFunction(duckdb::DatabaseInstance& db) {
  duckdb::ExtensionLoader loader(db, "rill");
  loader.RegisterFunction(RillArrowScan::Make());
}

void CreateScanView(duckdb::Connection& conn, const std::string& name, const ScanSource& source,
                    bool temporary) {
  duckdb::vector<duckdb::Value> args{
      duckdb::Value::POINTER(reinterpret_cast<uintptr_t>(&source)),
      duckdb::Value::POINTER(reinterpret_cast<uintptr_t>(&Produce)),
      duckdb::Value::POINTER(reinterpret_cast<uintptr_t>(&GetSchema))};
  conn.TableFunction(kScanFunctionName, args)->CreateView(name, /*replace=*/true, temporary);
}

}  // namespace rill::sql_internal
