// WebSocket /api/v1/stream with a real Beast client: auth, channels, errors,
// and a slow consumer (bounded queue, coalescing, notice frame).
#include <boost/beast/websocket.hpp>
#include <boost/json.hpp>

#include <map>
#include <memory>
#include <vector>

#include <arrow/array/concatenate.h>

#include "server/server_test_util.h"

namespace rill::server::testing {
namespace {

namespace json = boost::json;
namespace websocket = beast::websocket;

struct WsClient {
  net::io_context ioc;
  websocket::stream<tcp::socket> ws{ioc};

  /// Connect and upgrade; returns the handshake error, if any.
  beast::error_code Open(const std::string& address, const std::string& token,
                         int rcvbuf = 0) {
    std::string host = address.substr(0, address.rfind(':'));
    auto port = static_cast<uint16_t>(std::stoi(address.substr(address.rfind(':') + 1)));
    beast::error_code ec;
    auto& sock = ws.next_layer();
    sock.open(tcp::v4(), ec);
    if (rcvbuf > 0) sock.set_option(net::socket_base::receive_buffer_size(rcvbuf), ec);
    sock.connect(tcp::endpoint(net::ip::make_address(host), port), ec);
    if (ec) return ec;
    ws.set_option(websocket::stream_base::decorator([token](websocket::request_type& req) {
      if (!token.empty()) req.set(http::field::authorization, "Bearer " + token);
    }));
    ws.handshake(host, "/api/v1/stream", ec);
    return ec;
  }
  json::object Read() {
    beast::flat_buffer buffer;
    ws.read(buffer);
    return json::parse(beast::buffers_to_string(buffer.data())).as_object();
  }
  void Send(const std::string& text) { ws.write(net::buffer(text)); }
  /// Read until a frame satisfies `pred` (or give up after `max` frames).
  json::object ReadUntil(const std::function<bool(json::object&)>& pred, int max = 1000) {
    for (int i = 0; i < max; ++i) {
      json::object o = Read();
      if (pred(o)) return o;
    }
    ADD_FAILURE() << "no matching frame";
    return {};
  }
};

TEST(ServerWebSocket, UpgradeNeedsTheToken) {
  Harness h;
  WsClient anonymous;
  EXPECT_TRUE(anonymous.Open(h.server->address(), ""));
  WsClient wrong;
  EXPECT_TRUE(wrong.Open(h.server->address(), "nope"));
  WsClient ok;
  ASSERT_FALSE(ok.Open(h.server->address(), "test-token"));
  EXPECT_EQ(ok.Read()["type"].as_string(), "hello");
  EXPECT_EQ(h.server->stats().websocket_open, 1);
}

TEST(ServerWebSocket, MetricsAndTableChannelsOnOneSocket) {
  ServerOptions o;
  o.ws_metrics_interval_seconds = 0.1;
  Harness h(o, 10);
  WsClient c;
  ASSERT_FALSE(c.Open(h.server->address(), "test-token"));
  c.Read();  // hello
  c.Send(R"({"type":"subscribe","channels":["metrics","table:orders"]})");
  auto sub = c.ReadUntil([](json::object& f) { return f["type"] == "subscribed"; });
  EXPECT_EQ(sub["channels"].as_array().size(), 2u);
  auto table = h.engine->GetTable("orders").ValueOrDie();
  ASSERT_TRUE(table->Write(Orders(10, 25)).ok());
  auto frame = c.ReadUntil([](json::object& f) {
    return f["type"] == "event" && f["channel"] == "table:orders";
  });
  EXPECT_EQ(frame["data"].as_object()["rows"].to_number<int64_t>(), 25);
  EXPECT_EQ(frame["data"].as_object()["version"].to_number<uint64_t>(),
            table->snapshot()->version());
  auto metrics = c.ReadUntil([](json::object& f) { return f["channel"] == "metrics"; });
  EXPECT_TRUE(metrics["data"].as_object().contains("ticks"));
  c.Send(R"({"type":"ping"})");
  c.ReadUntil([](json::object& f) { return f["type"] == "pong"; });
}

TEST(ServerWebSocket, AlertsChannelDeliversRecordedAlerts) {
  Harness h;
  WsClient c;
  ASSERT_FALSE(c.Open(h.server->address(), "test-token"));
  c.Send(R"({"type":"subscribe","channels":["alerts"]})");
  c.ReadUntil([](json::object& f) { return f["type"] == "subscribed"; });
  ASSERT_TRUE(h.metrics->PushAlert("over the wire", "error", "d").ok());
  ASSERT_TRUE(h.metrics->Flush().ok());
  auto frame = c.ReadUntil([](json::object& f) { return f["channel"] == "alerts"; });
  EXPECT_EQ(frame["data"].as_object()["message"].as_string(), "over the wire");
  EXPECT_EQ(frame["data"].as_object()["severity"].as_string(), "error");
}

TEST(ServerWebSocket, BadMessagesGetErrorFramesAndTheSocketStaysUsable) {
  Harness h;
  WsClient c;
  ASSERT_FALSE(c.Open(h.server->address(), "test-token"));
  c.Read();
  for (const char* bad : {"not json", "[]", R"({"type":"dance"})",
                          R"({"type":"subscribe","channels":"metrics"})",
                          R"({"type":"subscribe","channels":["table:missing"]})",
                          R"({"type":"subscribe","channels":["nope"]})"}) {
    c.Send(bad);
    auto f = c.Read();
    EXPECT_EQ(f["type"].as_string(), "error") << bad;
  }
  c.Send(R"({"type":"subscribe","channels":["kpis"]})");
  EXPECT_EQ(c.Read()["type"].as_string(), "subscribed");
}

// Table versions written while the client reads nothing: far more than its
// 8-frame queue either way; fewer under the sanitizers, which make each write
// and each posted frame many times slower.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr int64_t kSlowConsumerVersions = 5000;
#else
constexpr int64_t kSlowConsumerVersions = 60000;
#endif

TEST(ServerWebSocket, SlowConsumerIsCoalescedNotBufferedAndNeverStallsWrites) {
  ServerOptions o;
  o.ws_queue_frames = 8;
  Harness h(o, 1);
  WsClient slow;
  ASSERT_FALSE(slow.Open(h.server->address(), "test-token", /*rcvbuf=*/4096));
  slow.Read();
  slow.Send(R"({"type":"subscribe","channels":["table:orders"]})");
  slow.ReadUntil([](json::object& f) { return f["type"] == "subscribed"; });
  auto table = h.engine->GetTable("orders").ValueOrDie();
  // The client reads nothing meanwhile: its frames pile up in the server. The
  // kernel's socket buffers take the first of them (how many depends on the
  // machine's tcp_wmem autotuning), so versions are written until the server
  // has had to coalesce, at least kSlowConsumerVersions of them, for at most
  // a minute.
  int64_t written = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    for (int64_t k = 0; k < 500; ++k) {
      ++written;
      ASSERT_TRUE(table->Write(Orders(written, written + 1)).ok());
    }
    if (written >= kSlowConsumerVersions && h.server->stats().ws_frames_coalesced > 0) break;
  }
  uint64_t last = table->snapshot()->version();
  // Wait for the io thread to drain the posts into the bounded queue.
  while (h.server->stats().ws_frames_coalesced == 0 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_GT(h.server->stats().ws_frames_coalesced, 0);
  bool notice = false;
  auto frame = slow.ReadUntil(
      [&](json::object& f) {
        if (f["type"] == "notice") notice = true;
        // Too far behind to merge by key: the latest state may come as a snapshot.
        return (f["type"] == "event" || f["type"] == "snapshot") &&
               f["data"].as_object()["version"].to_number<uint64_t>() == last;
      },
      100000);
  EXPECT_TRUE(notice);
  EXPECT_EQ(frame["data"].as_object()["rows"].to_number<int64_t>(), written + 1);
}

/// A client's copy of a keyed table, built from the table channel's frames:
/// order_id -> amount.
struct TableCopy {
  std::map<int64_t, double> rows;
  uint64_t version = 0;
  int64_t snapshots = 0;
  int64_t change_rows = 0;
  /// Apply a table frame; false if it is not one.
  bool Apply(json::object& f) {
    const bool snapshot = f["type"] == "snapshot";
    if (!(snapshot || f["type"] == "event") || !f.contains("channel") ||
        f["channel"] != "table:orders") {
      return false;
    }
    auto& data = f["data"].as_object();
    if (snapshot) {
      rows.clear();
      ++snapshots;
    }
    for (auto& v : data["changes"].as_array()) {
      auto& row = v.as_object();
      const int64_t id = row["order_id"].to_number<int64_t>();
      const auto op = row["_op"].as_string();
      if (op == "delete") {
        rows.erase(id);
      } else {
        rows[id] = row["amount"].to_number<double>();
      }
      if (!snapshot) ++change_rows;
    }
    if (!(data.contains("more") && data["more"].as_bool())) {
      version = data["version"].to_number<uint64_t>();
    }
    return true;
  }
};

/// Subscribe `client` to table:orders and apply its first snapshot to `copy`.
void SubscribeOrders(WsClient& client, TableCopy& copy) {
  client.Send(R"({"type":"subscribe","channels":["table:orders"]})");
  client.ReadUntil([&](json::object& f) { return copy.Apply(f) && copy.snapshots == 1; });
}

/// Orders [begin, end) with amounts base + 0, base + 1, ...
std::shared_ptr<arrow::RecordBatch> OrdersWithAmounts(int64_t begin, int64_t end, double base) {
  auto batch = Orders(begin, end);
  arrow::DoubleBuilder amount;
  for (int64_t k = 0; k < end - begin; ++k) EXPECT_TRUE(amount.Append(base + k).ok());
  return batch->SetColumn(2, batch->schema()->field(2), amount.Finish().ValueOrDie())
      .ValueOrDie();
}

/// The table's rows now: order_id -> amount.
std::map<int64_t, double> AmountsOf(const LiveTable& table) {
  std::map<int64_t, double> out;
  auto current = table.snapshot()->ToTable().ValueOrDie();
  auto amounts = std::static_pointer_cast<arrow::DoubleArray>(
      arrow::Concatenate(current->GetColumnByName("amount")->chunks()).ValueOrDie());
  auto ids = std::static_pointer_cast<arrow::Int64Array>(
      arrow::Concatenate(current->GetColumnByName("order_id")->chunks()).ValueOrDie());
  for (int64_t i = 0; i < ids->length(); ++i) out[ids->Value(i)] = amounts->Value(i);
  return out;
}

TEST(ServerWebSocket, TableChannelSendsASnapshotOnSubscribeThenTheChangedRows) {
  Harness h({}, 3);
  WsClient c;
  ASSERT_FALSE(c.Open(h.server->address(), "test-token"));
  c.Send(R"({"type":"subscribe","channels":["table:orders"]})");
  auto snapshot = c.ReadUntil([](json::object& f) { return f["type"] == "snapshot"; });
  EXPECT_EQ(snapshot["channel"].as_string(), "table:orders");
  auto& sd = snapshot["data"].as_object();
  EXPECT_EQ(sd["rows"].to_number<int64_t>(), 3);
  EXPECT_FALSE(sd["truncated"].as_bool());
  ASSERT_EQ(sd["changes"].as_array().size(), 3u);
  EXPECT_EQ(sd["changes"].as_array()[0].as_object()["_op"].as_string(), "insert");
  const uint64_t v0 = sd["version"].to_number<uint64_t>();
  EXPECT_EQ(sd["changes"].as_array()[0].as_object()["_version"].to_number<uint64_t>(), v0);
  auto table = h.engine->GetTable("orders").ValueOrDie();
  ASSERT_TRUE(table->Write({Orders(1, 2), Orders(5, 6)}).ok());
  auto event = c.ReadUntil([](json::object& f) {
    return f["type"] == "event" && f["channel"] == "table:orders";
  });
  auto& data = event["data"].as_object();
  EXPECT_EQ(data["version"].to_number<uint64_t>(), table->snapshot()->version());
  EXPECT_EQ(data["from_version"].to_number<uint64_t>(), v0);
  EXPECT_EQ(data["rows"].to_number<int64_t>(), 4);
  EXPECT_FALSE(data["more"].as_bool());
  auto& changes = data["changes"].as_array();
  ASSERT_EQ(changes.size(), 2u);
  EXPECT_EQ(changes[0].as_object()["order_id"].to_number<int64_t>(), 1);
  EXPECT_EQ(changes[0].as_object()["_op"].as_string(), "update");
  EXPECT_EQ(changes[1].as_object()["order_id"].to_number<int64_t>(), 5);
  EXPECT_EQ(changes[1].as_object()["_op"].as_string(), "insert");
  EXPECT_EQ(changes[1].as_object()["_version"].to_number<uint64_t>(),
            table->snapshot()->version());
}

TEST(ServerWebSocket, SlowTableClientGetsItsChangesMergedByKeyAndEndsWithTheTable) {
  ServerOptions o;
  o.ws_queue_frames = 8;
  Harness h(o, 10);
  WsClient slow;
  ASSERT_FALSE(slow.Open(h.server->address(), "test-token", /*rcvbuf=*/4096));
  TableCopy copy;
  SubscribeOrders(slow, copy);
  auto table = h.engine->GetTable("orders").ValueOrDie();
  // 2000 versions, each rewriting the same 40 keys with a new amount (about
  // 6 kB of change rows per version), while the client reads nothing.
  constexpr int kVersions = 2000;
  constexpr int kKeys = 40;
  for (int i = 0; i < kVersions; ++i) {
    ASSERT_TRUE(table->Write(OrdersWithAmounts(0, kKeys, i * 100.0)).ok());
  }
  const uint64_t last = table->snapshot()->version();
  slow.ReadUntil([&](json::object& f) { return copy.Apply(f) && copy.version == last; },
                 100000);
  EXPECT_EQ(copy.rows, AmountsOf(*table));
  // Merged: far fewer change rows than versions written.
  EXPECT_LT(copy.change_rows, int64_t{kVersions} * kKeys / 2);
  EXPECT_GT(h.server->stats().ws_frames_coalesced, 0);
}

// Clients that keep up take the frame the hub formats once per version (shared);
// a slow one beside them merges its own. Each ends with exactly the table, and
// each keeping-up client saw every version's changes in order, from_version
// following on from the last version it had.
TEST(ServerWebSocket, ClientsThatKeepUpShareOneFrameAndEachEndsWithTheTable) {
  ServerOptions o;
  o.ws_queue_frames = 8;
  Harness h(o, 10);
  constexpr int kFast = 4;
  std::vector<std::unique_ptr<WsClient>> fast;
  std::vector<TableCopy> copies(kFast);
  for (int i = 0; i < kFast; ++i) {
    fast.push_back(std::make_unique<WsClient>());
    ASSERT_FALSE(fast.back()->Open(h.server->address(), "test-token"));
    SubscribeOrders(*fast.back(), copies[i]);
  }
  WsClient slow;
  ASSERT_FALSE(slow.Open(h.server->address(), "test-token", /*rcvbuf=*/4096));
  TableCopy slow_copy;
  SubscribeOrders(slow, slow_copy);
  auto table = h.engine->GetTable("orders").ValueOrDie();
  for (int v = 0; v < 200; ++v) {
    ASSERT_TRUE(table->Write(OrdersWithAmounts(v % 7, v % 7 + 3, v * 10.0)).ok());
    // The fast clients read each version's frame as it comes.
    const uint64_t now = table->snapshot()->version();
    for (int i = 0; i < kFast; ++i) {
      fast[i]->ReadUntil([&](json::object& f) {
        if (f["type"] == "event" && f["channel"] == "table:orders") {
          auto& data = f["data"].as_object();
          EXPECT_EQ(data["from_version"].to_number<uint64_t>(), copies[i].version);
        }
        return copies[i].Apply(f) && copies[i].version == now;
      });
    }
  }
  const uint64_t last = table->snapshot()->version();
  slow.ReadUntil([&](json::object& f) { return slow_copy.Apply(f) && slow_copy.version == last; },
                 100000);
  const auto want = AmountsOf(*table);
  for (int i = 0; i < kFast; ++i) {
    EXPECT_EQ(copies[i].rows, want) << "fast client " << i;
    EXPECT_EQ(copies[i].snapshots, 1) << "fast client " << i;
  }
  EXPECT_EQ(slow_copy.rows, want);
}

}  // namespace
}  // namespace rill::server::testing
