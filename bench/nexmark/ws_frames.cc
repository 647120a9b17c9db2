#include "nexmark/ws_frames.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include <sys/socket.h>
#include <sys/time.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>

namespace rill::nexmark {

namespace beast = boost::beast;
namespace net = boost::asio;
namespace websocket = beast::websocket;
using tcp = net::ip::tcp;

namespace {

double WallMs() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void SetReceiveTimeout(int fd, int seconds) {
  timeval tv{seconds, 0};
  (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

}  // namespace

struct WsFrameRecorder::Socket {
  net::io_context ioc;
  websocket::stream<tcp::socket> ws{ioc};
};

WsFrameRecorder::WsFrameRecorder() : socket_(std::make_unique<Socket>()) {}

WsFrameRecorder::~WsFrameRecorder() { Join(); }

Status WsFrameRecorder::Open(const std::string& address, const std::string& token,
                             const std::string& table) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) return Status::Invalid("ws: address without a port: ", address);
  const std::string host = address.substr(0, colon);
  const auto port = static_cast<uint16_t>(std::atoi(address.c_str() + colon + 1));
  beast::error_code ec;
  auto& ws = socket_->ws;
  ws.next_layer().connect(tcp::endpoint(net::ip::make_address(host, ec), port), ec);
  if (ec) return Status::IOError("ws: connect to ", address, ": ", ec.message());
  // The upgrade and the subscription's reply must come within 10 s; the reader
  // then waits without a limit (Server::Stop closes the socket).
  SetReceiveTimeout(ws.next_layer().native_handle(), 10);
  ws.set_option(websocket::stream_base::decorator([token](websocket::request_type& req) {
    if (!token.empty()) req.set(beast::http::field::authorization, "Bearer " + token);
  }));
  ws.handshake(host, "/api/v1/stream", ec);
  if (ec) return Status::IOError("ws: upgrade at ", address, ": ", ec.message());
  channel_ = "table:" + table;
  ws.write(net::buffer("{\"type\":\"subscribe\",\"channels\":[\"" + channel_ + "\"]}"), ec);
  if (ec) return Status::IOError("ws: subscribe: ", ec.message());
  // Wait for the reply: only then is the server's table subscription in place.
  for (int i = 0; i < 100; ++i) {
    beast::flat_buffer buffer;
    ws.read(buffer, ec);
    if (ec) return Status::IOError("ws: read: ", ec.message());
    const std::string text = beast::buffers_to_string(buffer.data());
    if (text.find("\"type\":\"subscribed\"") != std::string::npos) {
      SetReceiveTimeout(ws.next_layer().native_handle(), 0);
      reader_ = std::thread([this] { Read(); });
      return Status::OK();
    }
    if (text.find("\"type\":\"error\"") != std::string::npos) {
      return Status::IOError("ws: subscribe to ", channel_, " refused: ", text);
    }
  }
  return Status::IOError("ws: no reply to the subscription of ", channel_);
}

void WsFrameRecorder::Read() {
  const std::string channel = "\"channel\":\"" + channel_ + "\"";
  beast::flat_buffer buffer;
  for (;;) {
    beast::error_code ec;
    buffer.clear();
    socket_->ws.read(buffer, ec);
    const double now = WallMs();
    if (ec) {
      std::lock_guard<std::mutex> lock(mu_);
      end_ = ec.message();
      return;
    }
    const std::string text = beast::buffers_to_string(buffer.data());
    const size_t v = text.find("\"version\":");
    std::lock_guard<std::mutex> lock(mu_);
    if (text.find(channel) == std::string::npos || v == std::string::npos) {
      ++other_;
      continue;
    }
    frames_.push_back({std::strtoull(text.c_str() + v + 10, nullptr, 10), now});
  }
}

void WsFrameRecorder::Join() {
  if (reader_.joinable()) reader_.join();
}

std::vector<WsFrameRecorder::Frame> WsFrameRecorder::frames() const {
  std::lock_guard<std::mutex> lock(mu_);
  return frames_;
}

int64_t WsFrameRecorder::other_frames() const {
  std::lock_guard<std::mutex> lock(mu_);
  return other_;
}

std::string WsFrameRecorder::end_reason() const {
  std::lock_guard<std::mutex> lock(mu_);
  return end_;
}

std::vector<float> MatchFrames(const std::vector<StampedVersion>& stamped,
                               const std::vector<WsFrameRecorder::Frame>& frames,
                               double from_ms, int64_t* versions_without_frame) {
  std::vector<float> out;
  int64_t skipped = 0;
  size_t next = 0;  // first stamped version not yet covered by a frame
  for (const auto& f : frames) {
    for (; next < stamped.size() && stamped[next].version <= f.version; ++next) {
      if (f.received_ms < from_ms) continue;
      if (stamped[next].version != f.version) ++skipped;
      for (double s : stamped[next].stamps_ms) out.push_back(static_cast<float>(f.received_ms - s));
    }
  }
  if (versions_without_frame != nullptr) *versions_without_frame = skipped;
  return out;
}

}  // namespace rill::nexmark
