// LiveTable::PrepareKeys and ReplaceState's use of its result: a table's key
// index built on another thread than the write that adopts it (issue 29: a
// checkpoint restore builds it while the rest of the file is read).
#include <limits>

#include <arrow/array.h>
#include <arrow/record_batch.h>
#include <arrow/table.h>
#include <arrow/type.h>

#include "rill/table/live_table_internal.h"

namespace rill {

using table_internal::Location;

Result<std::shared_ptr<PreparedKeys>> LiveTable::PrepareKeys(
    const arrow::Schema& user_schema, const std::vector<std::string>& primary_key,
    const arrow::Table& keys) {
  if (primary_key.empty()) return nullptr;
  auto prepared = std::make_shared<PreparedKeys>();
  std::vector<int> in_keys;
  for (const auto& name : primary_key) {
    const int at = user_schema.GetFieldIndex(name);
    const int in = keys.schema()->GetFieldIndex(name);
    if (at < 0 || in < 0 || !keys.schema()->field(in)->type()->Equals(
                                 *user_schema.field(at)->type())) {
      return nullptr;
    }
    prepared->key_columns.push_back(at);
    prepared->key_fields.push_back(user_schema.field(at));
    in_keys.push_back(in);
  }
  RILL_ASSIGN_OR_RAISE(prepared->index, KeyIndex::Make(user_schema, prepared->key_columns));
  arrow::TableBatchReader reader(keys);
  RILL_ASSIGN_OR_RAISE(auto batches, reader.ToRecordBatches());
  uint32_t slot = 0;
  for (const auto& b : batches) {
    const int64_t n = b->num_rows();
    prepared->batch_rows.push_back(n);
    if (n == 0) continue;  // WriteOneLocked allocates no slot for it either
    if (n > std::numeric_limits<uint32_t>::max()) return nullptr;
    // Bind reads only the key columns: the others are placeholders.
    std::vector<std::shared_ptr<arrow::Array>> columns(
        static_cast<size_t>(user_schema.num_fields()), std::make_shared<arrow::NullArray>(n));
    for (size_t k = 0; k < in_keys.size(); ++k) {
      columns[static_cast<size_t>(prepared->key_columns[k])] = b->column(in_keys[k]);
    }
    auto view = arrow::RecordBatch::Make(
        std::make_shared<arrow::Schema>(user_schema.fields()), n, std::move(columns));
    RILL_RETURN_NOT_OK(prepared->index->Bind(*view));
    std::vector<uint64_t> prev(static_cast<size_t>(n));
    prepared->index->UpsertAll(n, Location(slot, 0), prev.data());
    prepared->prev.push_back(std::move(prev));
    ++slot;
  }
  return prepared;
}

bool LiveTable::AdoptPreparedLocked(
    PreparedKeys* prepared, const std::vector<std::shared_ptr<arrow::RecordBatch>>& batches) {
  // The prepared locations name slots 0, 1, ...: what a table that never held a
  // chunk allocates for these batches.
  if (prepared == nullptr || prepared->index == nullptr || !index_ || !slots_.empty() ||
      index_->size() != 0 || batches.size() != prepared->batch_rows.size()) {
    return false;
  }
  for (size_t i = 0; i < batches.size(); ++i) {
    if (batches[i]->num_rows() != prepared->batch_rows[i]) return false;
  }
  for (size_t k = 0; k < prepared->key_columns.size(); ++k) {
    const int c = prepared->key_columns[k];
    if (c >= user_schema_->num_fields() || user_schema_->field(c)->name() !=
                                               prepared->key_fields[k]->name() ||
        !user_schema_->field(c)->type()->Equals(*prepared->key_fields[k]->type()) ||
        primary_key_.size() != prepared->key_columns.size() ||
        primary_key_[k] != prepared->key_fields[k]->name()) {
      return false;
    }
  }
  index_ = std::move(prepared->index);
  return true;
}

}  // namespace rill
