// Helpers shared by the table, connector and engine tests: status assertions,
// building batches from JSON, an injectable clock, and canonical row strings
// for comparing tables as multisets.
#pragma once

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <arrow/api.h>
#include <arrow/json/from_string.h>
#include <gtest/gtest.h>

#include "rill/common/clock.h"
#include "rill/common/status.h"
#include "rill/table/retention.h"

namespace rill::test {

inline const arrow::Status& StatusOf(const arrow::Status& s) { return s; }
template <typename T>
const arrow::Status& StatusOf(const arrow::Result<T>& r) {
  return r.status();
}

#define RILL_CONCAT_INNER(a, b) a##b
#define RILL_CONCAT(a, b) RILL_CONCAT_INNER(a, b)

/// Fail the test (fatally) unless `expr` (a Status or Result) is OK.
#define RILL_ASSERT_OK(expr)                                                   \
  do {                                                                         \
    const auto& _rill_value = (expr);                                          \
    const auto& _rill_st = ::rill::test::StatusOf(_rill_value);                \
    ASSERT_TRUE(_rill_st.ok()) << #expr << " failed: " << _rill_st.ToString(); \
  } while (false)

/// Fail the test (non-fatally) unless `expr` (a Status or Result) is OK.
#define RILL_EXPECT_OK(expr)                                                   \
  do {                                                                         \
    const auto& _rill_value = (expr);                                          \
    const auto& _rill_st = ::rill::test::StatusOf(_rill_value);                \
    EXPECT_TRUE(_rill_st.ok()) << #expr << " failed: " << _rill_st.ToString(); \
  } while (false)

#define RILL_ASSERT_OK_AND_ASSIGN_IMPL(tmp, lhs, rexpr)                         \
  auto tmp = (rexpr);                                                           \
  ASSERT_TRUE(tmp.ok()) << #rexpr << " failed: " << tmp.status().ToString();    \
  lhs = std::move(tmp).ValueUnsafe()

/// `lhs = value of rexpr`, failing the test if rexpr is an error.
#define RILL_ASSERT_OK_AND_ASSIGN(lhs, rexpr) \
  RILL_ASSERT_OK_AND_ASSIGN_IMPL(RILL_CONCAT(_rill_result_, __LINE__), lhs, rexpr)

/// Schema of a single int64 column "id" (the connector tests' rows).
inline std::shared_ptr<arrow::Schema> IdSchema() {
  return arrow::schema({arrow::field("id", arrow::int64())});
}

/// A batch of IdSchema() holding the ids [from, to).
inline std::shared_ptr<arrow::RecordBatch> IdBatch(int64_t from, int64_t to) {
  arrow::Int64Builder builder;
  for (int64_t i = from; i < to; ++i) {
    EXPECT_TRUE(builder.Append(i).ok());
  }
  return arrow::RecordBatch::Make(IdSchema(), to - from, {builder.Finish().ValueOrDie()});
}

/// The ids of `batches` (first column, int64), in order.
inline std::vector<int64_t> IdValues(
    const std::vector<std::shared_ptr<arrow::RecordBatch>>& batches) {
  std::vector<int64_t> out;
  for (const auto& batch : batches) {
    const auto& ids = static_cast<const arrow::Int64Array&>(*batch->column(0));
    for (int64_t i = 0; i < ids.length(); ++i) out.push_back(ids.Value(i));
  }
  return out;
}

/// The ids [from, to).
inline std::vector<int64_t> IdRange(int64_t from, int64_t to) {
  std::vector<int64_t> out;
  for (int64_t i = from; i < to; ++i) out.push_back(i);
  return out;
}

/// A settable clock; copies share the same time. Thread-safe.
class FakeClock {
 public:
  explicit FakeClock(double start = 1'700'000'000.0)
      : t_(std::make_shared<std::atomic<double>>(start)) {}
  Clock clock() const {
    auto t = t_;
    return [t] { return t->load(); };
  }
  void Set(double t) { t_->store(t); }
  void Advance(double dt) { t_->store(t_->load() + dt); }
  double now() const { return t_->load(); }

 private:
  std::shared_ptr<std::atomic<double>> t_;
};

/// Return an array parsed from JSON (aborts on a malformed literal: test bug).
inline std::shared_ptr<arrow::Array> ArrayOf(const std::shared_ptr<arrow::DataType>& type,
                                             const std::string& json) {
  return arrow::json::ArrayFromJSONString(type, json).ValueOrDie();
}

/// Return a batch of `schema` whose columns are parsed from `columns` (JSON).
inline std::shared_ptr<arrow::RecordBatch> BatchOf(
    const std::shared_ptr<arrow::Schema>& schema, const std::vector<std::string>& columns) {
  std::vector<std::shared_ptr<arrow::Array>> arrays;
  int64_t rows = 0;
  for (int i = 0; i < schema->num_fields(); ++i) {
    arrays.push_back(ArrayOf(schema->field(i)->type(), columns.at(i)));
    rows = arrays.back()->length();
  }
  return arrow::RecordBatch::Make(schema, rows, arrays);
}

inline std::string FormatDouble(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

/// Canonical text of one cell: "null", integers in decimal, doubles with 17
/// significant digits, strings as-is (dictionaries decoded), timestamps as
/// their raw integer.
inline std::string CellString(const arrow::Array& array, int64_t i) {
  if (array.IsNull(i)) {
    return "null";
  }
  switch (array.type_id()) {
    case arrow::Type::DOUBLE:
      return FormatDouble(static_cast<const arrow::DoubleArray&>(array).Value(i));
    case arrow::Type::FLOAT:
      return FormatDouble(static_cast<const arrow::FloatArray&>(array).Value(i));
    case arrow::Type::INT64:
      return std::to_string(static_cast<const arrow::Int64Array&>(array).Value(i));
    case arrow::Type::INT32:
      return std::to_string(static_cast<const arrow::Int32Array&>(array).Value(i));
    case arrow::Type::TIMESTAMP:
      return std::to_string(static_cast<const arrow::TimestampArray&>(array).Value(i));
    case arrow::Type::STRING:
      return std::string(static_cast<const arrow::StringArray&>(array).GetView(i));
    case arrow::Type::LARGE_STRING:
      return std::string(static_cast<const arrow::LargeStringArray&>(array).GetView(i));
    case arrow::Type::DICTIONARY: {
      const auto& dict = static_cast<const arrow::DictionaryArray&>(array);
      const int64_t index = dict.GetValueIndex(i);
      return CellString(*dict.dictionary(), index);
    }
    default:
      return array.GetScalar(i).ValueOrDie()->ToString();
  }
}

/// How a cell is written by RowStrings.
using CellFormatter = std::string (*)(const arrow::Array& array, int64_t i);

/// Return each row of `table` as "c0|c1|...", in table order. With `columns`,
/// only those columns, in that order; cells written by `cell`.
inline std::vector<std::string> RowStrings(const arrow::Table& table,
                                           const std::vector<std::string>& columns = {},
                                           CellFormatter cell = &CellString) {
  std::vector<std::shared_ptr<arrow::ChunkedArray>> cols;
  if (columns.empty()) {
    cols = table.columns();
  } else {
    for (const auto& name : columns) {
      auto col = table.GetColumnByName(name);
      if (col == nullptr) {
        ADD_FAILURE() << "no column " << name << " in " << table.schema()->ToString();
        return {};
      }
      cols.push_back(col);
    }
  }
  std::vector<std::string> rows(table.num_rows());
  for (size_t c = 0; c < cols.size(); ++c) {
    int64_t row = 0;
    for (const auto& chunk : cols[c]->chunks()) {
      for (int64_t i = 0; i < chunk->length(); ++i, ++row) {
        if (c > 0) {
          rows[row] += "|";
        }
        rows[row] += cell(*chunk, i);
      }
    }
  }
  return rows;
}

inline std::vector<std::string> SortedRows(const arrow::Table& table,
                                           const std::vector<std::string>& columns = {},
                                           CellFormatter cell = &CellString) {
  auto rows = RowStrings(table, columns, cell);
  std::sort(rows.begin(), rows.end());
  return rows;
}

/// Return the cells of one column, in table order.
inline std::vector<std::string> ColumnStrings(const arrow::Table& table,
                                              const std::string& column) {
  return RowStrings(table, {column});
}

/// A retention policy; unset limits stay unset.
inline RetentionPolicy Retention(std::optional<int64_t> max_rows,
                                 std::optional<double> max_age_seconds = std::nullopt,
                                 std::string time_column = "z_insert_ts") {
  RetentionPolicy policy;
  policy.max_rows = max_rows;
  policy.max_age_seconds = max_age_seconds;
  policy.time_column = std::move(time_column);
  return policy;
}

inline std::shared_ptr<arrow::Schema> SchemaOf(arrow::FieldVector fields) {
  return arrow::schema(std::move(fields));
}

}  // namespace rill::test
