// Helpers for the SQL and task tests: status assertions, and rows as strings
// for comparing results (timestamps as Arrow prints them); batches from JSON
// and the settable clock are the table tests' (table/test_util.h).
#pragma once

#include <string>
#include <vector>

#include <arrow/api.h>
#include <gtest/gtest.h>

#include "table/test_util.h"

/// The table tests' assertions under the names the SQL tests use.
#define ASSERT_OK(expr) RILL_ASSERT_OK(expr)
#define ASSERT_OK_AND_ASSIGN(lhs, rexpr) RILL_ASSERT_OK_AND_ASSIGN(lhs, rexpr)

namespace rill::sqltest {

using test::BatchOf;
using test::FakeClock;

/// Return one cell as text: "null", doubles with 17 significant digits (no
/// trailing ".0"), anything else as Arrow prints its scalar.
inline std::string CellString(const arrow::Array& array, int64_t i) {
  if (array.IsNull(i)) {
    return "null";
  }
  if (array.type_id() == arrow::Type::DOUBLE) {
    return test::FormatDouble(static_cast<const arrow::DoubleArray&>(array).Value(i));
  }
  if (array.type_id() == arrow::Type::STRING) {
    return std::string(static_cast<const arrow::StringArray&>(array).GetView(i));
  }
  return array.GetScalar(i).ValueOrDie()->ToString();
}

/// Each row of `table` as "c0|c1|..." (cells as CellString above), in table
/// order; with `columns`, only those columns, in that order.
inline std::vector<std::string> RowStrings(const arrow::Table& table,
                                           const std::vector<std::string>& columns = {}) {
  return test::RowStrings(table, columns, &CellString);
}

/// RowStrings, sorted (to compare results as multisets).
inline std::vector<std::string> SortedRows(const arrow::Table& table,
                                           const std::vector<std::string>& columns = {}) {
  return test::SortedRows(table, columns, &CellString);
}

}  // namespace rill::sqltest
