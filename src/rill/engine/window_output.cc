// WindowOperator: building output tables from groups (window bounds, decoded
// keys, aggregate values, DuckDB aggregations over kept rows).
#include <cstring>

#include <arrow/array.h>
#include <arrow/builder.h>
#include <arrow/compute/api_vector.h>
#include <arrow/datum.h>
#include <arrow/compute/cast.h>
#include <arrow/record_batch.h>
#include <arrow/table.h>
#include <arrow/type.h>
#include <arrow/util/bit_util.h>

#include "rill/common/arrow_init.h"
#include "rill/engine/window_operator_internal.h"
#include "rill/sql/sql_engine.h"

namespace rill {

using window_internal::ValueKind;

namespace {

constexpr char kGidColumn[] = "__rill_gid";
constexpr char kRowsView[] = "__rill_window_rows";

// Cast `array` to `type` when Arrow can; keep it as is otherwise (dictionary
// and large strings stay utf8).
std::shared_ptr<arrow::Array> CastOrKeep(const std::shared_ptr<arrow::Array>& array,
                                         const std::shared_ptr<arrow::DataType>& type) {
  if (!type || array->type()->Equals(*type) || type->id() == arrow::Type::DICTIONARY ||
      type->id() == arrow::Type::LARGE_STRING || type->id() == arrow::Type::STRING_VIEW) {
    return array;
  }
  auto cast = arrow::compute::Cast(array, arrow::compute::CastOptions::Unsafe(type));
  return cast.ok() ? cast->make_array() : array;
}

std::shared_ptr<arrow::DataType> KindType(ValueKind kind) {
  switch (kind) {
    case ValueKind::kInt:
      return arrow::int64();
    case ValueKind::kDouble:
      return arrow::float64();
    case ValueKind::kString:
      return arrow::utf8();
  }
  return arrow::int64();
}

// Append the 8-byte value at *p (see EncodeKey) to `builder` and move past it.
template <typename Builder>
Status AppendEncoded(arrow::ArrayBuilder* builder, const char** p) {
  typename Builder::value_type v;
  std::memcpy(&v, *p, sizeof(v));
  *p += sizeof(v);
  return static_cast<Builder*>(builder)->Append(v);
}

}  // namespace

// Appends the keys of `gids`, decoded from their encoding (see EncodeKey).
Status WindowOperator::Impl::DecodeKeys(
    const std::vector<uint32_t>& gids,
    std::vector<std::unique_ptr<arrow::ArrayBuilder>>* builders) {
  const size_t nkeys = builders->size();
  for (uint32_t g : gids) {
    const char* p = codes.key(g_code[g]).data();
    for (size_t k = 0; k < nkeys; ++k) {
      arrow::ArrayBuilder& builder = *(*builders)[k];
      if (*p++ == '\0') {
        RILL_RETURN_NOT_OK(builder.AppendNull());
        continue;
      }
      switch (key_kinds[k]) {
        case ValueKind::kInt:
          RILL_RETURN_NOT_OK(AppendEncoded<arrow::Int64Builder>(&builder, &p));
          break;
        case ValueKind::kDouble:
          RILL_RETURN_NOT_OK(AppendEncoded<arrow::DoubleBuilder>(&builder, &p));
          break;
        case ValueKind::kString: {
          uint32_t len;
          std::memcpy(&len, p, 4);
          p += 4;
          RILL_RETURN_NOT_OK(static_cast<arrow::StringBuilder&>(builder).Append(
              p, static_cast<int32_t>(len)));
          p += len;
          break;
        }
      }
    }
  }
  return Status::OK();
}

Result<std::shared_ptr<arrow::Table>> WindowOperator::Impl::Build(
    const std::vector<uint32_t>& gids, size_t updates) {
  std::vector<std::shared_ptr<arrow::Field>> fields;
  std::vector<std::shared_ptr<arrow::Array>> columns;
  const int64_t n = static_cast<int64_t>(gids.size());

  // Output arrays come from the tables' pool: Arrow's default pool hands the
  // pages of freed outputs back to the OS and faults them in again every emit.
  arrow::MemoryPool* pool = TableMemoryPool();
  // Window bounds.
  for (int which = 0; which < 2; ++which) {
    const auto& v = which == 0 ? g_start : g_end;
    // Straight into the buffer: bounds are never null.
    RILL_ASSIGN_OR_RAISE(std::shared_ptr<arrow::Buffer> values,
                         arrow::AllocateBuffer(n * 8, pool));
    if (bound_type->id() == arrow::Type::TIMESTAMP) {
      auto* out = reinterpret_cast<int64_t*>(values->mutable_data());
      for (int64_t i = 0; i < n; ++i) out[i] = v[gids[i]];
    } else {
      auto* out = reinterpret_cast<double*>(values->mutable_data());
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<double>(v[gids[i]]) / 1e6;
    }
    std::shared_ptr<arrow::Array> array =
        arrow::MakeArray(arrow::ArrayData::Make(bound_type, n, {nullptr, std::move(values)}, 0));
    fields.push_back(arrow::field(which == 0 ? "window_start" : "window_end", bound_type,
                                  /*nullable=*/false));
    columns.push_back(std::move(array));
  }

  // Keys, from their codes (see KeyCodes).
  const size_t nkeys = spec.group_by.size();
  std::vector<std::unique_ptr<arrow::ArrayBuilder>> builders;
  for (size_t k = 0; k < nkeys; ++k) {
    std::unique_ptr<arrow::ArrayBuilder> b;
    RILL_RETURN_NOT_OK(arrow::MakeBuilder(pool, KindType(key_kinds[k]), &b));
    RILL_RETURN_NOT_OK(b->Reserve(n));
    builders.push_back(std::move(b));
  }
  std::shared_ptr<arrow::Array> int_keys;
  if (codes.mode() == window_internal::KeyCodes::Mode::kInt) {
    // The codes are the values: straight into the buffer.
    RILL_ASSIGN_OR_RAISE(std::shared_ptr<arrow::Buffer> values,
                         arrow::AllocateBuffer(n * 8, pool));
    auto* out = reinterpret_cast<int64_t*>(values->mutable_data());
    int64_t nulls = 0;
    for (int64_t i = 0; i < n; ++i) {
      const uint32_t g = gids[i];
      out[i] = g_null[g] ? 0 : static_cast<int64_t>(g_code[g]);
      nulls += g_null[g];
    }
    std::shared_ptr<arrow::Buffer> validity;
    if (nulls > 0) {
      RILL_ASSIGN_OR_RAISE(validity, arrow::AllocateBitmap(n, pool));
      for (int64_t i = 0; i < n; ++i) {
        arrow::bit_util::SetBitTo(validity->mutable_data(), i, !g_null[gids[i]]);
      }
    }
    int_keys = arrow::MakeArray(
        arrow::ArrayData::Make(arrow::int64(), n, {std::move(validity), std::move(values)}, nulls));
  } else if (nkeys > 0) {
    RILL_RETURN_NOT_OK(DecodeKeys(gids, &builders));
  }
  for (size_t k = 0; k < nkeys; ++k) {
    std::shared_ptr<arrow::Array> array = int_keys;
    if (!array) RILL_RETURN_NOT_OK(builders[k]->Finish(&array));
    array = CastOrKeep(array, key_types[k]);
    fields.push_back(arrow::field(spec.group_by[k], array->type()));
    columns.push_back(std::move(array));
  }

  // Aggregations.
  std::vector<std::shared_ptr<arrow::Array>> sql_columns;
  if (has_sql) {
    RILL_ASSIGN_OR_RAISE(sql_columns, SqlColumns(gids));
  }
  size_t next_sql = 0;
  for (const auto& a : aggs) {
    std::shared_ptr<arrow::Array> array;
    if (!a.state) {
      array = sql_columns[next_sql++];
    } else {
      RILL_ASSIGN_OR_RAISE(array, a.state->Finish(gids, pool));
      const auto k = a.agg.kind;
      if (k == WindowAggKind::kMin || k == WindowAggKind::kMax || k == WindowAggKind::kFirst ||
          k == WindowAggKind::kLast) {
        array = CastOrKeep(array, a.input_type);
      }
    }
    fields.push_back(arrow::field(a.agg.output, array->type()));
    columns.push_back(std::move(array));
  }

  if (spec.emit == EmitMode::kOnUpdate) {
    arrow::BooleanBuilder b(pool);
    RILL_RETURN_NOT_OK(b.Reserve(n));
    for (int64_t i = 0; i < n; ++i) b.UnsafeAppend(static_cast<size_t>(i) >= updates);
    std::shared_ptr<arrow::Array> array;
    RILL_RETURN_NOT_OK(b.Finish(&array));
    fields.push_back(arrow::field("is_final", arrow::boolean(), /*nullable=*/false));
    columns.push_back(std::move(array));
  }
  return arrow::Table::Make(arrow::schema(fields), columns, n);
}

// Runs one DuckDB query over the kept rows of every group in `gids`, grouped by
// the group's position in `gids`, and returns one column per kSql aggregation
// with the values in the order of `gids`.
Result<std::vector<std::shared_ptr<arrow::Array>>> WindowOperator::Impl::SqlColumns(
    const std::vector<uint32_t>& gids) {
  std::vector<std::vector<int64_t>> rows(slots.size()), positions(slots.size());
  for (size_t i = 0; i < gids.size(); ++i) {
    for (const auto& ref : g_refs[gids[i]]) {
      rows[ref.slot].push_back(ref.row);
      positions[ref.slot].push_back(static_cast<int64_t>(i));
    }
  }
  auto schema = input_schema->AddField(input_schema->num_fields(),
                                       arrow::field(kGidColumn, arrow::int64()));
  RILL_RETURN_NOT_OK(schema.status());
  std::vector<std::shared_ptr<arrow::RecordBatch>> batches;
  for (size_t slot = 0; slot < slots.size(); ++slot) {
    if (rows[slot].empty()) continue;
    arrow::Int64Builder idx, pos;
    RILL_RETURN_NOT_OK(idx.AppendValues(rows[slot]));
    RILL_RETURN_NOT_OK(pos.AppendValues(positions[slot]));
    std::shared_ptr<arrow::Array> idx_array, pos_array;
    RILL_RETURN_NOT_OK(idx.Finish(&idx_array));
    RILL_RETURN_NOT_OK(pos.Finish(&pos_array));
    RILL_ASSIGN_OR_RAISE(auto taken, arrow::compute::Take(arrow::Datum(slots[slot].batch), arrow::Datum(idx_array)));
    auto batch = taken.record_batch();
    RILL_ASSIGN_OR_RAISE(batch, batch->AddColumn(batch->num_columns(), kGidColumn, pos_array));
    batches.push_back(std::move(batch));
  }
  RILL_ASSIGN_OR_RAISE(auto table, arrow::Table::FromRecordBatches(*schema, batches));
  std::string query = "SELECT " + QuoteIdentifier(kGidColumn);
  for (const auto& a : aggs) {
    if (a.state) continue;
    query += ", " + a.agg.expression + " AS " + QuoteIdentifier(a.agg.output);
  }
  query += " FROM " + QuoteIdentifier(kRowsView) + " GROUP BY " + QuoteIdentifier(kGidColumn);
  auto result = sql->QueryWith(query, {{kRowsView, table}});
  if (!result.ok()) {
    return result.status().WithMessage("window aggregation failed: ", result.status().message());
  }
  // Position -> result row, then gather each result column into gids order.
  RILL_ASSIGN_OR_RAISE(auto combined, (*result)->CombineChunks());
  std::vector<int64_t> where(gids.size(), -1);
  if (combined->num_rows() > 0) {
    RILL_ASSIGN_OR_RAISE(auto pos64,
                         arrow::compute::Cast(combined->column(0)->chunk(0), arrow::int64()));
    std::shared_ptr<arrow::Array> pos_array = pos64.make_array();  // owns the values below
    const auto& pos_values = static_cast<const arrow::Int64Array&>(*pos_array);
    for (int64_t r = 0; r < pos_values.length(); ++r) where[pos_values.Value(r)] = r;
  }
  arrow::Int64Builder take;
  for (int64_t w : where) {
    RILL_RETURN_NOT_OK(w < 0 ? take.AppendNull() : take.Append(w));
  }
  std::shared_ptr<arrow::Array> take_indices;
  RILL_RETURN_NOT_OK(take.Finish(&take_indices));
  std::vector<std::shared_ptr<arrow::Array>> out;
  for (int c = 1; c < combined->num_columns(); ++c) {
    std::shared_ptr<arrow::Array> values = combined->column(c)->num_chunks() > 0
                                               ? combined->column(c)->chunk(0)
                                               : nullptr;
    if (!values) {
      RILL_ASSIGN_OR_RAISE(values, arrow::MakeEmptyArray(combined->schema()->field(c)->type()));
    }
    RILL_ASSIGN_OR_RAISE(auto taken, arrow::compute::Take(values, take_indices));
    out.push_back(taken.make_array());
  }
  return out;
}

}  // namespace rill
