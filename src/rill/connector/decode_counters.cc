#include "rill/connector/decode_counters.h"

#include <arrow/record_batch.h>
#include <arrow/type.h>

#include "rill/connector/json_stream_connector.h"  // CollectRejects

namespace rill {

void CountDecoded(const std::string& connector, DecodeResult* decoded, int64_t max_pending,
                  std::vector<RejectedRecord>* pending, ConnectorStats* counters) {
  counters->received_records += decoded->records;
  counters->rejected_records += static_cast<int64_t>(decoded->rejects.size());
  counters->unknown_fields += decoded->unknown_fields;
  CollectRejects(connector, std::move(decoded->rejects), max_pending, pending,
                 &counters->rejects_overflowed);
  decoded->rejects.clear();
  if (decoded->batch) counters->parsed_records += decoded->batch->num_rows();
}

void AdoptTargetSchema(JsonDecoder* decoder, const std::shared_ptr<arrow::Schema>& schema,
                       ConnectorStats* counters) {
  if (decoder->schema() && decoder->schema()->Equals(*schema)) return;
  if (!decoder->SetSchema(schema).ok()) ++counters->errors;
}

ConnectorStats WithDecodeCounters(ConnectorStats stats, const ConnectorStats& counters) {
  stats.received_bytes = counters.received_bytes;
  stats.received_records = counters.received_records;
  stats.parsed_records = counters.parsed_records;
  stats.rejected_records = counters.rejected_records;
  stats.unknown_fields = counters.unknown_fields;
  stats.tombstones = counters.tombstones;
  stats.errors += counters.errors;
  stats.dropped_records += counters.dropped_records;
  stats.rejects_overflowed += counters.rejects_overflowed;
  return stats;
}

}  // namespace rill
