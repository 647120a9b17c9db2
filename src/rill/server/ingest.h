// Ingest over the network: POST /api/v1/ingest/{table} and the WebSocket
// `ingest` message (docs/api.md, "Ingest").
//
// Rows go into a JSONStreamConnector of the target table, with the same
// backpressure and per-record rejects as an in-process push_bytes():
//   - the table's own connector named `http:<table>` if the application added
//     one (its limits and on_overflow apply), else the first JSONStreamConnector
//     whose target is the table, else one the server adds, named
//     `http:<table>`, with ServerOptions' ingest_* limits and on_overflow
//     "error" (a full buffer answers 429 with Retry-After; nothing is dropped
//     silently).
//   - bodies by Content-Type: NDJSON or a JSON array (application/x-ndjson,
//     application/json, ...), Arrow IPC stream or file
//     (application/vnd.apache.arrow.stream / .file), CSV (text/csv, columns
//     typed by the table's schema), Avro (application/vnd.apache.avro…: an
//     object container file, or Confluent-framed records one after another with
//     ServerOptions::schema_registry_url; decoded into the table's schema, bad
//     records into rill_rejects; docs/avro.md); `Content-Encoding: gzip` inflates at most
//     max_ingest_decompressed_bytes (413 beyond).
//   - 202 once buffered; with wait=true, 200 once the tick that applied the
//     rows has published (polls the connector and the engine's tick count),
//     504 after ingest_wait_timeout_seconds (or ?timeout=).
//   - the reply counts records = accepted + rejected + dropped: rows the
//     buffer dropped (drop_newest, or drop_oldest of this push or, while
//     waiting, of later pushes) are not accepted; "published": true means
//     every accepted row is in the table ("uncertain": N and published false
//     when drains and drops interleaved too closely to tell).
//   - ?format=debezium: the body's records are Debezium change events;
//     ?op_column=NAME: a field (a column of CSV / Arrow bodies) that says what
//     each row does; ?ts_ms_column=NAME: source.ts_ms into that column. Rows
//     are applied in order as upserts, deletes and truncates (docs/debezium.md).
//   - rill_* tables are the engine's: ingest into them is refused (403).
//   - Arrow IPC bodies: ValidateFull on every batch (400), compressed buffers
//     bounded by max_ingest_decompressed_bytes before they are inflated (413).
//
// Threads: worker threads (the handlers block only while waiting with wait=true).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <boost/json/fwd.hpp>

#include "rill/connector/json_stream_connector.h"
#include "rill/server/http_types.h"
#include "rill/server/server_internal.h"

namespace rill::server {

/// One ingest request, from HTTP or WebSocket.
struct IngestRequest {
  std::string table;
  std::string content_type;  ///< "" is NDJSON / JSON
  std::string_view body;
  bool gzip = false;
  bool wait = false;
  double timeout_seconds = 0;  ///< 0: ServerOptions::ingest_wait_timeout_seconds
  /// ?format= (json | ndjson | debezium), ?op_column=, ?ts_ms_column=: how
  /// JSON records are framed (docs/debezium.md); op_column also names the
  /// operation column of CSV and Arrow bodies.
  PushFormat push_format;
  /// True when the request gave any of them (else the connector's own apply).
  bool has_push_format = false;
};

/// Buffer the rows of `request` and answer as POST /api/v1/ingest/{table}
/// does. Worker threads.
HttpReply Ingest(ServerContext& ctx, const IngestRequest& request);

/// The route POST /api/v1/ingest/{table}; nullopt for other paths.
std::optional<HttpReply> RouteIngest(ServerContext& ctx, const HttpRequest& request);

/// Handle a WebSocket message {"type":"ingest", "table", "data" (string) or
/// "rows" (array of objects), "format", "id", "wait"} and return the
/// acknowledgement frame {"type":"ingest_ack", "id", "status", ...the HTTP
/// reply's fields}. Worker threads.
std::string WsIngest(ServerContext& ctx, const boost::json::object& message);

}  // namespace rill::server
