// Framing and bounded parsing of frontend messages, and the value encoders.
#include <gtest/gtest.h>

#include <arrow/api.h>
#include <arrow/json/from_string.h>

#include "pgwire_test_util.h"
#include "rill/server/pgwire/pg_messages.h"
#include "rill/server/pgwire/pg_sql.h"
#include "rill/server/pgwire/pg_types.h"
#include "rill/server/pgwire/scram.h"

namespace rill::pgwire {
namespace {

using namespace rill::pgwire::testing;  // NOLINT

TEST(PgFrameDecoder, CutsStartupThenTypedFramesAcrossPartialReads) {
  PgFrameDecoder decoder;
  std::string bytes = Startup({{"user", "u"}}) + Query("SELECT 1");
  decoder.Append(bytes.data(), 3);
  ASSERT_FALSE(decoder.Next()->has_value());
  decoder.Append(bytes.data() + 3, bytes.size() - 3);
  auto startup = decoder.Next();
  ASSERT_TRUE(startup.ok() && startup->has_value());
  EXPECT_EQ((*startup)->type, 0);
  decoder.set_startup_phase(false);
  auto query = decoder.Next();
  ASSERT_TRUE(query.ok() && query->has_value());
  EXPECT_EQ((*query)->type, 'Q');
  EXPECT_EQ((*query)->body, CStr("SELECT 1"));
  EXPECT_FALSE(decoder.Next()->has_value());
}

TEST(PgFrameDecoder, RejectsLengthsOutOfBoundsBeforeBuffering) {
  for (int32_t len : {-1, 0, 7, 10001, 1 << 30}) {
    PgFrameDecoder decoder;
    std::string m;
    Put32(&m, len);
    decoder.Append(m.data(), m.size());
    EXPECT_FALSE(decoder.Next().ok()) << len;
  }
  for (int32_t len : {-5, 0, 3, (64 << 20) + 1}) {
    PgFrameDecoder decoder(/*max_message_bytes=*/64 << 20);
    decoder.set_startup_phase(false);
    std::string m(1, 'Q');
    Put32(&m, len);
    decoder.Append(m.data(), m.size());
    auto next = decoder.Next();
    ASSERT_FALSE(next.ok()) << len;
    EXPECT_NE(next.status().message().find("invalid length"), std::string::npos);
  }
}

TEST(PgMessages, ParsesStartupSslAndCancel) {
  auto s = ParseStartupPacket(Startup({{"user", "alice"}, {"database", "rill"}}).substr(4));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->kind, StartupPacket::Kind::kStartup);
  ASSERT_EQ(s->parameters.size(), 2u);
  EXPECT_EQ(s->parameters[1].second, "rill");
  auto ssl = ParseStartupPacket(SslRequest().substr(4));
  ASSERT_TRUE(ssl.ok());
  EXPECT_EQ(ssl->kind, StartupPacket::Kind::kSslRequest);
  std::string cancel;
  Put32(&cancel, 80877102);
  Put32(&cancel, 1234);
  Put32(&cancel, -99);
  auto c = ParseStartupPacket(cancel);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->cancel_pid, 1234);
  EXPECT_EQ(c->cancel_secret, -99);
  std::string v2;
  Put32(&v2, 2 << 16);
  EXPECT_FALSE(ParseStartupPacket(v2).ok());
}

TEST(PgMessages, TellsPostgresFirstBytesFromHttp) {
  EXPECT_TRUE(IsPostgresStart(Startup({{"user", "u"}})));
  EXPECT_TRUE(IsPostgresStart(SslRequest()));
  EXPECT_FALSE(IsPostgresStart("GET / HTTP/1.1\r\n"));
  EXPECT_FALSE(IsPostgresStart(SslRequest().substr(0, 7)));
  std::string huge;
  Put32(&huge, 20000);
  Put32(&huge, 196608);
  EXPECT_FALSE(IsPostgresStart(huge));
}

TEST(PgMessages, ParsesBindWithNullAndBinaryParameters) {
  std::string body = Bind("p", "s", {0, 1}, {std::string("42"), std::nullopt}, {1}).substr(5);
  auto b = ParseBind(body);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->portal, "p");
  EXPECT_EQ(b->statement, "s");
  ASSERT_EQ(b->params.size(), 2u);
  EXPECT_EQ(*b->params[0], "42");
  EXPECT_FALSE(b->params[1].has_value());
  EXPECT_EQ(b->result_formats, std::vector<int16_t>{1});
}

TEST(PgMessages, RejectsCountsThatCannotFitTheMessage) {
  std::string body = CStr("") + CStr("");
  Put16(&body, 0);
  Put16(&body, 30000);  // 30000 parameters announced, none present
  auto b = ParseBind(body);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("cannot fit"), std::string::npos);
  std::string parse = CStr("") + CStr("SELECT 1");
  Put16(&parse, -1);  // 65535 types announced
  EXPECT_FALSE(ParseParse(parse).ok());
}

TEST(PgMessages, RequiresNulInsideTheMessage) {
  EXPECT_FALSE(ParseQuery("SELECT 1").ok());
  EXPECT_FALSE(ParseParse("name").ok());
  EXPECT_TRUE(ParseQuery(CStr("SELECT 1")).ok());
  EXPECT_FALSE(ParseQuery(CStr("SELECT 1") + "x").ok());  // trailing bytes
}

TEST(PgSql, SplitsStatementsOutsideQuotesAndComments) {
  auto parts = SplitStatements("SELECT ';'; -- a;b\n SELECT $$x;y$$ ; /* c; */ ; ");
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(TrimStatement(parts[0]), "SELECT ';'");
  EXPECT_TRUE(SplitStatements(" -- only a comment").empty());
}

TEST(PgSql, SubstitutesParametersAsQuotedLiterals) {
  auto lit = ParameterLiteral(std::string("O'Brien"), 0, 0);
  ASSERT_TRUE(lit.ok());
  auto sql = SubstituteParameters("SELECT '$1', $1, $2", {*lit, "NULL"});
  ASSERT_TRUE(sql.ok());
  EXPECT_EQ(*sql, "SELECT '$1', 'O''Brien', NULL");
  EXPECT_FALSE(SubstituteParameters("SELECT $3", {"1"}).ok());
  EXPECT_EQ(*CountParameters("SELECT $2, '$9', $1"), 2);
}

TEST(PgTypes, DecodesBinaryParameters) {
  std::string i4;
  Put32(&i4, -7);
  EXPECT_EQ(*ParameterLiteral(i4, oid::kInt4, 1), "-7::INTEGER");
  EXPECT_FALSE(ParameterLiteral(std::string("abc"), oid::kInt4, 1).ok());
  std::string ts;
  Put32(&ts, 0);
  Put32(&ts, 0);  // 2000-01-01 00:00:00
  EXPECT_EQ(*ParameterLiteral(ts, oid::kTimestamp, 1), "'2000-01-01 00:00:00'::TIMESTAMP");
  EXPECT_FALSE(ParameterLiteral(std::string("a\0b", 3), oid::kText, 0).ok());
}

TEST(PgTypes, FormatsValuesLikePostgres) {
  auto text = [](const std::shared_ptr<arrow::Array>& a, int64_t row) {
    std::string out;
    AppendText(*a, row, &out);
    return out;
  };
  arrow::DoubleBuilder d;
  ASSERT_TRUE(d.AppendValues({0.1, 1e20, -0.0}).ok());
  auto doubles = d.Finish().ValueOrDie();
  EXPECT_EQ(text(doubles, 0), "0.1");
  EXPECT_EQ(text(doubles, 1), "1e+20");
  arrow::TimestampBuilder t(arrow::timestamp(arrow::TimeUnit::MICRO, "UTC"),
                            arrow::default_memory_pool());
  ASSERT_TRUE(t.Append(1704164645678000LL).ok());
  EXPECT_EQ(text(t.Finish().ValueOrDie(), 0), "2024-01-02 03:04:05.678+00");
  arrow::MonthDayNanoIntervalBuilder iv;
  ASSERT_TRUE(iv.Append({14, 3, 4LL * 3600 * 1000000000}).ok());
  ASSERT_TRUE(iv.Append({0, -1, 0}).ok());
  auto intervals = iv.Finish().ValueOrDie();
  EXPECT_EQ(text(intervals, 0), "1 year 2 mons 3 days 04:00:00");
  EXPECT_EQ(text(intervals, 1), "-1 days");
  auto list = arrow::json::ArrayFromJSONString(arrow::list(arrow::utf8()),
                                               R"([["a", "b c", null, ""]])");
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(text(*list, 0), "{a,\"b c\",NULL,\"\"}");
  EXPECT_EQ(PgTypeFor(*arrow::int64()).oid, oid::kInt8);
  EXPECT_EQ(PgTypeFor(*arrow::list(arrow::int32())).oid, 1007);
  EXPECT_EQ(PgTypeFor(*arrow::struct_({arrow::field("a", arrow::int32())})).oid, oid::kText);
}

TEST(Scram, Base64RoundTripsAndRejectsGarbage) {
  std::string bytes("\x00\x01\xfe\xff", 4);
  auto decoded = Base64Decode(Base64Encode(bytes));
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(*decoded, bytes);
  EXPECT_FALSE(Base64Decode("a*b=").ok());
  EXPECT_FALSE(Base64Decode("abc").ok());
}

TEST(Scram, RejectsMalformedClientMessages) {
  auto verifier = ScramVerifier::Make("token");
  ASSERT_TRUE(verifier.ok());
  ScramExchange exchange(*verifier);
  EXPECT_FALSE(exchange.ServerFirst("p=tls-server-end-point,,n=,r=abc").ok());
  EXPECT_FALSE(exchange.ServerFinal("c=biws,r=x,p=AAAA").ok());  // before client-first
  ScramExchange ok_exchange(*verifier);
  auto first = ok_exchange.ServerFirst("n,,n=,r=clientnonce");
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->rfind("r=clientnonce", 0), 0u);
  // A proof of the right length that does not match: empty answer (wrong password).
  std::string nonce = first->substr(2, first->find(',') - 2);
  auto final_msg = ok_exchange.ServerFinal("c=biws,r=" + nonce + ",p=" +
                                           Base64Encode(std::string(32, 'x')));
  ASSERT_TRUE(final_msg.ok());
  EXPECT_TRUE(final_msg->empty());
}

}  // namespace
}  // namespace rill::pgwire
