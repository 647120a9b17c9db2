#include "rill/server/pgwire/pg_connection.h"

#include <chrono>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>

namespace rill::pgwire {

/// One connection: a PgSession over a socket.
class PgConnection : public std::enable_shared_from_this<PgConnection> {
 public:
  /// Held while the connection lives (the server's connection count).
  std::shared_ptr<void> keepalive;

  PgConnection(PgService* service, boost::asio::ip::tcp::socket socket)
      : service_(service),
        socket_(std::move(socket)),
        strand_(boost::asio::make_strand(socket_.get_executor())),
        idle_timer_(strand_),
        session_(&service->config_) {
    session_.set_flush([this](std::string& out) { return WriteAll(out); });
    // Answers are small and sent whole: do not let Nagle hold them back.
    boost::system::error_code ec;
    socket_.set_option(boost::asio::ip::tcp::no_delay(true), ec);
  }

  void Start(std::string initial) {
    auto self = shared_from_this();
    boost::asio::post(service_->pool_,
                      [self, data = std::move(initial)] { self->Process(data); });
  }

  void Close() {
    boost::system::error_code ec;
    socket_.shutdown(boost::asio::ip::tcp::socket::shutdown_both, ec);
    socket_.close(ec);
  }

 private:
  Status WriteAll(std::string& out) {
    if (out.empty()) {
      return Status::OK();
    }
    boost::system::error_code ec;
    boost::asio::write(socket_, boost::asio::buffer(out), ec);
    out.clear();
    if (ec) {
      return Status::IOError("pgwire write failed: ", ec.message());
    }
    return Status::OK();
  }

  // On a pool thread: run what arrived, send the answer, then wait for more.
  void Process(const std::string& data) {
    Status status = data.empty() ? Status::OK() : session_.Feed(data.data(), data.size());
    Status written = WriteAll(session_.output());
    if (!status.ok() || !written.ok() || session_.closed()) {
      Finish();
      return;
    }
    ReadMore();
  }

  // The idle timeout for what the session waits for, and its FATAL message.
  int64_t IdleTimeoutMs(std::string_view* sqlstate, std::string_view* message) const {
    const PgServiceOptions& o = service_->options_;
    switch (session_.waiting()) {
      case PgSession::Waiting::kAuthentication:
        *sqlstate = "08006";
        *message = "terminating connection: authentication did not complete in time";
        return o.idle_in_transaction_timeout_ms;
      case PgSession::Waiting::kIdleInTransaction:
        *sqlstate = "25P03";
        *message = "terminating connection due to idle-in-transaction timeout";
        return o.idle_in_transaction_timeout_ms;
      case PgSession::Waiting::kIdle:
        break;
    }
    *sqlstate = "57P05";
    *message = "terminating connection due to idle-session timeout";
    return o.idle_session_timeout_ms;
  }

  // The read and the timer complete on the strand, so the timer's handler
  // never runs while a read's handler does (nor while Process runs: it
  // starts only after a read completed and arms the timer again at its end).
  void ReadMore() {
    auto self = shared_from_this();
    std::string_view sqlstate, message;
    if (int64_t timeout = IdleTimeoutMs(&sqlstate, &message); timeout > 0) {
      idle_timer_.expires_after(std::chrono::milliseconds(timeout));
      idle_timer_.async_wait([self, sqlstate, message](const boost::system::error_code& ec) {
        if (!ec) {
          // Say why, then close: the pending read fails and finishes the connection.
          self->session_.Terminate(sqlstate, message);
          (void)self->WriteAll(self->session_.output());
          self->Close();
        }
      });
    }
    socket_.async_read_some(
        boost::asio::buffer(buffer_),
        boost::asio::bind_executor(strand_, [self](const boost::system::error_code& ec,
                                                   size_t n) {
          self->idle_timer_.cancel();
          if (ec || self->session_.closed()) {
            self->Finish();
            return;
          }
          std::string data(self->buffer_.data(), n);
          boost::asio::post(self->service_->pool_,
                            [self, data = std::move(data)] { self->Process(data); });
        }));
  }

  void Finish() {
    Close();
    service_->Forget(this);
  }

  PgService* service_;
  boost::asio::ip::tcp::socket socket_;
  boost::asio::strand<boost::asio::ip::tcp::socket::executor_type> strand_;
  boost::asio::steady_timer idle_timer_;
  PgSession session_;
  std::array<char, 64 * 1024> buffer_{};
};

Result<std::unique_ptr<PgService>> PgService::Make(PgServerConfig config,
                                                   PgServiceOptions options) {
  RILL_RETURN_NOT_OK(PrepareServerConfig(&config));
  return std::unique_ptr<PgService>(new PgService(std::move(config), options));
}

PgService::PgService(PgServerConfig config, PgServiceOptions options)
    : config_(std::move(config)),
      options_(options),
      pool_(static_cast<size_t>(std::max(1, options.query_threads))) {}

PgService::~PgService() { Shutdown(); }

void PgService::HandOver(boost::asio::ip::tcp::socket socket, std::string initial_bytes,
                         std::shared_ptr<void> keepalive) {
  auto connection = std::make_shared<PgConnection>(this, std::move(socket));
  connection->keepalive = std::move(keepalive);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shut_down_) {
      connection->Close();
      return;
    }
    connections_.insert(connection);
  }
  active_.fetch_add(1);
  connection->Start(std::move(initial_bytes));
}

void PgService::Forget(PgConnection* connection) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = connections_.begin(); it != connections_.end(); ++it) {
    if (it->get() == connection) {
      connections_.erase(it);
      active_.fetch_sub(1);
      return;
    }
  }
}

void PgService::Shutdown() {
  std::set<std::shared_ptr<PgConnection>> connections;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shut_down_) {
      return;
    }
    shut_down_ = true;
    connections.swap(connections_);
  }
  for (auto& c : connections) {
    c->Close();
  }
  pool_.join();
}

}  // namespace rill::pgwire
