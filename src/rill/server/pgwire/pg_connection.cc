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
  /// Why a connection is ended from outside its own processing.
  enum class Kill { kNone, kLoginTimeout, kEvicted };

  /// Held while the connection lives (the server's connection count).
  std::shared_ptr<void> keepalive;
  /// Its place in PgService::unauthenticated_ (guarded by the service's mu_).
  std::list<PgConnection*>::iterator unauthenticated_at;
  bool listed_unauthenticated = false;  // guarded by the service's mu_

  PgConnection(PgService* service, boost::asio::ip::tcp::socket socket)
      : service_(service),
        socket_(std::move(socket)),
        strand_(boost::asio::make_strand(socket_.get_executor())),
        idle_timer_(strand_),
        login_timer_(strand_),
        session_(&service->config_) {
    session_.set_flush([this](std::string& out) { return WriteAll(out); });
    // Answers are small and sent whole: do not let Nagle hold them back.
    boost::system::error_code ec;
    socket_.set_option(boost::asio::ip::tcp::no_delay(true), ec);
  }

  void Start(std::string initial) {
    auto self = shared_from_this();
    if (int64_t timeout = service_->options_.login_timeout_ms; timeout > 0) {
      // A deadline from now, armed once: reads do not move it. The handler
      // holds no reference, so a closed connection goes at once.
      std::weak_ptr<PgConnection> weak = self;
      login_timer_.expires_after(std::chrono::milliseconds(timeout));
      login_timer_.async_wait([weak](const boost::system::error_code& ec) {
        auto connection = weak.lock();
        if (!ec && connection != nullptr) {
          connection->RequestKill(Kill::kLoginTimeout);
        }
      });
    }
    boost::asio::post(service_->pool_,
                      [self, data = std::move(initial)] { self->Process(data); });
  }

  /// Any thread: the service's Shutdown may close a connection while its
  /// own pool thread or strand finishes it; two closes of one asio socket at
  /// once deregister its descriptor twice (a crash seen in server_test).
  void Close() {
    std::lock_guard<std::mutex> lock(close_mu_);
    boost::system::error_code ec;
    socket_.shutdown(boost::asio::ip::tcp::socket::shutdown_both, ec);
    socket_.close(ec);
  }

  /// End the connection with a FATAL error, from any thread: at once when it
  /// waits for a read (the read is cancelled), else when the processing under
  /// way ends. Ignored once the session authenticated.
  void RequestKill(Kill reason) {
    if (authenticated_.load()) {
      return;
    }
    std::lock_guard<std::mutex> lock(io_mu_);
    if (kill_ != Kill::kNone) {
      return;
    }
    kill_ = reason;
    if (reading_) {
      boost::system::error_code ec;
      socket_.cancel(ec);  // the read completes with operation_aborted
    }
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

  // On a pool thread: run what arrived (and what FeedInline left), send the
  // answer, then wait for more.
  void Process(const std::string& data) {
    Status status = session_.Feed(data.data(), data.size());
    Status written = WriteAll(session_.output());
    if (!status.ok() || !written.ok() || session_.closed()) {
      Finish();
      return;
    }
    if (session_.authenticated() && !authenticated_.exchange(true)) {
      service_->Authenticated(this);
    }
    ReadMore();
  }

  // The idle timeout for what the session waits for, and its FATAL message.
  // Authentication has the login deadline instead.
  int64_t IdleTimeoutMs(std::string_view* sqlstate, std::string_view* message) const {
    const PgServiceOptions& o = service_->options_;
    switch (session_.waiting()) {
      case PgSession::Waiting::kAuthentication:
        return 0;
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
  // The read is started under io_mu_, so RequestKill sees either a pending
  // read (and cancels it) or a kill request this function acts on.
  void ReadMore() {
    {
      std::lock_guard<std::mutex> lock(io_mu_);
      if (kill_ != Kill::kNone && authenticated_.load()) {
        kill_ = Kill::kNone;  // the login completed just in time
      }
      if (kill_ == Kill::kNone) {
        reading_ = true;
        StartRead();
        return;
      }
    }
    Killed();
  }

  // Caller holds io_mu_.
  void StartRead() {
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
          bool killed;
          {
            std::lock_guard<std::mutex> lock(self->io_mu_);
            self->reading_ = false;
            killed = self->kill_ != Kill::kNone;
          }
          if (killed) {
            // Bytes that arrived with the kill request are not looked at.
            boost::asio::post(self->service_->pool_, [self] { self->ReadMore(); });
            return;
          }
          if (ec || self->session_.closed()) {
            self->Finish();
            return;
          }
          self->OnRead(n);
        }));
  }

  // On the io thread (the strand), `n` bytes in buffer_. Once authenticated,
  // what is cheap runs right here (PgSession::FeedInline) and its answer goes
  // out without blocking this thread: no hand-off to the pool and back. The
  // first message that may take longer goes to the pool with the rest.
  void OnRead(size_t n) {
    auto self = shared_from_this();
    if (!authenticated_.load()) {
      std::string data(buffer_.data(), n);
      boost::asio::post(service_->pool_,
                        [self, data = std::move(data)] { self->Process(data); });
      return;
    }
    bool deferred = false;
    Status status = session_.FeedInline(buffer_.data(), n, &deferred);
    if (status.ok() && deferred) {
      // The pool sends what FeedInline answered so far, then the rest.
      boost::asio::post(service_->pool_, [self] { self->Process(std::string()); });
      return;
    }
    const bool finish = !status.ok() || session_.closed();
    if (session_.output().empty()) {
      if (finish) {
        Finish();
      } else {
        ReadMore();
      }
      return;
    }
    inline_out_.clear();
    inline_out_.swap(session_.output());
    // Send what the socket takes now without blocking; an asynchronous write
    // (its completion is posted, which may wake the other io thread) only
    // for what it does not.
    boost::system::error_code ec;
    size_t sent = 0;
    socket_.non_blocking(true, ec);
    while (!ec && sent < inline_out_.size()) {
      sent += socket_.write_some(
          boost::asio::buffer(inline_out_.data() + sent, inline_out_.size() - sent), ec);
    }
    boost::system::error_code ignored;
    socket_.non_blocking(false, ignored);  // the pool's writes block
    if (ec == boost::asio::error::would_block || ec == boost::asio::error::try_again) {
      boost::asio::async_write(
          socket_, boost::asio::buffer(inline_out_.data() + sent, inline_out_.size() - sent),
          boost::asio::bind_executor(strand_, [self, finish](const boost::system::error_code& e,
                                                             size_t) {
            if (e || finish) {
              self->Finish();
              return;
            }
            self->ReadMore();
          }));
      return;
    }
    if (ec || finish) {
      Finish();
      return;
    }
    ReadMore();
  }

  // On a pool thread, no read pending: say why the connection ends, then close.
  void Killed() {
    if (kill_ == Kill::kLoginTimeout) {
      service_->login_timeouts_.fetch_add(1);
      session_.Terminate("08006", "terminating connection: authentication did not complete "
                                  "within the login timeout");
    } else {
      service_->evicted_.fetch_add(1);
      session_.Terminate("53300", "too many connections are authenticating at once "
                                  "(max_unauthenticated_connections): the oldest was closed");
    }
    (void)WriteAll(session_.output());
    Finish();
  }

  void Finish() {
    login_timer_.cancel();
    Close();
    service_->Forget(this);
  }

  PgService* service_;
  boost::asio::ip::tcp::socket socket_;
  boost::asio::strand<boost::asio::ip::tcp::socket::executor_type> strand_;
  boost::asio::steady_timer idle_timer_;
  boost::asio::steady_timer login_timer_;
  PgSession session_;
  std::array<char, 64 * 1024> buffer_{};
  std::string inline_out_;  // the answer OnRead is sending (asynchronously)
  std::atomic<bool> authenticated_{false};
  std::mutex io_mu_;
  std::mutex close_mu_;       // one Close at a time
  bool reading_ = false;      // a read is pending; guarded by io_mu_
  Kill kill_ = Kill::kNone;   // guarded by io_mu_
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
  std::shared_ptr<PgConnection> oldest;  // made to leave, outside the lock
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shut_down_) {
      connection->Close();
      return;
    }
    connections_.emplace(connection.get(), connection);
    connection->unauthenticated_at =
        unauthenticated_.insert(unauthenticated_.end(), connection.get());
    connection->listed_unauthenticated = true;
    const int64_t limit = options_.max_unauthenticated_connections;
    if (limit > 0 && static_cast<int64_t>(unauthenticated_.size()) > limit) {
      PgConnection* first = unauthenticated_.front();
      UnlistLocked(first);
      oldest = connections_[first];
    }
  }
  active_.fetch_add(1);
  if (oldest != nullptr) {
    oldest->RequestKill(PgConnection::Kill::kEvicted);
  }
  connection->Start(std::move(initial_bytes));
}

int64_t PgService::unauthenticated_connections() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(unauthenticated_.size());
}

void PgService::UnlistLocked(PgConnection* connection) {
  if (connection->listed_unauthenticated) {
    unauthenticated_.erase(connection->unauthenticated_at);
    connection->listed_unauthenticated = false;
  }
}

void PgService::Authenticated(PgConnection* connection) {
  std::lock_guard<std::mutex> lock(mu_);
  UnlistLocked(connection);
}

void PgService::Forget(PgConnection* connection) {
  std::shared_ptr<PgConnection> last;  // may be the last reference: dropped unlocked
  std::lock_guard<std::mutex> lock(mu_);
  auto it = connections_.find(connection);
  if (it != connections_.end()) {
    UnlistLocked(connection);
    last = std::move(it->second);
    connections_.erase(it);
    active_.fetch_sub(1);
  }
}

void PgService::Shutdown() {
  std::unordered_map<PgConnection*, std::shared_ptr<PgConnection>> connections;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shut_down_) {
      return;
    }
    shut_down_ = true;
    connections.swap(connections_);
    for (auto& [raw, c] : connections) {
      UnlistLocked(raw);
    }
  }
  for (auto& [raw, c] : connections) {
    c->Close();
  }
  pool_.join();
}

}  // namespace rill::pgwire
