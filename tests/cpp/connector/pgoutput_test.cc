// The pgoutput parser, LSNs, COPY text lines and the ChangeBatcher
// (rill/connector/postgres_cdc_internal.h), on messages built byte by byte as
// PostgreSQL's "Logical Replication Message Formats" (protocol 1) lays them
// out. The connector against a real server: tests/python/test_postgres_cdc.py.
#include <gtest/gtest.h>

#include <arrow/api.h>

#include "rill/connector/postgres_cdc_internal.h"
#include "rill/common/row_ops.h"

namespace rill::pgcdc_internal {
namespace {

/// Builds a message in network byte order.
class Msg {
 public:
  explicit Msg(char type) { s_.push_back(type); }
  Msg& U8(uint8_t v) { s_.push_back(static_cast<char>(v)); return *this; }
  Msg& I16(int16_t v) { return Be(static_cast<uint16_t>(v), 2); }
  Msg& I32(int32_t v) { return Be(static_cast<uint32_t>(v), 4); }
  Msg& I64(uint64_t v) { return Be(v, 8); }
  Msg& Str(const std::string& v) { s_ += v; s_.push_back('\0'); return *this; }
  Msg& Text(const std::string& v) { U8('t'); I32(static_cast<int32_t>(v.size())); s_ += v; return *this; }
  Msg& Null() { return U8('n'); }
  Msg& Toast() { return U8('u'); }
  std::string str() const { return s_; }

 private:
  Msg& Be(uint64_t v, int n) {
    for (int i = n - 1; i >= 0; --i) s_.push_back(static_cast<char>(v >> (8 * i)));
    return *this;
  }
  std::string s_;
};

std::string Relation() {
  Msg m('R');
  m.I32(16384).Str("public").Str("orders").U8('d').I16(3);
  m.U8(1).Str("id").I32(oid::kInt8).I32(-1);
  m.U8(0).Str("amount").I32(oid::kNumeric).I32(((10 << 16) | 2) + 4);
  m.U8(0).Str("tags").I32(1009).I32(-1);
  return m.str();
}

TEST(PgOutput, ParsesBeginAndCommit) {
  PgMessage m;
  ASSERT_TRUE(ParsePgOutput(Msg('B').I64(0x16B374D848ULL).I64(123).I32(777).str(), &m).ok());
  EXPECT_EQ(m.type, 'B');
  EXPECT_EQ(m.lsn, 0x16B374D848ULL);
  EXPECT_EQ(m.xid, 777u);
  ASSERT_TRUE(ParsePgOutput(Msg('C').U8(0).I64(100).I64(140).I64(5).str(), &m).ok());
  EXPECT_EQ(m.lsn, 100u);
  EXPECT_EQ(m.end_lsn, 140u);
}

TEST(PgOutput, ParsesRelationWithKeyFlagsAndTypmods) {
  PgMessage m;
  ASSERT_TRUE(ParsePgOutput(Relation(), &m).ok());
  ASSERT_EQ(m.relation.columns.size(), 3u);
  EXPECT_EQ(m.relation.oid, 16384u);
  EXPECT_EQ(m.relation.relname, "orders");
  EXPECT_TRUE(m.relation.columns[0].key);
  EXPECT_FALSE(m.relation.columns[1].key);
  EXPECT_TRUE(MapPgType(m.relation.columns[1].type_oid, m.relation.columns[1].typmod,
                        NumericAs::kDecimal)
                  ->Equals(arrow::decimal128(10, 2)));
  EXPECT_TRUE(MapPgType(1009, -1, NumericAs::kDecimal)->Equals(arrow::list(arrow::utf8())));
  EXPECT_TRUE(MapPgType(oid::kNumeric, -1, NumericAs::kFloat64)->Equals(arrow::float64()));
  EXPECT_TRUE(MapPgType(oid::kNumeric, -1, NumericAs::kDecimal)->Equals(arrow::decimal128(38, 9)));
}

TEST(PgOutput, ParsesUpdateWithOldKeyAndDeleteAndTruncate) {
  PgMessage m;
  std::string update = Msg('U').I32(16384).U8('K').I16(3).Text("1").Null().Null()
                           .U8('N').I16(3).Text("2").Text("9.50").Toast().str();
  ASSERT_TRUE(ParsePgOutput(update, &m).ok());
  EXPECT_EQ(m.old_kind, 'K');
  ASSERT_EQ(m.new_tuple.size(), 3u);
  EXPECT_EQ(m.new_tuple[1].text, "9.50");
  EXPECT_EQ(m.new_tuple[2].kind, 'u');
  ASSERT_TRUE(ParsePgOutput(Msg('D').I32(16384).U8('O').I16(1).Text("7").str(), &m).ok());
  EXPECT_EQ(m.old_kind, 'O');
  ASSERT_TRUE(ParsePgOutput(Msg('T').I32(2).U8(0).I32(1).I32(16384).str(), &m).ok());
  EXPECT_EQ(m.truncate_relids, (std::vector<uint32_t>{1, 16384}));
}

TEST(PgOutput, RejectsTruncatedAndUnknownMessagesNamingThem) {
  PgMessage m;
  std::string insert = Msg('I').I32(1).U8('N').I16(2).Text("1").Text("abc").str();
  for (size_t n = 1; n < insert.size(); ++n) {
    Status st = ParsePgOutput(insert.substr(0, n), &m);
    EXPECT_FALSE(st.ok()) << n;
  }
  EXPECT_TRUE(ParsePgOutput(insert, &m).ok());
  Status st = ParsePgOutput("Z", &m);
  EXPECT_NE(st.message().find("unknown pgoutput message type 'Z'"), std::string::npos);
  st = ParsePgOutput(Msg('I').I32(1).U8('N').I16(1).U8('q').str(), &m);
  EXPECT_NE(st.message().find("unknown column kind 'q'"), std::string::npos);
}

TEST(Lsn, FormatsAndParsesAsPostgresDoes) {
  EXPECT_EQ(FormatLsn(0x16B374D848ULL), "16/B374D848");
  EXPECT_EQ(*ParseLsn("16/B374D848"), 0x16B374D848ULL);
  EXPECT_EQ(*ParseLsn("0/0"), 0u);
  EXPECT_FALSE(ParseLsn("16B374D848").ok());
  EXPECT_FALSE(ParseLsn("1/").ok());
  EXPECT_FALSE(ParseLsn("x/1").ok());
}

TEST(CopyLine, SplitsFieldsAndUnescapes) {
  std::vector<PgValue> f;
  std::string scratch;
  std::string line = "1\t\\N\ta\\tb\\\\c\\n\t";
  scratch.reserve(line.size());
  SplitCopyLine(line, &f, &scratch);
  ASSERT_EQ(f.size(), 4u);
  EXPECT_EQ(f[0].text, "1");
  EXPECT_EQ(f[1].kind, 'n');
  EXPECT_EQ(f[2].text, "a\tb\\c\n");
  EXPECT_EQ(f[3].kind, 't');
  EXPECT_EQ(f[3].text, "");
}

std::vector<PgValue> Tuple(std::vector<std::optional<std::string>> values,
                           std::vector<std::string>* keep) {
  keep->reserve(64);
  std::vector<PgValue> out;
  for (auto& v : values) {
    PgValue p;
    if (!v) {
      p.kind = 'n';
    } else if (*v == "<toast>") {
      p.kind = 'u';
    } else {
      keep->push_back(*v);
      p.kind = 't';
      p.text = keep->back();
    }
    out.push_back(p);
  }
  return out;
}

TEST(ChangeBatcher, BuildsUpsertsDeletesAndTruncatesInOrder) {
  PgMessage rel;
  ASSERT_TRUE(ParsePgOutput(Relation(), &rel).ok());
  auto b = *ChangeBatcher::Make(rel.relation, nullptr, {"id"}, NumericAs::kDecimal, "c");
  std::vector<std::string> keep;
  b->AddUpsert(Tuple({"1", "9.50", "{a,\"b c\",NULL}"}, &keep), {}, "p1");
  // The key changes: a delete of the old key first.
  b->AddUpdate('K', Tuple({"1", std::nullopt, std::nullopt}, &keep),
               Tuple({"2", "3", "<toast>"}, &keep), "p2");
  b->AddDelete(Tuple({"2", std::nullopt, std::nullopt}, &keep), "p3");
  b->AddTruncate();
  auto batch = *b->Flush();
  ASSERT_EQ(batch->num_rows(), 5);
  EXPECT_EQ(batch->schema()->field(3)->name(), kWriteOpColumn);
  auto ops = std::static_pointer_cast<arrow::Int8Array>(batch->column(3));
  // upsert 1; delete 1; upsert 2 rejected (unchanged TOAST without an old value): skip;
  // delete 2; truncate.
  EXPECT_EQ(ops->Value(0), 0);
  EXPECT_EQ(ops->Value(1), 1);
  EXPECT_EQ(ops->Value(2), static_cast<int8_t>(RowOp::kSkip));
  EXPECT_EQ(ops->Value(3), 1);
  EXPECT_EQ(ops->Value(4), 2);
  auto amount = std::static_pointer_cast<arrow::Decimal128Array>(batch->column(1));
  EXPECT_EQ(amount->FormatValue(0), "9.50");
  auto tags = std::static_pointer_cast<arrow::ListArray>(batch->column(2));
  auto first = std::static_pointer_cast<arrow::StringArray>(tags->value_slice(0));
  ASSERT_EQ(first->length(), 3);
  EXPECT_EQ(first->GetString(0), "a");
  EXPECT_EQ(first->GetString(1), "b c");
  EXPECT_TRUE(first->IsNull(2));
  auto rejects = b->TakeRejects();
  ASSERT_EQ(rejects.size(), 1u);
  EXPECT_EQ(rejects[0].position, "p2");
  EXPECT_NE(rejects[0].error.find("unchanged TOAST"), std::string::npos);
}

TEST(ChangeBatcher, RejectsValuesThatDoNotParseAndKeepsTheRest) {
  PgRelation rel;
  rel.oid = 1;
  rel.relname = "t";
  rel.columns = {{"i", oid::kInt2, -1, true}, {"d", oid::kDate, -1, false},
                 {"ts", oid::kTimestamptz, -1, false}, {"b", oid::kBytea, -1, false}};
  auto b = *ChangeBatcher::Make(rel, nullptr, {}, NumericAs::kDecimal, "c");
  std::vector<std::string> keep;
  b->AddUpsert(Tuple({"7", "2024-02-29", "2024-01-02 03:04:05.5+02", "\\x00ff"}, &keep), {}, "ok");
  b->AddUpsert(Tuple({"70000", "2024-02-29", std::nullopt, std::nullopt}, &keep), {}, "bad int");
  b->AddUpsert(Tuple({"1", "infinity", std::nullopt, std::nullopt}, &keep), {}, "bad date");
  auto batch = *b->Flush();
  ASSERT_EQ(batch->num_rows(), 3);
  auto ops = std::static_pointer_cast<arrow::Int8Array>(batch->column(4));
  EXPECT_EQ(ops->Value(0), 0);
  EXPECT_EQ(ops->Value(1), 3);
  EXPECT_EQ(ops->Value(2), 3);
  auto ts = std::static_pointer_cast<arrow::TimestampArray>(batch->column(2));
  EXPECT_EQ(ts->Value(0), 1704157445500000);  // 2024-01-02 01:04:05.5 UTC
  auto d = std::static_pointer_cast<arrow::Date32Array>(batch->column(1));
  EXPECT_EQ(d->Value(0), 19782);
  auto by = std::static_pointer_cast<arrow::BinaryArray>(batch->column(3));
  EXPECT_EQ(by->GetString(0), std::string("\x00\xff", 2));
  auto rejects = b->TakeRejects();
  ASSERT_EQ(rejects.size(), 2u);
  EXPECT_NE(rejects[0].error.find("column 'i'"), std::string::npos);
  EXPECT_NE(rejects[1].error.find("column 'd'"), std::string::npos);
}

TEST(ChangeBatcher, FollowsTheTargetSchemaAndCountsUnknownColumns) {
  PgRelation rel;
  rel.oid = 1;
  rel.columns = {{"id", oid::kInt4, -1, true}, {"extra", oid::kText, -1, false}};
  auto target = arrow::schema({arrow::field("id", arrow::int64()),
                               arrow::field("missing", arrow::utf8())});
  auto b = *ChangeBatcher::Make(rel, target, {"id"}, NumericAs::kDecimal, "c");
  EXPECT_EQ(b->unknown_columns(), std::vector<std::string>{"extra"});
  std::vector<std::string> keep;
  b->AddUpsert(Tuple({"5", "x"}, &keep), {}, "p");
  auto batch = *b->Flush();
  EXPECT_EQ(batch->schema()->field_names(),
            (std::vector<std::string>{"id", "missing", kWriteOpColumn}));
  EXPECT_TRUE(batch->column(1)->IsNull(0));
}

TEST(TypeChange, WideningIsCompatibleOthersAreNot) {
  EXPECT_TRUE(CompatibleTypeChange(*arrow::int32(), *arrow::int64()));
  EXPECT_TRUE(CompatibleTypeChange(*arrow::float32(), *arrow::float64()));
  EXPECT_FALSE(CompatibleTypeChange(*arrow::int64(), *arrow::int32()));
  EXPECT_FALSE(CompatibleTypeChange(*arrow::int64(), *arrow::utf8()));
  EXPECT_FALSE(CompatibleTypeChange(*arrow::int32(), *arrow::float64()));
}

}  // namespace
}  // namespace rill::pgcdc_internal
