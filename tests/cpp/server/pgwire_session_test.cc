// PgSession against a real Engine: startup, authentication, simple and
// extended query protocol, portals with row limits, errors until Sync.
#include <gtest/gtest.h>

#include <arrow/api.h>

#include "pgwire_test_util.h"
#include "rill/common/arrow_init.h"
#include "rill/engine/engine.h"
#include "rill/server/pgwire/pg_session.h"

namespace rill::pgwire {
namespace {

using namespace rill::pgwire::testing;  // NOLINT

class PgSessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(InitializeArrowCompute().ok());
    engine_ = Engine::Make().ValueOrDie();
    auto schema = arrow::schema({arrow::field("i", arrow::int64()), arrow::field("s", arrow::utf8())});
    auto table = engine_->RegisterTable("t", schema).ValueOrDie();
    arrow::Int64Builder ib;
    arrow::StringBuilder sb;
    for (int i = 0; i < 10; ++i) {
      ASSERT_TRUE(ib.Append(i).ok());
      ASSERT_TRUE(sb.Append("v" + std::to_string(i)).ok());
    }
    auto batch = arrow::RecordBatch::Make(schema, 10, {ib.Finish().ValueOrDie(), sb.Finish().ValueOrDie()});
    ASSERT_TRUE(table->Write(batch).ok());
    executor_ = std::make_unique<EnginePgExecutor>(engine_.get(), nullptr);
    ASSERT_TRUE(executor_->Init().ok());
    config_.executor = executor_.get();
    config_.cancel_registry = &registry_;
    ASSERT_TRUE(PrepareServerConfig(&config_).ok());
  }

  // Feed `bytes`; return the messages produced.
  std::vector<BackendMessage> Send(PgSession& session, const std::string& bytes,
                                   bool expect_ok = true) {
    Status st = session.Feed(bytes.data(), bytes.size());
    EXPECT_EQ(st.ok(), expect_ok) << st;
    auto msgs = Messages(session.output());
    session.output().clear();
    return msgs;
  }

  std::unique_ptr<PgSession> Connected() {
    auto session = std::make_unique<PgSession>(&config_);
    auto msgs = Send(*session, Startup({{"user", "u"}, {"database", "rill"}}));
    EXPECT_EQ(msgs.back().type, 'Z');
    return session;
  }

  std::unique_ptr<Engine> engine_;
  std::unique_ptr<EnginePgExecutor> executor_;
  PgCancelRegistry registry_;
  PgServerConfig config_;
};

TEST_F(PgSessionTest, AnswersSslRequestWithNThenStartsUp) {
  PgSession session(&config_);
  std::string ssl = SslRequest();
  ASSERT_TRUE(session.Feed(ssl.data(), ssl.size()).ok());
  EXPECT_EQ(session.output(), "N");
  session.output().clear();
  auto msgs = Send(session, Startup({{"user", "u"}, {"application_name", "app"}}));
  std::map<std::string, std::string> params;
  for (auto& m : msgs) {
    if (m.type == 'S') {
      size_t nul = m.body.find('\0');
      params[m.body.substr(0, nul)] = m.body.substr(nul + 1, m.body.size() - nul - 2);
    }
  }
  EXPECT_EQ(msgs.front().type, 'R');
  EXPECT_EQ(params["server_version"].substr(0, 3), "16.");
  EXPECT_EQ(params["server_encoding"], "UTF8");
  EXPECT_EQ(params["client_encoding"], "UTF8");
  EXPECT_EQ(params["DateStyle"], "ISO, MDY");
  EXPECT_EQ(params["standard_conforming_strings"], "on");
  EXPECT_EQ(params["integer_datetimes"], "on");
  EXPECT_EQ(params["application_name"], "app");
  EXPECT_EQ(params.count("TimeZone"), 1u);
  EXPECT_EQ(params.count("server_version_num"), 1u);
  ASSERT_GE(msgs.size(), 2u);
  EXPECT_EQ(msgs[msgs.size() - 2].type, 'K');
  EXPECT_EQ(msgs.back().body, "I");
}

TEST_F(PgSessionTest, CleartextAuthenticationChecksTheToken) {
  config_.auth = PgAuthMethod::kCleartext;
  config_.token = "secret";
  PgSession bad(&config_);
  auto msgs = Send(bad, Startup({{"user", "u"}}));
  ASSERT_EQ(Types(msgs), "R");
  EXPECT_EQ(Get32(msgs[0].body, 0), 3);
  msgs = Send(bad, Msg('p', CStr("wrong")), /*expect_ok=*/false);
  ASSERT_EQ(Types(msgs), "E");
  EXPECT_EQ(ErrorField(msgs[0], 'C'), "28P01");
  EXPECT_EQ(ErrorField(msgs[0], 'S'), "FATAL");
  EXPECT_TRUE(bad.closed());
  PgSession good(&config_);
  Send(good, Startup({{"user", "u"}}));
  msgs = Send(good, Msg('p', CStr("secret")));
  EXPECT_EQ(msgs.back().type, 'Z');
  EXPECT_FALSE(good.closed());
}

TEST_F(PgSessionTest, SimpleQueryRunsEachStatementAndEmptyQueries) {
  auto s = Connected();
  auto msgs = Send(*s, Query("SELECT count(*) AS n FROM t; SELECT s FROM t WHERE i = 3"));
  EXPECT_EQ(Types(msgs), "T D C T D C Z");
  EXPECT_EQ(*RowValues(msgs[1])[0], "10");
  EXPECT_EQ(*RowValues(msgs[4])[0], "v3");
  EXPECT_EQ(msgs[2].body, CStr("SELECT 1"));
  EXPECT_EQ(Types(Send(*s, Query("  -- nothing\n"))), "I Z");
  // An error stops the rest of the message.
  msgs = Send(*s, Query("SELECT 1; SELECT * FROM missing; SELECT 2"));
  EXPECT_EQ(Types(msgs), "T D C E Z");
  EXPECT_EQ(ErrorField(msgs[3], 'C'), "42P01");
}

TEST_F(PgSessionTest, ExecuteWithRowLimitSuspendsThenContinues) {
  auto s = Connected();
  auto msgs = Send(*s, Parse("", "SELECT i FROM t WHERE i >= $1 ORDER BY i", {20}) +
                           Bind("", "", {}, {std::string("4")}, {}) + Describe('P', "") +
                           Execute("", 2) + Execute("", 3) + Execute("", 0) + Sync());
  EXPECT_EQ(Types(msgs), "1 2 T D D s D D D s D C Z");
  EXPECT_EQ(*RowValues(msgs[3])[0], "4");
  EXPECT_EQ(*RowValues(msgs[10])[0], "9");
  EXPECT_EQ(msgs[11].body, CStr("SELECT 1"));
  EXPECT_EQ(msgs.back().body, "I");
}

TEST_F(PgSessionTest, ErrorDiscardsMessagesUntilSync) {
  auto s = Connected();
  auto msgs = Send(*s, Parse("", "SELECT * FROM missing") + Bind("", "", {}, {}, {}) +
                           Execute("", 0) + Sync());
  // Parse succeeds (tables are resolved when the portal runs).
  ASSERT_FALSE(msgs.empty());
  msgs = Send(*s, Parse("bad", "SELECT 1; SELECT 2") + Bind("", "bad", {}, {}, {}) +
                      Execute("", 0) + Sync() + Query("SELECT 7"));
  EXPECT_EQ(Types(msgs), "E Z T D C Z");
  EXPECT_EQ(ErrorField(msgs[0], 'C'), "42601");
}

TEST_F(PgSessionTest, NamedStatementsDescribeAndRebind) {
  auto s = Connected();
  auto msgs = Send(*s, Parse("q", "SELECT s, i FROM t WHERE i = $1") + Describe('S', "q") + Sync());
  ASSERT_EQ(Types(msgs), "1 t T Z");
  EXPECT_EQ(Get16(msgs[1].body, 0), 1);  // one parameter
  EXPECT_EQ(Get16(msgs[2].body, 0), 2);  // two columns
  for (int i : {2, 5}) {
    msgs = Send(*s, Bind("", "q", {}, {std::to_string(i)}, {}) + Execute("", 0) + Sync());
    ASSERT_EQ(Types(msgs), "2 D C Z");
    EXPECT_EQ(*RowValues(msgs[1])[0], "v" + std::to_string(i));
  }
  msgs = Send(*s, Close('S', "q") + Bind("", "q", {}, {std::string("1")}, {}) + Sync());
  EXPECT_EQ(Types(msgs), "3 E Z");
  EXPECT_EQ(ErrorField(msgs[1], 'C'), "26000");
}

TEST_F(PgSessionTest, ParameterCountMismatchIsAnError) {
  auto s = Connected();
  auto msgs = Send(*s, Parse("", "SELECT $1, $2") + Bind("", "", {}, {std::string("1")}, {}) +
                           Sync());
  EXPECT_EQ(Types(msgs), "1 E Z");
  EXPECT_EQ(ErrorField(msgs[1], 'C'), "08P01");
}

TEST_F(PgSessionTest, BinaryResultsForCommonTypes) {
  auto s = Connected();
  auto msgs = Send(*s, Parse("", "SELECT i, s FROM t WHERE i = 9") +
                           Bind("", "", {}, {}, {1}) + Describe('P', "") + Execute("", 0) +
                           Sync());
  ASSERT_EQ(Types(msgs), "1 2 T D C Z");
  auto row = RowValues(msgs[3]);
  ASSERT_EQ(row[0]->size(), 8u);
  EXPECT_EQ(Get32(*row[0], 4), 9);
  EXPECT_EQ(*row[1], "v9");
}

TEST_F(PgSessionTest, TransactionStatusFollowsBeginErrorsAndRollback) {
  auto s = Connected();
  EXPECT_EQ(Send(*s, Query("BEGIN")).back().body, "T");
  EXPECT_EQ(Send(*s, Query("SELECT * FROM missing")).back().body, "E");
  auto msgs = Send(*s, Query("SELECT 1"));
  EXPECT_EQ(ErrorField(msgs[0], 'C'), "25P02");
  EXPECT_EQ(Send(*s, Query("ROLLBACK")).back().body, "I");
  msgs = Send(*s, Query("INSERT INTO t VALUES (1, 'x')"));
  EXPECT_EQ(ErrorField(msgs[0], 'C'), "25006");
}

TEST_F(PgSessionTest, CancelRequestNeedsTheRightSecret) {
  auto s = Connected();
  // The key the session announced.
  PgSession probe(&config_);
  auto msgs = Send(probe, Startup({{"user", "u"}}));
  int32_t pid = 0, secret = 0;
  for (auto& m : msgs) {
    if (m.type == 'K') {
      pid = Get32(m.body, 0);
      secret = Get32(m.body, 4);
    }
  }
  ASSERT_NE(pid, 0);
  EXPECT_FALSE(registry_.Cancel(pid, secret + 1));
  EXPECT_TRUE(registry_.Cancel(pid, secret));
  // A CancelRequest packet closes its own connection without an answer.
  PgSession canceller(&config_);
  std::string cancel;
  Put32(&cancel, 16);
  Put32(&cancel, 80877102);
  Put32(&cancel, pid);
  Put32(&cancel, secret);
  ASSERT_TRUE(canceller.Feed(cancel.data(), cancel.size()).ok());
  EXPECT_TRUE(canceller.closed());
  EXPECT_TRUE(canceller.output().empty());
}

TEST_F(PgSessionTest, CursorsFetchInChunks) {
  auto s = Connected();
  auto msgs = Send(*s, Query("BEGIN; DECLARE c CURSOR FOR SELECT i FROM t ORDER BY i; "
                             "FETCH FORWARD 4 FROM c; FETCH 100 FROM c; CLOSE c; COMMIT"));
  EXPECT_EQ(Types(msgs), "C C T D D D D C T D D D D D D C C C Z");
  EXPECT_EQ(msgs[7].body, CStr("FETCH 4"));
}

}  // namespace
}  // namespace rill::pgwire
