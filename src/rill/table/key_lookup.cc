// LiveTable::LookupKeys: rows by primary key through the key index, for point
// queries (sql/point_lookup.cc) that would otherwise scan the whole version.
//
// The index and the slots describe the published version exactly while no
// write is half done (index_published_, under write_mu_), so a location the
// index gives is a row of that version, and a key it does not hold has no
// live row there.
#include <algorithm>
#include <utility>

#include <arrow/array.h>
#include <arrow/array/util.h>
#include <arrow/record_batch.h>
#include <arrow/table.h>
#include <arrow/util/bit_util.h>

#include "rill/table/key_index_internal.h"
#include "rill/table/live_table.h"
#include "rill/table/live_table_internal.h"

namespace rill {

using table_internal::RowOf;
using table_internal::SlotOf;

Result<std::optional<KeyLookup>> LiveTable::LookupKeys(const arrow::RecordBatch& keys) {
  if (!keyed()) return std::nullopt;
  // The index's layout: key columns at their places in the user schema, the
  // other columns null (the index reads only the key columns).
  const int64_t n = keys.num_rows();
  std::vector<std::shared_ptr<arrow::Array>> columns;
  columns.reserve(static_cast<size_t>(user_schema_->num_fields()));
  for (const auto& field : user_schema_->fields()) {
    const bool is_key =
        std::find(primary_key_.begin(), primary_key_.end(), field->name()) != primary_key_.end();
    if (!is_key) {
      RILL_ASSIGN_OR_RAISE(auto nulls, arrow::MakeArrayOfNull(field->type(), n));
      columns.push_back(std::move(nulls));
      continue;
    }
    auto column = keys.GetColumnByName(field->name());
    if (column == nullptr) {
      return Status::Invalid("Table '", name_, "': the keys to look up lack key column '",
                             field->name(), "'");
    }
    if (!column->type()->Equals(*field->type())) {
      return Status::Invalid("Table '", name_, "': key column '", field->name(), "' has type ",
                             field->type()->ToString(), ", the keys to look up ",
                             column->type()->ToString());
    }
    columns.push_back(std::move(column));
  }
  auto probe = arrow::RecordBatch::Make(user_schema_, n, std::move(columns));

  if (stale_.load(std::memory_order_acquire)) RunRefresher();
  std::lock_guard<std::mutex> lock(write_mu_);
  if (!index_published_) return std::nullopt;
  KeyLookup found;
  found.version = current_.Load();
  std::vector<uint64_t> locations(static_cast<size_t>(n));
  RILL_RETURN_NOT_OK(index_->Bind(*probe));
  index_->FindAll(n, locations.data());
  // (position of the chunk in the version, row): the version lists the slots
  // of order_ that hold live rows, in that order.
  std::vector<std::pair<size_t, int64_t>> rows;
  for (uint64_t location : locations) {
    if (location == KeyIndex::kNone) continue;
    const uint32_t slot = SlotOf(location);
    const int64_t row = RowOf(location);
    if (slot >= slots_.size()) continue;
    const Chunk& chunk = slots_[slot];
    if (!chunk.in_use || chunk.live_rows == 0 || row >= chunk.batch->num_rows() ||
        (chunk.alive && !arrow::bit_util::GetBit(chunk.alive->data(), row))) {
      continue;
    }
    size_t position = 0;
    for (uint32_t s : order_) {
      if (s == slot) break;
      if (slots_[s].live_rows > 0) ++position;
    }
    rows.emplace_back(position, row);
  }
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  const auto& chunks = found.version->chunks();
  std::vector<std::shared_ptr<arrow::RecordBatch>> slices;
  for (const auto& [position, row] : rows) {
    if (position >= chunks.size()) {
      return Status::UnknownError("Table '", name_, "': the key index and the version disagree");
    }
    slices.push_back(chunks[position].batch->Slice(row, 1));
  }
  RILL_ASSIGN_OR_RAISE(found.rows, arrow::Table::FromRecordBatches(schema_, std::move(slices)));
  return found;
}

}  // namespace rill
