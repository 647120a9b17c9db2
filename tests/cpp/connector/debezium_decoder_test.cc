// JsonDecoder's row operations: the Debezium envelope (format kDebezium, with
// and without the schema/payload wrapper), source.ts_ms into a column, and an
// op_column of plain records. Fixtures: tests/data/debezium (written by hand
// from Debezium's documented PostgreSQL change events).
#include <fstream>
#include <sstream>

#include <arrow/api.h>
#include <arrow/json/from_string.h>
#include <gtest/gtest.h>

#include "rill/connector/json_decoder.h"
#include "rill/connector/json_stream_connector.h"
#include "table/test_util.h"

namespace rill {
namespace {

std::string Fixture(const std::string& name) {
  std::ifstream in(std::string(RILL_SOURCE_DIR) + "/tests/data/debezium/" + name);
  EXPECT_TRUE(in.good()) << name;
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::shared_ptr<arrow::Schema> Customers(std::shared_ptr<arrow::DataType> ts_type = nullptr) {
  std::vector<std::shared_ptr<arrow::Field>> fields = {
      arrow::field("id", arrow::int32(), /*nullable=*/false),
      arrow::field("first_name", arrow::utf8(), /*nullable=*/false),
      arrow::field("last_name", arrow::utf8()), arrow::field("email", arrow::utf8())};
  if (ts_type) fields.push_back(arrow::field("changed_at", ts_type));
  return arrow::schema(fields);
}

std::unique_ptr<JsonDecoder> Debezium(std::shared_ptr<arrow::Schema> schema,
                                      std::string ts_ms_column = "") {
  JsonDecodeOptions options;
  options.schema = std::move(schema);
  options.format = JsonFormat::kDebezium;
  options.ts_ms_column = std::move(ts_ms_column);
  auto decoder = JsonDecoder::Make(options);
  EXPECT_TRUE(decoder.ok()) << decoder.status();
  return decoder.ok() ? std::move(*decoder) : nullptr;
}

std::vector<int8_t> Ops(const arrow::RecordBatch& batch) {
  auto col = batch.GetColumnByName("_rill_op");
  EXPECT_NE(col, nullptr) << batch.schema()->ToString();
  std::vector<int8_t> out;
  if (!col) return out;
  EXPECT_EQ(col->type_id(), arrow::Type::INT8);
  EXPECT_EQ(col->null_count(), 0);
  const auto& ops = static_cast<const arrow::Int8Array&>(*col);
  for (int64_t i = 0; i < ops.length(); ++i) out.push_back(ops.Value(i));
  return out;
}

// c/u/r upsert (0), d deletes (1), t truncates (2), in the fixture's order.
const std::vector<int8_t> kFixtureOps = {0, 0, 0, 0, 0, 0, 1, 0, 1, 0, 2, 0, 0, 0, 1, 0};

TEST(DebeziumDecoder, DecodesEveryOpOfTheFixtureInOrder) {
  auto d = Debezium(Customers());
  RILL_ASSERT_OK_AND_ASSIGN(auto r, d->Decode(Fixture("events.ndjson")));
  ASSERT_TRUE(r.rejects.empty()) << r.rejects[0].error;
  ASSERT_NE(r.batch, nullptr);
  EXPECT_EQ(r.records, 16);
  EXPECT_EQ(Ops(*r.batch), kFixtureOps);
  EXPECT_TRUE(d->schema()->Equals(*Customers()));
  EXPECT_EQ(r.batch->schema()->field(4)->name(), "_rill_op");
  // Upserts carry `after`; deletes `before` (the key, other columns null); the
  // truncate is all nulls.
  auto ids = std::static_pointer_cast<arrow::Int32Array>(r.batch->GetColumnByName("id"));
  auto first = std::static_pointer_cast<arrow::StringArray>(
      r.batch->GetColumnByName("first_name"));
  const std::vector<int> expected_ids = {1, 2, 3, 4, 1, 4, 2, 5, 5, 5, -1, 6, 7, 6, 7, 8};
  for (int64_t i = 0; i < r.batch->num_rows(); ++i) {
    if (expected_ids[i] < 0) {
      EXPECT_TRUE(ids->IsNull(i));
      EXPECT_TRUE(first->IsNull(i));
    } else {
      EXPECT_EQ(ids->Value(i), expected_ids[i]) << "row " << i;
    }
  }
  EXPECT_EQ(first->GetString(4), "Anne Marie");  // the update's after
  EXPECT_TRUE(first->IsNull(6));                  // delete with the key only
  EXPECT_EQ(first->GetString(8), "Jane");         // delete with REPLICA IDENTITY FULL
  EXPECT_TRUE(first->IsNull(14));                 // delete whose before is {"id": 7}
}

TEST(DebeziumDecoder, DecodesTheSchemaPayloadWrapperAsTheBareEnvelope) {
  auto bare = Debezium(Customers(), "changed_at");
  auto wrapped = Debezium(Customers(), "changed_at");
  RILL_ASSERT_OK_AND_ASSIGN(auto a, bare->Decode(Fixture("events.ndjson")));
  RILL_ASSERT_OK_AND_ASSIGN(auto b, wrapped->Decode(Fixture("events_wrapped.ndjson")));
  ASSERT_TRUE(b.rejects.empty()) << b.rejects[0].error;
  ASSERT_NE(a.batch, nullptr);
  ASSERT_NE(b.batch, nullptr);
  EXPECT_TRUE(a.batch->Equals(*b.batch)) << a.batch->ToString() << b.batch->ToString();
}

TEST(DebeziumDecoder, PutsSourceTsMsIntoTheTsMsColumnByItsType) {
  // Milliseconds of the fixture's first two events' source.ts_ms.
  const int64_t t0 = 1559033904037, t1 = 1559033904074;
  struct Case {
    std::shared_ptr<arrow::DataType> type;
    int64_t first, second;
  };
  const Case cases[] = {
      {arrow::timestamp(arrow::TimeUnit::MILLI, "UTC"), t0, t1},
      {arrow::timestamp(arrow::TimeUnit::MICRO), t0 * 1000, t1 * 1000},
      {arrow::timestamp(arrow::TimeUnit::NANO, "UTC"), t0 * 1000000, t1 * 1000000},
      {arrow::timestamp(arrow::TimeUnit::SECOND), t0 / 1000, t1 / 1000},
      {arrow::int64(), t0, t1},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.type->ToString());
    auto d = Debezium(Customers(c.type), "changed_at");
    RILL_ASSERT_OK_AND_ASSIGN(auto r, d->Decode(Fixture("events.ndjson")));
    ASSERT_NE(r.batch, nullptr);
    auto col = r.batch->GetColumnByName("changed_at");
    ASSERT_TRUE(col->type()->Equals(*c.type));
    RILL_ASSERT_OK_AND_ASSIGN(auto s0, col->GetScalar(0));
    RILL_ASSERT_OK_AND_ASSIGN(auto s1, col->GetScalar(1));
    RILL_ASSERT_OK_AND_ASSIGN(auto e0, arrow::MakeScalar(c.type, c.first));
    RILL_ASSERT_OK_AND_ASSIGN(auto e1, arrow::MakeScalar(c.type, c.second));
    EXPECT_TRUE(s0->Equals(*e0)) << s0->ToString();
    EXPECT_TRUE(s1->Equals(*e1)) << s1->ToString();
    EXPECT_EQ(col->null_count(), 0);
  }
  // int32 cannot hold milliseconds of 2019: the records are rejects, named.
  auto narrow = Debezium(Customers(arrow::int32()), "changed_at");
  RILL_ASSERT_OK_AND_ASSIGN(auto r, narrow->Decode(Fixture("events.ndjson")));
  ASSERT_EQ(r.rejects.size(), 16u);
  EXPECT_NE(r.rejects[0].error.find("source.ts_ms"), std::string::npos) << r.rejects[0].error;
}

TEST(DebeziumDecoder, AddsAMissingTsMsColumnAndRefusesOtherTypes) {
  auto d = Debezium(Customers(), "ingested_at");
  ASSERT_NE(d, nullptr);
  auto f = d->schema()->GetFieldByName("ingested_at");
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(f->type()->Equals(*arrow::timestamp(arrow::TimeUnit::MILLI, "UTC")));
  RILL_ASSERT_OK_AND_ASSIGN(
      auto r, d->Decode(R"({"op":"c","after":{"id":1,"first_name":"a"},"source":{"ts_ms":5}})"
                        "\n"
                        R"({"op":"c","after":{"id":2,"first_name":"b"},"source":{}})"));
  ASSERT_EQ(r.batch->num_rows(), 2);
  auto col = r.batch->GetColumnByName("ingested_at");
  EXPECT_EQ(static_cast<const arrow::TimestampArray&>(*col).Value(0), 5);
  EXPECT_TRUE(col->IsNull(1));  // no source.ts_ms: null

  JsonDecodeOptions options;
  options.schema = Customers(arrow::utf8());
  options.format = JsonFormat::kDebezium;
  options.ts_ms_column = "changed_at";
  auto refused = JsonDecoder::Make(options);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("timestamp or an integer"), std::string::npos);
  options.format = JsonFormat::kJson;
  options.schema = Customers();
  auto plain = JsonDecoder::Make(options);
  ASSERT_FALSE(plain.ok());
  EXPECT_NE(plain.status().message().find("format='debezium'"), std::string::npos);
}

TEST(DebeziumDecoder, RejectsEachMalformedEnvelopeWithItsReasonAndKeepsTheRest) {
  // The malformed corpus, each line between two good events.
  std::istringstream bad(Fixture("malformed.ndjson"));
  std::istringstream good(Fixture("events.ndjson"));
  std::string input, line;
  std::vector<std::string> bad_lines;
  while (std::getline(bad, line)) bad_lines.push_back(line);
  for (const auto& b : bad_lines) {
    std::getline(good, line);
    input += line + "\n" + b + "\n";
  }
  while (std::getline(good, line)) input += line + "\n";
  const std::vector<std::string> reasons = {
      "",  // unclosed object: simdjson's message
      "expected a JSON object",
      "expected a JSON object",
      "missing field 'op'",
      "unknown op 'x'",
      "op 'c' needs an 'after' object (the row), got null",
      "op 'd' needs a 'before' object",
      "field 'after' must be an object or null",
      "field 'source.ts_ms' must be an integer",
      "field 'payload' must be an object",
      "duplicate field 'op'",
      "'after': field 'id': expected int32",
      "field 'op' must be a string",
      "the payload has no field 'op'",
  };
  ASSERT_EQ(bad_lines.size(), reasons.size());
  auto d = Debezium(Customers());
  RILL_ASSERT_OK_AND_ASSIGN(auto r, d->Decode(input));
  ASSERT_EQ(r.rejects.size(), reasons.size());
  EXPECT_EQ(r.records, 16 + static_cast<int64_t>(reasons.size()));
  for (size_t i = 0; i < reasons.size(); ++i) {
    EXPECT_EQ(r.rejects[i].raw, bad_lines[i]);
    EXPECT_FALSE(r.rejects[i].error.empty());
    EXPECT_NE(r.rejects[i].error.find(reasons[i]), std::string::npos)
        << "line " << i << ": " << r.rejects[i].error;
    EXPECT_EQ(r.rejects[i].position.rfind("line " + std::to_string(2 * i + 2) + ",", 0), 0u)
        << r.rejects[i].position;
  }
  ASSERT_NE(r.batch, nullptr);
  EXPECT_EQ(Ops(*r.batch), kFixtureOps);
}

TEST(DebeziumDecoder, EnforcesRequiredColumnsOnUpsertsOnly) {
  auto d = Debezium(Customers());
  RILL_ASSERT_OK_AND_ASSIGN(
      auto r, d->Decode(R"({"op":"c","after":{"id":1}})" "\n"
                        R"({"op":"d","before":{"id":1}})" "\n"
                        R"({"op":"u","after":{"id":2,"first_name":null}})" "\n"));
  ASSERT_EQ(r.rejects.size(), 2u);
  EXPECT_NE(r.rejects[0].error.find("missing field 'first_name'"), std::string::npos)
      << r.rejects[0].error;
  EXPECT_NE(r.rejects[1].error.find("null in a non-nullable column"), std::string::npos);
  ASSERT_NE(r.batch, nullptr);
  EXPECT_EQ(Ops(*r.batch), std::vector<int8_t>{1});
}

TEST(DebeziumDecoder, InfersTheSchemaFromTheRowsNotTheEnvelope) {
  JsonDecodeOptions options;
  options.format = JsonFormat::kDebezium;
  RILL_ASSERT_OK_AND_ASSIGN(auto d, JsonDecoder::Make(options));
  RILL_ASSERT_OK_AND_ASSIGN(auto r, d->Decode(Fixture("events_wrapped.ndjson")));
  ASSERT_TRUE(r.rejects.empty());
  EXPECT_TRUE(d->schema()->Equals(*arrow::schema(
      {arrow::field("id", arrow::int64()), arrow::field("first_name", arrow::utf8()),
       arrow::field("last_name", arrow::utf8()), arrow::field("email", arrow::utf8())})))
      << d->schema()->ToString();
  EXPECT_EQ(Ops(*r.batch), kFixtureOps);
}

TEST(DebeziumDecoder, DecodesAJsonArrayOfEnvelopes) {
  auto d = Debezium(Customers());
  RILL_ASSERT_OK_AND_ASSIGN(
      auto r, d->Decode(R"([{"op":"r","after":{"id":1,"first_name":"a"}},
                            {"op":"t"}, {"op":"d","before":{"id":1}}])"));
  ASSERT_TRUE(r.rejects.empty());
  EXPECT_EQ(Ops(*r.batch), (std::vector<int8_t>{0, 2, 1}));
}

TEST(OpColumnDecoder, TurnsTheOpFieldIntoRowOpsAndLeavesItOutOfTheColumns) {
  JsonDecodeOptions options;
  options.schema = arrow::schema({arrow::field("k", arrow::int64()),
                                  arrow::field("v", arrow::utf8())});
  options.op_column = "_op";
  RILL_ASSERT_OK_AND_ASSIGN(auto d, JsonDecoder::Make(options));
  RILL_ASSERT_OK_AND_ASSIGN(
      auto r, d->Decode(R"({"k":1,"v":"a","_op":"insert"})" "\n"
                        R"({"k":1,"v":"b","_op":"UPDATE"})" "\n"
                        R"({"_op":"delete","k":1})" "\n"
                        R"({"k":2,"v":"c"})" "\n"
                        R"({"k":3,"_op":"merge"})" "\n"
                        R"({"k":3,"_op":7})" "\n"
                        R"({"k":2,"_op":"d"})" "\n"
                        R"({"_op":"truncate"})" "\n"
                        R"({"k":4,"_op":null,"v":"e"})" "\n"
                        R"({"k":5,"_op":"u"})"));
  ASSERT_EQ(r.rejects.size(), 2u);
  EXPECT_NE(r.rejects[0].error.find("field '_op': unknown operation 'merge'"),
            std::string::npos) << r.rejects[0].error;
  EXPECT_NE(r.rejects[1].error.find("unknown operation '7'"), std::string::npos);
  ASSERT_NE(r.batch, nullptr);
  EXPECT_EQ(Ops(*r.batch), (std::vector<int8_t>{0, 0, 1, 0, 1, 2, 0, 0}));
  EXPECT_EQ(r.batch->schema()->GetFieldIndex("_op"), -1);
  EXPECT_TRUE(d->schema()->Equals(*options.schema));
  auto v = std::static_pointer_cast<arrow::StringArray>(r.batch->GetColumnByName("v"));
  EXPECT_EQ(v->GetString(1), "b");
  EXPECT_EQ(v->GetString(6), "e");
}

TEST(OpColumnDecoder, LeavesTheOpFieldOutOfAnInferredSchema) {
  JsonDecodeOptions options;
  options.op_column = "_op";
  RILL_ASSERT_OK_AND_ASSIGN(auto d, JsonDecoder::Make(options));
  RILL_ASSERT_OK_AND_ASSIGN(auto r, d->Decode(R"({"_op":"c","k":1,"tags":[1]})" "\n"
                                              R"({"k":1,"_op":"d"})"));
  ASSERT_TRUE(r.rejects.empty());
  EXPECT_TRUE(d->schema()->Equals(*arrow::schema(
      {arrow::field("k", arrow::int64()), arrow::field("tags", arrow::utf8())})))
      << d->schema()->ToString();
  EXPECT_EQ(Ops(*r.batch), (std::vector<int8_t>{0, 1}));
  // A target schema naming the op field or _rill_op does not make them columns.
  ASSERT_TRUE(d->SetSchema(arrow::schema({arrow::field("k", arrow::int64()),
                                          arrow::field("_op", arrow::utf8()),
                                          arrow::field("_rill_op", arrow::int8())}))
                  .ok());
  EXPECT_EQ(d->schema()->num_fields(), 1);
}

TEST(JsonFormatName, ParsesTheConnectorsFormatOption) {
  RILL_ASSERT_OK_AND_ASSIGN(auto f, ParseJsonFormat("debezium"));
  EXPECT_EQ(f, JsonFormat::kDebezium);
  RILL_ASSERT_OK_AND_ASSIGN(f, ParseJsonFormat("ndjson"));
  EXPECT_EQ(f, JsonFormat::kJson);
  auto bad = ParseJsonFormat("avro2");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("debezium"), std::string::npos);
}

}  // namespace
}  // namespace rill

namespace rill {
namespace {

std::vector<int8_t> DrainOps(JsonStreamConnector& c, int64_t* rows_without_ops) {
  std::vector<int8_t> ops;
  auto polled = c.Poll();
  EXPECT_TRUE(polled.ok()) << polled.status();
  if (!polled.ok()) return ops;
  for (const auto& b : *polled) {
    if (b->GetColumnByName("_rill_op") == nullptr) {
      *rows_without_ops += b->num_rows();
      continue;
    }
    for (int8_t op : Ops(*b)) ops.push_back(op);
  }
  return ops;
}

TEST(JsonStreamConnectorPushFormat, DecodesEachPushByItsOwnFormat) {
  JsonStreamOptions options;
  options.decode.schema = Customers();
  RILL_ASSERT_OK_AND_ASSIGN(auto c, JsonStreamConnector::Make("customers", options));
  // The connector's own format (json), then a Debezium push, then an op_column push.
  RILL_ASSERT_OK_AND_ASSIGN(auto plain, c->Push(R"({"id":1,"first_name":"a"})"));
  EXPECT_EQ(plain.accepted, 1);
  PushFormat debezium;
  debezium.format = JsonFormat::kDebezium;
  debezium.ts_ms_column = "changed_at";
  RILL_ASSERT_OK_AND_ASSIGN(auto cdc, c->Push(Fixture("events.ndjson"), 10, debezium));
  EXPECT_EQ(cdc.accepted, 16);
  PushFormat ops;
  ops.op_column = "_op";
  // A delete needs only the key; an upsert needs the required first_name.
  RILL_ASSERT_OK_AND_ASSIGN(auto mixed, c->Push(R"({"id":1,"_op":"d"})" "\n"
                                                R"({"id":2,"_op":"nope"})" "\n"
                                                R"({"id":3,"_op":"u"})", 10, ops));
  EXPECT_EQ(mixed.accepted, 1);
  ASSERT_EQ(mixed.first_rejects.size(), 2u);
  EXPECT_NE(mixed.first_rejects[0].error.find("unknown operation 'nope'"), std::string::npos);
  EXPECT_NE(mixed.first_rejects[1].error.find("missing field 'first_name'"), std::string::npos)
      << mixed.first_rejects[1].error;
  int64_t without = 0;
  std::vector<int8_t> expected = kFixtureOps;
  expected.push_back(1);
  EXPECT_EQ(DrainOps(*c, &without), expected);
  EXPECT_EQ(without, 1);
  // A bad combination is refused for that push only.
  PushFormat bad;
  bad.ts_ms_column = "changed_at";  // without debezium
  auto refused = c->Push("{}", 10, bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(refused.status().IsInvalid());
}

}  // namespace
}  // namespace rill
