#include "rill/table/live_table.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include <arrow/array.h>
#include <arrow/array/concatenate.h>
#include <arrow/array/util.h>
#include <arrow/buffer.h>
#include <arrow/compute/api.h>
#include <arrow/record_batch.h>
#include <arrow/table.h>
#include <arrow/type.h>
#include <arrow/util/bit_util.h>

#include "rill/common/arrow_init.h"
#include "rill/common/logging.h"
#include "rill/table/change_log_internal.h"
#include "rill/table/gather_internal.h"
#include "rill/table/key_index_internal.h"
#include "rill/table/live_table_internal.h"
#include "rill/table/page_memory_internal.h"
#include "rill/common/row_ops.h"

namespace rill {

using table_internal::AllAliveBitmap;
using table_internal::PopulateForWrite;
using table_internal::Location;
using table_internal::RowOf;
using table_internal::SlotOf;

namespace {

/// Return a buffer of `n` doubles from the tables' pool, to be written in
/// full by the caller. A large one is faulted in by one madvise instead of a
/// page fault per 4 KiB page on first write, when its pages are fresh (a first
/// large load: its system columns were ~4.6 ms of page faults per 8 MiB, issue 29).
Result<std::shared_ptr<arrow::Buffer>> DoublesToWrite(int64_t n) {
  RILL_ASSIGN_OR_RAISE(auto buffer,
                       arrow::AllocateBuffer(n * sizeof(double), TableMemoryPool()));
  PopulateForWrite(buffer->mutable_data(), buffer->size());
  return std::shared_ptr<arrow::Buffer>(std::move(buffer));
}

Result<std::shared_ptr<arrow::Buffer>> FilledDoubles(int64_t n, double value) {
  RILL_ASSIGN_OR_RAISE(auto buffer, DoublesToWrite(n));
  auto* out = reinterpret_cast<double*>(buffer->mutable_data());
  std::fill(out, out + n, value);
  return buffer;
}

}  // namespace

namespace table_internal {

Result<std::shared_ptr<arrow::Buffer>> AllAliveBitmap(int64_t n) {
  RILL_ASSIGN_OR_RAISE(auto buffer, arrow::AllocateBitmap(n, TableMemoryPool()));
  std::memset(buffer->mutable_data(), 0xff, buffer->size());
  return std::shared_ptr<arrow::Buffer>(std::move(buffer));
}

}  // namespace table_internal

// ---------------------------------------------------------------------------
// LiveTable::InsertTimes

Status LiveTable::InsertTimes::Allocate() {
  RILL_ASSIGN_OR_RAISE(buffer, DoublesToWrite(n));
  values = reinterpret_cast<double*>(buffer->mutable_data());
  return Status::OK();
}

Result<std::shared_ptr<arrow::Buffer>> LiveTable::InsertTimes::Finish(double now) {
  if (values == nullptr) return nullptr;
  std::fill(values + filled, values + n, now);
  filled = n;
  return buffer;
}

// ---------------------------------------------------------------------------
// LiveTable

LiveTable::LiveTable(std::string name, std::shared_ptr<arrow::Schema> user_schema,
                     std::vector<std::string> primary_key, TableMode mode, TableOptions options)
    : name_(std::move(name)),
      user_schema_(std::move(user_schema)),
      schema_(WithSystemColumns(user_schema_)),
      primary_key_(std::move(primary_key)),
      mode_(mode),
      options_(std::move(options)),
      clock_(OrSystemClock(options_.clock)),
      insert_ts_column_(schema_->GetFieldIndex(kInsertTsColumn)) {}

LiveTable::~LiveTable() = default;

Result<std::shared_ptr<LiveTable>> LiveTable::Make(std::string name,
                                                   std::shared_ptr<arrow::Schema> schema,
                                                   TableOptions options) {
  RILL_RETURN_NOT_OK(InitializeArrowCompute());
  if (name.empty()) {
    return Status::Invalid("A table needs a name");
  }
  if (!schema) {
    return Status::Invalid("Table '", name, "' needs a schema");
  }
  auto user_schema = WithoutSystemColumns(schema);
  std::vector<std::string> key =
      options.primary_key.empty() ? ExtractPrimaryKey(*schema) : options.primary_key;
  TableMode mode;
  if (options.mode) {
    mode = *options.mode;
  } else {
    RILL_ASSIGN_OR_RAISE(mode, ExtractMode(*schema));
  }
  if (options.retention) {
    RILL_RETURN_NOT_OK(options.retention->Validate());
  }
  RILL_RETURN_NOT_OK(CheckAppendRetention(name, mode, options.retention));
  // Record key and mode in the schema metadata so readers see them.
  RILL_ASSIGN_OR_RAISE(user_schema, WithTableMetadata(user_schema, key, mode));
  options.primary_key = key;
  options.mode = mode;
  auto table = std::shared_ptr<LiveTable>(
      new LiveTable(std::move(name), user_schema, key, mode, std::move(options)));

  if (table->options_.retention) {
    const auto& column = table->options_.retention->time_column;
    table->time_column_ = table->schema_->GetFieldIndex(column);
    if (table->time_column_ < 0) {
      return Status::KeyError("Retention time column '", column, "' is not a column of table '",
                              table->name_, "'");
    }
    if (!IsTimeLike(*table->schema_->field(table->time_column_)->type())) {
      return Status::TypeError("Retention time column '", column, "' of table '", table->name_,
                               "' has type ",
                               table->schema_->field(table->time_column_)->type()->ToString(),
                               ": expected unix seconds, a timestamp or a date");
    }
  }
  if (mode == TableMode::kSnapshot && !key.empty()) {
    std::vector<int> columns;
    for (const auto& k : key) {
      int i = user_schema->GetFieldIndex(k);
      if (i < 0) {
        return Status::KeyError("Primary key column '", k, "' is not a column of table '",
                                table->name_, "'");
      }
      columns.push_back(i);
    }
    RILL_ASSIGN_OR_RAISE(table->index_, KeyIndex::Make(*user_schema, std::move(columns)));
  }
  table->current_.Store(std::make_shared<TableVersion>(
      table->schema_, std::vector<VersionChunk>{}, 0, table->clock_()));
  return table;
}

Result<std::shared_ptr<arrow::Buffer>> LiveTable::NowBufferLocked(int64_t n, double now) {
  // Every row written at `now` carries the same value: share one filled buffer
  // (sliced) between the chunks and columns of a write, and across writes at
  // the same `now` (all tables of one tick). Published buffers are never modified.
  const int64_t bytes = n * static_cast<int64_t>(sizeof(double));
  if (!now_buffer_ || now_value_ != now || now_buffer_->size() < bytes) {
    const int64_t capacity = std::max<int64_t>(n, now_buffer_ && now_value_ == now
                                                      ? now_buffer_->size() / 8 * 2
                                                      : int64_t{1024});
    RILL_ASSIGN_OR_RAISE(now_buffer_, FilledDoubles(capacity, now));
    now_value_ = now;
  }
  return arrow::SliceBuffer(now_buffer_, 0, bytes);
}

Result<std::shared_ptr<arrow::RecordBatch>> LiveTable::WithSystemColumnsLocked(
    const std::shared_ptr<arrow::RecordBatch>& user_batch, std::shared_ptr<arrow::Buffer> insert_ts,
    double now) {
  const int64_t n = user_batch->num_rows();
  auto columns = user_batch->columns();
  RILL_ASSIGN_OR_RAISE(auto update_ts, NowBufferLocked(n, now));
  if (!insert_ts) {
    insert_ts = update_ts;
  }
  columns.push_back(std::make_shared<arrow::DoubleArray>(n, std::move(insert_ts)));
  columns.push_back(std::make_shared<arrow::DoubleArray>(n, std::move(update_ts)));
  return arrow::RecordBatch::Make(schema_, n, std::move(columns));
}

uint32_t LiveTable::AllocateSlotLocked() {
  if (!free_slots_.empty()) {
    uint32_t slot = free_slots_.back();
    free_slots_.pop_back();
    slots_[slot] = Chunk{};
    slots_[slot].in_use = true;
    return slot;
  }
  slots_.emplace_back();
  slots_.back().in_use = true;
  return static_cast<uint32_t>(slots_.size() - 1);
}

namespace {

void ComputeTimeRange(const std::shared_ptr<arrow::Array>& column, bool* has, double* lo,
                      double* hi) {
  *has = false;
  double mn = std::numeric_limits<double>::infinity();
  double mx = -mn;
  if (column->type_id() == arrow::Type::DOUBLE) {
    // The common case (system columns, float unix seconds): a tight loop.
    const double* v = column->data()->GetValues<double>(1);
    const int64_t n = column->length();
    if (column->null_count() == 0) {
      // Four independent minima and maxima: one pair is a dependency chain
      // of a compare and a select per row (issue 16: this scan was a tenth of
      // appending a 200k-row batch). `v < m ? v : m` keeps std::min's result,
      // NaN skipped, and maps onto minpd / maxpd.
      double lo4[4] = {mn, mn, mn, mn};
      double hi4[4] = {mx, mx, mx, mx};
      int64_t i = 0;
      for (; i + 4 <= n; i += 4) {
        for (int k = 0; k < 4; ++k) {
          lo4[k] = v[i + k] < lo4[k] ? v[i + k] : lo4[k];
          hi4[k] = hi4[k] < v[i + k] ? v[i + k] : hi4[k];
        }
      }
      for (; i < n; ++i) {
        lo4[0] = v[i] < lo4[0] ? v[i] : lo4[0];
        hi4[0] = hi4[0] < v[i] ? v[i] : hi4[0];
      }
      for (int k = 0; k < 4; ++k) {
        mn = std::min(mn, lo4[k]);
        mx = std::max(mx, hi4[k]);
      }
      *has = n > 0;
    } else {
      for (int64_t i = 0; i < n; ++i) {
        if (column->IsNull(i)) continue;
        mn = std::min(mn, v[i]);
        mx = std::max(mx, v[i]);
        *has = true;
      }
    }
  } else {
    auto reader = MakeTimeReader(column);
    if (!reader.ok()) return;
    for (int64_t i = 0; i < column->length(); ++i) {
      bool valid;
      double t = (*reader)(i, &valid);
      if (!valid) continue;
      mn = std::min(mn, t);
      mx = std::max(mx, t);
      *has = true;
    }
  }
  *lo = mn;
  *hi = mx;
}

}  // namespace

void LiveTable::SetChunkLocked(uint32_t slot, std::shared_ptr<arrow::RecordBatch> batch,
                               std::shared_ptr<arrow::Buffer> alive, int64_t live_rows) {
  Chunk& c = slots_[slot];
  c.batch = std::move(batch);
  c.alive = std::move(alive);
  c.live_rows = live_rows;
  c.insert_ts = c.batch->column(insert_ts_column_)->data()->GetValues<double>(1);
  if (time_column_ >= 0) {
    ComputeTimeRange(c.batch->column(time_column_), &c.has_time_range, &c.time_min, &c.time_max);
  }
}

Status LiveTable::IndexChunkLocked(uint32_t slot, const uint64_t* moved_from) {
  if (!index_) return Status::OK();
  const arrow::RecordBatch& batch = *slots_[slot].batch;
  RILL_RETURN_NOT_OK(index_->Bind(batch));
  prev_scratch_.resize(batch.num_rows());
  if (moved_from != nullptr) {
    index_->RelocateAll(batch.num_rows(), moved_from, Location(slot, 0), prev_scratch_.data());
  } else {
    index_->UpsertAll(batch.num_rows(), Location(slot, 0), prev_scratch_.data());
  }
  return Status::OK();
}

void LiveTable::KillRowLocked(uint64_t location) {
  Chunk& c = slots_[SlotOf(location)];
  const int64_t row = RowOf(location);
  // Copy-on-write: a published version may share the bitmap.
  if (!c.alive) {
    c.alive = *AllAliveBitmap(c.batch->num_rows());
  } else if (c.alive.use_count() > 1) {
    c.alive = *c.alive->CopySlice(0, c.alive->size(), TableMemoryPool());
  }
  arrow::bit_util::ClearBit(c.alive->mutable_data(), row);
  --c.live_rows;
  --live_rows_;
}

void LiveTable::EraseKeyLocked(uint32_t slot, int64_t row) {
  // Requires index_ bound to slots_[slot].batch.
  index_->Erase(row, Location(slot, row));
}

Status LiveTable::WriteOneLocked(const std::shared_ptr<arrow::RecordBatch>& batch, double now,
                                 WriteStats* stats, const uint64_t* given_prev) {
  const int64_t n = batch->num_rows();
  stats->rows_in += n;
  if (n == 0) {
    return Status::OK();
  }
  if (n > std::numeric_limits<uint32_t>::max()) {
    return Status::CapacityError("Table '", name_, "': a batch may hold at most 2^32-1 rows");
  }
  const uint32_t slot = AllocateSlotLocked();
  std::shared_ptr<arrow::Buffer> alive;
  int64_t live = n;
  InsertTimes ins(n);
  ins.logging = pending_ && !pending_->reset;
  if (index_) {
    RILL_RETURN_NOT_OK(RetireReplacedLocked(batch, slot, now, stats, given_prev, &ins, &alive,
                                            &live));
  } else {
    stats->inserted += n;
  }
  RILL_ASSIGN_OR_RAISE(auto insert_ts, ins.Finish(now));
  RILL_ASSIGN_OR_RAISE(auto full, WithSystemColumnsLocked(batch, std::move(insert_ts), now));
  SetChunkLocked(slot, std::move(full), std::move(alive), live);
  if (ins.logging) LogWrittenLocked(slot, std::move(ins.updated), std::move(ins.origins));
  order_.push_back(slot);
  live_rows_ += live;
  return Status::OK();
}

LiveTable::LiveLayout LiveTable::LiveLayoutLocked() const {
  LiveLayout layout;
  for (uint32_t slot : order_) {
    const Chunk& c = slots_[slot];
    if (c.live_rows > 0) layout.emplace_back(slot, c.batch.get());
  }
  return layout;
}

Status LiveTable::RetireReplacedLocked(const std::shared_ptr<arrow::RecordBatch>& batch,
                                       uint32_t slot, double now, WriteStats* stats,
                                       const uint64_t* given_prev, InsertTimes* ins,
                                       std::shared_ptr<arrow::Buffer>* alive, int64_t* live) {
  const int64_t n = batch->num_rows();
  // Row i replaces the row at `prev`: it takes over that row's insert time,
  // and the old row dies (a row earlier in this batch, or one of an older chunk).
  auto retire = [&](int64_t i, uint64_t prev) -> Status {
    if (SlotOf(prev) == slot) {
      // The same key earlier in this batch: the later row wins.
      if (!*alive) {
        RILL_ASSIGN_OR_RAISE(*alive, AllAliveBitmap(n));
      }
      arrow::bit_util::ClearBit((*alive)->mutable_data(), RowOf(prev));
      if (ins->values != nullptr) RILL_RETURN_NOT_OK(ins->Set(i, ins->Get(RowOf(prev), now), now));
      --*live;
      if (ins->updated && arrow::bit_util::GetBit(ins->updated->data(), RowOf(prev))) {
        arrow::bit_util::SetBit(ins->updated->mutable_data(), i);  // inherits the update
        ins->origins[i] = ins->origins[RowOf(prev)];
      }
      return Status::OK();
    }
    RILL_RETURN_NOT_OK(ins->Set(i, slots_[SlotOf(prev)].insert_ts[RowOf(prev)], now));
    if (ins->logging && LogRemovedLocked(prev, table_internal::Removal::kUpdate)) {
      if (!ins->updated) {
        RILL_ASSIGN_OR_RAISE(ins->updated, arrow::AllocateEmptyBitmap(n, TableMemoryPool()));
        ins->origins.assign(static_cast<size_t>(n), {-1, -1});
      }
      arrow::bit_util::SetBit(ins->updated->mutable_data(), i);
      ins->origins[i] = pending_->last_removed;
    }
    KillRowLocked(prev);
    ++stats->updated;
    return Status::OK();
  };
  if (given_prev == nullptr && index_->size() == 0) {
    // Into an empty table (a first load): only keys repeated within the batch
    // replace anything, so the index reports just those rows.
    RILL_RETURN_NOT_OK(index_->Bind(*batch));
    replaced_scratch_.clear();
    index_->UpsertAllReplaced(n, Location(slot, 0), &replaced_scratch_);
    stats->inserted += n - static_cast<int64_t>(replaced_scratch_.size());
    for (const auto& [i, prev] : replaced_scratch_) RILL_RETURN_NOT_OK(retire(i, prev));
    return Status::OK();
  }
  // Pass 1: the index (prefetching inside), unless prepared. Pass 2: retire
  // replaced rows, prefetching the old rows' insert times a few rows ahead.
  const uint64_t* prev_of = given_prev;
  if (prev_of == nullptr) {
    RILL_RETURN_NOT_OK(index_->Bind(*batch));
    prev_scratch_.resize(n);
    index_->UpsertAll(n, Location(slot, 0), prev_scratch_.data());
    prev_of = prev_scratch_.data();
  }
  constexpr int64_t kAhead = 32;
  for (int64_t i = 0; i < n; ++i) {
    if (i + kAhead < n) {
      const uint64_t p = prev_of[i + kAhead];
      if (p != KeyIndex::kNone && SlotOf(p) != slot) {
        __builtin_prefetch(slots_[SlotOf(p)].insert_ts + RowOf(p));
      }
    }
    const uint64_t prev = prev_of[i];
    if (prev == KeyIndex::kNone) {
      ++stats->inserted;
      continue;
    }
    if (SlotOf(prev) != slot && !ins->logging) [[likely]] {
      // retire(i, prev) for the common case, inline.
      if (ins->values == nullptr) RILL_RETURN_NOT_OK(ins->Allocate());
      ins->SetAllocated(i, slots_[SlotOf(prev)].insert_ts[RowOf(prev)], now);
      KillRowLocked(prev);
      ++stats->updated;
      continue;
    }
    RILL_RETURN_NOT_OK(retire(i, prev));
  }
  return Status::OK();
}

void LiveTable::PublishLocked(double now) {
  std::vector<VersionChunk> chunks;
  chunks.reserve(order_.size());
  for (uint32_t slot : order_) {
    const Chunk& c = slots_[slot];
    if (c.live_rows == 0) continue;
    chunks.push_back(VersionChunk{c.batch, c.alive, c.live_rows});
  }
  current_.Store(std::make_shared<TableVersion>(schema_, std::move(chunks), ++version_, now));
  index_published_ = true;
  if (recording_) {
    // Hand this version's entry to the log (a few pointers; rows stay shared).
    std::unique_ptr<table_internal::ChangeEntry> entry;
    if (!pending_->empty() || pending_->reset) {  // pending_ is set while recording_
      pending_->Seal();
      entry = std::move(pending_);
      pending_ = std::make_unique<table_internal::ChangeEntry>();
    }
    log_->Publish(std::move(entry), current_.Load());
  }
}

void LiveTable::Notify(const std::shared_ptr<const TableVersion>& version) {
  std::vector<std::shared_ptr<Subscriber>> subs;
  ErrorHandler on_error;
  {
    std::lock_guard<std::mutex> lock(subscribers_mu_);
    if (subscribers_.empty()) return;
    for (const auto& [id, s] : subscribers_) subs.push_back(s);
    on_error = error_handler_;
  }
  for (const auto& s : subs) {
    std::string what;
    try {
      (*s)(version);
      continue;
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
      what = "unknown exception";
    }
    if (on_error) {
      on_error(name_, what);
    } else {
      Logger("table." + name_)->error("subscriber failed: {}", what);
    }
  }
}

Result<WriteStats> LiveTable::Write(
    const std::vector<std::shared_ptr<arrow::RecordBatch>>& batches, std::optional<double> now) {
  std::vector<std::shared_ptr<arrow::RecordBatch>> reconciled;
  reconciled.reserve(batches.size());
  bool any_ops = false;
  for (const auto& b : batches) {
    if (!b) return Status::Invalid("Table '", name_, "': null batch");
    RILL_ASSIGN_OR_RAISE(auto r, Reconcile(b));
    if (r->num_columns() > user_schema_->num_fields()) {
      // The operation column (row_ops.h): only keyed tables delete; elsewhere
      // a batch of upserts only is written as it is (skipped rows left out).
      RILL_ASSIGN_OR_RAISE(r, table_internal::PrepareOpBatch(*this, std::move(r)));
      any_ops = any_ops || r->num_columns() > user_schema_->num_fields();
    }
    reconciled.push_back(std::move(r));
  }
  if (!keyed() && options_.auto_compact_chunks > 0 && !any_ops) {
    // One chunk for a write's small batches (before the lock: a pure copy).
    RILL_ASSIGN_OR_RAISE(reconciled, table_internal::CoalesceSmallBatches(
                                         user_schema_, std::move(reconciled),
                                         options_.target_chunk_rows, TableMemoryPool()));
  }
  WriteStats stats;
  std::shared_ptr<const TableVersion> published;
  {
    std::lock_guard<std::mutex> lock(write_mu_);
    BeginLogLocked();
    const bool was_published = index_published_;
    const auto layout = index_published_ ? LiveLayoutLocked() : LiveLayout{};
    index_published_ = false;  // until PublishLocked
    const double t = now.value_or(clock_());
    for (const auto& b : reconciled) {
      if (b->num_columns() > user_schema_->num_fields()) {
        RILL_RETURN_NOT_OK(WriteOpsLocked(b, t, &stats));
      } else {
        RILL_RETURN_NOT_OK(WriteOneLocked(b, t, &stats));
      }
    }
    RILL_RETURN_NOT_OK(ApplyRetentionLocked(t, &stats.expired));
    RILL_RETURN_NOT_OK(CompactLocked(/*full=*/false));
    if (stats.inserted + stats.updated + stats.deleted + stats.expired == 0) {
      // Nothing changed (no rows, or deletes of absent keys), unless the
      // compaction moved rows.
      index_published_ = was_published && LiveLayoutLocked() == layout;
      return stats;
    }
    PublishLocked(t);
    published = current_.Load();
  }
  Notify(published);
  return stats;
}

Result<WriteStats> LiveTable::Write(const std::shared_ptr<arrow::RecordBatch>& batch,
                                    std::optional<double> now) {
  return Write(std::vector<std::shared_ptr<arrow::RecordBatch>>{batch}, now);
}

Result<WriteStats> LiveTable::Write(const std::shared_ptr<arrow::Table>& table,
                                    std::optional<double> now) {
  arrow::TableBatchReader reader(*table);
  RILL_ASSIGN_OR_RAISE(auto batches, reader.ToRecordBatches());
  return Write(batches, now);
}

Status LiveTable::WriteReplacementLocked(
    const std::vector<std::shared_ptr<arrow::RecordBatch>>& batches,
    const std::vector<std::shared_ptr<arrow::RecordBatch>>& reconciled, int in_ins, int in_upd,
    double t, PreparedKeys* prepared, WriteStats* stats) {
  const bool adopted = AdoptPreparedLocked(prepared, reconciled);
  size_t prepared_slot = 0;
  Status st;
  for (size_t bi = 0; bi < reconciled.size() && st.ok(); ++bi) {
    const uint64_t* given_prev = nullptr;
    if (adopted && reconciled[bi]->num_rows() > 0) {
      given_prev = prepared->prev[prepared_slot++].data();
    }
    st = WriteReplacementBatchLocked(*batches[bi], reconciled[bi], in_ins, in_upd, t,
                                     given_prev, stats);
  }
  if (!st.ok() && adopted) {
    // The prepared index also maps the keys of the batches not written:
    // index the chunks that were, as the unprepared path would have.
    index_->Clear();
    for (uint32_t slot : order_) st &= IndexChunkLocked(slot);
  }
  return st;
}

Status LiveTable::WriteReplacementBatchLocked(
    const arrow::RecordBatch& input, const std::shared_ptr<arrow::RecordBatch>& reconciled,
    int in_ins, int in_upd, double t, const uint64_t* given_prev, WriteStats* stats) {
  const size_t first_new = order_.size();
  RILL_RETURN_NOT_OK(WriteOneLocked(reconciled, t, stats, given_prev));
  if ((in_ins < 0 && in_upd < 0) || order_.size() == first_new) return Status::OK();
  // Patch system columns from the input.
  Chunk& c = slots_[order_.back()];
  auto columns = c.batch->columns();
  const int nuser = user_schema_->num_fields();
  for (auto [src, dst] : {std::pair{in_ins, nuser}, std::pair{in_upd, nuser + 1}}) {
    if (src < 0) continue;
    RILL_ASSIGN_OR_RAISE(auto col, arrow::compute::Cast(*input.column(src), arrow::float64()));
    if (col->null_count() > 0) {
      return Status::Invalid("Table '", name_, "': system column ",
                             schema_->field(dst)->name(), " may not hold nulls");
    }
    columns[dst] = col;
  }
  SetChunkLocked(order_.back(),
                 arrow::RecordBatch::Make(schema_, c.batch->num_rows(), std::move(columns)),
                 c.alive, c.live_rows);
  return Status::OK();
}

Result<WriteStats> LiveTable::ReplaceState(const std::shared_ptr<arrow::Table>& table,
                                           std::optional<double> now,
                                           std::shared_ptr<PreparedKeys> prepared) {
  // Keep given system columns: write the user columns, then patch the z columns.
  const int in_ins = table->schema()->GetFieldIndex(kInsertTsColumn);
  const int in_upd = table->schema()->GetFieldIndex(kUpdateTsColumn);
  arrow::TableBatchReader reader(*table);
  RILL_ASSIGN_OR_RAISE(auto batches, reader.ToRecordBatches());
  std::vector<std::shared_ptr<arrow::RecordBatch>> reconciled;
  for (const auto& b : batches) {
    RILL_ASSIGN_OR_RAISE(auto r, Reconcile(b));
    reconciled.push_back(std::move(r));
  }
  WriteStats stats;
  std::shared_ptr<const TableVersion> published;
  {
    std::lock_guard<std::mutex> lock(write_mu_);
    BeginLogLocked();
    index_published_ = false;  // until PublishLocked
    // Not recorded: the log restarts at the version this publishes (older
    // cursors read a snapshot).
    if (recording_) {
      pending_ = std::make_unique<table_internal::ChangeEntry>();
      pending_->reset = true;  // also when this fails half-way
    }
    const double t = now.value_or(clock_());
    // Rows of the old state: dropped after the new rows are in (keyed tables
    // then keep z_insert_ts for keys that stay).
    const std::vector<uint32_t> old_order = order_;
    RILL_RETURN_NOT_OK(
        WriteReplacementLocked(batches, reconciled, in_ins, in_upd, t, prepared.get(), &stats));
    for (uint32_t slot : old_order) {
      Chunk& c = slots_[slot];
      if (c.live_rows == 0) continue;
      if (index_) {
        RILL_RETURN_NOT_OK(index_->Bind(*c.batch));
        for (int64_t r = 0; r < c.batch->num_rows(); ++r) {
          if (!c.alive || arrow::bit_util::GetBit(c.alive->data(), r)) EraseKeyLocked(slot, r);
        }
      }
      live_rows_ -= c.live_rows;
      c.live_rows = 0;
    }
    RILL_RETURN_NOT_OK(ApplyRetentionLocked(t, &stats.expired));
    RILL_RETURN_NOT_OK(CompactLocked(/*full=*/false));
    PublishLocked(t);
    published = current_.Load();
  }
  Notify(published);
  return stats;
}

Result<int64_t> LiveTable::ApplyRetention(std::optional<double> now) {
  int64_t expired = 0;
  std::shared_ptr<const TableVersion> published;
  {
    std::lock_guard<std::mutex> lock(write_mu_);
    BeginLogLocked();
    const bool was_published = index_published_;
    index_published_ = false;  // until PublishLocked
    const double t = now.value_or(clock_());
    RILL_RETURN_NOT_OK(ApplyRetentionLocked(t, &expired));
    if (expired == 0) {
      index_published_ = was_published;  // nothing changed
      return 0;
    }
    RILL_RETURN_NOT_OK(CompactLocked(/*full=*/false));
    PublishLocked(t);
    published = current_.Load();
  }
  Notify(published);
  return expired;
}

Status LiveTable::Compact(bool full) {
  std::lock_guard<std::mutex> lock(write_mu_);
  BeginLogLocked();
  index_published_ = false;  // until PublishLocked
  RILL_RETURN_NOT_OK(CompactLocked(full));
  // Compaction changes no rows (so no subscriber call); publish so that
  // readers drop the old chunks.
  PublishLocked(clock_());
  return Status::OK();
}

LiveTable::SubscriptionId LiveTable::Subscribe(Subscriber callback) {
  std::lock_guard<std::mutex> lock(subscribers_mu_);
  SubscriptionId id = next_subscription_++;
  subscribers_.emplace(id, std::make_shared<Subscriber>(std::move(callback)));
  return id;
}

bool LiveTable::Unsubscribe(SubscriptionId id) {
  std::lock_guard<std::mutex> lock(subscribers_mu_);
  return subscribers_.erase(id) > 0;
}

bool LiveTable::has_subscribers() const {
  std::lock_guard<std::mutex> lock(subscribers_mu_);
  return !subscribers_.empty();
}

void LiveTable::SetRefresher(std::function<void()> refresher) {
  std::lock_guard<std::mutex> lock(refresh_mu_);
  refresher_ = std::move(refresher);
}

void LiveTable::RunRefresher() const {
  std::lock_guard<std::mutex> lock(refresh_mu_);
  // Cleared before the call: a MarkStale() during the refresh is seen by the
  // next reader, and the refresher's own publication does not recurse.
  if (stale_.exchange(false, std::memory_order_acq_rel) && refresher_) refresher_();
}

void LiveTable::SetErrorHandler(ErrorHandler handler) {
  std::lock_guard<std::mutex> lock(subscribers_mu_);
  error_handler_ = std::move(handler);
}

int64_t LiveTable::EstimateRowSize() const {
  auto v = snapshot();
  if (v->num_rows() > 0) {
    int64_t physical = 0;
    for (const auto& c : v->chunks()) physical += c.batch->num_rows();
    return std::max<int64_t>(1, v->nbytes() / std::max<int64_t>(physical, 1));
  }
  return rill::EstimateRowSize(*schema_);
}

int64_t LiveTable::EstimateRecordsCapacity(int64_t memory_bytes) const {
  if (memory_bytes <= 0) return 0;
  return memory_bytes / EstimateRowSize();
}

int64_t LiveTable::num_chunks() const {
  return static_cast<int64_t>(snapshot()->chunks().size());
}

Result<std::shared_ptr<arrow::Table>> UpsertTable(const std::shared_ptr<arrow::Table>& old_rows,
                                                  const std::shared_ptr<arrow::Table>& new_rows,
                                                  const std::vector<std::string>& primary_key) {
  if (primary_key.empty()) {
    return Status::Invalid("upsert_table needs a primary key");
  }
  TableOptions options;
  options.primary_key = primary_key;
  options.mode = TableMode::kSnapshot;
  options.auto_compact_chunks = 0;
  RILL_ASSIGN_OR_RAISE(auto table, LiveTable::Make("upsert_table", old_rows->schema(), options));
  RILL_RETURN_NOT_OK(table->ReplaceState(old_rows).status());
  RILL_RETURN_NOT_OK(table->Write(new_rows).status());
  RILL_ASSIGN_OR_RAISE(auto result, table->snapshot()->ToTable());
  const bool keep_ins = old_rows->schema()->GetFieldIndex(kInsertTsColumn) >= 0;
  const bool keep_upd = old_rows->schema()->GetFieldIndex(kUpdateTsColumn) >= 0;
  if (!keep_upd) {
    RILL_ASSIGN_OR_RAISE(result, result->RemoveColumn(result->num_columns() - 1));
  }
  if (!keep_ins) {
    RILL_ASSIGN_OR_RAISE(result,
                         result->RemoveColumn(result->schema()->GetFieldIndex(kInsertTsColumn)));
  }
  return result;
}

}  // namespace rill
