// JsonDecoder: NDJSON / JSON arrays into Arrow by schema, with per-record rejects.
#include "rill/connector/json_decoder.h"

#include <random>

#include <arrow/api.h>
#include <arrow/io/memory.h>
#include <arrow/json/api.h>
#include <arrow/json/from_string.h>
#include <gtest/gtest.h>

#include "table/test_util.h"

namespace rill {
namespace {

std::unique_ptr<JsonDecoder> MakeDecoder(std::shared_ptr<arrow::Schema> schema,
                                         UnknownFieldPolicy unknown = UnknownFieldPolicy::kIgnore) {
  JsonDecodeOptions options;
  options.schema = std::move(schema);
  options.unknown_fields = unknown;
  auto decoder = JsonDecoder::Make(options);
  EXPECT_TRUE(decoder.ok()) << decoder.status();
  return std::move(*decoder);
}

std::shared_ptr<arrow::Schema> Events() {
  return arrow::schema({arrow::field("id", arrow::int64()), arrow::field("price", arrow::float64()),
                        arrow::field("ok", arrow::boolean()), arrow::field("name", arrow::utf8())});
}

std::shared_ptr<arrow::Array> Col(const DecodeResult& r, const std::string& name) {
  return r.batch->GetColumnByName(name);
}

TEST(JsonDecoder, DecodesNdjsonByTheSchemaWithNullsForMissingFields) {
  auto d = MakeDecoder(Events());
  RILL_ASSERT_OK_AND_ASSIGN(
      auto r, d->Decode("{\"id\":1,\"price\":2.5,\"ok\":true,\"name\":\"a\\u00e9\"}\n"
                        "\r\n"
                        "{\"name\":\"b\",\"id\":2,\"price\":3}\r\n"
                        "{\"id\":3,\"price\":null,\"extra\":[1,2]}"));
  EXPECT_TRUE(r.rejects.empty());
  ASSERT_EQ(r.batch->num_rows(), 3);
  EXPECT_EQ(r.records, 3);
  EXPECT_EQ(r.unknown_fields, 1);
  EXPECT_TRUE(r.batch->schema()->Equals(*Events()));
  auto expected = arrow::RecordBatch::FromStructArray(
                      *arrow::json::ArrayFromJSONString(
                           arrow::struct_(Events()->fields()),
                           R"([{"id":1,"price":2.5,"ok":true,"name":"aé"},
                               {"id":2,"price":3.0,"ok":null,"name":"b"},
                               {"id":3,"price":null,"ok":null,"name":null}])"))
                      .ValueOrDie();
  EXPECT_TRUE(r.batch->Equals(*expected)) << r.batch->ToString();
}

TEST(JsonDecoder, KeepsGoodLinesAndRejectsEachBadLineWithItsPosition) {
  auto d = MakeDecoder(Events());
  std::string input =
      "{\"id\":1}\n"
      "{\"id\":\"x\"}\n"
      "{\"id\":2,\n"
      "{\"id\":3}\n"
      "[1,2]\n"
      "{\"id\":4,\"id\":5}\n"
      "{\"id\":99999999999999999999}\n"
      "{\"id\":6} trailing\n"
      "{\"id\":7}\n";
  JsonInputPosition where;
  where.prefix = "file f.ndjson, ";
  RILL_ASSERT_OK_AND_ASSIGN(auto r, d->Decode(input, where));
  ASSERT_NE(r.batch, nullptr);
  EXPECT_EQ(Col(r, "id")->ToString(), arrow::json::ArrayFromJSONString(arrow::int64(), "[1,3,7]")
                                          .ValueOrDie()
                                          ->ToString());
  ASSERT_EQ(r.rejects.size(), 6u);
  EXPECT_EQ(r.rejects[0].position, "file f.ndjson, line 2, byte 9");
  EXPECT_NE(r.rejects[0].error.find("field 'id': expected int64, got a string"),
            std::string::npos)
      << r.rejects[0].error;
  EXPECT_EQ(r.rejects[0].raw, "{\"id\":\"x\"}");
  EXPECT_EQ(r.rejects[1].position, "file f.ndjson, line 3, byte 20");
  EXPECT_NE(r.rejects[2].error.find("expected a JSON object"), std::string::npos);
  EXPECT_NE(r.rejects[3].error.find("duplicate field 'id'"), std::string::npos);
  EXPECT_NE(r.rejects[4].error.find("out of range"), std::string::npos) << r.rejects[4].error;
  EXPECT_EQ(r.rejects[5].raw, "{\"id\":6} trailing") << r.rejects[5].error;
  EXPECT_EQ(r.records, 9);
}

TEST(JsonDecoder, RejectsUnknownFieldsWhenAskedTo) {
  auto d = MakeDecoder(Events(), UnknownFieldPolicy::kReject);
  RILL_ASSERT_OK_AND_ASSIGN(auto r, d->Decode("{\"id\":1}\n{\"id\":2,\"zzz\":0}\n"));
  ASSERT_EQ(r.rejects.size(), 1u);
  EXPECT_NE(r.rejects[0].error.find("unknown field 'zzz'"), std::string::npos);
  EXPECT_EQ(r.batch->num_rows(), 1);
}

TEST(JsonDecoder, DecodesATopLevelArrayAndRejectsNonObjects) {
  auto d = MakeDecoder(Events());
  RILL_ASSERT_OK_AND_ASSIGN(auto r,
                            d->Decode(" [ {\"id\":1}, 5, {\"id\":\"no\"},\n {\"id\":2} ] "));
  ASSERT_NE(r.batch, nullptr);
  EXPECT_EQ(r.batch->num_rows(), 2);
  ASSERT_EQ(r.rejects.size(), 2u);
  EXPECT_EQ(r.rejects[0].raw, "5");
  EXPECT_EQ(r.rejects[1].raw, "{\"id\":\"no\"}");
  RILL_ASSERT_OK_AND_ASSIGN(auto broken, d->Decode("[{\"id\":1}, {\"id\":2}, {\"id\": ]"));
  EXPECT_EQ(broken.batch->num_rows(), 2);
  EXPECT_EQ(broken.rejects.size(), 1u);
}

TEST(JsonDecoder, ConvertsTimestampsDatesAndNestedColumns) {
  auto schema = arrow::schema(
      {arrow::field("ts", arrow::timestamp(arrow::TimeUnit::MILLI, "UTC")),
       arrow::field("day", arrow::date32()),
       arrow::field("tags", arrow::list(arrow::utf8())),
       arrow::field("pos", arrow::struct_({arrow::field("x", arrow::int32()),
                                           arrow::field("y", arrow::float64())})),
       arrow::field("raw", arrow::utf8())});
  auto d = MakeDecoder(schema);
  RILL_ASSERT_OK_AND_ASSIGN(
      auto r, d->Decode(
                  "{\"ts\":\"2024-01-02T03:04:05.678Z\",\"day\":\"2024-01-02\",\"tags\":[\"a\","
                  "null],\"pos\":{\"x\":1,\"y\":2.5,\"z\":0},\"raw\":{\"k\":[1, 2]}}\n"
                  "{\"ts\":1000,\"day\":3,\"tags\":[],\"pos\":{\"y\":1},\"raw\":[7]}\n"
                  "{\"ts\":\"2024-01-02 03:04:05.123456\",\"pos\":{\"x\":\"bad\"}}\n"
                  "{\"ts\":\"yesterday\"}\n"));
  ASSERT_EQ(r.rejects.size(), 2u);
  EXPECT_NE(r.rejects[0].error.find("pos.x"), std::string::npos) << r.rejects[0].error;
  EXPECT_NE(r.rejects[1].error.find("ISO-8601"), std::string::npos) << r.rejects[1].error;
  auto expected = arrow::RecordBatch::FromStructArray(
                      *arrow::json::ArrayFromJSONString(
                           arrow::struct_(schema->fields()),
                           R"([{"ts":"2024-01-02T03:04:05.678","day":19724,"tags":["a",null],
                                "pos":{"x":1,"y":2.5},"raw":"{\"k\":[1, 2]}"},
                               {"ts":1000,"day":3,"tags":[],"pos":{"x":null,"y":1.0},"raw":"[7]"}])"))
                      .ValueOrDie();
  EXPECT_TRUE(r.batch->Equals(*expected)) << r.batch->ToString();
}

TEST(JsonDecoder, InfersASchemaFromTheFirstInputAndKeepsIt) {
  auto d = MakeDecoder(nullptr);
  RILL_ASSERT_OK_AND_ASSIGN(
      auto r, d->Decode("{\"a\":1,\"b\":\"x\",\"c\":null}\n{\"a\":2.5,\"d\":true,\"e\":{}}\n"
                        "{\"a\":3,\"b\":4}\nnot json\n"));
  auto expected = arrow::schema(
      {arrow::field("a", arrow::float64()), arrow::field("b", arrow::utf8()),
       arrow::field("c", arrow::utf8()), arrow::field("d", arrow::boolean()),
       arrow::field("e", arrow::utf8())});
  EXPECT_TRUE(r.batch->schema()->Equals(*expected)) << r.batch->schema()->ToString();
  EXPECT_EQ(r.batch->num_rows(), 3);
  EXPECT_EQ(r.rejects.size(), 1u);
  EXPECT_EQ(r.batch->GetColumnByName("b")->ToString(),
            arrow::json::ArrayFromJSONString(arrow::utf8(), R"(["x",null,"4"])")
                .ValueOrDie()
                ->ToString());
  RILL_ASSERT_OK_AND_ASSIGN(auto r2, d->Decode("{\"a\":\"s\"}\n"));
  EXPECT_EQ(r2.rejects.size(), 1u);  // the schema stays float64 for a
}

TEST(JsonDecoder, RejectsRecordsOverTheSizeLimitAndTruncatesRawBytes) {
  JsonDecodeOptions options;
  options.schema = Events();
  options.max_record_bytes = 1000;
  options.max_raw_bytes = 10;
  RILL_ASSERT_OK_AND_ASSIGN(auto d, JsonDecoder::Make(options));
  std::string big = "{\"name\":\"" + std::string(2000, 'x') + "\"}";
  RILL_ASSERT_OK_AND_ASSIGN(auto r, d->Decode(big + "\n{\"id\":1}\n"));
  ASSERT_EQ(r.rejects.size(), 1u);
  EXPECT_EQ(r.rejects[0].raw.size(), 10u);
  EXPECT_EQ(r.rejects[0].raw_size, static_cast<int64_t>(big.size()));
  EXPECT_NE(r.rejects[0].error.find("exceeds the limit"), std::string::npos);
  EXPECT_EQ(r.batch->num_rows(), 1);
}

TEST(JsonDecoder, DecodesATenMegabyteLine) {
  auto d = MakeDecoder(Events());
  std::string name(10 << 20, 'y');
  RILL_ASSERT_OK_AND_ASSIGN(auto r, d->Decode("{\"id\":1,\"name\":\"" + name + "\"}\n"));
  ASSERT_EQ(r.batch->num_rows(), 1);
  EXPECT_EQ(std::static_pointer_cast<arrow::StringArray>(Col(r, "name"))->GetView(0).size(),
            name.size());
}

TEST(JsonDecoder, RejectsInvalidUtf8) {
  auto d = MakeDecoder(Events());
  RILL_ASSERT_OK_AND_ASSIGN(auto r, d->Decode("{\"name\":\"a\xff\xfe\"}\n{\"id\":1}\n"));
  ASSERT_EQ(r.rejects.size(), 1u);
  EXPECT_NE(r.rejects[0].error.find("UTF"), std::string::npos) << r.rejects[0].error;
  EXPECT_EQ(r.batch->num_rows(), 1);
}

}  // namespace
}  // namespace rill
