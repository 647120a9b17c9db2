// AvroDecoder: Avro binary into Arrow by the resolution rules, with per-record
// errors naming the field and the byte offset.
#include "rill/connector/avro_decoder.h"

#include <arrow/api.h>
#include <arrow/json/from_string.h>
#include <gtest/gtest.h>

#include "rill/connector/avro_schema.h"
#include "table/test_util.h"

namespace rill {
namespace {

/// A tiny Avro binary writer for hand-made records.
struct Bytes {
  std::string s;
  Bytes& Long(int64_t v) {
    uint64_t z = (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
    while (z >= 0x80) {
      s.push_back(static_cast<char>((z & 0x7f) | 0x80));
      z >>= 7;
    }
    s.push_back(static_cast<char>(z));
    return *this;
  }
  Bytes& Str(std::string_view v) {
    Long(static_cast<int64_t>(v.size()));
    s.append(v);
    return *this;
  }
  Bytes& Double(double d) {
    s.append(reinterpret_cast<const char*>(&d), 8);
    return *this;
  }
  Bytes& Float(float f) {
    s.append(reinterpret_cast<const char*>(&f), 4);
    return *this;
  }
  Bytes& Bool(bool b) {
    s.push_back(b ? 1 : 0);
    return *this;
  }
  Bytes& Raw(std::string_view r) {
    s.append(r);
    return *this;
  }
};

std::shared_ptr<const AvroSchema> Parse(std::string_view json) {
  auto s = AvroSchema::Parse(json);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *s : nullptr;
}

std::unique_ptr<AvroDecoder> MakeDecoder(std::shared_ptr<arrow::Schema> schema) {
  AvroDecodeOptions o;
  o.schema = std::move(schema);
  auto d = AvroDecoder::Make(o);
  EXPECT_TRUE(d.ok()) << d.status();
  return std::move(*d);
}

std::shared_ptr<arrow::RecordBatch> Expected(const std::shared_ptr<arrow::Schema>& schema,
                                             const std::string& json) {
  auto a = arrow::json::ArrayFromJSONString(arrow::struct_(schema->fields()), json);
  EXPECT_TRUE(a.ok()) << a.status();
  return *arrow::RecordBatch::FromStructArray(*a);
}

void ExpectBatch(const std::shared_ptr<arrow::RecordBatch>& got,
                 const std::shared_ptr<arrow::RecordBatch>& want) {
  ASSERT_NE(got, nullptr);
  ASSERT_TRUE(got->ValidateFull().ok()) << got->ValidateFull();
  EXPECT_TRUE(got->Equals(*want)) << "got:\n" << got->ToString() << "\nwant:\n" << want->ToString();
}

const char* kUser = R"({"type":"record","name":"User","namespace":"t","fields":[
  {"name":"id","type":"long"},
  {"name":"name","type":"string"},
  {"name":"score","type":["null","double"],"default":null},
  {"name":"ok","type":"boolean"}]})";

TEST(AvroDecoder, DecodesRecordsIntoTheTargetColumnsByName) {
  auto writer = Parse(kUser);
  auto target = arrow::schema({arrow::field("name", arrow::utf8()), arrow::field("id", arrow::int64()),
                               arrow::field("score", arrow::float64()),
                               arrow::field("ok", arrow::boolean())});
  auto d = MakeDecoder(target);
  RILL_ASSERT_OK(d->Append(writer, Bytes().Long(1).Str("ann").Long(1).Double(2.5).Bool(true).s));
  RILL_ASSERT_OK(d->Append(writer, Bytes().Long(-7).Str("bo\xc3\xa9").Long(0).Bool(false).s));
  RILL_ASSERT_OK_AND_ASSIGN(auto batch, d->Flush());
  ExpectBatch(batch, Expected(target, R"([["ann", 1, 2.5, true], ["boé", -7, null, false]])"));
  RILL_ASSERT_OK_AND_ASSIGN(auto empty, d->Flush());
  EXPECT_EQ(empty, nullptr);
}

TEST(AvroDecoder, InfersTheSchemaFromTheWriterWithoutATarget) {
  auto writer = Parse(kUser);
  auto d = MakeDecoder(nullptr);
  RILL_ASSERT_OK(d->Append(writer, Bytes().Long(3).Str("x").Long(0).Bool(true).s));
  RILL_ASSERT_OK_AND_ASSIGN(auto batch, d->Flush());
  auto want = arrow::schema({arrow::field("id", arrow::int64()), arrow::field("name", arrow::utf8()),
                             arrow::field("score", arrow::float64()),
                             arrow::field("ok", arrow::boolean())});
  ExpectBatch(batch, Expected(want, R"([[3, "x", null, true]])"));
}

TEST(AvroDecoder, ResolvesMissingExtraAndPromotedFields) {
  // Writer: a (int), extra (string), f (float), s (bytes). Reader: a as int64
  // and double, f as double, s as string, plus a column the writer lacks.
  auto writer = Parse(R"({"type":"record","name":"R","fields":[
    {"name":"a","type":"int"},{"name":"extra","type":{"type":"array","items":"string"}},
    {"name":"f","type":"float"},{"name":"s","type":"bytes"}]})");
  auto target = arrow::schema({arrow::field("a", arrow::int64()), arrow::field("f", arrow::float64()),
                               arrow::field("s", arrow::utf8()), arrow::field("new", arrow::int32())});
  auto d = MakeDecoder(target);
  RILL_ASSERT_OK(d->Append(
      writer, Bytes().Long(42).Long(2).Str("p").Str("q").Long(0).Float(1.5f).Str("hi").s));
  RILL_ASSERT_OK_AND_ASSIGN(auto batch, d->Flush());
  ExpectBatch(batch, Expected(target, R"([[42, 1.5, "hi", null]])"));
}

TEST(AvroDecoder, DecodesNestedRecordsArraysMapsEnumsAsStructsListsMapsStrings) {
  auto writer = Parse(R"({"type":"record","name":"R","fields":[
    {"name":"addr","type":{"type":"record","name":"A","fields":[
        {"name":"city","type":"string"},{"name":"zip","type":["null","int"]}]}},
    {"name":"tags","type":{"type":"array","items":"string"}},
    {"name":"attrs","type":{"type":"map","values":"long"}},
    {"name":"color","type":{"type":"enum","name":"C","symbols":["RED","GREEN"]}},
    {"name":"addr_json","type":"A"}]})");
  auto target = arrow::schema(
      {arrow::field("addr", arrow::struct_({arrow::field("city", arrow::utf8()),
                                            arrow::field("zip", arrow::int32())})),
       arrow::field("tags", arrow::list(arrow::utf8())),
       arrow::field("attrs", arrow::map(arrow::utf8(), arrow::int64())),
       arrow::field("color", arrow::utf8()), arrow::field("addr_json", arrow::utf8())});
  auto d = MakeDecoder(target);
  Bytes b;
  b.Str("Oslo").Long(1).Long(150);              // addr
  b.Long(-2).Long(4).Str("a").Str("b").Long(0);  // tags: a block with its size
  b.Long(1).Str("k").Long(9).Long(0);           // attrs
  b.Long(1);                                     // color GREEN
  b.Str("Rome").Long(0);                         // addr_json, zip null
  RILL_ASSERT_OK(d->Append(writer, b.s));
  RILL_ASSERT_OK_AND_ASSIGN(auto batch, d->Flush());
  ExpectBatch(batch, Expected(target, R"([[{"city": "Oslo", "zip": 150}, ["a", "b"],
      [["k", 9]], "GREEN", "{\"city\":\"Rome\",\"zip\":null}"]])"));
}

TEST(AvroDecoder, DecodesLogicalTypes) {
  auto writer = Parse(R"({"type":"record","name":"R","fields":[
    {"name":"price","type":{"type":"bytes","logicalType":"decimal","precision":9,"scale":2}},
    {"name":"day","type":{"type":"int","logicalType":"date"}},
    {"name":"ts_ms","type":{"type":"long","logicalType":"timestamp-millis"}},
    {"name":"ts_us","type":{"type":"long","logicalType":"timestamp-micros"}},
    {"name":"id","type":{"type":"string","logicalType":"uuid"}}]})");
  RILL_ASSERT_OK_AND_ASSIGN(auto inferred, writer->ToArrowSchema());
  EXPECT_EQ(inferred->field(0)->type()->ToString(), "decimal128(9, 2)");
  EXPECT_EQ(inferred->field(2)->type()->ToString(), "timestamp[ms, tz=UTC]");
  // Reader: ts_ms into microseconds, ts_us into milliseconds (floored).
  auto target = arrow::schema(
      {arrow::field("price", arrow::decimal128(10, 3)), arrow::field("day", arrow::date32()),
       arrow::field("ts_ms", arrow::timestamp(arrow::TimeUnit::MICRO, "UTC")),
       arrow::field("ts_us", arrow::timestamp(arrow::TimeUnit::MILLI, "UTC")),
       arrow::field("id", arrow::utf8())});
  auto d = MakeDecoder(target);
  // -12.34 = -1234 unscaled: two's complement big-endian 0xfb 0x2e.
  Bytes b;
  b.Str(std::string("\xfb\x2e", 2)).Long(19000).Long(1700000000123).Long(-1500);
  b.Str("123e4567-e89b-12d3-a456-426614174000");
  RILL_ASSERT_OK(d->Append(writer, b.s));
  RILL_ASSERT_OK_AND_ASSIGN(auto batch, d->Flush());
  ExpectBatch(batch, Expected(target, R"([["-12.340", 19000, 1700000000123000, -2,
      "123e4567-e89b-12d3-a456-426614174000"]])"));
}

TEST(AvroDecoder, RejectsABadRecordNamingTheFieldAndByteAndKeepsTheOthers) {
  auto writer = Parse(R"({"type":"record","name":"R","fields":[
    {"name":"id","type":"long"},
    {"name":"inner","type":{"type":"record","name":"I","fields":[
        {"name":"c","type":{"type":"enum","name":"E","symbols":["A","B"]}}]}},
    {"name":"tags","type":{"type":"array","items":"string"}}]})");
  auto d = MakeDecoder(nullptr);
  RILL_ASSERT_OK(d->Append(writer, Bytes().Long(1).Long(0).Long(1).Str("x").Long(0).s));
  // Enum index 5 at byte 1.
  Status st = d->Append(writer, Bytes().Long(2).Long(5).Long(0).s);
  EXPECT_TRUE(st.IsInvalid());
  EXPECT_EQ(st.message(), "field 'inner.c': enum index 5 out of range (2 symbols) at byte 1");
  // A record cut inside the array's string: the items it appended are rolled back.
  st = d->Append(writer, Bytes().Long(3).Long(1).Long(2).Str("ok").Long(10).Raw("abc").s);
  EXPECT_EQ(st.message(), "field 'tags': length past the end of the record at byte 6");
  // Trailing bytes.
  st = d->Append(writer, Bytes().Long(4).Long(1).Long(0).Raw("zz").s);
  EXPECT_EQ(st.message(), "2 bytes left after the record at byte 3");
  RILL_ASSERT_OK(d->Append(writer, Bytes().Long(5).Long(1).Long(0).s));
  RILL_ASSERT_OK_AND_ASSIGN(auto batch, d->Flush());
  auto want = arrow::schema(
      {arrow::field("id", arrow::int64()),
       arrow::field("inner", arrow::struct_({arrow::field("c", arrow::utf8())})),
       arrow::field("tags", arrow::list(arrow::utf8()))});
  ExpectBatch(batch, Expected(want, R"([[1, {"c": "A"}, ["x"]], [5, {"c": "B"}, []]])"));
}

TEST(AvroDecoder, RejectsValuesThatDoNotFitTheColumn) {
  auto writer = Parse(R"({"type":"record","name":"R","fields":[
    {"name":"n","type":"long"},{"name":"s","type":"bytes"}]})");
  auto target = arrow::schema({arrow::field("n", arrow::int16()), arrow::field("s", arrow::utf8())});
  auto d = MakeDecoder(target);
  Status st = d->Append(writer, Bytes().Long(70000).Str("a").s);
  EXPECT_EQ(st.message(), "field 'n': 70000 out of range of int16 at byte 0");
  st = d->Append(writer, Bytes().Long(1).Str("\xff").s);
  EXPECT_EQ(st.message(), "field 's': invalid UTF-8 at byte 1");
  auto strings = Parse(R"({"type":"record","name":"R","fields":[{"name":"n","type":"string"}]})");
  st = d->Append(strings, Bytes().Str("12").s);
  EXPECT_EQ(st.message(), "field 'n': Avro string cannot be read as int16 at byte 0");
  EXPECT_EQ(d->num_rows(), 0);
}

TEST(AvroDecoder, DecodesConcatenatedRecordsAndTheConfluentFrame) {
  auto writer = Parse(R"({"type":"record","name":"R","fields":[{"name":"n","type":"int"}]})");
  std::string framed;
  AppendConfluentHeader(258, &framed);
  framed += Bytes().Long(7).Long(8).s;
  RILL_ASSERT_OK_AND_ASSIGN(auto frame, ParseConfluentFrame(framed));
  EXPECT_EQ(frame.schema_id, 258);
  auto d = MakeDecoder(nullptr);
  int64_t used = 0;
  RILL_ASSERT_OK(d->Append(writer, frame.body, 5, &used));
  EXPECT_EQ(used, 1);
  RILL_ASSERT_OK(d->Append(writer, frame.body.substr(1), 6, &used));
  EXPECT_EQ(d->num_rows(), 2);
  EXPECT_FALSE(ParseConfluentFrame(std::string("\x01\0\0\0\1", 5)).ok());
  EXPECT_FALSE(ParseConfluentFrame("\0\0").ok());
}

TEST(AvroSchema, RefusesInvalidSchemasWithAReason) {
  EXPECT_FALSE(AvroSchema::Parse("{").ok());
  auto st = AvroSchema::Parse(R"({"type":"record","name":"R","fields":[{"name":"a","type":"nope"}]})");
  EXPECT_EQ(st.status().message(), "Avro schema: record 'R', field 'a': unknown Avro type 'nope'");
  EXPECT_FALSE(AvroSchema::Parse(R"(["int","int"])").ok());
  EXPECT_FALSE(AvroSchema::Parse(R"({"type":"enum","name":"E","symbols":["A","A"]})").ok());
  // A recursive type parses; it has no Arrow mapping but can be read into a target.
  auto list = Parse(R"({"type":"record","name":"L","fields":[
    {"name":"v","type":"int"},{"name":"next","type":["null","L"]}]})");
  EXPECT_FALSE(list->ToArrowSchema().ok());
  auto target = arrow::schema({arrow::field("v", arrow::int32()), arrow::field("next", arrow::utf8())});
  auto d = MakeDecoder(target);
  RILL_ASSERT_OK(d->Append(list, Bytes().Long(1).Long(1).Long(2).Long(0).s));
  RILL_ASSERT_OK_AND_ASSIGN(auto batch, d->Flush());
  ExpectBatch(batch, Expected(target, R"([[1, "{\"v\":2,\"next\":null}"]])"));
}

TEST(AvroSchema, WritesAnAvroSchemaForAnArrowSchemaThatParsesBack) {
  auto schema = arrow::schema(
      {arrow::field("id", arrow::int64()), arrow::field("name", arrow::utf8()),
       arrow::field("ts", arrow::timestamp(arrow::TimeUnit::MICRO, "UTC")),
       arrow::field("p", arrow::decimal128(12, 4)),
       arrow::field("s", arrow::struct_({arrow::field("x", arrow::float64())})),
       arrow::field("l", arrow::list(arrow::int32()))});
  RILL_ASSERT_OK_AND_ASSIGN(auto json, ArrowToAvroSchemaJson(*schema, "my-topic"));
  RILL_ASSERT_OK_AND_ASSIGN(auto parsed, AvroSchema::Parse(json));
  RILL_ASSERT_OK_AND_ASSIGN(auto back, parsed->ToArrowSchema());
  EXPECT_EQ(back->field(2)->type()->ToString(), "timestamp[us, tz=UTC]");
  EXPECT_EQ(back->field(3)->type()->ToString(), "decimal128(12, 4)");
  EXPECT_EQ(back->field(5)->type()->ToString(), "list<item: int32>");
}

}  // namespace
}  // namespace rill
