#include "rill/common/row_ops.h"

#include <algorithm>
#include <cctype>
#include <string>

#include <arrow/array.h>
#include <arrow/builder.h>
#include <arrow/compute/api.h>
#include <arrow/record_batch.h>
#include <arrow/type.h>

#include "rill/common/arrow_init.h"

namespace rill {

namespace {

bool EqualsNoCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

}  // namespace

Result<RowOp> ParseRowOp(std::string_view name) {
  for (std::string_view n : {"insert", "upsert", "update", "c", "u", "r", "create", "read"}) {
    if (EqualsNoCase(name, n)) return RowOp::kUpsert;
  }
  for (std::string_view n : {"delete", "d"}) {
    if (EqualsNoCase(name, n)) return RowOp::kDelete;
  }
  for (std::string_view n : {"truncate", "t"}) {
    if (EqualsNoCase(name, n)) return RowOp::kTruncate;
  }
  if (EqualsNoCase(name, "update_before")) return RowOp::kSkip;
  return Status::Invalid("unknown operation '", std::string(name),
                         "' (expected insert, upsert, update, delete, truncate, or c, u, d, r, t)");
}

const char* RowOpName(RowOp op) {
  switch (op) {
    case RowOp::kUpsert:
      return "upsert";
    case RowOp::kDelete:
      return "delete";
    case RowOp::kTruncate:
      return "truncate";
    case RowOp::kSkip:
      return "skip";
  }
  return "?";
}

Result<std::shared_ptr<arrow::Array>> NormalizeRowOps(
    const std::shared_ptr<arrow::Array>& column) {
  const int64_t n = column->length();
  if (column->type_id() == arrow::Type::INT8) {
    const auto& codes = static_cast<const arrow::Int8Array&>(*column);
    for (int64_t i = 0; i < n; ++i) {
      if (codes.IsValid(i) && (codes.Value(i) < 0 || codes.Value(i) > 3)) {
        return Status::Invalid("column '", kWriteOpColumn, "', row ", i, ": operation code ",
                               static_cast<int>(codes.Value(i)), " is not one of 0-3");
      }
    }
    if (codes.null_count() == 0) return column;
  }
  if (column->type_id() == arrow::Type::NA) {  // every value null: every row an upsert
    arrow::Int8Builder zeros(TableMemoryPool());
    RILL_RETURN_NOT_OK(zeros.AppendEmptyValues(n));
    std::shared_ptr<arrow::Array> result;
    RILL_RETURN_NOT_OK(zeros.Finish(&result));
    return result;
  }
  std::shared_ptr<arrow::Array> strings = column;
  if (column->type_id() == arrow::Type::DICTIONARY) {
    RILL_ASSIGN_OR_RAISE(strings, arrow::compute::Cast(*column, arrow::utf8()));
  } else if (column->type_id() == arrow::Type::LARGE_STRING ||
             column->type_id() == arrow::Type::STRING_VIEW) {
    RILL_ASSIGN_OR_RAISE(strings, arrow::compute::Cast(*column, arrow::utf8()));
  }
  arrow::Int8Builder out(TableMemoryPool());
  RILL_RETURN_NOT_OK(out.Reserve(n));
  if (strings->type_id() == arrow::Type::INT8) {
    const auto& codes = static_cast<const arrow::Int8Array&>(*strings);
    for (int64_t i = 0; i < n; ++i) out.UnsafeAppend(codes.IsValid(i) ? codes.Value(i) : 0);
  } else if (strings->type_id() == arrow::Type::STRING) {
    const auto& names = static_cast<const arrow::StringArray&>(*strings);
    // Runs of one name are common (a whole push of deletes): parse once per run.
    std::string_view last;
    int8_t last_code = -1;
    for (int64_t i = 0; i < n; ++i) {
      if (names.IsNull(i)) {
        out.UnsafeAppend(static_cast<int8_t>(RowOp::kUpsert));
        continue;
      }
      std::string_view name = names.GetView(i);
      if (last_code < 0 || name != last) {
        auto op = ParseRowOp(name);
        if (!op.ok()) {
          return Status::Invalid("column '", kWriteOpColumn, "', row ", i, ": ",
                                 op.status().message());
        }
        last = name;
        last_code = static_cast<int8_t>(*op);
      }
      out.UnsafeAppend(last_code);
    }
  } else {
    return Status::Invalid("the operation column '", kWriteOpColumn, "' has type ",
                           column->type()->ToString(),
                           ": expected strings (insert, update, delete, ...) or int8 codes");
  }
  std::shared_ptr<arrow::Array> result;
  RILL_RETURN_NOT_OK(out.Finish(&result));
  return result;
}

Result<std::shared_ptr<arrow::RecordBatch>> RenameOpColumn(
    const std::shared_ptr<arrow::RecordBatch>& batch, const std::string& op_column) {
  if (op_column.empty() || op_column == kWriteOpColumn) return batch;
  const int i = batch->schema()->GetFieldIndex(op_column);
  if (i < 0) return batch;
  RILL_ASSIGN_OR_RAISE(auto schema,
                       batch->schema()->SetField(i, batch->schema()->field(i)->WithName(
                                                        kWriteOpColumn)));
  return arrow::RecordBatch::Make(std::move(schema), batch->num_rows(), batch->columns());
}

}  // namespace rill
