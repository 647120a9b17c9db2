// Asio glue: serve PgSessions over accepted TCP sockets.
//
// The server's listener accepts a connection, reads its first bytes to tell a
// PostgreSQL client from HTTP, and hands the socket over with those bytes:
//
//     pg_service->HandOver(std::move(socket), std::move(first_bytes));
//
// Socket reads are asynchronous on the socket's executor (the listener's
// io_context). Once a session authenticated, the messages of a batch of
// received bytes that cannot wait on data (PgSession::FeedInline: Sync, Bind,
// SET, SHOW, a SELECT with a cached constant plan, ...) run on the io thread
// and their answer is sent without blocking it (a non-blocking write, an
// asynchronous one for the rest). From the first other message on, the batch
// is processed on the service's query pool, where SQL may block, and the
// answer is written from there with blocking writes (one operation at a time
// per connection). Idle connections therefore hold no thread.
//
// Before authentication a connection is bounded three ways: each message is
// at most kMaxPreAuthMessageBytes (startup packets kMaxStartupPacket), the
// login must complete within login_timeout_ms of the hand-over (a deadline,
// not re-armed by reads, so a client trickling bytes is closed on time), and
// at most max_unauthenticated_connections wait for it at once: a new one
// beyond that closes the oldest still unauthenticated (FATAL 53300). Idle
// sockets therefore hold at most that many of the server's connection slots,
// and a client that authenticates promptly always gets in.
//
// Threads: HandOver may be called from any thread. PgService must outlive
// the io_context's handlers of its connections (call Shutdown first).
#pragma once

#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/thread_pool.hpp>

#include "rill/server/pgwire/pg_session.h"

namespace rill::pgwire {

struct PgServiceOptions {
  /// Threads that run sessions' queries (one per concurrently running query).
  int query_threads = 16;
  /// Close a connection that sits idle inside a transaction block (BEGIN
  /// without COMMIT/ROLLBACK) after this long without a message (FATAL 25P03,
  /// as PostgreSQL's idle_in_transaction_session_timeout); 0 = never.
  int64_t idle_in_transaction_timeout_ms = 0;
  /// Close a connection that has not authenticated this long after HandOver
  /// (FATAL 08006), however many bytes it sends meanwhile; 0 = never.
  int64_t login_timeout_ms = 10000;
  /// Connections that have not authenticated yet, at most; a new one beyond
  /// this closes the oldest of them (FATAL 53300). 0 = no limit.
  int64_t max_unauthenticated_connections = 16;
  /// Close a connection idle outside a transaction after this long (FATAL
  /// 57P05, as PostgreSQL's idle_session_timeout); 0 = never (PostgreSQL's
  /// default: psql and connection pools keep sessions open).
  int64_t idle_session_timeout_ms = 0;
};

class PgConnection;

/// Owns the query pool and the live connections of the pgwire protocol.
class PgService {
 public:
  /// `config` is completed with PrepareServerConfig. Invalid without executor.
  static Result<std::unique_ptr<PgService>> Make(PgServerConfig config,
                                                 PgServiceOptions options = {});
  ~PgService();

  /// Serve `socket` (already accepted, `initial_bytes` already read from it).
  /// `keepalive` (may be null) is held while the connection is open: the
  /// server counts open connections with it.
  void HandOver(boost::asio::ip::tcp::socket socket, std::string initial_bytes,
                std::shared_ptr<void> keepalive = nullptr);
  /// Close every connection and wait for running work. Idempotent.
  void Shutdown();
  /// Connections being served.
  int64_t active_connections() const { return active_.load(); }
  /// Of them, those that have not authenticated yet (any thread).
  int64_t unauthenticated_connections() const;
  /// Connections closed at the login deadline, and closed to make room for a
  /// newer unauthenticated one, since start (any thread).
  int64_t login_timeouts() const { return login_timeouts_.load(); }
  int64_t unauthenticated_evicted() const { return evicted_.load(); }
  const PgServerConfig& config() const { return config_; }

 private:
  friend class PgConnection;
  PgService(PgServerConfig config, PgServiceOptions options);
  void Forget(PgConnection* connection);
  /// `connection` authenticated: it no longer counts as unauthenticated.
  void Authenticated(PgConnection* connection);
  /// Take `connection` off the unauthenticated list. Caller holds mu_.
  void UnlistLocked(PgConnection* connection);

  PgServerConfig config_;
  PgServiceOptions options_;
  boost::asio::thread_pool pool_;
  std::atomic<int64_t> active_{0};
  std::atomic<int64_t> login_timeouts_{0};
  std::atomic<int64_t> evicted_{0};
  mutable std::mutex mu_;
  std::unordered_map<PgConnection*, std::shared_ptr<PgConnection>> connections_;  // mu_
  /// Connections not authenticated yet, oldest first (guarded by mu_).
  std::list<PgConnection*> unauthenticated_;
  bool shut_down_ = false;  // guarded by mu_
};

}  // namespace rill::pgwire
