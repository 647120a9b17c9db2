#include "rill/connector/websocket_connector.h"

#include <algorithm>
#include <chrono>
#include <limits>

#include <arrow/buffer.h>
#include <arrow/io/memory.h>
#include <arrow/ipc/reader.h>
#include <arrow/record_batch.h>
#include <arrow/type.h>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>

#include "rill/connector/decode_counters.h"
#include "rill/connector/json_stream_connector.h"  // CollectRejects

namespace rill {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;

namespace {

constexpr int64_t kMaxPendingRejects = 10000;
/// Bytes asked of one frame read (a message is read in pieces of at most this).
constexpr size_t kReadChunkBytes = 1 << 20;
/// Longest pause between two offers of a held message (under on_overflow = error).
constexpr std::chrono::milliseconds kMaxRoomWait{20};

Result<WebSocketConnector::Target> ParseUri(const std::string& uri) {
  WebSocketConnector::Target t;
  std::string rest;
  if (uri.rfind("ws://", 0) == 0) {
    rest = uri.substr(5);
  } else if (uri.rfind("wss://", 0) == 0) {
    t.tls = true;
    rest = uri.substr(6);
  } else {
    return Status::Invalid("WebSocketConnector: uri must start with ws:// or wss://, got '",
                           uri, "'");
  }
  size_t slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  t.path = slash == std::string::npos ? "/" : rest.substr(slash);
  size_t colon = authority.rfind(':');
  size_t bracket = authority.rfind(']');
  if (colon != std::string::npos && (bracket == std::string::npos || colon > bracket)) {
    t.host = authority.substr(0, colon);
    t.port = authority.substr(colon + 1);
  } else {
    t.host = authority;
    t.port = t.tls ? "443" : "80";
  }
  if (t.host.size() > 2 && t.host.front() == '[') t.host = t.host.substr(1, t.host.size() - 2);
  if (t.host.empty() || t.port.empty() ||
      !std::all_of(t.port.begin(), t.port.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return Status::Invalid("WebSocketConnector: bad host or port in uri '", uri, "'");
  }
  return t;
}

/// The batches of one binary message (an Arrow IPC stream), each validated in
/// full (bytes from the network: offsets, UTF-8, dictionary indices).
Result<std::vector<std::shared_ptr<arrow::RecordBatch>>> ReadIpcMessage(const std::string& data) {
  auto reader = arrow::ipc::RecordBatchStreamReader::Open(
      std::make_shared<arrow::io::BufferReader>(arrow::Buffer::FromString(data)));
  if (!reader.ok()) return Status::Invalid("not an Arrow IPC stream: ", reader.status().message());
  auto batches = (*reader)->ToRecordBatches();
  if (!batches.ok()) {
    return Status::Invalid("not an Arrow IPC stream: ", batches.status().message());
  }
  for (size_t i = 0; i < batches->size(); ++i) {
    Status valid = (*batches)[i]->ValidateFull();
    if (!valid.ok()) {
      return Status::Invalid("invalid Arrow IPC batch ", i, ": ", valid.message());
    }
  }
  return batches;
}

std::chrono::steady_clock::duration Seconds(double s) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(s));
}

}  // namespace

/// The reader's coroutines (friends of nothing: they use the public surface
/// plus the callbacks handed in).
struct WsClient {
  WebSocketConnector::Target target;
  const WebSocketOptions* options;
  /// Take one message: its bytes (only the first `max_raw_bytes` of one over
  /// max_message_bytes), whether binary, its full size. False: the message is
  /// held (the buffer is full under on_overflow = error); call retry_held.
  std::function<bool(const std::string&, bool, int64_t)> on_message;
  /// Offer the held message again; true once it is buffered.
  std::function<bool()> retry_held;
  std::function<void()> on_open;

  template <class Ws>
  net::awaitable<void> HandshakeAndRead(Ws& ws) {
    beast::get_lowest_layer(ws).expires_after(Seconds(options->connect_timeout_seconds));
    ws.set_option(websocket::stream_base::decorator(
        [headers = options->headers](websocket::request_type& req) {
          req.set(beast::http::field::user_agent, "rill-websocket-connector");
          for (const auto& [k, v] : headers) req.set(k, v);
        }));
    // Messages are read piece by piece and sized below, so that
    // one over max_message_bytes becomes a reject, not a dropped connection.
    ws.read_message_max(std::numeric_limits<uint64_t>::max());
    std::string host = target.host + ":" + target.port;
    co_await ws.async_handshake(host, target.path, net::use_awaitable);
    beast::get_lowest_layer(ws).expires_never();
    ws.set_option(websocket::stream_base::timeout::suggested(beast::role_type::client));
    on_open();
    beast::flat_buffer buffer;
    for (;;) {
      int64_t size = 0;
      std::string head;  // of a message over the limit (the rest is discarded)
      do {
        size += static_cast<int64_t>(
            co_await ws.async_read_some(buffer, kReadChunkBytes, net::use_awaitable));
        if (size > options->max_message_bytes) {
          // The first time here the buffer holds the message from its start.
          const size_t keep = static_cast<size_t>(options->decode.max_raw_bytes);
          if (head.size() < keep) {
            head += beast::buffers_to_string(buffer.data()).substr(0, keep - head.size());
          }
          buffer.consume(buffer.size());
        }
      } while (!ws.is_message_done());
      const bool taken =
          on_message(size > options->max_message_bytes
                         ? head
                         : beast::buffers_to_string(buffer.data()),
                     ws.got_binary(), size);
      buffer.consume(buffer.size());
      if (!taken) co_await WaitForRoom();
    }
  }

  /// Backpressure: read nothing more from the socket (the server's writes
  /// block once the TCP windows fill) until the held message fits.
  net::awaitable<void> WaitForRoom() {
    net::steady_timer timer(co_await net::this_coro::executor);
    auto wait = std::chrono::milliseconds(1);
    do {
      timer.expires_after(wait);
      co_await timer.async_wait(net::use_awaitable);
      wait = std::min(wait * 2, kMaxRoomWait);
    } while (!retry_held());
  }

  net::awaitable<void> Session(ssl::context* tls) {
    auto executor = co_await net::this_coro::executor;
    tcp::resolver resolver(executor);
    auto endpoints = co_await resolver.async_resolve(target.host, target.port, net::use_awaitable);
    if (!target.tls) {
      websocket::stream<beast::tcp_stream> ws(executor);
      beast::get_lowest_layer(ws).expires_after(Seconds(options->connect_timeout_seconds));
      co_await beast::get_lowest_layer(ws).async_connect(endpoints, net::use_awaitable);
      co_await HandshakeAndRead(ws);
      co_return;
    }
    websocket::stream<beast::ssl_stream<beast::tcp_stream>> ws(executor, *tls);
    beast::get_lowest_layer(ws).expires_after(Seconds(options->connect_timeout_seconds));
    co_await beast::get_lowest_layer(ws).async_connect(endpoints, net::use_awaitable);
    if (!SSL_set_tlsext_host_name(ws.next_layer().native_handle(), target.host.c_str())) {
      throw beast::system_error(beast::error_code(static_cast<int>(::ERR_get_error()),
                                                  net::error::get_ssl_category()));
    }
    if (options->tls_verify) {
      ws.next_layer().set_verify_callback(ssl::host_name_verification(target.host));
    }
    co_await ws.next_layer().async_handshake(ssl::stream_base::client, net::use_awaitable);
    co_await HandshakeAndRead(ws);
  }
};

Result<std::shared_ptr<WebSocketConnector>> WebSocketConnector::Make(std::string target_table,
                                                                     std::string uri,
                                                                     WebSocketOptions options) {
  if (target_table.empty()) return Status::Invalid("WebSocketConnector: empty target_table");
  RILL_ASSIGN_OR_RAISE(Target target, ParseUri(uri));
  if (!(options.reconnect_initial_seconds > 0) ||
      options.reconnect_max_seconds < options.reconnect_initial_seconds) {
    return Status::Invalid("WebSocketConnector: need 0 < reconnect_initial_seconds <= "
                           "reconnect_max_seconds");
  }
  if (options.max_message_bytes <= 0) {
    return Status::Invalid("WebSocketConnector: max_message_bytes must be > 0");
  }
  RILL_ASSIGN_OR_RAISE(auto decoder, JsonDecoder::Make(options.decode));
  return std::shared_ptr<WebSocketConnector>(new WebSocketConnector(
      std::move(target_table), std::move(uri), std::move(target), std::move(options),
      std::move(decoder)));
}

WebSocketConnector::WebSocketConnector(std::string target_table, std::string uri,
                                       Target target, WebSocketOptions options,
                                       std::unique_ptr<JsonDecoder> decoder)
    : Connector(options.name, std::move(target_table), options.decode.schema),
      uri_(std::move(uri)),
      target_(std::move(target)),
      options_(std::move(options)),
      explicit_schema_(options_.decode.schema != nullptr),
      buffer_(options_.limits),
      decoder_(std::move(decoder)) {}

WebSocketConnector::~WebSocketConnector() { Stop(); }

Status WebSocketConnector::Start() {
  if (thread_.joinable()) return Status::OK();
  stopping_ = false;
  thread_ = std::thread([this] { Run(); });
  return Status::OK();
}

void WebSocketConnector::Stop() {
  stopping_ = true;
  {
    std::lock_guard<std::mutex> lock(run_mu_);
    if (io_ != nullptr) static_cast<net::io_context*>(io_)->stop();
  }
  if (thread_.joinable()) thread_.join();
  connected_ = false;
}

void WebSocketConnector::Run() {
  ssl::context tls(ssl::context::tls_client);
  if (options_.tls_verify) {
    tls.set_default_verify_paths();
    if (!options_.ca_file.empty()) {
      beast::error_code ec;
      tls.load_verify_file(options_.ca_file, ec);
      if (ec) OnDisconnect("cannot load ca_file '" + options_.ca_file + "': " + ec.message());
    }
    tls.set_verify_mode(ssl::verify_peer);
  } else {
    tls.set_verify_mode(ssl::verify_none);
  }
  held_.clear();
  WsClient client{target_, &options_,
                  [this](const std::string& data, bool binary, int64_t size) {
                    return OnMessage(data, binary, size);
                  },
                  [this] { return PushOrHold(std::move(held_)); }, nullptr};
  bool ever_connected = false;
  bool opened = false;
  client.on_open = [&] {
    opened = true;
    connected_ = true;
    if (ever_connected) {
      std::lock_guard<std::mutex> lock(mu_);
      ++counters_.reconnects;
    }
    ever_connected = true;
  };
  auto loop = [&]() -> net::awaitable<void> {
    double backoff = options_.reconnect_initial_seconds;
    while (!stopping_) {
      std::string error;
      opened = false;
      try {
        co_await client.Session(&tls);
        error = "the server closed the connection";
      } catch (const std::exception& e) {
        error = e.what();
      }
      connected_ = false;
      if (stopping_) break;
      if (opened) backoff = options_.reconnect_initial_seconds;
      OnDisconnect(error);
      net::steady_timer timer(co_await net::this_coro::executor, Seconds(backoff));
      co_await timer.async_wait(net::use_awaitable);
      backoff = std::min(backoff * 2, options_.reconnect_max_seconds);
    }
  };
  // Declared last: its destructor frees the suspended coroutines, whose
  // streams use `tls` and whose callbacks use `client`.
  net::io_context ioc(1);
  net::co_spawn(ioc, loop, net::detached);
  {
    std::lock_guard<std::mutex> lock(run_mu_);
    if (stopping_) return;
    io_ = &ioc;
  }
  ioc.run();
  std::lock_guard<std::mutex> lock(run_mu_);
  io_ = nullptr;
}

bool WebSocketConnector::OnMessage(const std::string& data, bool binary, int64_t size) {
  std::vector<std::shared_ptr<arrow::RecordBatch>> batches;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const int64_t message = ++messages_;
    const int64_t offset = counters_.received_bytes;  // of the message in this connector's input
    counters_.received_bytes += size;
    const std::string where = "message " + std::to_string(message);
    auto reject = [&](std::string position, std::string error) {
      RejectedRecord r;
      r.position = std::move(position);
      r.error = std::move(error);
      r.raw = TruncateRaw(data, options_.decode.max_raw_bytes);
      r.raw_size = size;
      r.byte_offset = offset;
      ++counters_.received_records;
      ++counters_.rejected_records;
      CollectRejects(name(), {std::move(r)}, kMaxPendingRejects, &rejects_,
                     &counters_.rejects_overflowed);
      return true;
    };
    const std::string at = where + ", byte " + std::to_string(offset);
    if (size > options_.max_message_bytes) {
      return reject(at + (binary ? " (binary)" : ""),
                    "message of " + std::to_string(size) + " bytes exceeds max_message_bytes=" +
                        std::to_string(options_.max_message_bytes) + " (raw: its first bytes)");
    }
    if (binary) {
      auto read = ReadIpcMessage(data);
      if (!read.ok()) return reject(at + " (binary)", read.status().message());
      batches = std::move(*read);
      for (const auto& b : batches) {
        counters_.received_records += b->num_rows();
        counters_.parsed_records += b->num_rows();
      }
    } else {
      auto decoded = decoder_->Decode(data);
      if (!decoded.ok()) {
        // Not a bad record (those are rejects of the decode) but a failed
        // decode: the whole message is kept as one reject.
        ++counters_.errors;
        last_error_ = decoded.status().ToString();
        return reject(at, "cannot decode the message: " + decoded.status().message());
      }
      for (auto& r : decoded->rejects) r.position = where + ", " + r.position;
      CountDecoded(name(), &*decoded, kMaxPendingRejects, &rejects_, &counters_);
      if (decoded->batch) batches.push_back(decoded->batch);
    }
  }
  return PushOrHold(std::move(batches));
}

bool WebSocketConnector::PushOrHold(std::vector<std::shared_ptr<arrow::RecordBatch>> batches) {
  // The drop policies never refuse (they drop and count); under error, a push
  // that does not fit waits (a message larger than the buffer fits when it is
  // empty, or it would wait forever).
  if (buffer_.TryPush(batches, /*oversize_when_empty=*/true).IsCapacityError()) {
    held_ = std::move(batches);
    return false;
  }
  held_.clear();
  return true;
}

void WebSocketConnector::OnDisconnect(const std::string& error) {
  std::lock_guard<std::mutex> lock(mu_);
  ++counters_.errors;
  last_error_ = error;
}

Result<std::vector<std::shared_ptr<arrow::RecordBatch>>> WebSocketConnector::Poll() {
  return buffer_.Drain();
}

Result<std::vector<std::shared_ptr<arrow::RecordBatch>>> WebSocketConnector::PollAtMost(
    int64_t max_records) {
  return buffer_.Drain(max_records);
}

std::vector<RejectedRecord> WebSocketConnector::TakeRejects() {
  std::lock_guard<std::mutex> lock(mu_);
  return std::move(rejects_);
}

void WebSocketConnector::SetTargetSchema(const std::shared_ptr<arrow::Schema>& schema) {
  if (explicit_schema_ || !schema) return;
  std::lock_guard<std::mutex> lock(mu_);
  AdoptTargetSchema(decoder_.get(), schema, &counters_);
}

ConnectorStats WebSocketConnector::stats() const {
  ConnectorStats s = buffer_.stats();
  std::lock_guard<std::mutex> lock(mu_);
  s = WithDecodeCounters(s, counters_);
  s.reconnects = counters_.reconnects;
  return s;
}

std::string WebSocketConnector::last_error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_error_;
}

}  // namespace rill
