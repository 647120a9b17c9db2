// CoalesceByKey and friends (coalesce.h).
#include "rill/sink/coalesce.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include <arrow/api.h>
#include <arrow/compute/api.h>

#include "rill/table/live_table.h"

namespace rill {

namespace {

using BatchVector = std::vector<std::shared_ptr<arrow::RecordBatch>>;

void AppendLength(size_t n, std::string* out) {
  const auto len = static_cast<uint32_t>(n);
  out->append(reinterpret_cast<const char*>(&len), sizeof(len));
}

// Append the bytes of a[i] to `out`, so that equal values give equal bytes
// and the concatenation over the key columns is unambiguous.
void AppendKeyValue(const arrow::Array& a, int64_t i, std::string* out) {
  if (a.IsNull(i)) {
    out->push_back('\0');
    return;
  }
  out->push_back('\1');
  const arrow::Type::type id = a.type_id();
  if (id == arrow::Type::BOOL) {
    out->push_back(static_cast<const arrow::BooleanArray&>(a).Value(i) ? '\1' : '\0');
  } else if (id == arrow::Type::STRING || id == arrow::Type::BINARY) {
    auto v = static_cast<const arrow::BinaryArray&>(a).GetView(i);
    AppendLength(v.size(), out);
    out->append(v.data(), v.size());
  } else if (id == arrow::Type::LARGE_STRING || id == arrow::Type::LARGE_BINARY) {
    auto v = static_cast<const arrow::LargeBinaryArray&>(a).GetView(i);
    AppendLength(v.size(), out);
    out->append(v.data(), v.size());
  } else if (arrow::is_fixed_width(id) && id != arrow::Type::DICTIONARY &&
             a.data()->buffers.size() > 1 && a.data()->buffers[1]) {
    const int width =
        static_cast<const arrow::FixedWidthType&>(*a.type()).bit_width() / 8;
    const uint8_t* values = a.data()->buffers[1]->data() + (a.offset() + i) * width;
    out->append(reinterpret_cast<const char*>(values), width);
  } else {
    auto scalar = a.GetScalar(i);
    std::string text = scalar.ok() ? (*scalar)->ToString() : std::string();
    AppendLength(text.size(), out);
    out->append(text);
  }
}

Result<std::shared_ptr<arrow::StringArray>> OpColumn(const arrow::RecordBatch& batch) {
  auto column = batch.GetColumnByName(kChangeOpColumn);
  if (!column || column->type_id() != arrow::Type::STRING) {
    return Status::Invalid("change batch without a utf8 ", kChangeOpColumn, " column");
  }
  return std::static_pointer_cast<arrow::StringArray>(column);
}

Result<std::shared_ptr<arrow::UInt64Array>> VersionColumn(const arrow::RecordBatch& batch) {
  auto column = batch.GetColumnByName(kChangeVersionColumn);
  if (!column || column->type_id() != arrow::Type::UINT64) {
    return Status::Invalid("change batch without a uint64 ", kChangeVersionColumn, " column");
  }
  return std::static_pointer_cast<arrow::UInt64Array>(column);
}

Result<std::shared_ptr<arrow::RecordBatch>> TakeRows(
    const std::shared_ptr<arrow::RecordBatch>& batch, const std::vector<int64_t>& rows) {
  if (static_cast<int64_t>(rows.size()) == batch->num_rows()) return batch;
  arrow::Int64Builder indices;
  RILL_RETURN_NOT_OK(indices.AppendValues(rows));
  RILL_ASSIGN_OR_RAISE(auto index_array, indices.Finish());
  RILL_ASSIGN_OR_RAISE(arrow::Datum taken, arrow::compute::Take(batch, index_array));
  return taken.record_batch();
}

}  // namespace

int64_t CountRows(const BatchVector& batches) {
  int64_t n = 0;
  for (const auto& b : batches) n += b->num_rows();
  return n;
}

Result<BatchVector> CoalesceByKey(const BatchVector& batches,
                                  const std::vector<std::string>& key_columns) {
  if (batches.empty()) return batches;
  std::vector<int> key_index;
  for (const auto& name : key_columns) {
    const int i = batches[0]->schema()->GetFieldIndex(name);
    if (i < 0) return Status::KeyError("CoalesceByKey: no key column '", name, "'");
    key_index.push_back(i);
  }
  // Last position (batch, row) of every key.
  std::unordered_map<std::string, std::pair<size_t, int64_t>> last;
  std::string key;
  for (size_t b = 0; b < batches.size(); ++b) {
    const auto& batch = *batches[b];
    RILL_ASSIGN_OR_RAISE(auto ops, OpColumn(batch));
    for (int64_t r = 0; r < batch.num_rows(); ++r) {
      if (ops->GetView(r) == ChangeOpName(ChangeOp::kUpdateBefore)) continue;
      key.clear();
      for (int c : key_index) AppendKeyValue(*batch.column(c), r, &key);
      last[key] = {b, r};
    }
  }
  std::vector<std::vector<int64_t>> keep(batches.size());
  for (const auto& [k, pos] : last) keep[pos.first].push_back(pos.second);
  BatchVector out;
  for (size_t b = 0; b < batches.size(); ++b) {
    if (keep[b].empty()) continue;
    std::sort(keep[b].begin(), keep[b].end());
    RILL_ASSIGN_OR_RAISE(auto taken, TakeRows(batches[b], keep[b]));
    out.push_back(std::move(taken));
  }
  return out;
}

Result<BatchVector> KeepOps(const BatchVector& batches, const std::vector<ChangeOp>& ops) {
  BatchVector out;
  std::vector<int64_t> rows;
  for (const auto& batch : batches) {
    RILL_ASSIGN_OR_RAISE(auto op_column, OpColumn(*batch));
    rows.clear();
    for (int64_t r = 0; r < batch->num_rows(); ++r) {
      const auto op = op_column->GetView(r);
      for (ChangeOp wanted : ops) {
        if (op == ChangeOpName(wanted)) {
          rows.push_back(r);
          break;
        }
      }
    }
    if (rows.empty()) continue;
    RILL_ASSIGN_OR_RAISE(auto taken, TakeRows(batch, rows));
    out.push_back(std::move(taken));
  }
  return out;
}

Result<BatchVector> KeepVersions(const BatchVector& batches, uint64_t min_version,
                                 uint64_t max_version) {
  BatchVector out;
  for (const auto& batch : batches) {
    RILL_ASSIGN_OR_RAISE(auto versions, VersionColumn(*batch));
    int64_t begin = 0;
    int64_t end = batch->num_rows();
    while (begin < end && versions->Value(begin) <= min_version) ++begin;
    int64_t stop = begin;
    while (stop < end && versions->Value(stop) <= max_version) ++stop;
    if (stop > begin) out.push_back(batch->Slice(begin, stop - begin));
  }
  return out;
}

Result<BatchVector> DropVersions(const BatchVector& batches,
                                 const std::vector<std::pair<uint64_t, uint64_t>>& ranges) {
  if (ranges.empty()) return batches;
  auto dropped = [&](uint64_t v) {
    for (const auto& [after, through] : ranges) {
      if (v > after && v <= through) return true;
    }
    return false;
  };
  BatchVector out;
  for (const auto& batch : batches) {
    RILL_ASSIGN_OR_RAISE(auto versions, VersionColumn(*batch));
    const int64_t n = batch->num_rows();
    int64_t r = 0;
    while (r < n) {
      while (r < n && dropped(versions->Value(r))) ++r;
      const int64_t begin = r;
      while (r < n && !dropped(versions->Value(r))) ++r;
      if (r > begin) out.push_back(begin == 0 && r == n ? batch : batch->Slice(begin, r - begin));
    }
  }
  return out;
}

Result<BatchVector> ShiftVersions(const BatchVector& batches, int64_t delta) {
  if (delta == 0) return batches;
  BatchVector out;
  for (const auto& batch : batches) {
    RILL_ASSIGN_OR_RAISE(auto versions, VersionColumn(*batch));
    arrow::UInt64Builder builder;
    RILL_RETURN_NOT_OK(builder.Reserve(versions->length()));
    for (int64_t r = 0; r < versions->length(); ++r) {
      builder.UnsafeAppend(versions->Value(r) + static_cast<uint64_t>(delta));
    }
    RILL_ASSIGN_OR_RAISE(auto shifted, builder.Finish());
    const int i = batch->schema()->GetFieldIndex(kChangeVersionColumn);
    RILL_ASSIGN_OR_RAISE(auto replaced,
                         batch->SetColumn(i, batch->schema()->field(i), shifted));
    out.push_back(std::move(replaced));
  }
  return out;
}

Result<BatchVector> SnapshotChangeBatches(const TableVersion& state, uint64_t version) {
  auto schema = ChangeSchema(state.schema());
  BatchVector out;
  for (const auto& chunk : state.chunks()) {
    if (chunk.live_rows == 0) continue;
    RILL_ASSIGN_OR_RAISE(auto live, TableVersion::LiveBatch(chunk));
    const int64_t n = live->num_rows();
    arrow::StringBuilder ops;
    arrow::UInt64Builder versions;
    RILL_RETURN_NOT_OK(ops.Reserve(n));
    RILL_RETURN_NOT_OK(ops.ReserveData(n * 6));
    RILL_RETURN_NOT_OK(versions.Reserve(n));
    for (int64_t r = 0; r < n; ++r) {
      ops.UnsafeAppend(std::string_view(ChangeOpName(ChangeOp::kInsert)));
      versions.UnsafeAppend(version);
    }
    auto columns = live->columns();
    RILL_ASSIGN_OR_RAISE(auto op_array, ops.Finish());
    RILL_ASSIGN_OR_RAISE(auto version_array, versions.Finish());
    columns.push_back(op_array);
    columns.push_back(version_array);
    out.push_back(arrow::RecordBatch::Make(schema, n, std::move(columns)));
  }
  return out;
}

std::vector<BatchVector> SplitRows(const BatchVector& batches, int64_t max_rows) {
  std::vector<BatchVector> groups;
  BatchVector group;
  int64_t rows = 0;
  for (const auto& batch : batches) {
    int64_t offset = 0;
    while (offset < batch->num_rows()) {
      int64_t take = batch->num_rows() - offset;
      if (max_rows > 0) take = std::min(take, max_rows - rows);
      group.push_back(offset == 0 && take == batch->num_rows() ? batch
                                                               : batch->Slice(offset, take));
      offset += take;
      rows += take;
      if (max_rows > 0 && rows >= max_rows) {
        groups.push_back(std::move(group));
        group.clear();
        rows = 0;
      }
    }
  }
  if (!group.empty()) groups.push_back(std::move(group));
  return groups;
}

}  // namespace rill
