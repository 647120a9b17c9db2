// Dictionary encoding of string columns for the scan: same values, nulls kept,
// refused when it would not pay, and live-row filtering that keeps the
// dictionary object.
#include "rill/sql/string_dictionary_internal.h"

#include <arrow/api.h>
#include <arrow/json/from_string.h>
#include <gtest/gtest.h>

#include "rill/table/gather_internal.h"
#include "sql/sql_test_util.h"

namespace rill::sql_internal {
namespace {

std::shared_ptr<arrow::Array> JsonArray(const std::shared_ptr<arrow::DataType>& type,
                                        const std::string& json) {
  return arrow::json::ArrayFromJSONString(type, json).ValueOrDie();
}

std::shared_ptr<arrow::Array> Encode(const std::shared_ptr<arrow::Array>& strings) {
  auto encoded = EncodeStringDictionary(*strings, arrow::default_memory_pool());
  EXPECT_TRUE(encoded.ok()) << encoded.status().ToString();
  return encoded.ok() ? *encoded : nullptr;
}

// The encoded array decoded back to plain strings.
std::shared_ptr<arrow::Array> Decode(const std::shared_ptr<arrow::Array>& encoded,
                                     const std::shared_ptr<arrow::DataType>& type) {
  const auto& dict = static_cast<const arrow::DictionaryArray&>(*encoded);
  auto builder = arrow::MakeBuilder(type).ValueOrDie();
  for (int64_t i = 0; i < dict.length(); ++i) {
    if (dict.IsNull(i) || dict.dictionary()->IsNull(dict.GetValueIndex(i))) {
      EXPECT_TRUE(builder->AppendNull().ok());
    } else {
      auto scalar = dict.dictionary()->GetScalar(dict.GetValueIndex(i)).ValueOrDie();
      EXPECT_TRUE(builder->AppendScalar(*scalar).ok());
    }
  }
  return builder->Finish().ValueOrDie();
}

TEST(EncodeStringDictionary, KeepsValuesAndNullsInOrderOfFirstAppearance) {
  for (const auto& type : {arrow::utf8(), arrow::large_utf8()}) {
    auto strings = JsonArray(
        type, R"(["b", "a", null, "b", "", "caf\u00e9", "a", null, ""])");
    auto encoded = Encode(strings);
    ASSERT_NE(encoded, nullptr);
    EXPECT_TRUE(encoded->type()->Equals(*EncodedStringType(type)));
    const auto& dict = static_cast<const arrow::DictionaryArray&>(*encoded);
    // Null is an entry, so the indices carry no nulls.
    EXPECT_TRUE(dict.dictionary()->Equals(
        *JsonArray(type, R"(["b", "a", null, "", "caf\u00e9"])")));
    EXPECT_EQ(dict.null_count(), 0);
    EXPECT_TRUE(Decode(encoded, type)->Equals(*strings)) << Decode(encoded, type)->ToString();
  }
}

TEST(EncodeStringDictionary, ReadsOnlyTheSliceOfASlicedArray) {
  auto strings =
      JsonArray(arrow::utf8(), R"(["x", "y", null, "y", "z", "q"])")->Slice(1, 4);
  auto encoded = Encode(strings);
  ASSERT_NE(encoded, nullptr);
  EXPECT_TRUE(Decode(encoded, arrow::utf8())->Equals(*strings));
  EXPECT_EQ(static_cast<const arrow::DictionaryArray&>(*encoded).dictionary()->length(), 3);
}

TEST(EncodeStringDictionary, RefusesWhenThereAreTooManyDistinctValues) {
  arrow::StringBuilder unique;
  arrow::StringBuilder repeated;
  for (int i = 0; i < 20000; ++i) {
    ASSERT_TRUE(unique.Append("v" + std::to_string(i)).ok());
    ASSERT_TRUE(repeated.Append("v" + std::to_string(i % kMaxDictionaryValues)).ok());
  }
  EXPECT_EQ(Encode(unique.Finish().ValueOrDie()), nullptr);
  auto at_limit = Encode(repeated.Finish().ValueOrDie());
  ASSERT_NE(at_limit, nullptr);
  EXPECT_EQ(static_cast<const arrow::DictionaryArray&>(*at_limit).dictionary()->length(),
            kMaxDictionaryValues);
  // Short columns encode while at most about half their values are distinct.
  EXPECT_NE(Encode(JsonArray(arrow::utf8(), R"(["a", "b", "c"])")), nullptr);
  EXPECT_FALSE(EncodeStringDictionary(*JsonArray(arrow::int32(), "[1]"),
                                      arrow::default_memory_pool())
                   .ok());
}

// The scan drops the dead rows of encoded columns with the table's gather.
TEST(LiveRowsOfEncodedColumns, KeepTheLiveRowsAndTheSameDictionary) {
  auto strings = JsonArray(arrow::utf8(), R"(["a", null, "b", "a", "c", null])");
  auto encoded = Encode(strings);
  ASSERT_NE(encoded, nullptr);
  auto alive = arrow::AllocateEmptyBitmap(6).ValueOrDie();
  alive->mutable_data()[0] = 0b101110;  // rows 1, 2, 3, 5
  auto batch = arrow::RecordBatch::Make(
      arrow::schema({arrow::field("s", encoded->type())}), 6, {encoded});
  auto filter = [&](int64_t live_rows) {
    return table_internal::GatherLiveRows(batch->schema(), {{batch, alive, live_rows}},
                                          arrow::default_memory_pool());
  };
  ASSERT_OK_AND_ASSIGN(auto live_batch, filter(/*live_rows=*/4));
  auto live = live_batch->column(0);
  EXPECT_TRUE(Decode(live, arrow::utf8())
                  ->Equals(*JsonArray(arrow::utf8(), R"([null, "b", "a", null])")));
  EXPECT_EQ(live->null_count(), 0);
  EXPECT_EQ(static_cast<const arrow::DictionaryArray&>(*live).dictionary()->data(),
            static_cast<const arrow::DictionaryArray&>(*encoded).dictionary()->data());
  EXPECT_FALSE(filter(/*live_rows=*/3).ok());
}

}  // namespace
}  // namespace rill::sql_internal
