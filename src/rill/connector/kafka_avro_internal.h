// KafkaConnector with format="avro": message values into rows and rejects
// (kafka_avro.cc), beside the NDJSON path of kafka_decode.cc.
#pragma once

#include "rill/connector/avro_decoder.h"
#include "rill/connector/avro_source.h"
#include "rill/connector/kafka_connector_internal.h"

namespace rill::kafka_internal {

/// Decode the values of `messages[begin, end)`, one Avro record per message,
/// with `decoder` and the writer schemas of `source`. A value that is not in
/// the wire format, names a schema id the registry does not have, or does not
/// decode becomes a reject (its bytes, the field and byte offset in the
/// message value); a null value (tombstone) too. When the registry cannot be
/// asked (IOError), the messages from that one on are left for the caller to
/// decode again (`error` set, `messages` counting those before it). With
/// `metadata_columns`, the _topic, _partition, _offset, _key and _timestamp
/// columns are added from `pool`. The caller holds the decoder's lock.
DecodedMessages DecodeAvroMessages(AvroSource* source, AvroDecoder* decoder,
                                   const std::vector<MessagePtr>& messages, size_t begin,
                                   size_t end, bool metadata_columns, arrow::MemoryPool* pool,
                                   int64_t max_raw_bytes);

}  // namespace rill::kafka_internal
