#include "rill/table/retention.h"

#include <arrow/array.h>
#include <arrow/record_batch.h>
#include <arrow/type.h>
#include <arrow/util/bit_util.h>

#include "rill/table/change_log_internal.h"
#include "rill/table/key_index_internal.h"
#include "rill/table/live_table.h"
#include "rill/table/live_table_internal.h"

namespace rill {

Status RetentionPolicy::Validate() const {
  if (max_rows && *max_rows < 0) {
    return Status::Invalid("RetentionPolicy max_rows must be >= 0, got ", *max_rows);
  }
  if (max_age_seconds && !(*max_age_seconds >= 0)) {
    return Status::Invalid("RetentionPolicy max_age_seconds must be >= 0, got ",
                           *max_age_seconds);
  }
  if (time_column.empty()) {
    return Status::Invalid("RetentionPolicy time_column must not be empty");
  }
  return Status::OK();
}

bool IsTimeLike(const arrow::DataType& type) {
  return arrow::is_integer(type.id()) || arrow::is_floating(type.id()) ||
         type.id() == arrow::Type::TIMESTAMP || type.id() == arrow::Type::DATE32 ||
         type.id() == arrow::Type::DATE64;
}

namespace {

template <typename ArrayT>
TimeReader NumericReader(const std::shared_ptr<arrow::Array>& array, double scale) {
  auto typed = std::static_pointer_cast<ArrayT>(array);
  return [typed, scale](int64_t i, bool* valid) -> double {
    *valid = typed->IsValid(i);
    return *valid ? static_cast<double>(typed->Value(i)) * scale : 0.0;
  };
}

}  // namespace

Result<TimeReader> MakeTimeReader(const std::shared_ptr<arrow::Array>& array) {
  const auto& type = *array->type();
  switch (type.id()) {
    case arrow::Type::DOUBLE:
      return NumericReader<arrow::DoubleArray>(array, 1.0);
    case arrow::Type::FLOAT:
      return NumericReader<arrow::FloatArray>(array, 1.0);
    case arrow::Type::INT64:
      return NumericReader<arrow::Int64Array>(array, 1.0);
    case arrow::Type::INT32:
      return NumericReader<arrow::Int32Array>(array, 1.0);
    case arrow::Type::INT16:
      return NumericReader<arrow::Int16Array>(array, 1.0);
    case arrow::Type::INT8:
      return NumericReader<arrow::Int8Array>(array, 1.0);
    case arrow::Type::UINT64:
      return NumericReader<arrow::UInt64Array>(array, 1.0);
    case arrow::Type::UINT32:
      return NumericReader<arrow::UInt32Array>(array, 1.0);
    case arrow::Type::UINT16:
      return NumericReader<arrow::UInt16Array>(array, 1.0);
    case arrow::Type::UINT8:
      return NumericReader<arrow::UInt8Array>(array, 1.0);
    case arrow::Type::DATE32:
      return NumericReader<arrow::Date32Array>(array, 86400.0);
    case arrow::Type::DATE64:
      return NumericReader<arrow::Date64Array>(array, 1e-3);
    case arrow::Type::TIMESTAMP: {
      // Timestamps are UTC-normalized whatever their time zone; only the unit matters.
      double scale = 1.0;
      switch (static_cast<const arrow::TimestampType&>(type).unit()) {
        case arrow::TimeUnit::SECOND: scale = 1.0; break;
        case arrow::TimeUnit::MILLI: scale = 1e-3; break;
        case arrow::TimeUnit::MICRO: scale = 1e-6; break;
        case arrow::TimeUnit::NANO: scale = 1e-9; break;
      }
      return NumericReader<arrow::TimestampArray>(array, scale);
    }
    default:
      return Status::TypeError("Retention time column must be a number of unix seconds, a ",
                               "timestamp or a date, not ", type.ToString());
  }
}

Status CheckAppendRetention(const std::string& name, TableMode mode,
                            const std::optional<RetentionPolicy>& retention) {
  if (mode == TableMode::kAppend && (!retention || !retention->enabled())) {
    return Status::Invalid(
        "Retention policy (TTL) with max_rows or max_age_seconds is mandatory for "
        "append-only tables: table '", name, "' is in append mode without one");
  }
  return Status::OK();
}

// ---------------------------------------------------------------------------
// Applying a policy to a live table

using table_internal::Location;

Status LiveTable::ApplyRetentionLocked(double now, int64_t* expired) {
  if (!options_.retention || !options_.retention->enabled()) {
    return Status::OK();
  }
  const auto& policy = *options_.retention;
  const int64_t before = live_rows_;
  const bool logging = pending_ && !pending_->reset;
  auto kill = [&](uint32_t slot, int64_t row) {
    if (logging) LogRemovedLocked(Location(slot, row), table_internal::Removal::kRetention);
    if (index_) EraseKeyLocked(slot, row);
    KillRowLocked(Location(slot, row));
  };
  auto alive = [&](const Chunk& c, int64_t row) {
    return !c.alive || arrow::bit_util::GetBit(c.alive->data(), row);
  };
  if (policy.max_age_seconds) {
    const double cutoff = now - *policy.max_age_seconds;
    for (uint32_t slot : order_) {
      Chunk& c = slots_[slot];
      if (c.live_rows == 0 || !c.has_time_range || c.time_min >= cutoff) continue;
      if (index_) RILL_RETURN_NOT_OK(index_->Bind(*c.batch));
      RILL_ASSIGN_OR_RAISE(auto reader, MakeTimeReader(c.batch->column(time_column_)));
      const int64_t rows = c.batch->num_rows();
      for (int64_t r = 0; r < rows && c.live_rows > 0; ++r) {
        if (!alive(c, r)) continue;
        bool valid;
        double t = reader(r, &valid);
        if (valid && t < cutoff) kill(slot, r);
      }
    }
  }
  if (policy.max_rows && live_rows_ > *policy.max_rows) {
    int64_t excess = live_rows_ - *policy.max_rows;
    for (uint32_t slot : order_) {
      if (excess == 0) break;
      Chunk& c = slots_[slot];
      if (c.live_rows == 0) continue;
      if (index_) RILL_RETURN_NOT_OK(index_->Bind(*c.batch));
      const int64_t rows = c.batch->num_rows();
      if (c.live_rows <= excess && !index_) {
        // Whole chunk expires: no need to touch rows one by one.
        if (logging) LogExpiredRangeLocked(slot, 0, rows);
        excess -= c.live_rows;
        live_rows_ -= c.live_rows;
        c.live_rows = 0;
        continue;
      }
      if (!index_ && !c.alive) {
        // Unkeyed, no dead rows: the oldest `excess` rows are a prefix. Slice
        // it off (no copy, no bitmap, no rewrite once half of it is dead).
        if (logging) LogExpiredRangeLocked(slot, 0, excess);
        SetChunkLocked(slot, c.batch->Slice(excess), nullptr, rows - excess);
        live_rows_ -= excess;
        excess = 0;
        break;
      }
      for (int64_t r = 0; r < rows && excess > 0 && c.live_rows > 0; ++r) {
        if (!alive(c, r)) continue;
        kill(slot, r);
        --excess;
      }
    }
  }
  *expired += before - live_rows_;
  return Status::OK();
}

}  // namespace rill
