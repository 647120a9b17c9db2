// The one Arrow-to-JSON writer (common/arrow_json.h) in the three forms its
// callers use: the server's (valid UTF-8, 17-digit floats), the Kafka sink's
// (valid UTF-8, shortest floats) and the file sink's (bytes as they are,
// shortest floats).
#include "rill/common/arrow_json.h"

#include <cmath>
#include <limits>

#include <arrow/api.h>
#include <arrow/json/from_string.h>
#include <gtest/gtest.h>

namespace rill {
namespace {

constexpr ArrowJsonOptions kServer{true, JsonFloatFormat::kSeventeenDigits};
constexpr ArrowJsonOptions kKafka{true, JsonFloatFormat::kShortest};
constexpr ArrowJsonOptions kFile{false, JsonFloatFormat::kShortest};

std::shared_ptr<arrow::Array> JsonArray(const std::shared_ptr<arrow::DataType>& type,
                                        const std::string& json) {
  return arrow::json::ArrayFromJSONString(type, json).ValueOrDie();
}

// Every value of `array`, each written as JSON, joined by '|'.
std::string Values(const arrow::Array& array, const ArrowJsonOptions& options) {
  std::string out;
  for (int64_t i = 0; i < array.length(); ++i) {
    if (i > 0) out.push_back('|');
    EXPECT_TRUE(AppendArrowJsonValue(array, i, options, &out).ok());
  }
  return out;
}

std::shared_ptr<arrow::Array> Doubles() {
  arrow::DoubleBuilder builder;
  for (double v : {0.1, 1.0, -0.0, 1e15, 1e20, std::numeric_limits<double>::quiet_NaN(),
                   std::numeric_limits<double>::infinity()}) {
    EXPECT_TRUE(builder.Append(v).ok());
  }
  EXPECT_TRUE(builder.AppendNull().ok());
  return builder.Finish().ValueOrDie();
}

TEST(ArrowJsonTest, TheServerWritesFloatsWithSeventeenDigitsAndIntegralOnesAsIntegers) {
  EXPECT_EQ(Values(*Doubles(), kServer),
            "0.10000000000000001|1|0|1000000000000000|1e+20|null|null|null");
  EXPECT_EQ(Values(*JsonArray(arrow::float32(), "[0.5, 0.1]"), kServer),
            "0.5|0.10000000149011612");
}

TEST(ArrowJsonTest, TheSinksWriteFloatsInTheirShortestRoundTripText) {
  for (const auto& options : {kKafka, kFile}) {
    EXPECT_EQ(Values(*Doubles(), options), "0.1|1|-0|1e+15|1e+20|null|null|null");
    EXPECT_EQ(Values(*JsonArray(arrow::float32(), "[0.5, 0.1]"), options),
              "0.5|0.10000000149011612");
  }
}

TEST(ArrowJsonTest, StringsAreEscapedAndInvalidUtf8IsReplacedOnlyWhenAsked) {
  arrow::StringBuilder builder;
  ASSERT_TRUE(builder.Append("q\"\\\n\r\t\x01\x7f \xC3\xA9").ok());
  ASSERT_TRUE(builder.Append("a\xFFz").ok());
  auto strings = builder.Finish().ValueOrDie();
  const std::string escaped = "\"q\\\"\\\\\\n\\r\\t\\u0001\x7f \xC3\xA9\"";
  EXPECT_EQ(Values(*strings, kServer), escaped + "|\"a\xEF\xBF\xBDz\"");
  EXPECT_EQ(Values(*strings, kKafka), escaped + "|\"a\xEF\xBF\xBDz\"");
  EXPECT_EQ(Values(*strings, kFile), escaped + "|\"a\xFFz\"");
}

TEST(ArrowJsonTest, NestedListsStructsAndDictionariesBecomeJsonArraysObjectsAndValues) {
  auto type = arrow::struct_({arrow::field("n", arrow::int64()),
                              arrow::field("tags", arrow::list(arrow::utf8())),
                              arrow::field("ok", arrow::boolean())});
  auto structs = JsonArray(type, R"([{"n": -3, "tags": ["x", null], "ok": true},
                                     {"n": null, "tags": [], "ok": false}, null])");
  EXPECT_EQ(Values(*structs, kFile),
            "{\"n\":-3,\"tags\":[\"x\",null],\"ok\":true}|{\"n\":null,\"tags\":[],\"ok\":false}|"
            "null");
  auto dict = arrow::DictionaryArray::FromArrays(JsonArray(arrow::int32(), "[1, 0, null]"),
                                                 JsonArray(arrow::utf8(), R"(["a", "b"])"))
                  .ValueOrDie();
  EXPECT_EQ(Values(*dict, kKafka), "\"b\"|\"a\"|null");
  EXPECT_EQ(Values(*JsonArray(arrow::uint64(), "[18446744073709551615]"), kServer),
            "18446744073709551615");
}

TEST(ArrowJsonTest, TypesWithoutAJsonFormAreTheStringArrowPrints) {
  auto ts = JsonArray(arrow::timestamp(arrow::TimeUnit::SECOND), "[0]");
  auto binary = JsonArray(arrow::binary(), R"(["ab"])");
  for (const auto& array : {ts, binary}) {
    const std::string text = array->GetScalar(0).ValueOrDie()->ToString();
    EXPECT_EQ(Values(*array, kServer), "\"" + text + "\"");
  }
  EXPECT_EQ(Values(*ts, kFile), "\"1970-01-01 00:00:00\"");
}

TEST(ArrowJsonTest, ARowIsAnObjectOfItsColumnsInOrder) {
  auto schema =
      arrow::schema({arrow::field("id", arrow::int32()), arrow::field("v", arrow::float64())});
  auto batch = arrow::RecordBatch::Make(
      schema, 2, {JsonArray(arrow::int32(), "[1, 2]"), JsonArray(arrow::float64(), "[2.5, null]")});
  std::string out;
  ASSERT_TRUE(AppendArrowJsonRow(*batch, 1, kServer, &out).ok());
  EXPECT_EQ(out, "{\"id\":2,\"v\":null}");
}

}  // namespace
}  // namespace rill
