// Before authentication a PostgreSQL client can hold little: each message is
// capped at a few KiB, the login is a deadline from the first byte, and idle
// unauthenticated sockets cannot take the connection slots of clients that
// log in. Over real sockets against a started Server.
#include <gtest/gtest.h>

#include "pgwire_socket_client.h"
#include "server_test_util.h"

namespace rill::server {
namespace {

using pgwire::testing::ErrorField;
using pgwire::testing::Msg;
using pgwire::testing::PgSocketClient;
using pgwire::testing::Put32;
using pgwire::testing::Startup;
using testing::Harness;

// A message header announcing `length` bytes (length word included), and
// only a few bytes of its body.
std::string Announcing(char type, int32_t length) {
  std::string m(1, type);
  Put32(&m, length);
  return m + std::string(16, 'x');
}

TEST(PgWirePreAuth, PasswordMessageAnnouncing64MiBIsRefusedBeforeItsBodyArrives) {
  Harness h;  // token "test-token": SCRAM-SHA-256
  PgSocketClient client(h.server->address());
  ASSERT_TRUE(client.connected());
  ASSERT_TRUE(client.Send(Startup({{"user", "tester"}, {"database", "rill"}})));
  ASSERT_TRUE(client.Until('R').has_value()) << "no AuthenticationSASL";
  // The SASLInitialResponse ('p') claims 64 MiB; 16 bytes follow, nothing more.
  ASSERT_TRUE(client.Send(Announcing('p', 64 << 20)));
  // The server answers and closes without waiting for (or buffering) the rest.
  ASSERT_TRUE(client.UntilClosed()) << "the server waited for the 64 MiB body";
  auto error = client.Error();
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(ErrorField(*error, 'S'), "FATAL");
  EXPECT_EQ(ErrorField(*error, 'C'), "08P01");
  EXPECT_NE(ErrorField(*error, 'M').find("8192"), std::string::npos)
      << ErrorField(*error, 'M');
}

TEST(PgWirePreAuth, StartupPacketAnnouncing16MiBIsRefusedBeforeItsBodyArrives) {
  Harness h;
  PgSocketClient client(h.server->address());
  ASSERT_TRUE(client.connected());
  // The largest length whose first byte is 0 (the listener's sign of
  // PostgreSQL; 64 MiB would start with 0x04 and be taken for HTTP).
  std::string packet;
  Put32(&packet, (16 << 20) - 1);
  Put32(&packet, 196608);
  ASSERT_TRUE(client.Send(packet));
  ASSERT_TRUE(client.UntilClosed());
  auto error = client.Error();
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(ErrorField(*error, 'C'), "08P01");
}

TEST(PgWirePreAuth, ThirdEncryptionRequestIsAProtocolViolation) {
  Harness h;
  PgSocketClient client(h.server->address());
  ASSERT_TRUE(client.Send(pgwire::testing::SslRequest()));
  ASSERT_TRUE(client.ReadSslAnswer());
  ASSERT_TRUE(client.Send(pgwire::testing::SslRequest()));
  ASSERT_TRUE(client.ReadSslAnswer());
  ASSERT_TRUE(client.Send(pgwire::testing::SslRequest()));
  ASSERT_TRUE(client.UntilClosed());
  auto error = client.Error();
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(ErrorField(*error, 'C'), "08P01");
}

TEST(PgWirePreAuth, ClientTricklingOneBytePer100msIsClosedAtTheLoginDeadline) {
  ServerOptions options;
  options.login_timeout_seconds = 0.5;
  Harness h(options);
  PgSocketClient client(h.server->address());
  ASSERT_TRUE(client.connected());
  // A startup packet of 9,000 bytes, sent one byte per 100 ms: it would take
  // 15 minutes. Each byte is a read, which re-armed the old idle timer.
  std::string packet = Startup({{"user", "tester"}, {"application_name", std::string(8900, 'a')}});
  size_t sent = 0;
  while (sent < packet.size() && !client.closed()) {
    if (!client.Send(packet.substr(sent, 1))) break;
    ++sent;
    client.Pump(std::chrono::milliseconds(100));
    // An event bound, not a speed check: 300 bytes = 30 s of trickling.
    ASSERT_LT(sent, 300u) << "still open after 30 s of trickling";
  }
  ASSERT_TRUE(client.UntilClosed());
  auto error = client.Error();
  ASSERT_TRUE(error.has_value()) << "closed without a word after " << sent << " bytes";
  EXPECT_EQ(ErrorField(*error, 'S'), "FATAL");
  EXPECT_EQ(ErrorField(*error, 'C'), "08006");
}

TEST(PgWirePreAuth, LoginDeadlineDoesNotCloseAnAuthenticatedSession) {
  ServerOptions options;
  options.login_timeout_seconds = 0.3;
  options.token = "";  // no authentication: the startup logs in
  Harness h(options);
  PgSocketClient client(h.server->address());
  ASSERT_TRUE(client.StartUp());
  // Past the deadline (an event: the login deadline of a second client).
  PgSocketClient late(h.server->address());
  ASSERT_TRUE(late.Send(pgwire::testing::SslRequest()));
  ASSERT_TRUE(late.ReadSslAnswer());
  ASSERT_TRUE(late.UntilClosed());
  auto rows = client.SimpleQuery("SELECT count(*) FROM orders");
  ASSERT_FALSE(client.closed());
  EXPECT_EQ(pgwire::testing::Types(rows), "T D C Z");
}

TEST(PgWirePreAuth, IdleUnauthenticatedSocketsLeaveRoomForAClientThatLogsIn) {
  ServerOptions options;
  options.token = "";  // a startup authenticates (the SCRAM case: test_pgwire.py)
  options.max_connections = 8;  // unauthenticated: at most 8 / 2 = 4
  Harness h(options);
  // Fill every connection slot with sockets that asked for TLS and went quiet.
  std::vector<std::unique_ptr<PgSocketClient>> idle;
  for (int i = 0; i < 8; ++i) {
    idle.push_back(std::make_unique<PgSocketClient>(h.server->address()));
    ASSERT_TRUE(idle.back()->Send(pgwire::testing::SslRequest()));
    ASSERT_TRUE(idle.back()->ReadSslAnswer()) << "socket " << i;
  }
  // The oldest four were closed to make room (each an event).
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(idle[i]->UntilClosed()) << "idle socket " << i << " still open";
    auto error = idle[i]->Error();
    ASSERT_TRUE(error.has_value());
    EXPECT_EQ(ErrorField(*error, 'C'), "53300");
  }
  PgSocketClient client(h.server->address());
  ASSERT_TRUE(client.StartUp()) << (client.Error() ? ErrorField(*client.Error(), 'M') : "");
  auto rows = client.SimpleQuery("SELECT count(*) FROM orders");
  EXPECT_EQ(pgwire::testing::Types(rows), "T D C Z");
  // The four newest idle sockets were not closed by it (it logged in at once)
  // except the oldest of them, which made room for the client's own login.
  for (int i = 5; i < 8; ++i) {
    idle[i]->Pump(std::chrono::milliseconds(0));
    EXPECT_FALSE(idle[i]->closed()) << "socket " << i;
  }
}

}  // namespace
}  // namespace rill::server
