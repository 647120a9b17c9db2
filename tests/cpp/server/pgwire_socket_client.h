// A blocking PostgreSQL client over a real socket, for tests against a started
// Server: send frontend messages (pgwire_test_util.h encodes them), read
// backend messages until one of a kind arrives or the server closes. Every
// wait has a bound, so a server that never answers fails the test instead of
// hanging it; the bound is generous (an event that does not come in 30 s is
// taken as never).
#pragma once

#include <poll.h>

#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio.hpp>
#include <gtest/gtest.h>

#include "pgwire_test_util.h"

namespace rill::pgwire::testing {

class PgSocketClient {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::seconds kBound{30};

  /// Connect to "HOST:PORT".
  explicit PgSocketClient(const std::string& address) : socket_(ioc_) {
    const std::string host = address.substr(0, address.rfind(':'));
    const auto port = static_cast<uint16_t>(std::stoi(address.substr(address.rfind(':') + 1)));
    boost::system::error_code ec;
    socket_.connect({boost::asio::ip::make_address(host), port}, ec);
    connected_ = !ec;
  }

  bool connected() const { return connected_; }

  /// Send bytes; false once the server closed the connection.
  bool Send(const std::string& bytes) {
    boost::system::error_code ec;
    boost::asio::write(socket_, boost::asio::buffer(bytes), ec);
    return !ec;
  }

  /// Read what is there within `wait` (0: only what already arrived). Returns
  /// false once the server closed the connection.
  bool Pump(std::chrono::milliseconds wait) {
    pollfd p{socket_.native_handle(), POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(wait.count())) <= 0) {
      return !closed_;
    }
    char buf[8192];
    boost::system::error_code ec;
    size_t n = socket_.read_some(boost::asio::buffer(buf), ec);
    if (ec) {
      closed_ = true;
      return false;
    }
    in_.append(buf, n);
    return true;
  }

  /// Read until a message of `type` arrives (returned), the server closes or
  /// the bound passes (nullopt). Messages before it are kept in seen().
  std::optional<BackendMessage> Until(char type) {
    const auto deadline = Clock::now() + kBound;
    while (true) {
      while (auto m = Next()) {
        seen_.push_back(*m);
        if (m->type == type) return m;
      }
      if (closed_ || Clock::now() >= deadline) return std::nullopt;
      Pump(std::chrono::milliseconds(100));
    }
  }

  /// Read until the server closes (true) or the bound passes (false).
  bool UntilClosed() {
    const auto deadline = Clock::now() + kBound;
    while (!closed_ && Clock::now() < deadline) {
      Pump(std::chrono::milliseconds(100));
    }
    while (auto m = Next()) seen_.push_back(*m);
    return closed_;
  }

  /// The first ErrorResponse received so far ('E'), if any.
  std::optional<BackendMessage> Error() const {
    for (const auto& m : seen_) {
      if (m.type == 'E') return m;
    }
    return std::nullopt;
  }

  /// Expect the 'N' answer to an SSLRequest (one byte, not a message).
  bool ReadSslAnswer() {
    const auto deadline = Clock::now() + kBound;
    while (in_.empty() && !closed_ && Clock::now() < deadline) {
      Pump(std::chrono::milliseconds(100));
    }
    if (in_.empty() || in_[0] != 'N') return false;
    in_.erase(0, 1);
    return true;
  }

  /// Start up without authentication (a server with an empty token) and wait
  /// for ReadyForQuery.
  bool StartUp(const std::string& database = "rill") {
    if (!Send(Startup({{"user", "tester"}, {"database", database}}))) return false;
    return Until('Z').has_value();
  }

  /// Run one simple query; return the messages up to ReadyForQuery.
  std::vector<BackendMessage> SimpleQuery(const std::string& sql) {
    seen_.clear();
    Send(Query(sql));
    Until('Z');
    return seen_;
  }

  const std::vector<BackendMessage>& seen() const { return seen_; }
  void ClearSeen() { seen_.clear(); }
  bool closed() const { return closed_; }

 private:
  std::optional<BackendMessage> Next() {
    if (in_.size() < 5) return std::nullopt;
    const int32_t len = Get32(in_, 1);
    if (len < 4 || in_.size() < static_cast<size_t>(len) + 1) return std::nullopt;
    BackendMessage m{in_[0], in_.substr(5, static_cast<size_t>(len) - 4)};
    in_.erase(0, static_cast<size_t>(len) + 1);
    return m;
  }

  boost::asio::io_context ioc_;
  boost::asio::ip::tcp::socket socket_;
  bool connected_ = false;
  bool closed_ = false;
  std::string in_;
  std::vector<BackendMessage> seen_;
};

/// The SQLSTATE of the first ErrorResponse in `messages`, "" when none.
inline std::string SqlStateOf(const std::vector<BackendMessage>& messages) {
  for (const auto& m : messages) {
    if (m.type == 'E') return ErrorField(m, 'C');
  }
  return "";
}

}  // namespace rill::pgwire::testing
