#include "rill/metrics/kpi_query.h"

#include <cmath>

#include <arrow/api.h>
#include <arrow/compute/api.h>

namespace rill {
namespace {

bool IsNumericLike(const arrow::DataType& type) {
  return arrow::is_integer(type.id()) || arrow::is_floating(type.id()) ||
         arrow::is_decimal(type.id()) || type.id() == arrow::Type::BOOL;
}

Result<std::shared_ptr<arrow::DoubleArray>> AsDoubles(
    const std::shared_ptr<arrow::ChunkedArray>& column) {
  arrow::compute::CastOptions options = arrow::compute::CastOptions::Unsafe(arrow::float64());
  RILL_ASSIGN_OR_RAISE(arrow::Datum cast, arrow::compute::Cast(column, options));
  RILL_ASSIGN_OR_RAISE(std::shared_ptr<arrow::Array> flat,
                       arrow::Concatenate(cast.chunked_array()->chunks()));
  return std::static_pointer_cast<arrow::DoubleArray>(flat);
}

}  // namespace

Result<ChartType> ParseChartType(std::string_view text) {
  if (text == "line") return ChartType::kLine;
  if (text == "bar") return ChartType::kBar;
  if (text == "scatter") return ChartType::kScatter;
  return Status::Invalid("unknown chart_type '", text, "': expected line, bar or scatter");
}

const char* ChartTypeName(ChartType type) {
  switch (type) {
    case ChartType::kLine:
      return "line";
    case ChartType::kBar:
      return "bar";
    case ChartType::kScatter:
      return "scatter";
  }
  return "line";
}

Status KpiQuery::Validate() const {
  if (name.empty()) {
    return Status::Invalid("KPI query needs a name");
  }
  if (sql.empty()) {
    return Status::Invalid("KPI query '", name, "' needs SQL");
  }
  if (!std::isfinite(interval_seconds) || interval_seconds <= 0) {
    return Status::Invalid("KPI query '", name,
                           "': interval_seconds must be positive, got ", interval_seconds);
  }
  return Status::OK();
}

Result<std::optional<double>> ExtractKpiValue(const arrow::Table& result,
                                              const std::string& y_col) {
  std::shared_ptr<arrow::ChunkedArray> column;
  if (!y_col.empty()) {
    column = result.GetColumnByName(y_col);
    if (column == nullptr) {
      return Status::Invalid("KPI result has no column '", y_col, "' (columns: ",
                             result.schema()->ToString(), ")");
    }
    if (!IsNumericLike(*column->type())) {
      return Status::Invalid("KPI column '", y_col, "' is ", column->type()->ToString(),
                             ", not numeric");
    }
  } else {
    for (int i = 0; i < result.num_columns(); ++i) {
      if (result.schema()->field(i)->name() != "ts" &&
          IsNumericLike(*result.column(i)->type())) {
        column = result.column(i);
        break;
      }
    }
    if (column == nullptr) {
      return std::optional<double>();
    }
  }
  if (result.num_rows() == 0) {
    return std::optional<double>();
  }
  RILL_ASSIGN_OR_RAISE(auto doubles, AsDoubles(column->Slice(0, 1)));
  if (doubles->length() == 0 || doubles->IsNull(0)) {
    return std::optional<double>();
  }
  return std::optional<double>(doubles->Value(0));
}

Result<std::vector<KpiCell>> KpiCells(const std::shared_ptr<arrow::Table>& result,
                                      int64_t max_rows) {
  std::vector<KpiCell> cells;
  const int64_t rows = std::min(result->num_rows(), max_rows);
  if (rows <= 0) {
    return cells;
  }
  std::shared_ptr<arrow::Table> head = result->Slice(0, rows);
  const int num_columns = head->num_columns();
  // Column-wise conversion, then row-major output.
  std::vector<std::shared_ptr<arrow::DoubleArray>> numeric(num_columns);
  std::vector<std::shared_ptr<arrow::Array>> other(num_columns);
  for (int c = 0; c < num_columns; ++c) {
    const auto& column = head->column(c);
    if (IsNumericLike(*column->type())) {
      RILL_ASSIGN_OR_RAISE(numeric[c], AsDoubles(column));
    } else {
      RILL_ASSIGN_OR_RAISE(other[c], arrow::Concatenate(column->chunks()));
    }
  }
  cells.reserve(static_cast<size_t>(rows * num_columns));
  for (int64_t r = 0; r < rows; ++r) {
    for (int c = 0; c < num_columns; ++c) {
      KpiCell cell;
      cell.row_index = r;
      cell.column = head->schema()->field(c)->name();
      if (numeric[c] != nullptr) {
        if (!numeric[c]->IsNull(r)) {
          cell.value = numeric[c]->Value(r);
        }
      } else if (other[c]->IsValid(r)) {
        RILL_ASSIGN_OR_RAISE(std::shared_ptr<arrow::Scalar> scalar, other[c]->GetScalar(r));
        if (scalar->type->id() == arrow::Type::STRING ||
            scalar->type->id() == arrow::Type::LARGE_STRING ||
            scalar->type->id() == arrow::Type::STRING_VIEW) {
          cell.text = std::string(
              std::static_pointer_cast<arrow::BaseBinaryScalar>(scalar)->view());
        } else {
          cell.text = scalar->ToString();
        }
      }
      cells.push_back(std::move(cell));
    }
  }
  return cells;
}

}  // namespace rill
