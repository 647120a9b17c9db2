// JsonDecoder over large NDJSON inputs, which it decodes with simdjson document
// streams (iterate_many over regions of lines) and, where a stream cannot tell
// a line's outcome, line by line. The oracle: the same decoder given each line
// on its own (positions passed in), whose rows, rejects (reasons, raw bytes,
// positions) and counts the whole-input decode must reproduce exactly.
#include <random>

#include <arrow/api.h>
#include <gtest/gtest.h>

#include "rill/connector/json_decoder.h"
#include "table/test_util.h"

namespace rill {
namespace {

std::shared_ptr<arrow::Schema> Schema() {
  return arrow::schema({
      arrow::field("i", arrow::int64()),
      arrow::field("small", arrow::int16()),
      arrow::field("f", arrow::float64()),
      arrow::field("b", arrow::boolean()),
      arrow::field("s", arrow::utf8()),
      arrow::field("ts", arrow::timestamp(arrow::TimeUnit::MILLI)),
      arrow::field("tags", arrow::list(arrow::utf8())),
      arrow::field("obj", arrow::struct_({arrow::field("a", arrow::int64()),
                                          arrow::field("n", arrow::list(arrow::float64()))})),
      arrow::field("m", arrow::map(arrow::utf8(), arrow::int32())),
  });
}

std::string RandomString(std::mt19937_64& rng, int max_pieces = 8) {
  static const char* kPieces[] = {"a", "Z", " ", "\\\"", "\\\\", "\\/", "\\n", "\\t",
                                  "\\u00e9", "\xc3\xa9", "\xf0\x9f\x98\x80", "{", "}", "[",
                                  "]", ":", ","};
  std::string out = "\"";
  for (int n = static_cast<int>(rng() % (max_pieces + 1)); n > 0; --n) {
    out += kPieces[rng() % 17];
  }
  return out + "\"";
}

/// A record every reader accepts (fields in any order, some missing or null,
/// some unknown).
std::string GoodRecord(std::mt19937_64& rng) {
  std::vector<std::string> fields;
  auto maybe_null = [&](std::string v) { return rng() % 8 == 0 ? std::string("null") : v; };
  fields.push_back("\"i\":" + maybe_null(std::to_string(static_cast<int64_t>(rng()))));
  fields.push_back("\"small\":" + maybe_null(std::to_string(static_cast<int16_t>(rng()))));
  fields.push_back("\"f\":" + maybe_null(std::to_string(static_cast<int>(rng() % 1000)) + "." +
                                         std::to_string(rng() % 100)));
  fields.push_back("\"b\":" + maybe_null(rng() % 2 ? "true" : "false"));
  fields.push_back("\"s\":" + maybe_null(RandomString(rng)));
  char ts[48];
  std::snprintf(ts, sizeof(ts), "\"2024-%02d-%02dT%02d:%02d:%02d.%03dZ\"",
                static_cast<int>(rng() % 12 + 1), static_cast<int>(rng() % 28 + 1),
                static_cast<int>(rng() % 24), static_cast<int>(rng() % 60),
                static_cast<int>(rng() % 60), static_cast<int>(rng() % 1000));
  fields.push_back("\"ts\":" + maybe_null(ts));
  std::string tags = "[";
  for (int n = static_cast<int>(rng() % 4); n > 0; --n) {
    tags += (tags.size() > 1 ? "," : "") + (rng() % 6 == 0 ? "null" : RandomString(rng, 3));
  }
  fields.push_back("\"tags\":" + maybe_null(tags + "]"));
  fields.push_back("\"obj\":" + maybe_null("{\"n\":[1.5," + std::to_string(rng() % 9) +
                                           "],\"a\":" + std::to_string(rng() % 100) + "}"));
  fields.push_back("\"m\":" + maybe_null("{\"x\":" + std::to_string(rng() % 7) + ",\"y\":null}"));
  if (rng() % 5 == 0) fields.push_back("\"extra\":{\"deep\":[1,{\"x\":null}]}");
  if (rng() % 3 == 0) std::shuffle(fields.begin(), fields.end(), rng);
  std::string out = "{";
  for (const auto& f : fields) {
    if (rng() % 10 == 0) continue;  // missing -> null
    out += (out.size() > 1 ? "," : "") + f;
  }
  return out + "}";
}

/// A line the per-line decoder rejects, or one that can confuse a document
/// stream over many lines (an object spread over lines, an unclosed string
/// or bracket, two documents on a line, invalid UTF-8 that fails the whole
/// stream's stage 1).
std::string BadLine(std::mt19937_64& rng) {
  const std::string good = GoodRecord(rng);
  switch (rng() % 16) {
    case 0: return good.substr(0, 1 + rng() % (good.size() - 1));  // truncated
    case 1: {
      std::string s = good;
      s.insert(1 + rng() % (s.size() - 1), 1, static_cast<char>(0x80 + rng() % 0x80));
      return s;  // invalid UTF-8 (inside or outside a string)
    }
    case 2: return R"({"s":"unclosed)";
    case 3: return R"({"s":"escaped quote\"})";
    case 4: return good + good;  // two documents on a line
    case 5: return good + " 5";
    // (no line starts with '[': on its own, the oracle would read it as an array)
    case 6: return std::vector<std::string>{"5", "null", "\"str\"", " 1,2]", "true", "{}}",
                                            "}", "]", "{", "{[", "\""}[rng() % 11];
    case 7: return R"({"i":[1})";          // unbalanced
    case 8: return R"({"i":1,"extra":[1})";  // unbalanced in a skipped field
    case 9: return R"({"i":"x"})";         // wrong type
    case 10: return R"({"small":40000})";  // out of range
    case 11: return R"({"obj":{"n":[1,"x"]}})";
    case 12: return R"({"i":1,"i":2})";    // duplicate
    case 13: return R"({"i":1,)" "\n" R"("s":"two lines"})";  // an object over two lines
    case 14: return R"({"extra":tru})";  // accepted: top-level unknown values are skipped
    default: return R"({"m":{"x":"1"}})";
  }
}

struct Decoded {
  std::vector<std::shared_ptr<arrow::RecordBatch>> batches;
  std::vector<RejectedRecord> rejects;
  int64_t records = 0;
  int64_t unknown_fields = 0;
  std::vector<int64_t> row_offsets;
};

JsonDecodeOptions Options(int64_t max_record_bytes = 64 << 20) {
  JsonDecodeOptions options;
  options.schema = Schema();
  options.row_offsets = true;
  options.max_record_bytes = max_record_bytes;
  options.max_raw_bytes = 100;
  return options;
}

void Add(Decoded* out, DecodeResult r, int64_t base) {
  if (r.batch) out->batches.push_back(r.batch);
  for (auto& reject : r.rejects) out->rejects.push_back(std::move(reject));
  out->records += r.records;
  out->unknown_fields += r.unknown_fields;
  for (int64_t o : r.row_offsets) out->row_offsets.push_back(o + base);
}

/// Decode `data` in one call (the streamed path for inputs this size).
Decoded Whole(const std::string& data, const JsonDecodeOptions& options) {
  auto decoder = JsonDecoder::Make(options).ValueOrDie();
  Decoded out;
  auto r = decoder->Decode(data);
  EXPECT_TRUE(r.ok()) << r.status();
  if (r.ok()) Add(&out, std::move(*r), 0);
  return out;
}

/// Decode each line of `data` on its own, as an input of its own at the
/// line's position (the per-line path: each input is one short line).
Decoded EachLine(const std::string& data, const JsonDecodeOptions& options) {
  auto decoder = JsonDecoder::Make(options).ValueOrDie();
  Decoded out;
  size_t pos = 0;
  int64_t line = 1;
  while (pos < data.size()) {
    size_t nl = data.find('\n', pos);
    size_t end = nl == std::string::npos ? data.size() : nl;
    JsonInputPosition where;
    where.first_line = line;
    where.base_offset = static_cast<int64_t>(pos);
    auto r = decoder->Decode(std::string_view(data).substr(pos, end - pos), where);
    EXPECT_TRUE(r.ok()) << r.status();
    if (r.ok()) Add(&out, std::move(*r), static_cast<int64_t>(pos));
    pos = nl == std::string::npos ? data.size() : nl + 1;
    ++line;
  }
  return out;
}

/// The rows of `d` as one batch (null when none).
std::shared_ptr<arrow::RecordBatch> Rows(const Decoded& d) {
  if (d.batches.empty()) return nullptr;
  auto table = arrow::Table::FromRecordBatches(d.batches).ValueOrDie();
  EXPECT_TRUE(table->ValidateFull().ok());
  return table->CombineChunksToBatch().ValueOrDie();
}

void ExpectSame(const Decoded& ours, const Decoded& oracle, const std::string& what) {
  auto a = Rows(ours);
  auto b = Rows(oracle);
  ASSERT_EQ(a == nullptr, b == nullptr) << what;
  if (a) {
    ASSERT_EQ(a->num_rows(), b->num_rows()) << what;
    for (int c = 0; c < a->num_columns(); ++c) {
      EXPECT_TRUE(a->column(c)->Equals(*b->column(c)))
          << what << ": column " << a->schema()->field(c)->name();
    }
  }
  EXPECT_EQ(ours.records, oracle.records) << what;
  EXPECT_EQ(ours.unknown_fields, oracle.unknown_fields) << what;
  EXPECT_EQ(ours.row_offsets, oracle.row_offsets) << what;
  for (size_t i = 0; i < std::min(ours.rejects.size(), oracle.rejects.size()); ++i) {
    ASSERT_EQ(ours.rejects[i].position, oracle.rejects[i].position)
        << what << " first differing reject: " << oracle.rejects[i].raw << " / "
        << ours.rejects[i].raw;
  }
  ASSERT_EQ(ours.rejects.size(), oracle.rejects.size()) << what;
  for (size_t i = 0; i < ours.rejects.size(); ++i) {
    const RejectedRecord& x = ours.rejects[i];
    const RejectedRecord& y = oracle.rejects[i];
    EXPECT_EQ(x.position, y.position) << what << " reject " << i;
    EXPECT_EQ(x.error, y.error) << what << " reject " << i << " at " << y.position;
    EXPECT_EQ(x.raw, y.raw) << what << " reject " << i;
    EXPECT_EQ(x.raw_size, y.raw_size) << what << " reject " << i;
    EXPECT_EQ(x.byte_offset, y.byte_offset) << what << " reject " << i;
  }
}

TEST(JsonDecoderStream, BadLineAnywhereIsRejectedAloneAndItsNeighboursKept) {
  std::mt19937_64 rng(11);
  std::vector<std::string> good;
  for (int i = 0; i < 6000; ++i) good.push_back(GoodRecord(rng));  // ~1.3 MB: two regions
  std::string all_good;
  for (const auto& g : good) all_good += g + "\n";
  const Decoded expected_rows = Whole(all_good, Options());
  ASSERT_TRUE(expected_rows.rejects.empty());
  ASSERT_EQ(Rows(expected_rows)->num_rows(), 6000);
  const std::vector<std::string> bad = {
      R"({"s":"unclosed)", "{\"s\":\"\xff\"}", R"({"i":[1})", R"({"i":"x"})", "5",
      good[0] + good[1], R"({"i":1,"i":2})", R"({"obj":{"a":1,"zz":tru}})",
      // a line longer than a stream batch (1 MiB)
      R"({"s":")" + std::string(1100000, 'x') + R"(", "i":"no"})"};
  for (size_t at : {size_t{0}, size_t{1}, size_t{2999}, size_t{4400}, size_t{5999}, size_t{6000}}) {
    for (const auto& b : bad) {
      std::string data;
      int64_t offset = 0;
      for (size_t i = 0; i <= good.size(); ++i) {
        if (i == at) {
          offset = static_cast<int64_t>(data.size());
          data += b + "\n";
        }
        if (i < good.size()) data += good[i] + "\n";
      }
      const std::string what = "bad line " + std::to_string(at + 1) + ": " + b.substr(0, 30);
      Decoded ours = Whole(data, Options());
      ASSERT_EQ(ours.rejects.size(), 1u) << what;
      EXPECT_EQ(ours.rejects[0].position,
                "line " + std::to_string(at + 1) + ", byte " + std::to_string(offset))
          << what;
      EXPECT_EQ(ours.rejects[0].raw_size, static_cast<int64_t>(b.size())) << what;
      // The reason is the one the line gets on its own.
      auto alone = JsonDecoder::Make(Options()).ValueOrDie()->Decode(b).ValueOrDie();
      ASSERT_EQ(alone.rejects.size(), 1u) << what;
      EXPECT_EQ(ours.rejects[0].error, alone.rejects[0].error) << what;
      EXPECT_EQ(ours.records, 6001) << what;
      auto a = Rows(ours);
      ASSERT_TRUE(a != nullptr) << what;
      EXPECT_TRUE(a->Equals(*Rows(expected_rows))) << what;
    }
  }
}

TEST(JsonDecoderStream, RandomInputsDecodeAsEachLineOnItsOwn) {
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    std::mt19937_64 rng(seed);
    // Bad lines from none to most, so that regions fail rarely, often, or in runs.
    const int bad_per_mille = std::vector<int>{0, 2, 20, 150, 600, 1000}[seed % 6];
    std::string data;
    const int lines = 1500 + static_cast<int>(rng() % 4500);
    for (int i = 0; i < lines; ++i) {
      const uint64_t r = rng() % 1000;
      if (r < static_cast<uint64_t>(bad_per_mille)) {
        data += BadLine(rng);
      } else if (r % 97 == 0) {
        data += std::vector<std::string>{"", "  ", "\t", "\r"}[rng() % 4];  // blank
      } else {
        std::string g = GoodRecord(rng);
        if (r % 89 == 0) g = "  " + g + " \t";
        if (r % 83 == 0) g += "\r";  // CRLF
        if (r % 211 == 0) g.insert(g.size() - 1, ",\"pad\":\"" + std::string(3000, 'p') + "\"");
        data += g;
      }
      data += "\n";
    }
    if (seed % 2) data.pop_back();  // with and without a final newline
    for (int64_t max_record : {int64_t{64} << 20, int64_t{300}}) {
      const std::string what = "seed " + std::to_string(seed) + " max_record_bytes " +
                               std::to_string(max_record);
      ExpectSame(Whole(data, Options(max_record)), EachLine(data, Options(max_record)), what);
    }
  }
}

TEST(JsonDecoderStream, OpColumnAndPushesOfAnySize) {
  std::mt19937_64 rng(5);
  std::string data;
  for (int i = 0; i < 4000; ++i) {
    std::string g = GoodRecord(rng);
    const char* ops[] = {"", "\"op\":\"d\",", "\"op\":\"u\",", "\"op\":\"zz\","};
    g.insert(1, ops[rng() % 4]);
    data += (rng() % 50 == 0 ? BadLine(rng) : g) + "\n";
  }
  JsonDecodeOptions options = Options();
  options.op_column = "op";
  // Split into pushes of random sizes (at line ends) decoded one after another.
  auto decoder = JsonDecoder::Make(options).ValueOrDie();
  Decoded ours;
  size_t pos = 0;
  int64_t line = 1;
  while (pos < data.size()) {
    size_t end = std::min(data.size(), pos + 1 + static_cast<size_t>(rng() % 300000));
    end = data.find('\n', end);
    end = end == std::string::npos ? data.size() : end + 1;
    JsonInputPosition where;
    where.first_line = line;
    where.base_offset = static_cast<int64_t>(pos);
    RILL_ASSERT_OK_AND_ASSIGN(auto r, decoder->Decode(std::string_view(data).substr(pos, end - pos),
                                                      where));
    Add(&ours, std::move(r), static_cast<int64_t>(pos));
    line += std::count(data.begin() + static_cast<int64_t>(pos),
                       data.begin() + static_cast<int64_t>(end), '\n');
    pos = end;
  }
  ExpectSame(ours, EachLine(data, options), "op_column");
}

}  // namespace
}  // namespace rill
