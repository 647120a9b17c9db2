// JsonDecoder's column buffers (json_columns_internal.h): values are written at
// the row's index and a rejected record is dropped by not counting its row.
// Randomized records over every column type the decoder fills, with records
// that fail on one field of each type placed between good ones (their other
// fields, before and after the bad one, are written first), pushed in inputs of
// random sizes (the per-line path, document streams, inputs read in place,
// columns growing during a decode). The oracle: Arrow's JSON-literal arrays
// (arrow::json::ArrayFromJSONString) of the good records' values, written from
// the same random model.
#include <ctime>
#include <functional>
#include <random>

#include <arrow/api.h>
#include <arrow/json/from_string.h>
#include <gtest/gtest.h>

#include "rill/connector/json_decoder.h"
#include "table/test_util.h"

namespace rill {
namespace {

/// One value: its text in a record, and its text in the expected array.
struct Value {
  std::string json;
  std::string expect;
};

struct Column {
  std::shared_ptr<arrow::Field> field;
  std::function<Value(std::mt19937_64&)> good;
  /// Values the column refuses (each rejects its record, naming the field).
  std::vector<std::string> bad;
};

int64_t Between(std::mt19937_64& rng, int64_t lo, int64_t hi) {
  return lo + static_cast<int64_t>(rng() % static_cast<uint64_t>(hi - lo + 1));
}

Value Same(std::string text) { return {text, text}; }

std::string RandomString(std::mt19937_64& rng, int max_pieces = 6) {
  static const char* kPieces[] = {"a", "Z", " ", "\\\"", "\\\\", "\\/", "\\n", "\\t",
                                  "\\u00e9", "\xc3\xa9", "\xf0\x9f\x98\x80", "{", "]"};
  std::string out = "\"";
  for (int n = static_cast<int>(rng() % (max_pieces + 1)); n > 0; --n) out += kPieces[rng() % 13];
  // Now and then a long one: string data grows during a decode.
  if (rng() % 50 == 0) out += std::string(static_cast<size_t>(Between(rng, 100, 3000)), 'x');
  return out + "\"";
}

template <typename T>
Column IntColumn(const std::string& name, std::shared_ptr<arrow::DataType> type,
                 std::vector<std::string> bad) {
  return {arrow::field(name, std::move(type)),
          [](std::mt19937_64& rng) {
            const T v = static_cast<T>(rng());
            return Same(std::to_string(v));
          },
          std::move(bad)};
}

std::string Exact(std::mt19937_64& rng, int64_t range) {
  // Multiples of 1/64: exact in binary, parsed alike by every reader.
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.17g",
                static_cast<double>(Between(rng, -range, range)) / 64);
  return buf;
}

int64_t FloorDiv(int64_t a, int64_t b) { return a / b - (a % b < 0 ? 1 : 0); }

/// `us` microseconds since the epoch as an ISO-8601 string: a date only, or
/// "…T…" with as many fraction digits as it needs (none, 3 or 6), with or
/// without a 'Z'.
std::string Iso(int64_t us, bool date_only, bool z = true) {
  const int64_t secs = FloorDiv(us, 1000000);
  const int64_t frac = us - secs * 1000000;
  const time_t t = static_cast<time_t>(secs);
  struct tm tm;
  gmtime_r(&t, &tm);
  char buf[128];
  if (date_only) {
    std::strftime(buf, sizeof(buf), "\"%Y-%m-%d\"", &tm);
    return buf;
  }
  char base[48];
  std::strftime(base, sizeof(base), "%Y-%m-%dT%H:%M:%S", &tm);
  char fraction[16] = "";
  if (frac % 1000 != 0) {
    std::snprintf(fraction, sizeof(fraction), ".%06d", static_cast<int>(frac));
  } else if (frac != 0) {
    std::snprintf(fraction, sizeof(fraction), ".%03d", static_cast<int>(frac / 1000));
  }
  std::snprintf(buf, sizeof(buf), "\"%s%s%s\"", base, fraction, z ? "Z" : "");
  return buf;
}

/// A timestamp column of `unit`: ISO strings (1874-2096, finer digits than
/// the unit truncated) or numbers in the unit.
Column TimestampColumn(const std::string& name, arrow::TimeUnit::type unit) {
  return {arrow::field(name, arrow::timestamp(unit)),
          [unit](std::mt19937_64& rng) {
            int64_t us = Between(rng, -3000000000000000, 4000000000000000);
            if (rng() % 3 == 0) us -= us % 1000000;  // whole seconds
            if (rng() % 3 == 0) us -= us % 1000;     // whole milliseconds
            const int64_t value = unit == arrow::TimeUnit::SECOND ? FloorDiv(us, 1000000)
                                  : unit == arrow::TimeUnit::MILLI ? FloorDiv(us, 1000)
                                  : unit == arrow::TimeUnit::MICRO ? us
                                                                   : us * 1000;
            const std::string number = std::to_string(value);
            std::string iso = Iso(us, false, rng() % 4 != 0);
            if (rng() % 6 == 0) iso[11] = ' ';  // Arrow's parser takes it too
            return Value{rng() % 3 ? iso : number, number};
          },
          {"\"yesterday\"", "true", "\"2024-02-30T00:00:00Z\""}};
}

Value IntList(std::mt19937_64& rng, int n) {
  std::string out = "[";
  for (int k = 0; k < n; ++k) {
    out += (k ? "," : "") + (rng() % 6 == 0 ? std::string("null")
                                            : std::to_string(Between(rng, -30000, 30000)));
  }
  return Same(out + "]");
}

Value StringList(std::mt19937_64& rng) {
  std::string out = "[";
  for (int k = static_cast<int>(rng() % 4); k > 0; --k) {
    out += (out.size() > 1 ? "," : "") + (rng() % 6 == 0 ? "null" : RandomString(rng, 3));
  }
  return Same(out + "]");
}

/// A struct value: fields in any order, some missing (null), an unknown one
/// now and then; expected with every field, in schema order.
Value Struct(std::mt19937_64& rng,
             const std::vector<std::pair<std::string, std::function<Value(std::mt19937_64&)>>>&
                 fields) {
  std::vector<std::pair<std::string, Value>> values;
  for (const auto& [name, make] : fields) {
    Value v = rng() % 8 == 0 ? Same("null") : make(rng);
    values.emplace_back(name, rng() % 8 == 0 ? Value{"", "null"} : v);
  }
  std::string expect = "{";
  for (const auto& [name, v] : values) {
    expect += (expect.size() > 1 ? "," : "") + ("\"" + name + "\":" + v.expect);
  }
  std::vector<std::string> parts;
  for (const auto& [name, v] : values) {
    if (!v.json.empty()) parts.push_back("\"" + name + "\":" + v.json);
  }
  if (rng() % 5 == 0) parts.push_back(R"("zz":{"q":[1,{"r":null}]})");
  if (rng() % 3 == 0) std::shuffle(parts.begin(), parts.end(), rng);
  std::string json = "{";
  for (const auto& p : parts) json += (json.size() > 1 ? "," : "") + p;
  return {json + "}", expect + "}"};
}

std::vector<Column> Columns() {
  using arrow::field;
  std::vector<Column> c;
  c.push_back({field("id", arrow::int32(), /*nullable=*/false),
               [](std::mt19937_64& rng) { return Same(std::to_string(Between(rng, 0, 1 << 30))); },
               {"\"1\"", "2147483648"}});
  c.push_back(IntColumn<int8_t>("i8", arrow::int8(), {"200", "-129", "1.5", "\"1\""}));
  c.push_back(IntColumn<int16_t>("i16", arrow::int16(), {"40000", "true"}));
  c.push_back(IntColumn<int32_t>("i32", arrow::int32(), {"-2147483649", "[1]"}));
  c.push_back(IntColumn<int64_t>("i64", arrow::int64(), {"9223372036854775808", "1e3"}));
  c.push_back(IntColumn<uint8_t>("u8", arrow::uint8(), {"-1", "256"}));
  c.push_back(IntColumn<uint16_t>("u16", arrow::uint16(), {"65536", "{}"}));
  c.push_back(IntColumn<uint32_t>("u32", arrow::uint32(), {"4294967296", "\"x\""}));
  c.push_back(IntColumn<uint64_t>("u64", arrow::uint64(), {"-5", "18446744073709551616"}));
  c.push_back({field("f32", arrow::float32()),
               [](std::mt19937_64& rng) { return Same(Exact(rng, 100000)); },
               {"\"1.0\"", "true"}});
  c.push_back({field("f64", arrow::float64()),
               [](std::mt19937_64& rng) {
                 return Same(rng() % 4 == 0 ? std::to_string(Between(rng, -99, 99))
                                            : Exact(rng, 1000000000));
               },
               {"[1.5]", "1e999"}});
  c.push_back({field("b", arrow::boolean()),
               [](std::mt19937_64& rng) { return Same(rng() % 2 ? "true" : "false"); },
               {"1", "\"true\""}});
  c.push_back({field("s", arrow::utf8()),
               [](std::mt19937_64& rng) { return Same(RandomString(rng)); }, {"5", "true"}});
  c.push_back({field("lstr", arrow::large_utf8()),
               [](std::mt19937_64& rng) { return Same(RandomString(rng)); }, {"1.5"}});
  c.push_back({field("bin", arrow::binary()),
               [](std::mt19937_64& rng) { return Same(RandomString(rng)); }, {"1"}});
  c.push_back({field("lbin", arrow::large_binary()),
               [](std::mt19937_64& rng) { return Same(RandomString(rng)); }, {"false"}});
  c.push_back(TimestampColumn("ts", arrow::TimeUnit::MILLI));
  c.push_back(TimestampColumn("ts_s", arrow::TimeUnit::SECOND));
  c.push_back(TimestampColumn("ts_us", arrow::TimeUnit::MICRO));
  c.push_back(TimestampColumn("ts_ns", arrow::TimeUnit::NANO));
  c.push_back({field("d32", arrow::date32()),
               [](std::mt19937_64& rng) {
                 const int64_t days = Between(rng, -20000, 40000);
                 return Value{rng() % 2 ? Iso(days * 86400000000, true) : std::to_string(days),
                              std::to_string(days)};
               },
               {"\"soon\"", "5000000000"}});
  c.push_back({field("d64", arrow::date64()),
               [](std::mt19937_64& rng) {
                 const int64_t ms = Between(rng, -20000, 40000) * 86400000;
                 return Value{rng() % 2 ? Iso(ms * 1000, true) : std::to_string(ms),
                              std::to_string(ms)};
               },
               {"[1]"}});
  c.push_back({field("li", arrow::list(arrow::int32())),
               [](std::mt19937_64& rng) { return IntList(rng, static_cast<int>(rng() % 5)); },
               {"[1,\"x\"]", "{}", "[1,2147483648]"}});
  c.push_back({field("ll", arrow::large_list(arrow::utf8())), StringList, {"[1]", "\"x\""}});
  c.push_back({field("fl", arrow::fixed_size_list(arrow::int16(), 3)),
               [](std::mt19937_64& rng) { return IntList(rng, 3); },
               {"[1,2]", "[1,2,3,4]", "[1,2,99999]"}});
  auto inner = arrow::struct_({field("x", arrow::boolean())});
  c.push_back({field("st", arrow::struct_({field("a", arrow::int64()),
                                           field("n", arrow::list(arrow::utf8())),
                                           field("c", inner)})),
               [](std::mt19937_64& rng) {
                 return Struct(
                     rng, {{"a", [](std::mt19937_64& r) { return Same(std::to_string(r() % 9)); }},
                           {"n", StringList},
                           {"c", [](std::mt19937_64& r) {
                              return Struct(r, {{"x", [](std::mt19937_64& q) {
                                                   return Same(q() % 2 ? "true" : "false");
                                                 }}});
                            }}});
               },
               {"{\"a\":\"x\"}", "{\"n\":[1]}", "{\"c\":{\"x\":1}}", "[]", "{\"a\":1,\"c\":5}"}});
  c.push_back({field("m", arrow::map(arrow::utf8(), arrow::int32())),
               [](std::mt19937_64& rng) {
                 std::string json = "{", expect = "[";
                 for (int k = static_cast<int>(rng() % 4); k > 0; --k) {
                   const std::string key = RandomString(rng, 2);
                   const std::string v =
                       rng() % 5 == 0 ? "null" : std::to_string(Between(rng, -100, 100));
                   json += (json.size() > 1 ? "," : "") + key + ":" + v;
                   expect += (expect.size() > 1 ? "," : "") + ("[" + key + "," + v + "]");
                 }
                 return Value{json + "}", expect + "]"};
               },
               {"{\"k\":\"v\"}", "[1]", "{\"k\":1,\"j\":[]}"}});
  c.push_back({field("lx", arrow::list(arrow::struct_({field("x", arrow::int16()),
                                                       field("y", arrow::utf8())}))),
               [](std::mt19937_64& rng) {
                 std::string json = "[", expect = "[";
                 for (int k = static_cast<int>(rng() % 3); k > 0; --k) {
                   Value v = Struct(rng, {{"x", [](std::mt19937_64& r) {
                                             return Same(std::to_string(Between(r, -9, 9)));
                                           }},
                                          {"y", [](std::mt19937_64& r) {
                                             return Same(RandomString(r, 2));
                                           }}});
                   json += (json.size() > 1 ? "," : "") + v.json;
                   expect += (expect.size() > 1 ? "," : "") + v.expect;
                 }
                 return Value{json + "]", expect + "]"};
               },
               {"[{\"x\":70000}]", "[{\"y\":1}]", "[{\"x\":1},2]"}});
  return c;
}

/// A record of `columns` (fields shuffled now and then, nullable ones
/// missing or null now and then); `expect` gets each column's expected text.
/// With `bad_column` >= 0, that field holds `bad_value`.
std::string Record(std::mt19937_64& rng, const std::vector<Column>& columns,
                   std::vector<std::string>* expect, int bad_column = -1,
                   const std::string& bad_value = "") {
  std::vector<std::string> parts;
  for (size_t i = 0; i < columns.size(); ++i) {
    const Column& c = columns[i];
    Value v = c.field->nullable() && rng() % 8 == 0 ? Same("null") : c.good(rng);
    if (static_cast<int>(i) == bad_column) {
      v.json = bad_value;
    } else if (c.field->nullable() && rng() % 10 == 0) {
      v = {"", "null"};  // missing
    }
    (*expect)[i] = v.expect;
    if (!v.json.empty()) parts.push_back("\"" + c.field->name() + "\":" + v.json);
  }
  if (rng() % 6 == 0) parts.push_back(R"("unknown":[{"deep":"x"}])");
  if (rng() % 3 == 0) std::shuffle(parts.begin(), parts.end(), rng);
  std::string out = "{";
  for (const auto& p : parts) out += (out.size() > 1 ? "," : "") + p;
  return out + "}";
}

struct Bad {
  std::string line;
  std::string column;  ///< the field its reason names
};

TEST(JsonColumns, EveryColumnTypeDecodesLikeTheModelWithRejectsBetweenRows) {
  const std::vector<Column> columns = Columns();
  std::vector<std::shared_ptr<arrow::Field>> fields;
  for (const auto& c : columns) fields.push_back(c.field);
  auto schema = arrow::schema(fields);
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    std::mt19937_64 rng(seed);
    std::vector<std::vector<std::string>> expected(columns.size());
    std::vector<std::string> row(columns.size());
    std::vector<Bad> bad;
    std::string input;
    for (int r = 0; r < 2500; ++r) {
      if (rng() % 8 == 0) {
        // A record with one bad field (of each column in turn, with the
        // other fields before and after it), or without the required one.
        const size_t col = rng() % (columns.size() + 2);
        std::string line;
        std::string name = "id";
        if (col == columns.size()) {
          line = Record(rng, columns, &row, 0, "null");
        } else if (col == columns.size() + 1) {
          line = Record(rng, columns, &row);
          line.replace(line.find("\"id\":"), 5, "\"di\":");
        } else {
          const auto& choices = columns[col].bad;
          line = Record(rng, columns, &row, static_cast<int>(col), choices[rng() % choices.size()]);
          name = columns[col].field->name();
        }
        bad.push_back({line, name});
        input += line + "\n";
      }
      input += Record(rng, columns, &row) + "\n";
      for (size_t i = 0; i < columns.size(); ++i) expected[i].push_back(row[i]);
    }

    JsonDecodeOptions options;
    options.schema = schema;
    options.max_raw_bytes = 1 << 20;
    RILL_ASSERT_OK_AND_ASSIGN(auto decoder, JsonDecoder::Make(options));
    std::vector<std::shared_ptr<arrow::RecordBatch>> batches;
    std::vector<RejectedRecord> rejects;
    // Pushes of random sizes, at line ends: a few lines (the per-line path),
    // tens of KiB (document streams), hundreds (read in place); the columns,
    // sized from the push before, grow during a decode when lines get shorter.
    for (size_t pos = 0; pos < input.size();) {
      const size_t want = rng() % 3 == 0 ? 600 : rng() % 2 ? 40000 : 300000;
      size_t end = input.find('\n', std::min(input.size() - 1, pos + want));
      end = end == std::string::npos ? input.size() : end + 1;
      RILL_ASSERT_OK_AND_ASSIGN(auto r,
                                decoder->Decode(std::string_view(input).substr(pos, end - pos)));
      if (r.batch) batches.push_back(r.batch);
      for (auto& reject : r.rejects) rejects.push_back(std::move(reject));
      pos = end;
    }

    ASSERT_EQ(rejects.size(), bad.size()) << "seed " << seed;
    for (size_t i = 0; i < bad.size(); ++i) {
      EXPECT_EQ(rejects[i].raw, bad[i].line) << "seed " << seed << " reject " << i;
      const std::string& error = rejects[i].error;
      const std::string& name = bad[i].column;
      const bool names_it =
          error.find("field '" + name + "'") != std::string::npos ||
          error.find("field '" + name + ".") != std::string::npos ||
          error.find("field '" + name + "[") != std::string::npos;
      EXPECT_TRUE(names_it) << "seed " << seed << ": " << error << " for " << bad[i].line;
    }
    RILL_ASSERT_OK_AND_ASSIGN(auto ours, arrow::Table::FromRecordBatches(schema, batches));
    RILL_ASSERT_OK(ours->ValidateFull());
    RILL_ASSERT_OK_AND_ASSIGN(ours, ours->CombineChunks());
    ASSERT_EQ(ours->num_rows(), 2500);
    for (size_t i = 0; i < columns.size(); ++i) {
      std::string literal = "[";
      for (const auto& v : expected[i]) literal += (literal.size() > 1 ? "," : "") + v;
      RILL_ASSERT_OK_AND_ASSIGN(
          auto want, arrow::json::ArrayFromJSONString(columns[i].field->type(), literal + "]"));
      auto got = ours->column(static_cast<int>(i))->chunk(0);
      EXPECT_TRUE(got->Equals(*want)) << "seed " << seed << " column "
                                      << columns[i].field->name();
    }
  }
}

TEST(JsonColumns, NullStructsHoldEmptyChildrenAndNullFixedListsNullItems) {
  // As Arrow's builders append them: a struct's children under a null get
  // empty values, a fixed_size_list's items under a null get nulls.
  auto type = arrow::struct_({arrow::field("s", arrow::utf8()),
                              arrow::field("l", arrow::list(arrow::int32())),
                              arrow::field("f", arrow::fixed_size_list(arrow::int8(), 2))});
  auto schema = arrow::schema({arrow::field("st", type),
                               arrow::field("fl", arrow::fixed_size_list(arrow::int8(), 2))});
  JsonDecodeOptions options;
  options.schema = schema;
  RILL_ASSERT_OK_AND_ASSIGN(auto decoder, JsonDecoder::Make(options));
  RILL_ASSERT_OK_AND_ASSIGN(
      auto r, decoder->Decode("{\"st\":{\"s\":\"a\",\"l\":[1],\"f\":[1,2]},\"fl\":[3,4]}\n"
                              "{\"st\":null}\n"
                              "{\"st\":{\"s\":\"b\",\"l\":[2,3],\"f\":[5,\"x\"]},\"fl\":[7,8]}\n"
                              "{\"st\":{\"l\":[4]},\"fl\":null}\n"));
  ASSERT_EQ(r.rejects.size(), 1u);
  EXPECT_EQ(r.rejects[0].error, "field 'st.f[1]': expected int8, got a string \"x\"");
  ASSERT_NE(r.batch, nullptr);
  RILL_ASSERT_OK(r.batch->ValidateFull());
  auto st = std::static_pointer_cast<arrow::StructArray>(r.batch->column(0));
  EXPECT_EQ(st->null_count(), 1);
  RILL_ASSERT_OK_AND_ASSIGN(auto s, arrow::json::ArrayFromJSONString(arrow::utf8(),
                                                                     "[\"a\",\"\",null]"));
  EXPECT_TRUE(st->field(0)->Equals(*s)) << st->field(0)->ToString();
  RILL_ASSERT_OK_AND_ASSIGN(auto l, arrow::json::ArrayFromJSONString(
                                        arrow::list(arrow::int32()), "[[1],[],[4]]"));
  EXPECT_TRUE(st->field(1)->Equals(*l)) << st->field(1)->ToString();
  auto fl = std::static_pointer_cast<arrow::FixedSizeListArray>(r.batch->column(1));
  // Row 1 (a missing fixed list) and row 2 (null): null items.
  RILL_ASSERT_OK_AND_ASSIGN(auto want_fl,
                            arrow::json::ArrayFromJSONString(fl->type(), "[[3,4],null,null]"));
  EXPECT_TRUE(fl->Equals(*want_fl)) << fl->ToString();
  EXPECT_EQ(fl->values()->null_count(), 4);
}

}  // namespace
}  // namespace rill
