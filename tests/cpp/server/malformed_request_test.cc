// A generated corpus of malformed requests (bad request lines, huge and
// negative lengths, bad chunked encoding, bad WebSocket frames and masks, bad
// JSON bodies), each sent on its own connection: the server answers with a
// 4xx or closes, never crashes, keeps serving, and its memory stays bounded.
#include <fstream>
#include <random>

#include "server/server_test_util.h"

namespace rill::server::testing {
namespace {

struct Case {
  std::string name;
  std::string bytes;
  bool websocket = false;  // a valid upgrade followed by bad frames
};

int64_t RssKb() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6));
  }
  return 0;
}

std::string Auth() { return "Authorization: Bearer test-token\r\n"; }

std::string Post(const std::string& path, const std::string& body) {
  return "POST " + path + " HTTP/1.1\r\nHost: x\r\n" + Auth() +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

/// A client frame: FIN + opcode, masked with `mask` unless `masked` is false.
std::string Frame(uint8_t first, const std::string& payload, bool masked = true,
                  int64_t claimed_length = -1) {
  std::string f(1, static_cast<char>(first));
  uint64_t len = claimed_length >= 0 ? static_cast<uint64_t>(claimed_length) : payload.size();
  uint8_t mask_bit = masked ? 0x80 : 0;
  if (len < 126) {
    f.push_back(static_cast<char>(mask_bit | len));
  } else if (len < 65536) {
    f.push_back(static_cast<char>(mask_bit | 126));
    f.push_back(static_cast<char>(len >> 8));
    f.push_back(static_cast<char>(len & 0xff));
  } else {
    f.push_back(static_cast<char>(mask_bit | 127));
    for (int i = 7; i >= 0; --i) f.push_back(static_cast<char>((len >> (8 * i)) & 0xff));
  }
  const char key[4] = {0x12, 0x34, 0x56, 0x78};
  if (masked) f.append(key, 4);
  for (size_t i = 0; i < payload.size(); ++i) {
    f.push_back(masked ? static_cast<char>(payload[i] ^ key[i % 4]) : payload[i]);
  }
  return f;
}

std::string Upgrade() {
  return "GET /api/v1/stream HTTP/1.1\r\nHost: x\r\n" + Auth() +
         "Upgrade: websocket\r\nConnection: Upgrade\r\n"
         "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";
}

std::vector<Case> Corpus() {
  std::vector<Case> cases;
  auto add = [&](std::string name, std::string bytes, bool ws = false) {
    cases.push_back(Case{std::move(name), std::move(bytes), ws});
  };
  // Request lines.
  for (const char* line :
       {"GET\r\n\r\n", "GET / HTTP/9.9\r\n\r\n", "GET /\r\n\r\n", " / HTTP/1.1\r\n\r\n",
        "GET  / HTTP/1.1\r\n\r\n", "G\x01T / HTTP/1.1\r\n\r\n", "GET / HTTP/1.1\n\n",
        "GET / HTTP/1.1\r\nHost x\r\n\r\n", "GET / HTTP/1.1\r\n: v\r\n\r\n",
        "GET http://evil/ HTTP/1.1\r\nHost: x\r\n\r\n", "GET * HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET /api/v1/tables/%zz HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET /api/v1/tables/%4 HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET /?a=%%% HTTP/1.1\r\nHost: x\r\n\r\n", "HTTP/1.1 200 OK\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: x\r\nX: a\rb\r\n\r\n", "\r\n\r\n\r\n",
        "BREW /pot HTTP/1.1\r\nHost: x\r\n\r\n"}) {
    add("line", line);
  }
  for (const char* method : {"GET", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "CONNECT"}) {
    add("method", std::string(method) + " /api/v1/query HTTP/1.1\r\nHost: x\r\n" + Auth() +
                      "Content-Length: 0\r\n\r\n");
  }
  add("long uri", "GET /" + std::string(40000, 'a') + " HTTP/1.1\r\nHost: x\r\n\r\n");
  add("many headers", "GET / HTTP/1.1\r\n" + [] {
    std::string h;
    for (int i = 0; i < 3000; ++i) h += "X-" + std::to_string(i) + ": v\r\n";
    return h;
  }() + "\r\n");
  // Lengths.
  for (const char* length : {"-1", "-100", "abc", "99999999999999999999", "18446744073709551616",
                             "1e3", "0x10", " ", "1, 2", "17000000", "4294967296"}) {
    add("length", "POST /api/v1/query HTTP/1.1\r\nHost: x\r\n" + Auth() +
                      "Content-Length: " + length + "\r\n\r\n{}");
  }
  add("two lengths", "POST /api/v1/query HTTP/1.1\r\nHost: x\r\n" + Auth() +
                         "Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}");
  add("length and chunked", "POST /api/v1/query HTTP/1.1\r\nHost: x\r\n" + Auth() +
                                "Content-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n");
  add("short body", "POST /api/v1/query HTTP/1.1\r\nHost: x\r\n" + Auth() +
                        "Content-Length: 100\r\n\r\n{}");
  // Chunked encoding.
  for (const char* body :
       {"zz\r\n{}\r\n0\r\n\r\n", "-2\r\n{}\r\n0\r\n\r\n", "ffffffffffffffffff\r\n{}\r\n",
        "2\r\n{}0\r\n\r\n", "2\r\n{}\r\n", "2;ext=\x01\r\n{}\r\n0\r\n\r\n", "\r\n\r\n",
        "10000000\r\nabc\r\n", "2\n{}\n0\n\n", "0\r\nTrailer: \x7f\r\n\r\n",
        "1\r\n{\r\n1\r\n}\r\n0\r\n\r\n"}) {
    add("chunked", "POST /api/v1/query HTTP/1.1\r\nHost: x\r\n" + Auth() +
                       "Transfer-Encoding: chunked\r\n\r\n" + body);
  }
  add("bad encoding", "POST /api/v1/query HTTP/1.1\r\nHost: x\r\n" + Auth() +
                          "Transfer-Encoding: gzip\r\n\r\n{}");
  // JSON bodies.
  for (const std::string& body :
       std::vector<std::string>{"", "{", "}", "[]", "null", "1", "\"sql\"", "{\"sql\":1}",
                                "{\"sql\":null}", "{\"sql\":\"\"}", "{\"sql\":[\"SELECT 1\"]}",
                                "{\"sql\":\"SELECT 1\",\"format\":7}",
                                "{\"sql\":\"SELECT 1\",\"format\":\"\"}",
                                "{\"sql\":\"SELECT 1\"", "{\"sql\":\"\xff\xfe\"}",
                                "{\"sql\":\"SELECT 1\"}}", "{'sql':'SELECT 1'}",
                                std::string(100000, '['), std::string(5000, '{'),
                                "{\"sql\":\"SELECT 1; SELECT 2\"}",
                                "{\"sql\":\"ATTACH 'x.db'\"}", "{\"sql\":\"COPY orders TO 'x'\"}",
                                "{\"sql\":\"SET threads=1\"}", "{\"sql\":\"INSTALL httpfs\"}",
                                "{\"sql\":\"SELECT * FROM read_text('/etc/passwd')\"}",
                                "{\"sql\":\"CREATE TABLE x(a INT)\"}", "{\"sql\":\"\\ud800\"}",
                                "{\"sql\":1e999}"}) {
    for (const char* path : {"/api/v1/query", "/api/v1/metrics/query", "/api/v1/alerts",
                             "/api/v1/kpis", "/api/v1/rules", "/api/v1/login"}) {
      add("json", Post(path, body));
    }
  }
  // Random bytes.
  std::mt19937_64 rng(20261130);
  for (int i = 0; i < 40; ++i) {
    std::string junk(1 + rng() % 600, '\0');
    for (char& c : junk) c = static_cast<char>(rng());
    if (junk[0] == '\0') junk[0] = 'G';  // keep it HTTP (0 goes to the pgwire seam)
    add("random", junk);
  }
  for (int i = 0; i < 20; ++i) {  // a valid prefix, then junk
    std::string junk = "POST /api/v1/query HTTP/1.1\r\nHost: x\r\n" + Auth();
    for (int k = 0; k < 50; ++k) junk.push_back(static_cast<char>(rng()));
    add("random tail", junk);
  }
  // PostgreSQL-looking first bytes (closed until pgwire is registered).
  add("pg startup", std::string("\0\0\0\x08\x04\xd2\x16\x2f", 8));
  add("pg garbage", std::string("\0\xff\xff\xff", 4));
  // WebSocket: bad upgrade requests.
  add("ws no key", "GET /api/v1/stream HTTP/1.1\r\nHost: x\r\n" + Auth() +
                       "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n\r\n");
  add("ws version", "GET /api/v1/stream HTTP/1.1\r\nHost: x\r\n" + Auth() +
                        "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 7\r\n\r\n");
  // WebSocket: bad frames after a valid handshake.
  std::vector<std::string> frames = {
      Frame(0x81, "{\"type\":\"ping\"}", /*masked=*/false),  // unmasked client frame
      Frame(0x83, "x"),                                       // reserved opcode
      Frame(0x8B, "x"),                                       // reserved control opcode
      Frame(0xC1, "x"),                                       // RSV1 without extension
      Frame(0xA1, "x"),                                       // RSV2
      Frame(0x09, "x"),                                       // fragmented ping
      Frame(0x89, std::string(200, 'p')),                     // control frame > 125
      Frame(0x81, "\xff\xfe\xfd"),                            // invalid UTF-8 text
      Frame(0x81, "x", true, int64_t{1} << 62),               // huge length
      Frame(0x81, std::string(70000, 'a')),                   // over read_message_max
      Frame(0x80, "x"),                                       // continuation without start
      Frame(0x01, "{\"ty") + Frame(0x81, "pe\"}"),            // new message mid-fragment
      Frame(0x88, "\x03"),                                    // close with 1-byte payload
      Frame(0x88, "\x03\xe7"),                                // close code 999
      Frame(0x81, "{\"type\":") ,                             // bad JSON
      Frame(0x81, "[1,2,3]"),                                 // JSON, not an object
      Frame(0x82, "\x01\x02"),                                // binary frame
      std::string("\x81", 1),                                 // truncated header
  };
  for (size_t i = 0; i < frames.size(); ++i) {
    add("ws frame " + std::to_string(i), Upgrade() + frames[i], true);
  }
  for (const char* text : {"{\"type\":", "[1,2,3]", "{\"type\":\"subscribe\",\"channels\":7}",
                           "{\"type\":\"subscribe\",\"channels\":[\"table:nope\"]}",
                           "{\"type\":42}", "null"}) {
    add("ws json", Upgrade() + Frame(0x81, text), true);
  }
  for (int i = 0; i < 40; ++i) {  // random frame bytes
    std::string junk(1 + rng() % 100, '\0');
    for (char& c : junk) c = static_cast<char>(rng());
    add("ws random", Upgrade() + junk, true);
  }
  return cases;
}

TEST(MalformedRequests, EachGetsA4xxOrACloseAndTheServerSurvives) {
  ServerOptions o;
  o.header_timeout_seconds = 2;
  o.idle_timeout_seconds = 2;
  Harness h(o, 10);
  std::vector<Case> cases = Corpus();
  ASSERT_GE(cases.size(), 300u);
  int64_t rss_before = RssKb();
  for (int round = 0; round < 2; ++round) {
    for (const Case& c : cases) {
      bool closed = false;
      std::string reply = RawExchange(h.server->address(), c.bytes, 5, &closed);
      ASSERT_TRUE(closed) << c.name << ": the server neither answered nor closed";
      int status = StatusOf(reply);
      if (c.websocket) {
        // The upgrade itself is valid (101); the frames must end the connection
        // (a close frame or a plain close), or an error frame for bad JSON.
        EXPECT_TRUE(status == 101 || (status >= 400 && status < 500)) << c.name << reply;
        if (c.name == "ws json") {
          EXPECT_NE(reply.find("\"type\":\"error\""), std::string::npos) << c.bytes;
        }
      } else {
        EXPECT_TRUE(status == 0 || (status >= 400 && status < 500))
            << c.name << " got " << status << ": " << reply.substr(0, 300) << "\nSENT: " << c.bytes.substr(0, 200);
      }
    }
    ASSERT_EQ(Get(h.server->address(), "/healthz").status, 200);
  }
  // Two rounds of the corpus must not grow memory without bound.
  EXPECT_LT(RssKb() - rss_before, 200 * 1024);
  EXPECT_EQ(Get(h.server->address(), "/api/v1/info", "test-token").status, 200);
}

}  // namespace
}  // namespace rill::server::testing
