#include "rill/table/change_feed.h"

#include <arrow/api.h>

namespace rill {

const char* ChangeOpName(ChangeOp op) {
  switch (op) {
    case ChangeOp::kInsert:
      return "insert";
    case ChangeOp::kUpdate:
      return "update";
    case ChangeOp::kDelete:
      return "delete";
    case ChangeOp::kUpdateBefore:
      return "update_before";
  }
  return "insert";
}

Result<ChangeOp> ParseChangeOp(std::string_view name) {
  for (ChangeOp op : {ChangeOp::kInsert, ChangeOp::kUpdate, ChangeOp::kDelete,
                      ChangeOp::kUpdateBefore}) {
    if (name == ChangeOpName(op)) return op;
  }
  return Status::Invalid("unknown change operation '", name,
                         "' (expected insert, update, delete or update_before)");
}

std::shared_ptr<arrow::Schema> ChangeSchema(const std::shared_ptr<arrow::Schema>& table_schema) {
  arrow::FieldVector fields;
  fields.reserve(table_schema->num_fields() + 2);
  for (const auto& field : table_schema->fields()) fields.push_back(field->WithNullable(true));
  fields.push_back(arrow::field(kChangeOpColumn, arrow::utf8(), /*nullable=*/false));
  fields.push_back(arrow::field(kChangeVersionColumn, arrow::uint64(), /*nullable=*/false));
  return arrow::schema(std::move(fields), table_schema->metadata());
}

}  // namespace rill
