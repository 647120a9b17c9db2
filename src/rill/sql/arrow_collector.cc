// ArrowTableCollector: DuckDB result chunks straight into Arrow arrays, with
// fixed-width columns that still point into an input buffer shared, not copied
// (arrow_collector_internal.h). Fixed-width columns are built here; every other
// type goes through DuckDB's own ArrowAppender, so its Arrow form is exactly
// what ResultToArrowTable produces.
#include "rill/sql/arrow_collector_internal.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <unordered_map>

#include <arrow/array.h>
#include <arrow/buffer.h>
#include <arrow/buffer_builder.h>
#include <arrow/c/bridge.h>
#include <arrow/record_batch.h>
#include <arrow/table.h>

#include <duckdb.hpp>
#include <duckdb/common/arrow/arrow_appender.hpp>
#include <duckdb/common/arrow/arrow_converter.hpp>
#include <duckdb/execution/operator/helper/physical_result_collector.hpp>
#include <duckdb/execution/physical_operator_states.hpp>
#include <duckdb/execution/physical_plan_generator.hpp>
#include <duckdb/function/table/arrow/arrow_duck_schema.hpp>
#include <duckdb/main/prepared_statement_data.hpp>

#include "rill/common/arrow_init.h"

namespace rill::sql_internal {

void SharedInputBuffers::AddTable(const arrow::Table& table) {
  for (const auto& column : table.columns()) {
    if (!arrow::is_fixed_width(column->type()->id()) ||
        column->type()->id() == arrow::Type::BOOL) {
      continue;
    }
    for (const auto& chunk : column->chunks()) {
      const auto& buffers = chunk->data()->buffers;
      if (buffers.size() > 1 && buffers[1] != nullptr && buffers[1]->size() > 0) {
        buffers_.push_back(buffers[1]);
      }
    }
  }
}

void SharedInputBuffers::Seal() {
  std::sort(buffers_.begin(), buffers_.end(),
            [](const auto& a, const auto& b) { return a->data() < b->data(); });
}

const std::shared_ptr<arrow::Buffer>* SharedInputBuffers::Find(const uint8_t* data,
                                                               int64_t size) const {
  // The last buffer starting at or before `data`; buffers may nest or overlap
  // (slices of one allocation), so look back while they start before it.
  auto it = std::upper_bound(buffers_.begin(), buffers_.end(), data,
                             [](const uint8_t* p, const auto& b) { return p < b->data(); });
  while (it != buffers_.begin()) {
    --it;
    const auto& b = *it;
    if (data + size <= b->data() + b->size()) return &b;
  }
  return nullptr;
}

namespace {

[[noreturn]] void ThrowStatus(const arrow::Status& status) {
  if (status.IsOutOfMemory()) throw duckdb::OutOfMemoryException(status.ToString());
  throw duckdb::InternalException("rill: building the Arrow result: " + status.ToString());
}

void Check(const arrow::Status& status) {
  if (!status.ok()) ThrowStatus(status);
}

// DuckDB types whose values are stored as their Arrow form byte for byte (the
// ArrowAppender copies them with ArrowScalarData<T> and no conversion).
bool IsSharedLayout(const duckdb::LogicalType& type) {
  using duckdb::LogicalTypeId;
  switch (type.id()) {
    case LogicalTypeId::TINYINT:
    case LogicalTypeId::SMALLINT:
    case LogicalTypeId::INTEGER:
    case LogicalTypeId::BIGINT:
    case LogicalTypeId::UTINYINT:
    case LogicalTypeId::USMALLINT:
    case LogicalTypeId::UINTEGER:
    case LogicalTypeId::UBIGINT:
    case LogicalTypeId::FLOAT:
    case LogicalTypeId::DOUBLE:
    case LogicalTypeId::DATE:
    case LogicalTypeId::TIME:
    case LogicalTypeId::TIMESTAMP:
    case LogicalTypeId::TIMESTAMP_SEC:
    case LogicalTypeId::TIMESTAMP_MS:
    case LogicalTypeId::TIMESTAMP_NS:
    case LogicalTypeId::TIMESTAMP_TZ:
      return true;
    default:
      return false;
  }
}

// One fixed-width result column of the batch being built. While every chunk
// so far points into one shared input buffer, each right after the previous
// one, the column is a slice of that buffer (`run_*`); the first chunk that
// does not continue it copies what the run covered and copies from then on.
class FixedColumn {
 public:
  FixedColumn(std::shared_ptr<arrow::DataType> type, int width)
      : type_(std::move(type)), width_(width), values_(TableMemoryPool()),
        validity_(TableMemoryPool()) {}

  void Append(duckdb::Vector& vector, duckdb::idx_t count, const SharedInputBuffers* shared) {
    const int64_t n = static_cast<int64_t>(count);
    const int64_t bytes = n * width_;
    if (vector.GetVectorType() == duckdb::VectorType::FLAT_VECTOR) {
      const uint8_t* data = duckdb::FlatVector::GetData(vector);
      AppendValidity(duckdb::FlatVector::Validity(vector), n);
      if (!copying_ && ExtendRun(data, bytes, shared)) {
        rows_ += n;
        return;
      }
      StartCopying();
      Check(values_.Append(data, bytes));
      rows_ += n;
      return;
    }
    duckdb::UnifiedVectorFormat format;
    vector.ToUnifiedFormat(count, format);
    StartCopying();
    Check(values_.Reserve(bytes));
    uint8_t* out = values_.mutable_data() + values_.length();
    for (int64_t i = 0; i < n; ++i) {
      const auto index = format.sel->get_index(static_cast<duckdb::idx_t>(i));
      std::memcpy(out + i * width_, format.data + index * width_, width_);
    }
    values_.UnsafeAdvance(bytes);
    if (format.validity.AllValid()) {
      AppendAllValid(n);
    } else {
      StartValidity(n);
      for (int64_t i = 0; i < n; ++i) {
        const bool valid =
            format.validity.RowIsValid(format.sel->get_index(static_cast<duckdb::idx_t>(i)));
        validity_.UnsafeAppend(valid);
        null_count_ += valid ? 0 : 1;
      }
    }
    rows_ += n;
  }

  // Return the column built so far and start a new one.
  std::shared_ptr<arrow::Array> Finish() {
    // A slice of less than half its buffer would keep the rest alive as long
    // as the result (a LIMIT 1 holding a whole batch): copy it instead.
    if (!copying_ && run_owner_ != nullptr && 2 * rows_ * width_ < run_owner_->size()) {
      StartCopying();
    }
    std::shared_ptr<arrow::Buffer> values;
    if (!copying_ && run_owner_ != nullptr) {
      values = arrow::SliceBuffer(run_owner_, run_start_ - run_owner_->data(), rows_ * width_);
    } else {
      auto finished = values_.Finish();
      Check(finished.status());
      values = std::move(finished).ValueUnsafe();
    }
    std::shared_ptr<arrow::Buffer> validity;
    if (has_validity_) {
      auto finished = validity_.Finish();
      Check(finished.status());
      validity = std::move(finished).ValueUnsafe();
    }
    auto array = arrow::MakeArray(
        arrow::ArrayData::Make(type_, rows_, {std::move(validity), std::move(values)},
                               null_count_));
    run_owner_ = nullptr;
    run_start_ = nullptr;
    copying_ = false;
    has_validity_ = false;
    null_count_ = 0;
    rows_ = 0;
    return array;
  }

 private:
  // Extend the run with `bytes` at `data` if they continue it (or start it)
  // inside a shared buffer.
  bool ExtendRun(const uint8_t* data, int64_t bytes, const SharedInputBuffers* shared) {
    if (run_owner_ != nullptr) {
      return data == run_start_ + rows_ * width_ &&
             data + bytes <= run_owner_->data() + run_owner_->size();
    }
    if (rows_ > 0 || shared == nullptr) return false;
    const auto* owner = shared->Find(data, bytes);
    if (owner == nullptr) return false;
    run_owner_ = *owner;
    run_start_ = data;
    return true;
  }

  void StartCopying() {
    if (copying_) return;
    copying_ = true;
    if (run_owner_ != nullptr) {
      Check(values_.Append(run_start_, rows_ * width_));
      run_owner_ = nullptr;
      run_start_ = nullptr;
    }
  }

  // Start a validity bitmap (the rows so far all valid) and make room for n more.
  void StartValidity(int64_t n) {
    if (!has_validity_) {
      has_validity_ = true;
      Check(validity_.Reserve(rows_ + n));
      validity_.UnsafeAppend(rows_, true);
      return;
    }
    Check(validity_.Reserve(n));
  }

  void AppendAllValid(int64_t n) {
    if (!has_validity_) return;
    Check(validity_.Reserve(n));
    validity_.UnsafeAppend(n, true);
  }

  void AppendValidity(duckdb::ValidityMask& mask, int64_t n) {
    if (mask.AllValid()) {
      AppendAllValid(n);
      return;
    }
    StartValidity(n);
    for (int64_t i = 0; i < n; ++i) {
      const bool valid = mask.RowIsValid(static_cast<duckdb::idx_t>(i));
      validity_.UnsafeAppend(valid);
      null_count_ += valid ? 0 : 1;
    }
  }

  std::shared_ptr<arrow::DataType> type_;
  int width_;
  arrow::BufferBuilder values_;
  arrow::TypedBufferBuilder<bool> validity_;
  std::shared_ptr<arrow::Buffer> run_owner_;
  const uint8_t* run_start_ = nullptr;
  bool copying_ = false;
  bool has_validity_ = false;
  int64_t null_count_ = 0;
  int64_t rows_ = 0;
};

// What every thread's sink shares: the result's Arrow schema, which columns
// are built as FixedColumn, and the finished batches.
struct CollectorPlan {
  std::shared_ptr<arrow::Schema> schema;
  std::vector<int> fixed_width;        // per column: byte width, or 0 (appender)
  duckdb::vector<duckdb::LogicalType> other_types;  // the appender's columns, in order
  std::vector<int> other_columns;       // their result column indices
  std::shared_ptr<arrow::Schema> other_schema;
  duckdb::ClientProperties properties;
  std::unordered_map<duckdb::idx_t, const duckdb::shared_ptr<duckdb::ArrowTypeExtensionData>>
      other_extensions;
};

class CollectorGlobalState : public duckdb::GlobalSinkState {
 public:
  std::shared_ptr<const CollectorPlan> plan;
  std::mutex mu;
  std::vector<std::shared_ptr<arrow::RecordBatch>> batches;  // guarded by mu
};

class CollectorLocalState : public duckdb::LocalSinkState {
 public:
  // Set up for `plan` (the global state's) on the first chunk.
  void Start(std::shared_ptr<const CollectorPlan> plan) {
    if (plan_ != nullptr) return;
    plan_ = std::move(plan);
    for (int i = 0; i < plan_->schema->num_fields(); ++i) {
      if (plan_->fixed_width[i] > 0) {
        fixed_.emplace(i, FixedColumn(plan_->schema->field(i)->type(), plan_->fixed_width[i]));
      }
    }
    if (!plan_->other_types.empty()) other_chunk_.InitializeEmpty(plan_->other_types);
  }

  void Append(duckdb::DataChunk& chunk, const SharedInputBuffers* shared) {
    const duckdb::idx_t count = chunk.size();
    for (auto& [column, builder] : fixed_) builder.Append(chunk.data[column], count, shared);
    if (!plan_->other_types.empty()) {
      for (size_t k = 0; k < plan_->other_columns.size(); ++k) {
        other_chunk_.data[k].Reference(chunk.data[plan_->other_columns[k]]);
      }
      other_chunk_.SetCardinality(count);
      if (appender_ == nullptr) {
        appender_ = duckdb::make_uniq<duckdb::ArrowAppender>(
            plan_->other_types, count, plan_->properties, plan_->other_extensions);
      }
      appender_->Append(other_chunk_, 0, count, count);
    }
    rows_ += static_cast<int64_t>(count);
  }

  int64_t rows() const { return rows_; }

  // Move the rows built so far into `out` as one batch.
  void FinishBatch(std::vector<std::shared_ptr<arrow::RecordBatch>>* out) {
    if (plan_ == nullptr || rows_ == 0) return;
    std::vector<std::shared_ptr<arrow::Array>> columns(plan_->schema->num_fields());
    for (auto& [column, builder] : fixed_) columns[column] = builder.Finish();
    if (appender_ != nullptr) {
      ArrowArray array = appender_->Finalize();
      appender_.reset();
      auto imported = arrow::ImportRecordBatch(&array, plan_->other_schema);
      Check(imported.status());
      for (size_t k = 0; k < plan_->other_columns.size(); ++k) {
        columns[plan_->other_columns[k]] = (*imported)->column(static_cast<int>(k));
      }
    }
    out->push_back(arrow::RecordBatch::Make(plan_->schema, rows_, std::move(columns)));
    rows_ = 0;
  }

  std::vector<std::shared_ptr<arrow::RecordBatch>> finished;

 private:
  std::shared_ptr<const CollectorPlan> plan_;
  std::map<int, FixedColumn> fixed_;
  duckdb::DataChunk other_chunk_;
  duckdb::unique_ptr<duckdb::ArrowAppender> appender_;
  int64_t rows_ = 0;
};

class CollectedTableResult : public duckdb::QueryResult {
 public:
  CollectedTableResult(duckdb::StatementType statement_type,
                       duckdb::StatementProperties properties,
                       duckdb::vector<duckdb::LogicalType> types,
                       duckdb::vector<std::string> names, duckdb::ClientProperties client,
                       std::shared_ptr<arrow::Table> table)
      : duckdb::QueryResult(duckdb::QueryResultType::ARROW_RESULT, statement_type,
                            std::move(properties), std::move(types), std::move(names),
                            std::move(client)),
        table(std::move(table)) {}

  duckdb::unique_ptr<duckdb::DataChunk> FetchRaw() override {
    throw duckdb::NotImplementedException("rill: a collected Arrow table is read as a table");
  }
  std::string ToString() override { return "rill collected Arrow table"; }

  std::shared_ptr<arrow::Table> table;
};

class ArrowTableCollector : public duckdb::PhysicalResultCollector {
 public:
  ArrowTableCollector(duckdb::PhysicalPlan& physical_plan, duckdb::PreparedStatementData& data,
                      bool parallel, std::shared_ptr<const SharedInputBuffers> shared,
                      int64_t batch_rows)
      : duckdb::PhysicalResultCollector(physical_plan, data),
        parallel_(parallel),
        shared_(std::move(shared)),
        batch_rows_(batch_rows) {}

  duckdb::unique_ptr<duckdb::GlobalSinkState> GetGlobalSinkState(
      duckdb::ClientContext& context) const override {
    auto state = duckdb::make_uniq<CollectorGlobalState>();
    state->plan = MakePlan(context);
    return state;
  }

  duckdb::unique_ptr<duckdb::LocalSinkState> GetLocalSinkState(
      duckdb::ExecutionContext& /*context*/) const override {
    return duckdb::make_uniq<CollectorLocalState>();
  }

  duckdb::SinkResultType Sink(duckdb::ExecutionContext& /*context*/, duckdb::DataChunk& chunk,
                              duckdb::OperatorSinkInput& input) const override {
    auto& local = input.local_state.Cast<CollectorLocalState>();
    local.Start(input.global_state.Cast<CollectorGlobalState>().plan);
    local.Append(chunk, shared_.get());
    if (local.rows() >= batch_rows_) local.FinishBatch(&local.finished);
    return duckdb::SinkResultType::NEED_MORE_INPUT;
  }

  duckdb::SinkCombineResultType Combine(duckdb::ExecutionContext& /*context*/,
                                        duckdb::OperatorSinkCombineInput& input) const override {
    auto& global = input.global_state.Cast<CollectorGlobalState>();
    auto& local = input.local_state.Cast<CollectorLocalState>();
    local.FinishBatch(&local.finished);
    std::lock_guard<std::mutex> lock(global.mu);
    for (auto& b : local.finished) global.batches.push_back(std::move(b));
    local.finished.clear();
    return duckdb::SinkCombineResultType::FINISHED;
  }

  duckdb::unique_ptr<duckdb::QueryResult> GetResult(duckdb::GlobalSinkState& state) override {
    auto& global = state.Cast<CollectorGlobalState>();
    auto table = arrow::Table::FromRecordBatches(global.plan->schema, std::move(global.batches));
    Check(table.status());
    return duckdb::make_uniq<CollectedTableResult>(statement_type, properties, types, names,
                                                   global.plan->properties,
                                                   std::move(table).ValueUnsafe());
  }

  bool ParallelSink() const override { return parallel_; }
  bool SinkOrderDependent() const override { return true; }

 private:
  std::shared_ptr<const CollectorPlan> MakePlan(duckdb::ClientContext& context) const {
    auto plan = std::make_shared<CollectorPlan>();
    plan->properties = context.GetClientProperties();
    ArrowSchema c_schema;
    duckdb::ArrowConverter::ToArrowSchema(&c_schema, types, names, plan->properties);
    auto schema = arrow::ImportSchema(&c_schema);
    Check(schema.status());
    plan->schema = *schema;
    const auto extensions = duckdb::ArrowTypeExtensionData::GetExtensionTypes(context, types);
    arrow::FieldVector other_fields;
    for (duckdb::idx_t i = 0; i < types.size(); ++i) {
      const auto& type = plan->schema->field(static_cast<int>(i))->type();
      const int width = static_cast<int>(duckdb::GetTypeIdSize(types[i].InternalType()));
      const bool fixed = IsSharedLayout(types[i]) && extensions.count(i) == 0 &&
                         arrow::is_fixed_width(type->id()) && type->id() != arrow::Type::BOOL &&
                         type->byte_width() == width;
      plan->fixed_width.push_back(fixed ? width : 0);
      if (fixed) continue;
      plan->other_types.push_back(types[i]);
      plan->other_columns.push_back(static_cast<int>(i));
      other_fields.push_back(plan->schema->field(static_cast<int>(i)));
    }
    plan->other_schema = arrow::schema(std::move(other_fields));
    plan->other_extensions =
        duckdb::ArrowTypeExtensionData::GetExtensionTypes(context, plan->other_types);
    return plan;
  }

  bool parallel_;
  std::shared_ptr<const SharedInputBuffers> shared_;
  int64_t batch_rows_;
};

}  // namespace

duckdb::PhysicalOperator& MakeArrowTableCollector(
    duckdb::ClientContext& context, duckdb::PreparedStatementData& data,
    std::shared_ptr<const SharedInputBuffers> shared, int64_t batch_rows) {
  auto& physical_plan = *data.physical_plan;
  // As DuckDB's collectors: in parallel unless the plan keeps the row order
  // (then one thread sinks the chunks in order).
  const bool parallel =
      !duckdb::PhysicalPlanGenerator::PreserveInsertionOrder(context, physical_plan.Root());
  return physical_plan.Make<ArrowTableCollector>(data, parallel, std::move(shared),
                                                 batch_rows);
}

Result<std::shared_ptr<arrow::Table>> TakeCollectedTable(duckdb::QueryResult& result) {
  if (result.HasError()) return Status::Invalid(result.GetError());
  auto* collected = dynamic_cast<CollectedTableResult*>(&result);
  if (collected == nullptr || collected->table == nullptr) {
    return Status::Invalid("not a result of the Arrow table collector");
  }
  return std::move(collected->table);
}

}  // namespace rill::sql_internal
