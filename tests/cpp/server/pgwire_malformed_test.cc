// A generated corpus of malformed client input (over 500 cases): bad lengths,
// truncated and padded messages, unknown types, messages out of order, bad
// UTF-8, parameter count mismatches, huge counts and random mutations. Each
// case states what must happen: the connection closes with a FATAL error, or
// the statement fails with a given SQLSTATE and the session goes on. Nothing
// may crash, hang or allocate what a length merely claims.
#include <gtest/gtest.h>

#include <climits>
#include <random>

#include "pgwire_test_util.h"
#include "rill/server/pgwire/pg_session.h"

namespace rill::pgwire {
namespace {

using namespace rill::pgwire::testing;  // NOLINT

enum class Expect { kFatal, kError, kSurvive };

struct Case {
  std::string name;
  std::string bytes;
  bool after_startup = true;
  Expect expect = Expect::kFatal;
  std::string sqlstate;  // for kError (and kFatal when set)
};

std::string WithLength(char type, int32_t length, const std::string& body) {
  std::string m(1, type);
  Put32(&m, length);
  return m + body;
}

// Collects the cases; each Add* method generates one family.
struct CorpusBuilder {
  std::vector<Case> cases;
  void fatal(std::string name, std::string bytes, bool after = true) {
    cases.push_back({std::move(name), std::move(bytes), after, Expect::kFatal, ""});
  }
  void error(std::string name, std::string bytes, std::string state) {
    cases.push_back({std::move(name), std::move(bytes), true, Expect::kError, std::move(state)});
  }

  void AddStartupCases() {
  // A. Startup packet lengths out of 8..10000.
  for (int32_t len : {INT_MIN, -1000, -1, 0, 1, 2, 3, 4, 5, 6, 7, 10001, 10002, 65536, INT_MAX}) {
    std::string m;
    Put32(&m, len);
    Put32(&m, 196608);
    fatal("startup length " + std::to_string(len), m, false);
  }
  // B. Startup bodies: bad versions, missing terminators, every truncation.
  for (int32_t version : {0, 1 << 16, 2 << 16, 4 << 16, -1, 80877105, 1234}) {
    std::string body;
    Put32(&body, version);
    body += CStr("user") + CStr("u") + std::string(1, '\0');
    std::string m;
    Put32(&m, static_cast<int32_t>(body.size() + 4));
    fatal("startup version " + std::to_string(version), m + body, false);
  }
  const std::string startup = Startup({{"user", "someone"}, {"database", "rill"}});
  for (size_t cut = 4; cut < startup.size() - 4; ++cut) {
    std::string body = startup.substr(4, cut);
    std::string m;
    Put32(&m, static_cast<int32_t>(body.size() + 4));
    fatal("startup cut at " + std::to_string(cut), m + body, false);
  }
  for (const std::string& extra : {std::string("x"), std::string("\0x", 2)}) {
    std::string body = startup.substr(4) + extra;
    std::string m;
    Put32(&m, static_cast<int32_t>(body.size() + 4));
    fatal("startup trailing bytes", m + body, false);
  }
  {
    std::string body;
    Put32(&body, 196608);
    body += CStr("database") + CStr("rill") + std::string(1, '\0');  // no user
    std::string m;
    Put32(&m, static_cast<int32_t>(body.size() + 4));
    cases.push_back({"startup without user", m + body, false, Expect::kFatal, "28000"});
  }
  }

  void AddTypeAndLengthCases() {
  // C. Unknown message types after startup.
  const std::string valid_types = "QPBDECSHXdcf";
  for (int t = 0; t < 256; ++t) {
    if (valid_types.find(static_cast<char>(t)) != std::string::npos) continue;
    fatal("unknown type " + std::to_string(t), Msg(static_cast<char>(t), ""));
  }
  // D. Typed lengths out of 4..cap.
  for (int32_t len : {INT_MIN, -1, 0, 1, 2, 3, (1 << 20) + 1, INT_MAX}) {
    fatal("Q length " + std::to_string(len), WithLength('Q', len, CStr("SELECT 1")));
  }
  }

  void AddTruncationCases() {
  // E. Every length-consistent truncation of valid messages; F. trailing bytes.
  const std::vector<std::pair<std::string, std::string>> valid = {
      {"Query", Query("SELECT 'abc'")},
      {"Parse", Parse("stmt", "SELECT $1, $2", {23, 25})},
      {"Bind", Bind("portal", "stmt", {0, 1}, {std::string("42"), std::nullopt}, {0, 1})},
      {"Describe", Describe('S', "stmt")},
      {"Execute", Execute("portal", 10)},
      {"Close", Close('P', "portal")},
  };
  for (auto& [name, msg] : valid) {
    std::string body = msg.substr(5);
    for (size_t cut = 0; cut < body.size(); ++cut) {
      fatal(name + " cut at " + std::to_string(cut), Msg(msg[0], body.substr(0, cut)));
    }
    for (int extra = 1; extra <= 3; ++extra) {
      fatal(name + " +" + std::to_string(extra), Msg(msg[0], body + std::string(extra, '\x01')));
    }
  }
  fatal("Describe target X", Msg('D', "X" + CStr("s")));
  fatal("Close target 0", Msg('C', std::string(1, '\0') + CStr("s")));
  }

  void AddOrderAndUtf8Cases() {
  // G. Messages out of order.
  error("Bind unknown statement", Bind("", "nope", {}, {}, {}) + Sync(), "26000");
  error("Execute unknown portal", Execute("nope", 0) + Sync(), "34000");
  error("Describe unknown statement", Describe('S', "nope") + Sync(), "26000");
  error("Describe unknown portal", Describe('P', "nope") + Sync(), "34000");
  error("Execute before Bind", Parse("", "SELECT 1") + Execute("", 0) + Sync(), "34000");
  error("Parse twice", Parse("x", "SELECT 1") + Parse("x", "SELECT 2") + Sync(), "42P05");
  error("Bind portal twice", Parse("", "SELECT 1") + Bind("p", "", {}, {}, {}) +
                                 Bind("p", "", {}, {}, {}) + Sync(), "42P03");
  fatal("password after startup", Msg('p', CStr("token")));
  // Read as a typed message, a startup packet is type 0 with a length within
  // the cap: the session waits for the rest (as PostgreSQL does).
  cases.push_back({"startup packet after startup", Startup({{"user", "someone"}}), true,
                     Expect::kSurvive, ""});
  fatal("SASL response after startup", Msg('p', CStr("SCRAM-SHA-256") + std::string(4, '\xff')));
  // H. Bad UTF-8 in queries, statements and text parameters.
  for (const std::string bad : {"\xff", "\xc0\x80", "\xed\xa0\x80", "\xf8\x88\x80\x80\x80",
                                "\xe2\x82", "abc\x80", "\xf4\x90\x80\x80", "\xc3"}) {
    error("bad UTF-8 query", Query("SELECT '" + bad + "'"), "22021");
    error("bad UTF-8 Parse", Parse("", "SELECT '" + bad + "'") + Sync(), "22021");
    error("bad UTF-8 param",
          Parse("", "SELECT $1") + Bind("", "", {}, {"x" + bad}, {}) + Sync(), "22021");
  }
  }

  void AddParameterCases() {
  // I. Parameter count mismatches and bad parameter values.
  for (int n : {0, 1, 3, 10}) {
    std::vector<std::optional<std::string>> params(static_cast<size_t>(n), std::string("1"));
    error("Bind " + std::to_string(n) + " params for 2",
          Parse("", "SELECT $1, $2") + Bind("", "", {}, params, {}) + Sync(), "08P01");
  }
  fatal("Bind 2 formats for 3 params",
        Parse("", "SELECT $1, $2, $3") +
            Bind("", "", {0, 0}, {std::string("1"), std::string("2"), std::string("3")}, {}));
  fatal("Bind format code 2", Parse("", "SELECT $1") + Bind("", "", {2}, {std::string("1")}, {}));
  fatal("Bind result format 7", Parse("", "SELECT 1") + Bind("", "", {}, {}, {7}));
  error("parameter number too big", Parse("", "SELECT $70000") + Sync(), "42601");
  for (const std::string& bytes : {std::string("abc"), std::string(3, '\0'), std::string(8, '\0')}) {
    error("binary int4 of " + std::to_string(bytes.size()) + " bytes",
          Parse("", "SELECT $1", {23}) + Bind("", "", {1}, {bytes}, {}) + Sync(), "22P02");
  }
  error("binary of unsupported type",
        Parse("", "SELECT $1", {600}) + Bind("", "", {1}, {std::string("xx")}, {}) + Sync(),
        "22P02");
  error("NUL in text parameter",
        Parse("", "SELECT $1") + Bind("", "", {}, {std::string("a\0b", 3)}, {}) + Sync(), "22021");
  error("multiple statements in Parse", Parse("", "SELECT 1; SELECT 2") + Sync(), "42601");
  // J. Huge counts and lengths inside messages.
  {
    std::string body = CStr("") + CStr("");
    Put16(&body, 0);
    Put16(&body, -1);  // 65535 parameters, no data
    fatal("Bind 65535 params without data", Msg('B', body));
    for (int32_t len : {INT_MAX, 1 << 30, -2, -100}) {
      std::string b = CStr("") + CStr("");
      Put16(&b, 0);
      Put16(&b, 1);
      Put32(&b, len);
      b += "abc";
      Put16(&b, 0);
      fatal("Bind param length " + std::to_string(len), Msg('B', b));
    }
    std::string p = CStr("") + CStr("SELECT 1");
    Put16(&p, 20000);
    fatal("Parse 20000 types without data", Msg('P', p));
    std::string sasl = CStr("SCRAM-SHA-256");
    Put32(&sasl, INT_MAX);
    fatal("SASL initial response length INT_MAX", Msg('p', sasl));
  }
  }

  void AddMutations() {
  // K. Random mutations of a valid stream: must not crash; the output stays
  // well-formed (checked by the runner).
  const std::string stream = Parse("s", "SELECT $1::INTEGER + 1", {23}) +
                             Bind("p", "s", {}, {std::string("41")}, {}) + Describe('P', "p") +
                             Execute("p", 1) + Execute("p", 0) + Sync() + Query("SELECT 1; ;");
  std::mt19937 rng(20261130);
  for (int i = 0; i < 120; ++i) {
    std::string m = stream;
    int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) {
      m[rng() % m.size()] = static_cast<char>(rng() % 256);
    }
    if (rng() % 3 == 0) m.resize(rng() % m.size());
    cases.push_back({"mutation " + std::to_string(i), m, true, Expect::kSurvive, ""});
  }
  }
};

std::vector<Case> Corpus() {
  CorpusBuilder b;
  b.AddStartupCases();
  b.AddTypeAndLengthCases();
  b.AddTruncationCases();
  b.AddOrderAndUtf8Cases();
  b.AddParameterCases();
  b.AddMutations();
  return b.cases;
}

bool WellFormed(const std::string& out) {
  size_t i = 0;
  while (i < out.size()) {
    if (i + 5 > out.size()) return false;
    int32_t len = Get32(out, i + 1);
    if (len < 4 || i + 1 + static_cast<size_t>(len) > out.size()) return false;
    i += 1 + static_cast<size_t>(len);
  }
  return true;
}

TEST(PgMalformedCorpus, EveryCaseFailsTheWayItShould) {
  EchoExecutor executor;
  PgCancelRegistry registry;
  PgServerConfig config;
  config.executor = &executor;
  config.cancel_registry = &registry;
  config.max_message_bytes = 1 << 20;
  ASSERT_TRUE(PrepareServerConfig(&config).ok());
  const auto corpus = Corpus();
  ASSERT_GE(corpus.size(), 500u);
  const std::string startup = Startup({{"user", "fuzz"}});
  for (const Case& c : corpus) {
    SCOPED_TRACE(c.name);
    PgSession session(&config);
    if (c.after_startup) {
      ASSERT_TRUE(session.Feed(startup.data(), startup.size()).ok());
      session.output().clear();
    }
    Status st = session.Feed(c.bytes.data(), c.bytes.size());
    const std::string& out = session.output();
    ASSERT_TRUE(WellFormed(out));
    auto msgs = Messages(out);
    switch (c.expect) {
      case Expect::kFatal: {
        EXPECT_FALSE(st.ok());
        EXPECT_TRUE(session.closed());
        ASSERT_FALSE(msgs.empty());
        EXPECT_EQ(msgs.back().type, 'E');
        EXPECT_EQ(ErrorField(msgs.back(), 'S'), "FATAL");
        EXPECT_FALSE(ErrorField(msgs.back(), 'M').empty());
        if (!c.sqlstate.empty()) {
          EXPECT_EQ(ErrorField(msgs.back(), 'C'), c.sqlstate);
        }
        break;
      }
      case Expect::kError: {
        EXPECT_TRUE(st.ok()) << st;
        EXPECT_FALSE(session.closed());
        bool found = false;
        for (auto& m : msgs) {
          if (m.type == 'E') {
            EXPECT_EQ(ErrorField(m, 'S'), "ERROR");
            EXPECT_EQ(ErrorField(m, 'C'), c.sqlstate);
            found = true;
            break;
          }
        }
        EXPECT_TRUE(found);
        ASSERT_FALSE(msgs.empty());
        EXPECT_EQ(msgs.back().type, 'Z');
        break;
      }
      case Expect::kSurvive:
        // Either closed with a FATAL error or still serving.
        if (!st.ok()) {
          EXPECT_TRUE(session.closed());
        }
        break;
    }
  }
}

}  // namespace
}  // namespace rill::pgwire
