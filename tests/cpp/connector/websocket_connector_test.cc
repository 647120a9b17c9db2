// WebSocketConnector against a Boost.Beast server on 127.0.0.1 in the test:
// what the connector cannot decode is a reject with the frame's bytes and
// position, a message over the limit too (the connection stays), and under
// on_overflow = error the reader stops reading until there is room.
#include "rill/connector/websocket_connector.h"

#include <sys/socket.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <arrow/api.h>
#include <arrow/io/memory.h>
#include <arrow/ipc/api.h>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <gtest/gtest.h>

#include "rill/engine/engine.h"
#include "table/test_util.h"

namespace rill {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;
using tcp = net::ip::tcp;

struct Frame {
  std::string data;
  bool binary = false;
};

/// Accepts one WebSocket connection, sends `frames`, then reads until the
/// client goes away.
class FrameServer {
 public:
  explicit FrameServer(std::vector<Frame> frames)
      : acceptor_(ioc_, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0)) {
    port_ = acceptor_.local_endpoint().port();
    thread_ = std::thread([this, frames = std::move(frames)] {
      beast::error_code ec;
      tcp::socket socket(ioc_);
      acceptor_.accept(socket, ec);
      if (ec) return;
      websocket::stream<tcp::socket> ws(std::move(socket));
      ws.read_message_max(0);
      ws.accept(ec);
      if (ec) return;
      for (const auto& f : frames) {
        ws.binary(f.binary);
        ws.write(net::buffer(f.data), ec);
        if (ec) return;
      }
      beast::flat_buffer buffer;
      ws.read(buffer, ec);  // until the client closes
    });
  }
  ~FrameServer() {
    ::shutdown(acceptor_.native_handle(), SHUT_RDWR);  // wakes an accept still waiting
    thread_.join();
  }
  std::string uri() const { return "ws://127.0.0.1:" + std::to_string(port_) + "/feed"; }

 private:
  net::io_context ioc_;
  tcp::acceptor acceptor_;
  int port_ = 0;
  std::thread thread_;
};

/// Wait (up to a generous deadline, not a threshold) until `done`.
bool WaitFor(const std::function<bool()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

std::string Ndjson(int64_t from, int64_t to) {
  std::string out;
  for (int64_t i = from; i < to; ++i) out += "{\"id\":" + std::to_string(i) + "}\n";
  return out;
}

/// An Arrow IPC stream whose one string column holds bytes that are not UTF-8:
/// it reads, but does not validate in full.
std::string IpcWithInvalidUtf8() {
  const int32_t offsets[] = {0, 2};
  auto data = arrow::ArrayData::Make(
      arrow::utf8(), 1,
      {nullptr, arrow::Buffer::FromString(std::string(reinterpret_cast<const char*>(offsets),
                                                       sizeof(offsets))),
       arrow::Buffer::FromString("\xff\xfe")},
      /*null_count=*/0);
  auto ids = arrow::json::ArrayFromJSONString(arrow::int64(), "[9]").ValueOrDie();
  auto batch = arrow::RecordBatch::Make(
      arrow::schema({arrow::field("id", arrow::int64()), arrow::field("name", arrow::utf8())}),
      1, {ids, arrow::MakeArray(data)});
  EXPECT_TRUE(batch->Validate().ok());
  EXPECT_FALSE(batch->ValidateFull().ok());
  auto sink = arrow::io::BufferOutputStream::Create().ValueOrDie();
  auto writer = arrow::ipc::MakeStreamWriter(sink, batch->schema()).ValueOrDie();
  EXPECT_TRUE(writer->WriteRecordBatch(*batch).ok());
  EXPECT_TRUE(writer->Close().ok());
  return sink->Finish().ValueOrDie()->ToString();
}

std::shared_ptr<WebSocketConnector> MakeConnector(const std::string& uri,
                                                  WebSocketOptions options = {}) {
  options.decode.schema = test::IdSchema();
  options.reconnect_initial_seconds = 0.05;
  auto c = WebSocketConnector::Make("t", uri, std::move(options));
  EXPECT_TRUE(c.ok()) << c.status();
  return *c;
}

TEST(WebSocketConnector, RejectsABinaryFrameThatIsNotValidArrowWithItsBytesInRillRejects) {
  const std::string invalid = IpcWithInvalidUtf8();
  FrameServer server({{"{\"id\":1}"}, {invalid, true}, {"{\"id\":2}"}});
  RILL_ASSERT_OK_AND_ASSIGN(auto engine, Engine::Make());
  RILL_ASSERT_OK(engine->RegisterTable("t", test::IdSchema()).status());
  auto c = MakeConnector(server.uri());
  RILL_ASSERT_OK(engine->AddConnector(c));
  ASSERT_TRUE(WaitFor([&] {
    EXPECT_TRUE(engine->Step().ok());
    return engine->GetMetrics().rejected_records == 1 &&
           engine->GetMetrics().total_records_processed == 2;
  }));
  RILL_ASSERT_OK_AND_ASSIGN(auto ids, engine->Query("SELECT id FROM t ORDER BY id"));
  EXPECT_EQ(test::ColumnStrings(*ids, "id"), (std::vector<std::string>{"1", "2"}));
  RILL_ASSERT_OK_AND_ASSIGN(auto rejects,
                            engine->Query("SELECT source, position, reason, raw FROM rill_rejects"));
  ASSERT_EQ(rejects->num_rows(), 1);
  auto cell = [&](int col) { return rejects->column(col)->GetScalar(0).ValueOrDie()->ToString(); };
  EXPECT_EQ(cell(0), "t");
  // Message 2 starts after the 8 bytes of message 1.
  EXPECT_EQ(cell(1), "message 2, byte 8 (binary)");
  EXPECT_NE(cell(2).find("invalid Arrow IPC batch 0"), std::string::npos) << cell(2);
  auto raw = std::static_pointer_cast<arrow::BinaryArray>(rejects->column(3)->chunk(0));
  EXPECT_EQ(raw->GetView(0), invalid);
  EXPECT_EQ(c->stats().rejected_records, 1);
  c->Stop();
}

TEST(WebSocketConnector, AMessageOverMaxMessageBytesIsARejectAndTheConnectionStays) {
  const std::string big = Ndjson(0, 2000);  // ~20 KB
  FrameServer server({{big}, {"{\"id\":7}"}});
  WebSocketOptions o;
  o.max_message_bytes = 1000;
  auto c = MakeConnector(server.uri(), o);
  RILL_ASSERT_OK(c->Start());
  std::vector<int64_t> ids;
  ASSERT_TRUE(WaitFor([&] {
    for (int64_t id : test::IdValues(*c->Poll())) ids.push_back(id);
    return !ids.empty();
  }));
  EXPECT_EQ(ids, (std::vector<int64_t>{7}));
  auto rejects = c->TakeRejects();
  ASSERT_EQ(rejects.size(), 1u);
  EXPECT_EQ(rejects[0].position, "message 1, byte 0");
  EXPECT_NE(rejects[0].error.find("exceeds max_message_bytes=1000"), std::string::npos)
      << rejects[0].error;
  EXPECT_EQ(rejects[0].raw_size, static_cast<int64_t>(big.size()));
  EXPECT_EQ(rejects[0].raw, big.substr(0, 4096));  // max_raw_bytes of it
  EXPECT_EQ(c->stats().reconnects, 0);
  c->Stop();
}

TEST(WebSocketConnector, UnderOnOverflowErrorStopsReadingUntilThereIsRoomAndLosesNothing) {
  std::vector<Frame> frames;
  for (int64_t k = 0; k < 100; ++k) frames.push_back({Ndjson(5 * k, 5 * k + 5)});
  FrameServer server(std::move(frames));
  WebSocketOptions o;
  o.limits.max_records = 10;
  o.limits.on_overflow = OverflowPolicy::kError;
  auto c = MakeConnector(server.uri(), o);
  RILL_ASSERT_OK(c->Start());
  ASSERT_TRUE(WaitFor([&] { return c->stats().buffered_records == 10; }));
  // Two messages fill the buffer; the reader holds the third and reads no more.
  EXPECT_LE(c->stats().received_records, 15);
  std::vector<int64_t> ids;
  ASSERT_TRUE(WaitFor([&] {
    for (int64_t id : test::IdValues(*c->Poll())) ids.push_back(id);
    return ids.size() >= 500;
  }));
  EXPECT_EQ(ids, test::IdRange(0, 500));
  const ConnectorStats s = c->stats();
  EXPECT_EQ(s.refused_records, 0);
  EXPECT_EQ(s.dropped_records, 0);
  EXPECT_EQ(s.parsed_records, 500);
  c->Stop();
}

}  // namespace
}  // namespace rill
