// Bookkeeping shared by the connectors that decode NDJSON (JSONStreamConnector,
// FileStreamConnector, WebSocketConnector): counting a decode's records,
// rejects and unknown fields, keeping its rejects, adopting the target table's
// schema, and merging the decode counters into the buffer's stats.
//
// Each connector keeps its decoder, pending rejects and counters under its own
// mutex; every function here is called with that mutex held.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <arrow/type_fwd.h>

#include "rill/connector/connector.h"
#include "rill/connector/json_decoder.h"

namespace rill {

/// Count `decoded` in `counters` (received, rejected, parsed records and
/// unknown fields) and move its rejects, named after `connector`, to
/// `pending` (at most `max_pending` kept; CollectRejects). `decoded->batch`
/// stays for the caller to buffer.
void CountDecoded(const std::string& connector, DecodeResult* decoded, int64_t max_pending,
                  std::vector<RejectedRecord>* pending, ConnectorStats* counters);

/// Decode into `schema` from now on, unless the decoder already does (a
/// schema it inferred keeps its JSON-text columns). A schema the decoder
/// cannot take is counted in `counters->errors`.
void AdoptTargetSchema(JsonDecoder* decoder, const std::shared_ptr<arrow::Schema>& schema,
                       ConnectorStats* counters);

/// The buffer's `stats` with the connector's decode `counters` added.
ConnectorStats WithDecodeCounters(ConnectorStats stats, const ConnectorStats& counters);

}  // namespace rill
