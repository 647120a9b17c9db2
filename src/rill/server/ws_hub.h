// WsHub: the WebSocket endpoint /api/v1/stream and its channels.
//
// Channels (a client subscribes with {"type":"subscribe","channels":[...]}):
//   metrics       every ws_metrics_interval_seconds: the engine's metrics now
//   alerts        each alert as the metrics store records it
//   kpis          each KPI evaluation (checked every interval)
//   pipeline      the catalog as a graph (pipeline::Catalog::GraphJson, as GET
//                 /api/v1/pipeline) on subscribing, then every second; computed
//                 on a worker only while someone subscribes, at most one
//                 pending frame per client (a newer graph replaces it)
//   table:<name>  a snapshot of the table on subscribing, then its changed rows
//                 (ws_table_changes.h): one ChangeFeed per table, read on a
//                 worker after each version, rows formatted once for all clients
// Frame schema: docs/api.md. Each client has a queue of at most
// ws_queue_frames; when full, a frame replaces the queued frame of the same
// channel (coalesced: metrics, kpis) or the oldest frame is dropped (alerts).
// A table channel holds one marker in the queue, formatted when written, and
// merges the changes that come meanwhile by key (bounded: beyond, a snapshot).
// All are counted and reported to the client in a "notice" frame.
// Pings every ws_ping_interval_seconds detect dead peers.
//
// Threads: the 1 Hz timer and the sessions run on the io threads; the alert
// listener (metrics collector thread) only formats a frame and posts it; the
// table subscriptions (tick thread) note the version and wake a worker, which
// reads the change feed, formats the rows and posts them to the sessions.
#pragma once

#include <memory>
#include <string>

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include "rill/server/server_internal.h"

namespace rill::server {

class WsSession;

class WsHub {
 public:
  WsHub(Server::Impl& server);
  ~WsHub();
  /// Start the metrics and pipeline timers and the alert listener. Io thread not needed.
  void Start();
  /// Stop the timer and listeners, close every client. Any non-io thread.
  void Stop();
  /// Destroy the timers. Call after the io threads have stopped and before the
  /// io_context is destroyed (the timers' strands need its services).
  void ReleaseTimers();
  /// Take over an upgrade request on `stream` (io thread).
  void Accept(boost::beast::tcp_stream stream, boost::beast::flat_buffer buffer,
              boost::beast::http::request<boost::beast::http::string_body> request,
              std::shared_ptr<void> slot);

  struct State;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace rill::server
