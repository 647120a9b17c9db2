// Server: the network face of an engine on one listening address.
//
// One TCP listener serves everything. The first byte of a connection picks the
// protocol: 0x00 starts a PostgreSQL message (startup, SSLRequest,
// GSSENCRequest, CancelRequest all begin with a 4-byte big-endian length), which
// goes to the ProtocolHandler registered as "pgwire" (protocol_handler.h);
// anything else is HTTP/1.1: the REST API under /api/v1, the WebSocket stream
// /api/v1/stream, Prometheus /metrics, /healthz and the static assets at /
// (static_assets.h). docs/api.md is the reference of the HTTP API.
//
// Threads owned by a running server:
//   io ("rill-io-N", options.io_threads)     accept, parse, write; never run SQL
//   workers (worker_threads)                 every API handler (SQL included),
//                                            at most max_pending_requests queued
//   the WebSocket hub's 1 Hz timer runs on an io thread.
// Nothing here runs on the engine's tick thread except the table subscription
// callbacks of WebSocket `table:` channels, which only post a message.
// A slow client only holds its own connection and its own bounded queue.
//
// Lifetime: the Engine and the MetricsStore (if any) must outlive the Server.
// Threads: Start/Stop from any thread but not concurrently with each other;
// the accessors from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "rill/common/status.h"
#include "rill/server/http_types.h"

namespace rill {
class Engine;
class MetricsStore;
namespace toolkit {
struct Toolkit;
}  // namespace toolkit
}  // namespace rill

namespace rill::server {

/// Options of a Server. Sizes in bytes, durations in seconds.
struct ServerOptions {
  /// "quack:HOST:PORT" or "HOST:PORT" ("[::1]:PORT" for IPv6); port 0 picks a
  /// free port (see Server::address()).
  std::string listen = "127.0.0.1:9494";
  /// nullopt: generate a random token (128 bits from OpenSSL's CSPRNG).
  /// "": no authentication, allowed only on a loopback address.
  std::optional<std::string> token;
  /// The admin credential: with it (bearer token over HTTP, the password of
  /// pgwire user `admin`) clients may run DDL (CREATE / DROP of declared
  /// pipelines, pipeline/ddl.h) over POST /api/v1/sql and pgwire; the token
  /// stays read-only (DDL gets 403 / SQLSTATE 42501). Empty: no DDL over the
  /// network. Must differ from the token.
  std::string admin_token;
  /// Let webhooks reach loopback/private addresses (webhook.h).
  bool allow_private_webhooks = false;
  /// Origins (scheme://host:port) whose pages may call this server from a
  /// browser (CORS). Pages served by any Rill server on a loopback address
  /// are allowed when this server listens on loopback too (the dashboard's
  /// tabs to other local servers); the token is still required.
  std::vector<std::string> cors_origins;
  /// Folder of the dashboard's built assets (index.html, app.js, app.css).
  /// Empty: $RILL_DASHBOARD_DIR, else the build's dashboard/dist when present.
  std::string dashboard_dir;

  /// Request line + headers; larger requests get 431.
  int64_t max_header_bytes = 16 * 1024;
  /// The request line and headers must arrive within this time (else closed).
  double header_timeout_seconds = 10;
  /// Request body; larger bodies get 413.
  int64_t max_body_bytes = 16 * 1024 * 1024;
  /// Open connections (all protocols); beyond this a connection gets 503 and
  /// is closed.
  int64_t max_connections = 512;
  /// A keep-alive connection idle this long is closed; also the limit for
  /// reading one request body and writing one response piece.
  double idle_timeout_seconds = 60;
  /// SQL statements are interrupted after this long (0 = no limit): live-table
  /// and metrics-database queries over HTTP and pgwire, and the check of a
  /// KPI query posted to /api/v1/kpis.
  double query_timeout_seconds = 30;
  /// DuckDB memory limit of the databases remote SQL runs in (the live
  /// tables' and the metrics database), in bytes: a query that needs more
  /// fails with an out-of-memory error (pgwire SQLSTATE 53200) and the
  /// engine keeps serving. DuckDB's limit is per database, so it bounds the
  /// engine's SQL tasks too. -1 (default): a quarter of the host's physical
  /// memory; 0: leave DuckDB's own limit (80% of physical memory).
  int64_t query_memory_limit_bytes = -1;
  /// PostgreSQL clients must authenticate within this time of their first
  /// byte (a deadline, however slowly they send), else FATAL 08006 and close.
  /// 0 = no limit.
  double login_timeout_seconds = 10;
  /// PostgreSQL connections still authenticating, at most (also at most half
  /// of max_connections, at least 1): a new one beyond the limit closes the
  /// oldest of them (FATAL 53300), so idle or trickling sockets hold at most
  /// this many connection slots and a client that logs in promptly gets in.
  int64_t max_unauthenticated_connections = 16;
  /// Buffered JSON query results larger than this get 413 (use ndjson, csv or
  /// arrow, which stream and are not capped).
  int64_t max_json_result_bytes = 64 * 1024 * 1024;
  /// Threads parsing and writing (the io threads).
  int io_threads = 2;
  /// Threads running API handlers and SQL.
  int worker_threads = 4;
  /// Requests waiting for a worker; beyond this a request gets 503.
  int64_t max_pending_requests = 256;
  /// WebSocket: frames queued per client before coalescing / dropping.
  int64_t ws_queue_frames = 256;
  /// WebSocket: ping after this much silence; close when the pong does not
  /// come within the same time.
  double ws_ping_interval_seconds = 15;
  /// Period of the `metrics` channel.
  double ws_metrics_interval_seconds = 1;
  /// Ingest (POST /api/v1/ingest/{table}, ingest.h): a gzip body may inflate
  /// to at most this many bytes (413 beyond).
  int64_t max_ingest_decompressed_bytes = 256 * 1024 * 1024;
  /// Ingest: the buffer of the connector `http:<table>` the server adds for a
  /// table without a JSONStreamConnector of its own (on_overflow "error": 429).
  int64_t ingest_max_buffer_records = 1000000;
  int64_t ingest_max_buffer_bytes = 256 * 1024 * 1024;
  /// Ingest with ?wait=true: answer 504 when the rows are not published by then.
  double ingest_wait_timeout_seconds = 30;
  /// Ingest of Avro (Content-Type application/vnd.apache.avro…) in the Confluent
  /// wire format: the schema registry the schema ids are looked up in
  /// (http(s)://[user:password@]host:port; docs/avro.md). Not needed for Avro
  /// object container files, which carry their schema.
  std::string schema_registry_url;
  std::string schema_registry_user;
  std::string schema_registry_password;
  /// Seed 001's queues and stream analytics served under /api/v1/queues and
  /// /api/v1/analytics (toolkit/toolkit.h); null: the server makes an
  /// in-memory one at Start().
  std::shared_ptr<toolkit::Toolkit> toolkit;
};

/// Counters of a running server (monotonic except the open counts).
struct ServerStats {
  int64_t connections_accepted = 0;
  int64_t connections_refused = 0;  ///< over max_connections
  int64_t http_open = 0;
  int64_t websocket_open = 0;
  int64_t pgwire_open = 0;
  int64_t requests = 0;
  int64_t queries = 0;
  int64_t query_timeouts = 0;
  int64_t ws_frames_sent = 0;
  int64_t ws_frames_dropped = 0;
  int64_t ws_frames_coalesced = 0;
};

class Server {
 public:
  /// Check the options and prepare a server (nothing is bound yet). `engine`
  /// must outlive the server; `metrics` may be null (no metrics database: the
  /// alert, KPI, rule and telemetry-history routes then answer 503).
  static Result<std::unique_ptr<Server>> Make(Engine* engine, MetricsStore* metrics,
                                              ServerOptions options);
  /// Stop (as Stop()).
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  /// Bind and start the threads. IOError naming the address when it is taken;
  /// Invalid when the address does not parse or authentication is disabled on
  /// a non-loopback address. Invalid if already running.
  Status Start();
  /// Close the listener and every connection, join the threads. Safe twice;
  /// the same address can be started again afterwards.
  void Stop();
  bool running() const;

  /// The bound address "HOST:PORT" (the real port when 0 was asked), or the
  /// configured one before Start().
  std::string address() const;
  /// The token clients must present ("" when authentication is disabled).
  const std::string& token() const;
  /// http://HOST:PORT/?token=TOKEN (the token part only when there is one).
  std::string dashboard_url() const;
  const ServerOptions& options() const;
  ServerStats stats() const;

  /// Route one request as a connection would (token check included) and
  /// return the reply, without a socket: for tests and the fuzz target.
  /// Runs on the calling thread. 503 when the server is not running.
  HttpReply Handle(const HttpRequest& request);

  struct Impl;

 private:
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// Parse "quack:HOST:PORT" / "HOST:PORT" / "[V6]:PORT" into host and port.
/// Invalid naming the text otherwise.
Result<std::pair<std::string, uint16_t>> ParseListenAddress(std::string_view text);

}  // namespace rill::server
