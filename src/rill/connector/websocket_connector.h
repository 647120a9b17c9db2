// WebSocketConnector: rows from a WebSocket server (ws:// or wss://).
//
// A reader thread runs a Boost.Beast client: it connects, reads messages and
// decodes each one on arrival — text frames as NDJSON or a JSON array (the
// shared JsonDecoder), binary frames as an Arrow IPC stream — into a bounded
// buffer (the MemoryConnector contract: max_buffer_records / max_buffer_bytes /
// on_overflow). When the connection fails or drops, it reconnects after a
// backoff that starts at `reconnect_initial_seconds` and doubles up to
// `reconnect_max_seconds` (reset by a successful handshake), counting
// `reconnects` and recording the error as a rate-limited connector error.
// Nothing read is lost without a trace:
//   - a bad record of a text frame is a reject (position "message N, line L,
//     byte B", B counted within the message);
//   - a binary frame that is not a valid Arrow IPC stream (every batch is
//     validated in full), a message over `max_message_bytes` (read frame by
//     frame and discarded past the limit, its first `max_raw_bytes` kept; the
//     connection stays open) and a text frame the decoder fails on are one
//     reject each, position "message N, byte B" (B: the message's offset in
//     all the bytes this connector received);
//   - under on_overflow = error a message whose rows do not fit is held and
//     the reader stops reading the socket (TCP backpressure on the server)
//     until a tick makes room; nothing is refused. A message larger than the
//     whole buffer is taken when the buffer is empty. drop_oldest and
//     drop_newest drop and count (`dropped_records`; the engine alerts).
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "rill/connector/bounded_buffer.h"
#include "rill/connector/connector.h"
#include "rill/connector/json_decoder.h"

namespace rill {

/// Options of a WebSocketConnector.
struct WebSocketOptions {
  /// Decoding of text frames (schema: explicit, else the table's, else inferred).
  JsonDecodeOptions decode;
  BufferLimits limits;
  /// Unique name within an engine (default: the target table's name).
  std::string name;
  /// Extra headers of the handshake (e.g. Authorization).
  std::map<std::string, std::string> headers;
  double reconnect_initial_seconds = 1;
  double reconnect_max_seconds = 30;
  /// TCP connect + TLS + WebSocket handshake must finish within this time.
  double connect_timeout_seconds = 10;
  /// Largest message decoded; a bigger one becomes a reject (its head kept).
  int64_t max_message_bytes = 64 * 1024 * 1024;
  /// wss://: verify the server's certificate (system CAs, plus `ca_file`).
  bool tls_verify = true;
  std::string ca_file;
};

/// Threads: Start/Stop from the engine; Poll/TakeRejects from the tick thread;
/// stats() and connected() from any thread.
class WebSocketConnector : public Connector {
 public:
  /// Make a connector for `uri` (ws://HOST[:PORT]/PATH or wss://...). Invalid
  /// for a malformed URI or bad options. Nothing connects before Start().
  static Result<std::shared_ptr<WebSocketConnector>> Make(std::string target_table,
                                                          std::string uri,
                                                          WebSocketOptions options);
  ~WebSocketConnector() override;

  /// Start the reader thread (connects in the background). No-op if running.
  Status Start() override;
  /// Close the connection and join the reader thread. Safe twice.
  void Stop() override;
  Result<std::vector<std::shared_ptr<arrow::RecordBatch>>> Poll() override;
  Result<std::vector<std::shared_ptr<arrow::RecordBatch>>> PollAtMost(
      int64_t max_records) override;
  std::vector<RejectedRecord> TakeRejects() override;
  void SetTargetSchema(const std::shared_ptr<arrow::Schema>& schema) override;
  ConnectorStats stats() const override;

  const std::string& uri() const { return uri_; }
  /// True while a connection is open (handshake done). Any thread.
  bool connected() const { return connected_.load(); }
  /// The last connection error ("" if none). Any thread.
  std::string last_error() const;

  struct Target {
    bool tls = false;
    std::string host, port, path;
  };

 private:
  WebSocketConnector(std::string target_table, std::string uri, Target target,
                     WebSocketOptions options, std::unique_ptr<JsonDecoder> decoder);
  void Run();
  /// Decode one message of `size` bytes (`data`: all of it, or its head when
  /// it is over max_message_bytes: then one reject) into the buffer. False:
  /// the buffer is full under on_overflow = error and the rows are held until
  /// PushOrHold takes them (the reader stops reading meanwhile). Reader thread.
  bool OnMessage(const std::string& data, bool binary, int64_t size);
  /// Buffer `batches`, or hold them in held_ when they do not fit (false).
  /// Reader thread.
  bool PushOrHold(std::vector<std::shared_ptr<arrow::RecordBatch>> batches);
  void OnDisconnect(const std::string& error);

  const std::string uri_;
  const Target target_;
  const WebSocketOptions options_;
  const bool explicit_schema_;
  BoundedBuffer buffer_;
  std::atomic<bool> connected_{false};
  // Rows of a message waiting for buffer room (on_overflow = error); reader thread only.
  std::vector<std::shared_ptr<arrow::RecordBatch>> held_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
  // The reader's io_context, to stop it from Stop(); guarded by run_mu_.
  std::mutex run_mu_;
  std::condition_variable run_cv_;
  void* io_ = nullptr;  // boost::asio::io_context* while running

  mutable std::mutex mu_;
  std::unique_ptr<JsonDecoder> decoder_;  // guarded by mu_
  std::vector<RejectedRecord> rejects_;   // guarded by mu_
  ConnectorStats counters_;               // guarded by mu_
  std::string last_error_;                // guarded by mu_
  int64_t messages_ = 0;                  // guarded by mu_
};

}  // namespace rill
