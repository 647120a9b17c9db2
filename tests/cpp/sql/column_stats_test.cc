// Column summaries, the bounds behind the scan's DuckDB statistics: they must
// hold for every value.
#include "rill/sql/column_stats_internal.h"

#include <cmath>
#include <limits>

#include <arrow/api.h>
#include <arrow/json/from_string.h>
#include <gtest/gtest.h>


namespace rill::sql_internal {
namespace {

std::shared_ptr<arrow::Array> ArrayOf(const std::shared_ptr<arrow::DataType>& type,
                                      const std::string& json) {
  return arrow::json::ArrayFromJSONString(type, json).ValueOrDie();
}

ColumnSummary Summarize(const std::shared_ptr<arrow::DataType>& type, const std::string& json) {
  auto summary = SummarizeArray(*ArrayOf(type, json));
  EXPECT_TRUE(summary.has_value()) << type->ToString();
  return summary.value_or(ColumnSummary{});
}

uint64_t PrefixOf(const std::string& s) {
  uint64_t p = 0;
  for (size_t i = 0; i < 8; ++i) {
    p = (p << 8) | (i < s.size() ? static_cast<uint8_t>(s[i]) : 0);
  }
  return p;
}

TEST(SummarizeArray, BoundsIntegersIgnoringNulls) {
  auto s = Summarize(arrow::int32(), "[5, null, -7, 12, null]");
  EXPECT_EQ(s.kind, ColumnSummary::Kind::kSigned);
  EXPECT_TRUE(s.has_bounds);
  EXPECT_TRUE(s.has_null);
  EXPECT_TRUE(s.has_valid);
  EXPECT_EQ(s.min_signed, -7);
  EXPECT_EQ(s.max_signed, 12);

  auto u = Summarize(arrow::uint64(), "[18446744073709551615, 3]");
  EXPECT_EQ(u.kind, ColumnSummary::Kind::kUnsigned);
  EXPECT_FALSE(u.has_null);
  EXPECT_EQ(u.min_unsigned, 3u);
  EXPECT_EQ(u.max_unsigned, std::numeric_limits<uint64_t>::max());
}

TEST(SummarizeArray, ReadsOnlyTheSliceOfASlicedArray) {
  auto array = ArrayOf(arrow::int64(), "[100, 1, 2, 3, -100]")->Slice(1, 3);
  auto s = SummarizeArray(*array);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->min_signed, 1);
  EXPECT_EQ(s->max_signed, 3);

  auto strings = ArrayOf(arrow::utf8(), R"(["zzz", "b", "c", "aaa"])")->Slice(1, 2);
  auto t = SummarizeArray(*strings);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->min_prefix, PrefixOf("b"));
  EXPECT_EQ(t->max_prefix, PrefixOf("c"));
  EXPECT_EQ(t->max_length, 1u);
}

TEST(SummarizeArray, GivesNoFloatBoundsWhenNaNOrInfinityIsPresent) {
  auto finite = Summarize(arrow::float64(), "[1.5, -2.25, null]");
  EXPECT_TRUE(finite.has_bounds);
  EXPECT_EQ(finite.min_float, -2.25);
  EXPECT_EQ(finite.max_float, 1.5);

  auto nan = SummarizeArray(*arrow::MakeArrayFromScalar(
                                 arrow::DoubleScalar(std::nan("")), 2)
                                 .ValueOrDie());
  ASSERT_TRUE(nan.has_value());
  EXPECT_FALSE(nan->has_bounds);
  EXPECT_TRUE(nan->has_valid);

  auto inf = Summarize(arrow::float32(), "[1, Inf]");
  EXPECT_FALSE(inf.has_bounds);
}

TEST(SummarizeArray, KeepsEightBytePrefixesLengthsAndNonAscii) {
  auto s = Summarize(arrow::utf8(), R"(["abcdefghij", "", "abcdefgh", "b", null])");
  EXPECT_EQ(s.kind, ColumnSummary::Kind::kString);
  EXPECT_EQ(s.min_prefix, PrefixOf(""));
  EXPECT_EQ(s.max_prefix, PrefixOf("b"));
  EXPECT_EQ(s.max_length, 10u);
  EXPECT_FALSE(s.non_ascii);
  EXPECT_TRUE(s.has_null);

  auto u = Summarize(arrow::large_utf8(), R"(["caf\u00e9", "a"])");
  EXPECT_TRUE(u.non_ascii);
  EXPECT_EQ(u.max_length, 5u);  // bytes, not characters
}

TEST(SummarizeArray, MarksAllNullColumnsAsHavingNoValues) {
  auto s = Summarize(arrow::int16(), "[null, null]");
  EXPECT_TRUE(s.has_null);
  EXPECT_FALSE(s.has_valid);
  EXPECT_FALSE(s.has_bounds);
}

TEST(SummarizeArray, SkipsTypesItDoesNotBound) {
  EXPECT_FALSE(SummarizeArray(*ArrayOf(arrow::boolean(), "[true]")).has_value());
  EXPECT_FALSE(SummarizeArray(*ArrayOf(arrow::binary(), R"(["x"])")).has_value());
  EXPECT_FALSE(
      SummarizeArray(*ArrayOf(arrow::list(arrow::int32()), "[[1]]")).has_value());
}

TEST(MergeSummary, WidensBoundsAndKeepsNullFlags) {
  auto a = Summarize(arrow::int64(), "[1, 2]");
  auto b = Summarize(arrow::int64(), "[-5, null]");
  auto all_null = Summarize(arrow::int64(), "[null]");
  MergeSummary(a, b);
  EXPECT_EQ(a.min_signed, -5);
  EXPECT_EQ(a.max_signed, 2);
  EXPECT_TRUE(a.has_null);

  MergeSummary(all_null, Summarize(arrow::int64(), "[7]"));
  EXPECT_TRUE(all_null.has_valid);
  EXPECT_TRUE(all_null.has_bounds);
  EXPECT_TRUE(all_null.has_null);
  EXPECT_EQ(all_null.min_signed, 7);
  EXPECT_EQ(all_null.max_signed, 7);
}

}  // namespace
}  // namespace rill::sql_internal
