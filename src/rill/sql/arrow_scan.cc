// The stream factory behind every view: DuckDB's arrow_scan calls Produce at
// each scan and GetSchema at each bind, passing back the ScanSource pointer the
// view was created with; our Cardinality and Statistics callbacks ask the same
// source while DuckDB optimizes a query.
#include "rill/sql/arrow_scan_internal.h"

#include <cstring>

#include <arrow/array.h>
#include <arrow/c/bridge.h>
#include <arrow/record_batch.h>
#include <arrow/table.h>

#include <duckdb.hpp>
#include <duckdb/common/arrow/arrow_wrapper.hpp>
#include <duckdb/common/types/vector_buffer.hpp>
#include <duckdb/function/table/arrow.hpp>
#include <duckdb/main/extension/extension_loader.hpp>
#include <duckdb/storage/statistics/node_statistics.hpp>

#include "rill/sql/duck_statistics_internal.h"

namespace rill::sql_internal {
namespace {

class TableSource : public ScanSource {
 public:
  TableSource(std::shared_ptr<arrow::Table> table, bool report_rows)
      : table_(std::move(table)), report_rows_(report_rows) {}
  std::shared_ptr<arrow::Schema> schema() const override { return table_->schema(); }
  Result<std::shared_ptr<arrow::RecordBatchReader>> Open(
      const std::vector<std::string>& columns) const override {
    return ProjectReader(std::make_shared<arrow::TableBatchReader>(table_), columns);
  }
  std::optional<int64_t> FixedNumRows() const override {
    if (!report_rows_) return std::nullopt;
    return table_->num_rows();
  }

 private:
  std::shared_ptr<arrow::Table> table_;
  bool report_rows_;
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

// duckdb::stream_factory_produce_t
duckdb::unique_ptr<duckdb::ArrowArrayStreamWrapper> Produce(
    uintptr_t factory, duckdb::ArrowStreamParameters& parameters) {
  const auto* source = reinterpret_cast<const ScanSource*>(factory);
  auto reader = source->Open(parameters.projected_columns.columns);
  if (!reader.ok()) {
    ThrowStatus("rill: cannot open table for scanning", reader.status());
  }
  auto wrapper = duckdb::make_uniq<duckdb::ArrowArrayStreamWrapper>();
  wrapper->number_of_rows = -1;
  auto status = arrow::ExportRecordBatchReader(std::move(reader).ValueUnsafe(),
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
  auto status = arrow::ExportSchema(*source->ScanSchema(), &schema);
  if (!status.ok()) {
    ThrowStatus("rill: cannot export table schema", status);
  }
}

const ScanSource& SourceOf(const duckdb::FunctionData* bind_data) {
  const auto& data = bind_data->Cast<duckdb::ArrowScanFunctionData>();
  return *reinterpret_cast<const ScanSource*>(data.stream_factory_ptr);
}

// duckdb::table_function_cardinality_t
duckdb::unique_ptr<duckdb::NodeStatistics> Cardinality(duckdb::ClientContext& /*context*/,
                                                       const duckdb::FunctionData* bind_data) {
  auto rows = SourceOf(bind_data).FixedNumRows();
  if (!rows.has_value()) {
    return duckdb::make_uniq<duckdb::NodeStatistics>();
  }
  const auto n = static_cast<duckdb::idx_t>(*rows);
  return duckdb::make_uniq<duckdb::NodeStatistics>(n, n);
}

// duckdb::table_statistics_t; `column` indexes the bound columns, i.e. the
// source's schema (or is a virtual column such as the row id).
duckdb::unique_ptr<duckdb::BaseStatistics> Statistics(duckdb::ClientContext& /*context*/,
                                                      const duckdb::FunctionData* bind_data,
                                                      duckdb::column_t column) {
  const auto& data = bind_data->Cast<duckdb::ArrowScanFunctionData>();
  const ScanSource& source = SourceOf(bind_data);
  const auto schema = source.schema();
  if (column >= data.all_types.size() ||
      column >= static_cast<duckdb::column_t>(schema->num_fields())) {
    return nullptr;
  }
  auto summary = source.FixedColumnSummary(static_cast<int>(column));
  if (!summary.has_value()) {
    return nullptr;
  }
  return DuckStatistics(*summary, *schema->field(static_cast<int>(column))->type(),
                        data.all_types[column]);
}

// True if `field` carries kCachedDictionaryKey in its metadata (the C data
// interface's encoding: int32 count, then int32-length-prefixed keys and values).
bool HasCachedDictionaryMark(const ArrowSchema& field) {
  const char* p = field.metadata;
  if (p == nullptr) {
    return false;
  }
  auto read_int = [&p] {
    int32_t v;
    std::memcpy(&v, p, sizeof(v));
    p += sizeof(v);
    return v;
  };
  const size_t key_length = std::strlen(kCachedDictionaryKey);
  for (int32_t n = read_int(); n > 0; --n) {
    const int32_t key_size = read_int();
    const bool match = static_cast<size_t>(key_size) == key_length &&
                       std::memcmp(p, kCachedDictionaryKey, key_length) == 0;
    p += key_size;
    p += read_int();  // the value
    if (match) {
      return true;
    }
  }
  return false;
}

// Tell DuckDB the size and identity of the dictionaries behind the dictionary
// vectors just scanned from marked columns. DuckDB 1.4's arrow scan makes
// plain dictionary vectors (a selection over the batch's converted
// dictionary); remade with Vector::Dictionary, as DuckDB's own storage makes
// them, they carry the dictionary's size (so hashes are computed once per
// dictionary and cached on it, and functions run on the dictionary) and an id
// (so the aggregate hash table looks each entry up once and caches the result
// across vectors).
//
// The id is the address of the dictionary's offsets buffer. Marked columns
// only carry dictionaries from a ChunkCache, which keeps one object per chunk
// and column, alive as long as the chunk; the pinned version keeps every chunk
// alive for the whole query; so within a query equal ids mean the same
// dictionary. DuckDB keeps such ids only in per-query state.
void IdentifyCachedDictionaries(duckdb::TableFunctionInput& input, duckdb::DataChunk& output) {
  const auto& bind = input.bind_data->Cast<duckdb::ArrowScanFunctionData>();
  auto& local = input.local_state->Cast<duckdb::ArrowScanLocalState>();
  const auto& global = input.global_state->Cast<duckdb::ArrowScanGlobalState>();
  if (local.chunk == nullptr) {
    return;
  }
  const ArrowArray& batch = local.chunk->arrow_array;
  const ArrowSchema& schema = bind.schema_root.arrow_schema;
  for (duckdb::idx_t j = 0; j < output.ColumnCount(); ++j) {
    // Output column j is scanned column `scanned`, the arrow batch's child of
    // the same index (the stream is projected to the scanned columns).
    const duckdb::idx_t scanned =
        global.CanRemoveFilterColumns() ? global.projection_ids[j] : j;
    if (scanned >= local.column_ids.size() ||
        scanned >= static_cast<duckdb::idx_t>(batch.n_children)) {
      continue;
    }
    const duckdb::column_t column = local.column_ids[scanned];
    if (column >= static_cast<duckdb::column_t>(schema.n_children) ||
        !HasCachedDictionaryMark(*schema.children[column])) {
      continue;
    }
    duckdb::Vector& vector = output.data[j];
    const ArrowArray& array = *batch.children[scanned];
    auto state = local.array_states.find(column);
    // Null indices would point past the dictionary; ours have none.
    if (vector.GetVectorType() != duckdb::VectorType::DICTIONARY_VECTOR ||
        state == local.array_states.end() || !state->second->HasDictionary() ||
        array.dictionary == nullptr || array.null_count != 0 ||
        array.dictionary->n_buffers < 2 || array.dictionary->buffers[1] == nullptr) {
      continue;
    }
    duckdb::Vector& dictionary = state->second->GetDictionary();
    const auto size = static_cast<duckdb::idx_t>(array.dictionary->length);
    const duckdb::SelectionVector selection = duckdb::DictionaryVector::SelVector(vector);
    vector.Dictionary(dictionary, size, selection, output.size());
    duckdb::DictionaryVector::SetDictionaryId(
        vector, "rill-dictionary-" +
                    std::to_string(reinterpret_cast<uintptr_t>(array.dictionary->buffers[1])));
  }
}

// Derives from ArrowTableFunction only to reach its protected callbacks.
struct RillArrowScan : duckdb::ArrowTableFunction {
  // duckdb::table_function_t
  static void Scan(duckdb::ClientContext& context, duckdb::TableFunctionInput& input,
                   duckdb::DataChunk& output) {
    ArrowScanFunction(context, input, output);
    if (output.size() > 0 && input.local_state != nullptr) {
      IdentifyCachedDictionaries(input, output);
    }
  }

  static duckdb::TableFunction Make() {
    using duckdb::LogicalType;
    duckdb::TableFunction fn(kScanFunctionName,
                             {LogicalType::POINTER, LogicalType::POINTER, LogicalType::POINTER},
                             Scan, ArrowScanBind, ArrowScanInitGlobal, ArrowScanInitLocal);
    fn.cardinality = Cardinality;
    fn.statistics = Statistics;
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

Result<std::shared_ptr<arrow::RecordBatchReader>> ProjectReader(
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

std::shared_ptr<ScanSource> MakeTableSource(std::shared_ptr<arrow::Table> table,
                                            bool report_rows) {
  return std::make_shared<TableSource>(std::move(table), report_rows);
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
