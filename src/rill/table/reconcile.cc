#include "rill/table/live_table.h"

#include <arrow/array.h>
#include <arrow/array/util.h>
#include <arrow/compute/api.h>
#include <arrow/record_batch.h>
#include <arrow/type.h>

#include "rill/common/arrow_init.h"
#include "rill/common/row_ops.h"

namespace rill {

Result<std::shared_ptr<arrow::RecordBatch>> LiveTable::Reconcile(
    const std::shared_ptr<arrow::RecordBatch>& batch) const {
  const int op = batch->schema()->GetFieldIndex(kWriteOpColumn);
  if (op < 0) return ReconcileImpl(batch, /*null_check=*/true);
  // The operation column: normalized to int8 codes and kept last; only the
  // rows that are written (upserts) must satisfy the columns' nullability.
  auto ops = NormalizeRowOps(batch->column(op));
  if (!ops.ok()) return Status::Invalid("Table '", name_, "': ", ops.status().message());
  RILL_ASSIGN_OR_RAISE(auto rest, batch->RemoveColumn(op));
  RILL_ASSIGN_OR_RAISE(auto user, ReconcileImpl(rest, /*null_check=*/false));
  const int8_t* codes = (*ops)->data()->GetValues<int8_t>(1);
  const int64_t n = user->num_rows();
  for (int i = 0; i < user_schema_->num_fields(); ++i) {
    const auto& field = *user_schema_->field(i);
    const auto& column = *user->column(i);
    if (field.nullable() || column.null_count() == 0) continue;
    int64_t nulls = 0;
    for (int64_t r = 0; r < n; ++r) {
      nulls += codes[r] == static_cast<int8_t>(RowOp::kUpsert) && column.IsNull(r);
    }
    if (nulls > 0) {
      return Status::Invalid("Table '", name_, "': column '", field.name(),
                             "' is not nullable but the batch has ", nulls,
                             " null value(s) in rows it writes");
    }
  }
  return user->AddColumn(user->num_columns(), arrow::field(kWriteOpColumn, arrow::int8(), false),
                         *ops);
}

Result<std::shared_ptr<arrow::RecordBatch>> LiveTable::ReconcileImpl(
    const std::shared_ptr<arrow::RecordBatch>& batch, bool null_check) const {
  const auto& in = *batch->schema();
  const int64_t n = batch->num_rows();
  // On column data, not boxed arrays: boxing an Array per column allocates, a
  // fixed cost per push (issue 16).
  auto check_nulls = [&](const arrow::Field& field, const arrow::ArrayData& col) -> Status {
    if (null_check && !field.nullable() && col.GetNullCount() > 0) {
      return Status::Invalid("Table '", name_, "': column '", field.name(),
                             "' is not nullable but the batch has ", col.GetNullCount(),
                             " null value(s)");
    }
    return Status::OK();
  };
  if (SameColumnNamesAndTypes(in, *user_schema_)) {
    for (int i = 0; i < user_schema_->num_fields(); ++i) {
      RILL_RETURN_NOT_OK(check_nulls(*user_schema_->field(i), *batch->column_data(i)));
    }
    // Same names and types: relabel with the table's schema (its nullability
    // and metadata). No Schema::Equals: its fingerprints of a schema imported
    // per push cost more than the relabel (issue 16).
    if (batch->schema() == user_schema_) return batch;
    return arrow::RecordBatch::Make(user_schema_, n, batch->column_data());
  }
  for (const auto& f : in.fields()) {
    if (!IsSystemColumn(f->name()) && user_schema_->GetFieldIndex(f->name()) < 0) {
      std::string names;
      for (const auto& uf : user_schema_->fields()) {
        names += (names.empty() ? "" : ", ") + uf->name();
      }
      return Status::Invalid("Table '", name_, "' has no column '", f->name(),
                             "' (its columns: ", names, ")");
    }
  }
  std::vector<std::shared_ptr<arrow::Array>> columns;
  columns.reserve(user_schema_->num_fields());
  for (const auto& field : user_schema_->fields()) {
    auto matches = in.GetAllFieldIndices(field->name());
    if (matches.size() > 1) {
      return Status::Invalid("Table '", name_, "': the batch has column '", field->name(),
                             "' ", matches.size(), " times");
    }
    std::shared_ptr<arrow::Array> col;
    if (matches.empty()) {
      if (null_check && !field->nullable()) {
        return Status::Invalid("Table '", name_, "': column '", field->name(), "' (",
                               field->type()->ToString(),
                               ") is missing from the batch and is not nullable");
      }
      RILL_ASSIGN_OR_RAISE(col, arrow::MakeArrayOfNull(field->type(), n, TableMemoryPool()));
    } else {
      col = batch->column(matches[0]);
      if (!col->type()->Equals(*field->type())) {
        arrow::compute::ExecContext ctx(TableMemoryPool());
        auto cast = arrow::compute::Cast(*col, field->type(), arrow::compute::CastOptions::Safe(),
                                         &ctx);
        if (!cast.ok()) {
          return Status::Invalid("Table '", name_, "': column '", field->name(), "' has type ",
                                 col->type()->ToString(), " but the table expects ",
                                 field->type()->ToString(), ": ", cast.status().message());
        }
        col = *cast;
      }
      RILL_RETURN_NOT_OK(check_nulls(*field, *col->data()));
    }
    columns.push_back(std::move(col));
  }
  return arrow::RecordBatch::Make(user_schema_, n, std::move(columns));
}

}  // namespace rill
