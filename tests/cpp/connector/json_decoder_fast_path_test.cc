// JsonDecoder's fast paths: typed getters per column, raw-key matching against
// the predicted column, and nested values written into the column buffers as
// they are read.
// Randomized documents are checked against Arrow C++'s JSON reader (the oracle).
#include <random>

#include <arrow/api.h>
#include <arrow/io/memory.h>
#include <arrow/json/api.h>
#include <arrow/json/from_string.h>
#include <gtest/gtest.h>

#include "rill/connector/json_decoder.h"
#include "table/test_util.h"

namespace rill {
namespace {

std::unique_ptr<JsonDecoder> MakeDecoder(std::shared_ptr<arrow::Schema> schema) {
  JsonDecodeOptions options;
  options.schema = std::move(schema);
  auto decoder = JsonDecoder::Make(options);
  EXPECT_TRUE(decoder.ok()) << decoder.status();
  return std::move(*decoder);
}

std::shared_ptr<arrow::Schema> RandomSchema() {
  return arrow::schema({
      arrow::field("i", arrow::int64()),
      arrow::field("small", arrow::int32()),
      arrow::field("f", arrow::float64()),
      arrow::field("b", arrow::boolean()),
      arrow::field("s", arrow::utf8()),
      arrow::field("ts", arrow::timestamp(arrow::TimeUnit::MILLI)),
      arrow::field("tags", arrow::list(arrow::int64())),
      arrow::field("obj", arrow::struct_({arrow::field("a", arrow::int64()),
                                          arrow::field("n", arrow::list(arrow::utf8()))})),
  });
}

std::string RandomString(std::mt19937_64& rng) {
  static const char* kPieces[] = {"a", "Z", " ", "\\\"", "\\\\", "\\/", "\\n", "\\t",
                                  "\\u00e9", "\xc3\xa9", "\xf0\x9f\x98\x80", "\\ud83d\\ude00"};
  std::string out = "\"";
  for (int n = static_cast<int>(rng() % 10); n > 0; --n) out += kPieces[rng() % 12];
  return out + "\"";
}

/// One random record (fields in a random order, some missing, some null,
/// some keys escaped) that every reader must accept.
std::string RandomRecord(std::mt19937_64& rng) {
  std::vector<std::pair<std::string, std::string>> fields;
  auto maybe_null = [&](std::string v) { return rng() % 8 == 0 ? std::string("null") : v; };
  fields.emplace_back(rng() % 5 == 0 ? "\"\\u0069\"" : "\"i\"",
                      maybe_null(std::to_string(static_cast<int64_t>(rng()))));
  fields.emplace_back("\"small\"", maybe_null(std::to_string(static_cast<int32_t>(rng()))));
  const double d = static_cast<double>(static_cast<int64_t>(rng() % 2000001) - 1000000) / 64;
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.17g", d);
  fields.emplace_back("\"f\"", maybe_null(rng() % 4 == 0 ? std::to_string(rng() % 1000) : buf));
  fields.emplace_back("\"b\"", maybe_null(rng() % 2 ? "true" : "false"));
  fields.emplace_back("\"s\"", maybe_null(RandomString(rng)));
  std::snprintf(buf, sizeof(buf), "\"2024-%02d-%02dT%02d:%02d:%02d.%03d\"",
                static_cast<int>(rng() % 12 + 1), static_cast<int>(rng() % 28 + 1),
                static_cast<int>(rng() % 24), static_cast<int>(rng() % 60),
                static_cast<int>(rng() % 60), static_cast<int>(rng() % 1000));
  fields.emplace_back("\"ts\"", maybe_null(buf));
  std::string tags = "[";
  for (int n = static_cast<int>(rng() % 4); n > 0; --n) {
    tags += (tags.size() > 1 ? "," : "") + (rng() % 6 == 0 ? "null" : std::to_string(rng() % 100));
  }
  fields.emplace_back("\"tags\"", maybe_null(tags + "]"));
  std::string n = "[" + RandomString(rng) + "," + RandomString(rng) + "]";
  std::vector<std::string> obj_fields = {"\"a\":" + maybe_null(std::to_string(rng() % 9)),
                                         "\"n\":" + maybe_null(n)};
  if (rng() % 2) std::swap(obj_fields[0], obj_fields[1]);
  if (rng() % 4 == 0) obj_fields.pop_back();
  std::string obj = "{";
  for (const auto& f : obj_fields) obj += (obj.size() > 1 ? "," : "") + f;
  fields.emplace_back("\"obj\"", maybe_null(obj + "}"));
  if (rng() % 3 == 0) std::shuffle(fields.begin(), fields.end(), rng);
  std::string out = "{";
  for (const auto& [k, v] : fields) {
    if (rng() % 10 == 0) continue;  // missing -> null
    out += (out.size() > 1 ? "," : "") + k + ":" + v;
  }
  return out + "}";
}

std::shared_ptr<arrow::Table> ArrowRead(const std::string& ndjson,
                                        const std::shared_ptr<arrow::Schema>& schema) {
  auto read = arrow::json::ReadOptions::Defaults();
  read.use_threads = false;
  auto parse = arrow::json::ParseOptions::Defaults();
  parse.explicit_schema = schema;
  auto input = std::make_shared<arrow::io::BufferReader>(arrow::Buffer::FromString(ndjson));
  auto reader =
      arrow::json::TableReader::Make(arrow::default_memory_pool(), input, read, parse);
  EXPECT_TRUE(reader.ok()) << reader.status();
  auto table = (*reader)->Read();
  EXPECT_TRUE(table.ok()) << table.status();
  return *table;
}

TEST(JsonDecoderFastPath, RandomDocumentsDecodeLikeArrowsReader) {
  auto schema = RandomSchema();
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    std::mt19937_64 rng(seed);
    std::string good, mixed;
    int64_t bad = 0;
    // Bad records between good ones: each is rejected whole, and the columns
    // it had already read from must not shift the next rows.
    const char* kBad[] = {
        R"({"i":1,"small":2,"obj":{"a":1,"n":["x",3]}})",
        R"({"i":1,"obj":{"a":1,"zz":tru}})",
        R"({"s":"x","tags":[1,"2"]})",
        R"({"small":3000000000})",
        R"({"i":1.5})",
        R"({"f":"1"})",
        R"({"obj":{"n":["x"],"a":"1"}})",
        R"({"tags":[1,2,{"x":1}],"b":true})",
    };
    for (int r = 0; r < 400; ++r) {
      std::string line = RandomRecord(rng);
      good += line + "\n";
      mixed += line + "\n";
      if (rng() % 7 == 0) {
        mixed += std::string(kBad[rng() % 8]) + "\n";
        ++bad;
      }
    }
    auto d = MakeDecoder(schema);
    // Two pushes: the second one is sized from the first.
    const size_t cut = mixed.find('\n', mixed.size() / 3) + 1;
    RILL_ASSERT_OK_AND_ASSIGN(auto r1, d->Decode(std::string_view(mixed).substr(0, cut)));
    RILL_ASSERT_OK_AND_ASSIGN(auto r2, d->Decode(std::string_view(mixed).substr(cut)));
    EXPECT_EQ(static_cast<int64_t>(r1.rejects.size() + r2.rejects.size()), bad) << seed;
    RILL_ASSERT_OK_AND_ASSIGN(auto ours, arrow::Table::FromRecordBatches({r1.batch, r2.batch}));
    RILL_ASSERT_OK_AND_ASSIGN(ours, ours->CombineChunks());
    RILL_ASSERT_OK(ours->ValidateFull());
    auto expected = ArrowRead(good, schema);
    RILL_ASSERT_OK_AND_ASSIGN(expected, expected->CombineChunks());
    ASSERT_EQ(ours->num_rows(), 400);
    for (int c = 0; c < schema->num_fields(); ++c) {
      EXPECT_TRUE(ours->column(c)->Equals(*expected->column(c)))
          << "seed " << seed << " column " << schema->field(c)->name();
    }
  }
}

TEST(JsonDecoderFastPath, MatchesEscapedKeysAndNamesWithQuotes) {
  auto schema = arrow::schema({arrow::field("a\"b", arrow::int64()),
                               arrow::field("c\\d", arrow::utf8()),
                               arrow::field("ab", arrow::int64())});
  auto d = MakeDecoder(schema);
  RILL_ASSERT_OK_AND_ASSIGN(
      auto r, d->Decode(R"({"a\"b":1,"c\\d":"x","ab":2})" "\n"
                        R"({"a\"b":3,"c\\d":"y","a\u0062":4})" "\n"
                        R"({"ab":5,"a\"b":6})" "\n"
                        R"({"a\\":7})" "\n"));
  EXPECT_TRUE(r.rejects.empty());
  EXPECT_EQ(r.unknown_fields, 1);
  auto expected = arrow::RecordBatch::FromStructArray(
                      *arrow::json::ArrayFromJSONString(
                           arrow::struct_(schema->fields()),
                           R"([{"a\"b":1,"c\\d":"x","ab":2},{"a\"b":3,"c\\d":"y","ab":4},
                               {"a\"b":6,"c\\d":null,"ab":5},
                               {"a\"b":null,"c\\d":null,"ab":null}])"))
                      .ValueOrDie();
  EXPECT_TRUE(r.batch->Equals(*expected)) << r.batch->ToString();
}

TEST(JsonDecoderFastPath, NestedValuesAreCheckedWhole) {
  auto schema = arrow::schema(
      {arrow::field("m", arrow::map(arrow::utf8(), arrow::int32())),
       arrow::field("p", arrow::fixed_size_list(arrow::float64(), 2)),
       arrow::field("st", arrow::struct_({arrow::field("k", arrow::int64(), false),
                                          arrow::field("v", arrow::utf8())}))});
  auto d = MakeDecoder(schema);
  RILL_ASSERT_OK_AND_ASSIGN(
      auto r, d->Decode(R"({"m":{"x":1,"y":null},"p":[1,2.5],"st":{"k":1,"v":"a","k":9}})" "\n"
                        R"({"p":[1]})" "\n"
                        R"({"st":{"v":"no key"}})" "\n"
                        R"({"st":{"k":null}})" "\n"
                        R"({"m":{"x":"1"}})" "\n"
                        R"({"st":{"k":1,"extra":[1,{"a":nul}]}})" "\n"
                        R"({"m":{},"p":null,"st":{"k":2,"extra":[1,{"a":null}]}})" "\n"));
  ASSERT_EQ(r.rejects.size(), 5u);
  EXPECT_NE(r.rejects[0].error.find("expected 2 items, got 1"), std::string::npos)
      << r.rejects[0].error;
  EXPECT_NE(r.rejects[1].error.find("field 'st.k': missing"), std::string::npos)
      << r.rejects[1].error;
  EXPECT_NE(r.rejects[2].error.find("field 'st.k': null"), std::string::npos)
      << r.rejects[2].error;
  EXPECT_NE(r.rejects[3].error.find("field 'm.x': expected int32"), std::string::npos)
      << r.rejects[3].error;
  EXPECT_NE(r.rejects[4].error.find("invalid JSON"), std::string::npos) << r.rejects[4].error;
  auto expected = arrow::RecordBatch::FromStructArray(
                      *arrow::json::ArrayFromJSONString(
                           arrow::struct_(schema->fields()),
                           R"([{"m":[["x",1],["y",null]],"p":[1.0,2.5],"st":{"k":1,"v":"a"}},
                               {"m":[],"p":null,"st":{"k":2,"v":null}}])"))
                      .ValueOrDie();
  RILL_ASSERT_OK(r.batch->ValidateFull());
  EXPECT_TRUE(r.batch->Equals(*expected)) << r.batch->ToString();
}

}  // namespace
}  // namespace rill
