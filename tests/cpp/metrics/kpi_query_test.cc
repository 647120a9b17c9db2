#include "rill/metrics/kpi_query.h"

#include <arrow/api.h>
#include <gtest/gtest.h>

namespace rill {
namespace {

std::shared_ptr<arrow::Table> MakeResult() {
  arrow::StringBuilder tier;
  arrow::Int64Builder count;
  arrow::DoubleBuilder revenue;
  EXPECT_TRUE(tier.AppendValues({"Gold", "Silver"}).ok());
  EXPECT_TRUE(count.AppendValues({2, 1}).ok());
  EXPECT_TRUE(revenue.Append(350.5).ok());
  EXPECT_TRUE(revenue.AppendNull().ok());
  auto schema = arrow::schema({arrow::field("tier", arrow::utf8()),
                               arrow::field("n", arrow::int64()),
                               arrow::field("revenue", arrow::float64())});
  return arrow::Table::Make(schema, {*tier.Finish(), *count.Finish(), *revenue.Finish()});
}

TEST(ChartType, ParsesLineBarScatter) {
  EXPECT_EQ(*ParseChartType("line"), ChartType::kLine);
  EXPECT_EQ(*ParseChartType("bar"), ChartType::kBar);
  EXPECT_EQ(*ParseChartType("scatter"), ChartType::kScatter);
  EXPECT_TRUE(ParseChartType("pie").status().IsInvalid());
}

TEST(KpiQuery, ValidatesNameSqlAndInterval) {
  KpiQuery q{"k", "SELECT 1", 1.0};
  EXPECT_TRUE(q.Validate().ok());
  q.interval_seconds = 0;
  EXPECT_TRUE(q.Validate().IsInvalid());
  EXPECT_TRUE((KpiQuery{"", "SELECT 1"}).Validate().IsInvalid());
  EXPECT_TRUE((KpiQuery{"k", ""}).Validate().IsInvalid());
}

TEST(KpiValue, IsTheFirstRowOfYColOrOfTheFirstNumericColumn) {
  auto result = MakeResult();
  EXPECT_EQ(**ExtractKpiValue(*result, "revenue"), 350.5);
  EXPECT_EQ(**ExtractKpiValue(*result, ""), 2.0);
  EXPECT_TRUE(ExtractKpiValue(*result, "missing").status().IsInvalid());
  EXPECT_TRUE(ExtractKpiValue(*result, "tier").status().IsInvalid());
  EXPECT_FALSE(ExtractKpiValue(*result->Slice(0, 0), "n")->has_value());
  EXPECT_FALSE(ExtractKpiValue(*result->Slice(1, 1), "revenue")->has_value());  // null
}

TEST(KpiCells, ListsEveryCellRowByRowWithNumbersAndText) {
  auto cells = KpiCells(MakeResult(), /*max_rows=*/10);
  ASSERT_TRUE(cells.ok()) << cells.status();
  ASSERT_EQ(cells->size(), 6u);
  EXPECT_EQ((*cells)[0].column, "tier");
  EXPECT_EQ(*(*cells)[0].text, "Gold");
  EXPECT_EQ(*(*cells)[1].value, 2.0);
  EXPECT_EQ(*(*cells)[2].value, 350.5);
  EXPECT_EQ((*cells)[5].row_index, 1);
  EXPECT_FALSE((*cells)[5].value.has_value());  // null revenue
  EXPECT_FALSE((*cells)[5].text.has_value());
  EXPECT_EQ(KpiCells(MakeResult(), 1)->size(), 3u);
}

}  // namespace
}  // namespace rill
