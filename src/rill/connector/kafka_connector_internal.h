// What kafka_connector.cc (the consumer, positions, commits) and
// kafka_decode.cc (messages into rows and rejects) share.
#pragma once

#include <librdkafka/rdkafka.h>

#include <cstdint>
#include <memory>
#include <vector>

#include <arrow/type_fwd.h>

#include "rill/common/status.h"
#include "rill/connector/connector.h"
#include "rill/connector/json_decoder.h"

namespace rill::kafka_internal {

struct MessageDeleter {
  void operator()(rd_kafka_message_t* m) const { rd_kafka_message_destroy(m); }
};
using MessagePtr = std::unique_ptr<rd_kafka_message_t, MessageDeleter>;

/// What a run of messages decoded into.
struct DecodedMessages {
  std::vector<std::shared_ptr<arrow::RecordBatch>> rows;
  /// Bad records and undecodable messages, positions filled in (connector
  /// names left empty).
  std::vector<RejectedRecord> rejects;
  int64_t received_bytes = 0;
  int64_t received_records = 0;
  int64_t unknown_fields = 0;
  /// How many messages from the first one the rows and rejects account for;
  /// fewer than given only when `error` is set.
  size_t messages = 0;
  /// Why the messages from `messages` on were not decoded (adding the metadata
  /// columns failed: the caller keeps them and tries again).
  Status error;
};

/// "topic t, partition 0, offset 17".
std::string MessagePosition(const rd_kafka_message_t& m);

/// Decode the values of `messages[begin, end)` with `decoder`: runs of NDJSON
/// messages are decoded together; a message holding a JSON array alone (an
/// array is a whole input of the decoder, so a neighbour's rows never end up
/// inside it). A run the decoder fails on (it fails only when Arrow cannot
/// allocate) is decoded message by message, and a message it still fails on
/// becomes a reject holding its bytes. With `metadata_columns`, the _topic,
/// _partition, _offset, _key and _timestamp columns are added from `pool`.
/// The caller holds the decoder's lock.
DecodedMessages DecodeMessages(JsonDecoder* decoder, const JsonDecodeOptions& options,
                               const std::vector<MessagePtr>& messages, size_t begin,
                               size_t end, bool metadata_columns, arrow::MemoryPool* pool);

}  // namespace rill::kafka_internal
