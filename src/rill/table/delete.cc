// Deletes and truncations (issue 25): LiveTable::Delete, Truncate, and the
// batches whose operation column (row_ops.h) mixes upserts, deletes and
// truncations, applied run by run under one write lock as one version.
#include <algorithm>
#include <string>

#include <arrow/array.h>
#include <arrow/array/util.h>
#include <arrow/builder.h>
#include <arrow/compute/api.h>
#include <arrow/record_batch.h>
#include <arrow/table.h>
#include <arrow/type.h>
#include <arrow/util/bit_util.h>

#include "rill/common/arrow_init.h"
#include "rill/table/change_log_internal.h"
#include "rill/table/key_index_internal.h"
#include "rill/table/live_table.h"
#include "rill/table/live_table_internal.h"
#include "rill/common/row_ops.h"

namespace rill {

using table_internal::Location;
using table_internal::SlotOf;

namespace {

/// Deletes probe the index by upserting each key at a location in this slot
/// (no chunk ever has it: slots are allocated from 0, and KeyIndex::kNone is
/// slot 0xffffffff), then erase those probe entries again.
constexpr uint32_t kProbeSlot = 0xfffffffeu;

std::string JoinNames(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

namespace table_internal {

Result<std::shared_ptr<arrow::RecordBatch>> PrepareOpBatch(
    const LiveTable& table, std::shared_ptr<arrow::RecordBatch> batch) {
  const int last = batch->num_columns() - 1;
  const int8_t* ops = batch->column_data(last)->GetValues<int8_t>(1);
  const int64_t n = batch->num_rows();
  int64_t counts[4] = {0, 0, 0, 0};
  for (int64_t i = 0; i < n; ++i) ++counts[ops[i] & 3];
  const int64_t deletes = counts[static_cast<int>(RowOp::kDelete)];
  const int64_t truncates = counts[static_cast<int>(RowOp::kTruncate)];
  const int64_t skips = counts[static_cast<int>(RowOp::kSkip)];
  if (table.keyed() && (deletes > 0 || truncates > 0 || skips > 0)) return batch;
  if (deletes > 0 || truncates > 0) {
    return Status::Invalid(
        "Table '", table.name(), "' is ",
        table.mode() == TableMode::kAppend ? "an append table" : "not keyed (no primary key)",
        ": the batch asks to ", deletes > 0 ? "delete" : "truncate", " (", deletes,
        " delete and ", truncates,
        " truncate rows), but only keyed tables (a primary key, snapshot mode) delete rows");
  }
  RILL_ASSIGN_OR_RAISE(auto rows, batch->RemoveColumn(last));
  if (skips == 0) return rows;
  arrow::BooleanBuilder keep(TableMemoryPool());
  RILL_RETURN_NOT_OK(keep.Reserve(n));
  for (int64_t i = 0; i < n; ++i) keep.UnsafeAppend(ops[i] != static_cast<int8_t>(RowOp::kSkip));
  std::shared_ptr<arrow::Array> mask;
  RILL_RETURN_NOT_OK(keep.Finish(&mask));
  arrow::compute::ExecContext ctx(TableMemoryPool());
  RILL_ASSIGN_OR_RAISE(auto filtered, arrow::compute::Filter(rows, mask,
                                                             arrow::compute::FilterOptions(),
                                                             &ctx));
  return filtered.record_batch();
}

}  // namespace table_internal

Status LiveTable::DeleteKeysLocked(const arrow::RecordBatch& keys, WriteStats* stats) {
  const int64_t n = keys.num_rows();
  stats->rows_in += n;
  if (n == 0) return Status::OK();
  RILL_RETURN_NOT_OK(index_->Bind(keys));
  prev_scratch_.resize(n);
  uint64_t* prev = prev_scratch_.data();
  index_->UpsertAll(n, Location(kProbeSlot, 0), prev);
  const bool logging = pending_ && !pending_->reset;
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t p = prev[i];
    if (p == KeyIndex::kNone) {
      ++stats->delete_misses;
      continue;
    }
    if (SlotOf(p) == kProbeSlot) continue;  // the same key earlier in this batch
    if (logging) LogRemovedLocked(p, table_internal::Removal::kDelete);
    KillRowLocked(p);
    ++stats->deleted;
  }
  // Erase maps only a key still at its probe location: the last row of a key
  // repeated in the batch erases it.
  for (int64_t i = 0; i < n; ++i) index_->Erase(i, Location(kProbeSlot, i));
  return Status::OK();
}

void LiveTable::TruncateLocked(WriteStats* stats) {
  const bool logging = pending_ && !pending_->reset;
  for (uint32_t slot : order_) {
    Chunk& c = slots_[slot];
    if (c.live_rows == 0) continue;
    if (logging) LogTruncatedChunkLocked(slot);
    stats->deleted += c.live_rows;
    live_rows_ -= c.live_rows;
    c.live_rows = 0;  // dropped by the compaction that ends the write
  }
  if (index_) index_->Clear();
}

Status LiveTable::WriteOpsLocked(const std::shared_ptr<arrow::RecordBatch>& batch, double now,
                                 WriteStats* stats) {
  const int last = batch->num_columns() - 1;
  const int8_t* ops = batch->column_data(last)->GetValues<int8_t>(1);
  RILL_ASSIGN_OR_RAISE(auto rows, batch->RemoveColumn(last));
  const int64_t n = rows->num_rows();
  int64_t i = 0;
  while (i < n) {
    const int8_t op = ops[i];
    int64_t j = i + 1;
    while (j < n && ops[j] == op) ++j;
    switch (static_cast<RowOp>(op)) {
      case RowOp::kUpsert:
        RILL_RETURN_NOT_OK(WriteOneLocked(i == 0 && j == n ? rows : rows->Slice(i, j - i), now,
                                          stats));
        break;
      case RowOp::kDelete:
        RILL_RETURN_NOT_OK(DeleteKeysLocked(*rows->Slice(i, j - i), stats));
        break;
      case RowOp::kTruncate:
        TruncateLocked(stats);
        stats->rows_in += j - i;
        break;
      case RowOp::kSkip:
        stats->rows_in += j - i;
        break;
    }
    i = j;
  }
  return Status::OK();
}

Result<WriteStats> LiveTable::Delete(const std::shared_ptr<arrow::RecordBatch>& keys,
                                     std::optional<double> now) {
  if (!keys) return Status::Invalid("Table '", name_, "': null batch of keys");
  if (!keyed()) {
    return Status::Invalid("Table '", name_, "' is ",
                           mode_ == TableMode::kAppend ? "an append table" : "not keyed",
                           ": rows cannot be deleted by key (only keyed tables, with a "
                           "primary key in snapshot mode, can delete)");
  }
  // The key columns, cast to the table's types, at their positions in the
  // user schema (the index reads only those; the others are typed nulls).
  const int64_t n = keys->num_rows();
  std::vector<std::shared_ptr<arrow::Array>> columns;
  arrow::FieldVector fields;
  for (const auto& field : user_schema_->fields()) {
    const bool is_key = std::find(primary_key_.begin(), primary_key_.end(), field->name()) !=
                        primary_key_.end();
    if (!is_key) {
      fields.push_back(arrow::field(field->name(), arrow::null()));
      columns.push_back(std::make_shared<arrow::NullArray>(n));
      continue;
    }
    auto column = keys->GetColumnByName(field->name());
    if (!column) {
      return Status::Invalid("Table '", name_, "': the keys to delete have no column '",
                             field->name(), "' (the primary key is ",
                             JoinNames(primary_key_), ")");
    }
    if (!column->type()->Equals(*field->type())) {
      arrow::compute::ExecContext ctx(TableMemoryPool());
      auto cast = arrow::compute::Cast(*column, field->type(),
                                       arrow::compute::CastOptions::Safe(), &ctx);
      if (!cast.ok()) {
        return Status::Invalid("Table '", name_, "': key column '", field->name(),
                               "' has type ", column->type()->ToString(),
                               " but the table expects ", field->type()->ToString(), ": ",
                               cast.status().message());
      }
      column = *cast;
    }
    fields.push_back(field);
    columns.push_back(std::move(column));
  }
  auto probe = arrow::RecordBatch::Make(arrow::schema(std::move(fields)), n, std::move(columns));
  return RemoveAndPublish(now, [&](WriteStats* stats) { return DeleteKeysLocked(*probe, stats); });
}

Result<WriteStats> LiveTable::Delete(const std::shared_ptr<arrow::Table>& keys,
                                     std::optional<double> now) {
  if (!keys) return Status::Invalid("Table '", name_, "': null table of keys");
  RILL_ASSIGN_OR_RAISE(auto combined, keys->CombineChunksToBatch(TableMemoryPool()));
  return Delete(combined, now);
}

Result<WriteStats> LiveTable::DeleteWhereIn(const std::string& column,
                                            const std::vector<int64_t>& values,
                                            std::optional<double> now) {
  if (keyed()) {
    return Status::Invalid("Table '", name_, "' is keyed: delete its rows by key");
  }
  const int c = user_schema_->GetFieldIndex(column);
  if (c < 0) return Status::KeyError("Table '", name_, "' has no column '", column, "'");
  if (!arrow::is_integer(user_schema_->field(c)->type()->id())) {
    return Status::Invalid("Table '", name_, "': column '", column, "' is ",
                           user_schema_->field(c)->type()->ToString(), ", not an integer");
  }
  std::vector<int64_t> sorted = values;
  std::sort(sorted.begin(), sorted.end());
  return RemoveAndPublish(now, [&](WriteStats* stats) -> Status {
    const bool logging = pending_ && !pending_->reset;
    for (uint32_t slot : order_) {
      if (slots_[slot].live_rows == 0) continue;
      // The column as int64 (cast once per chunk: it is a small integer column).
      RILL_ASSIGN_OR_RAISE(
          auto cast, arrow::compute::Cast(slots_[slot].batch->column(c), arrow::int64(),
                                          arrow::compute::CastOptions::Unsafe()));
      const auto array = cast.make_array();
      const auto& ints = static_cast<const arrow::Int64Array&>(*array);
      for (int64_t r = 0; r < ints.length(); ++r) {
        const Chunk& chunk = slots_[slot];
        if (chunk.alive && !arrow::bit_util::GetBit(chunk.alive->data(), r)) continue;
        if (ints.IsNull(r) || !std::binary_search(sorted.begin(), sorted.end(), ints.Value(r))) {
          continue;
        }
        const uint64_t location = Location(slot, r);
        if (logging) LogRemovedLocked(location, table_internal::Removal::kDelete);
        KillRowLocked(location);
        ++stats->deleted;
      }
    }
    return Status::OK();
  });
}

Result<WriteStats> LiveTable::Truncate(std::optional<double> now) {
  if (!keyed()) {
    return Status::Invalid("Table '", name_, "' is ",
                           mode_ == TableMode::kAppend ? "an append table" : "not keyed",
                           ": it cannot be truncated by a change (only keyed tables can)");
  }
  return RemoveAndPublish(now, [&](WriteStats* stats) {
    TruncateLocked(stats);
    return Status::OK();
  });
}

Result<WriteStats> LiveTable::RemoveAndPublish(
    std::optional<double> now, const std::function<Status(WriteStats*)>& remove) {
  WriteStats stats;
  std::shared_ptr<const TableVersion> published;
  {
    std::lock_guard<std::mutex> lock(write_mu_);
    BeginLogLocked();
    const bool was_published = index_published_;
    index_published_ = false;  // until PublishLocked
    const double t = now.value_or(clock_());
    RILL_RETURN_NOT_OK(remove(&stats));
    if (stats.deleted == 0) {  // nothing removed: no new version
      // The misses' probes left every mapping as it was.
      index_published_ = was_published;
      return stats;
    }
    RILL_RETURN_NOT_OK(CompactLocked(/*full=*/false));
    PublishLocked(t);
    published = current_.Load();
  }
  Notify(published);
  return stats;
}

}  // namespace rill
