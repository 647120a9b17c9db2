// Helpers for the SQL and task tests: status assertions, batches from JSON, a
// settable clock, and rows as strings for comparing results.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <arrow/api.h>
#include <arrow/json/from_string.h>
#include <gtest/gtest.h>

#include "rill/common/clock.h"

namespace rill::sqltest {

inline arrow::Status ToStatus(const arrow::Status& s) { return s; }
template <typename T>
arrow::Status ToStatus(const arrow::Result<T>& r) {
  return r.status();
}

}  // namespace rill::sqltest

/// Fail the test (fatally) unless `expr` (a Status or Result) is OK.
#define ASSERT_OK(expr)                                                    \
  do {                                                                     \
    const ::arrow::Status _st = ::rill::sqltest::ToStatus(expr);           \
    ASSERT_TRUE(_st.ok()) << #expr << " failed: " << _st.ToString();       \
  } while (false)

#define SQLTEST_CONCAT_INNER(a, b) a##b
#define SQLTEST_CONCAT(a, b) SQLTEST_CONCAT_INNER(a, b)
#define SQLTEST_ASSIGN_IMPL(tmp, lhs, rexpr)                                 \
  auto tmp = (rexpr);                                                      \
  ASSERT_TRUE(tmp.ok()) << #rexpr << " failed: " << tmp.status().ToString(); \
  lhs = std::move(tmp).ValueUnsafe()
/// `lhs = value of rexpr`, failing the test (fatally) if rexpr is an error.
#define ASSERT_OK_AND_ASSIGN(lhs, rexpr) \
  SQLTEST_ASSIGN_IMPL(SQLTEST_CONCAT(_result_, __LINE__), lhs, rexpr)

namespace rill::sqltest {

/// A settable clock; copies share the same time. Thread-safe.
class FakeClock {
 public:
  explicit FakeClock(double start) : t_(std::make_shared<std::atomic<double>>(start)) {}
  Clock clock() const {
    auto t = t_;
    return [t] { return t->load(); };
  }
  void Set(double t) { t_->store(t); }
  double now() const { return t_->load(); }

 private:
  std::shared_ptr<std::atomic<double>> t_;
};

/// Return a batch of `schema` whose columns are parsed from JSON arrays.
inline std::shared_ptr<arrow::RecordBatch> BatchOf(const std::shared_ptr<arrow::Schema>& schema,
                                                   const std::vector<std::string>& columns) {
  std::vector<std::shared_ptr<arrow::Array>> arrays;
  int64_t rows = 0;
  for (int i = 0; i < schema->num_fields(); ++i) {
    arrays.push_back(
        arrow::json::ArrayFromJSONString(schema->field(i)->type(), columns.at(i)).ValueOrDie());
    rows = arrays.back()->length();
  }
  return arrow::RecordBatch::Make(schema, rows, arrays);
}

/// Return one cell as text: "null", doubles with 17 significant digits (no
/// trailing ".0"), anything else as Arrow prints its scalar.
inline std::string CellString(const arrow::Array& array, int64_t i) {
  if (array.IsNull(i)) {
    return "null";
  }
  if (array.type_id() == arrow::Type::DOUBLE) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.17g",
                  static_cast<const arrow::DoubleArray&>(array).Value(i));
    return buf;
  }
  if (array.type_id() == arrow::Type::STRING) {
    return std::string(static_cast<const arrow::StringArray&>(array).GetView(i));
  }
  return array.GetScalar(i).ValueOrDie()->ToString();
}

/// Return each row of `table` as "c0|c1|..." in table order; with `columns`,
/// only those columns, in that order.
inline std::vector<std::string> RowStrings(const arrow::Table& table,
                                           const std::vector<std::string>& columns = {}) {
  std::vector<std::shared_ptr<arrow::ChunkedArray>> cols;
  if (columns.empty()) {
    cols = table.columns();
  }
  for (const auto& name : columns) {
    auto col = table.GetColumnByName(name);
    if (col == nullptr) {
      ADD_FAILURE() << "no column " << name << " in " << table.schema()->ToString();
      return {};
    }
    cols.push_back(col);
  }
  std::vector<std::string> rows(table.num_rows());
  for (size_t c = 0; c < cols.size(); ++c) {
    int64_t row = 0;
    for (const auto& chunk : cols[c]->chunks()) {
      for (int64_t i = 0; i < chunk->length(); ++i, ++row) {
        rows[row] += (c > 0 ? "|" : "") + CellString(*chunk, i);
      }
    }
  }
  return rows;
}

/// RowStrings, sorted (to compare results as multisets).
inline std::vector<std::string> SortedRows(const arrow::Table& table,
                                           const std::vector<std::string>& columns = {}) {
  auto rows = RowStrings(table, columns);
  std::sort(rows.begin(), rows.end());
  return rows;
}

}  // namespace rill::sqltest
