// What kafka_connector.cc (the consumer, positions, commits) and
// kafka_decode.cc (messages into rows and rejects) share.
#pragma once

#include <librdkafka/rdkafka.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <arrow/type_fwd.h>

#include "rill/common/status.h"
#include "rill/connector/connector.h"
#include "rill/connector/json_decoder.h"
#include "rill/connector/kafka_connector.h"

namespace rill::kafka_internal {

struct MessageDeleter {
  void operator()(rd_kafka_message_t* m) const { rd_kafka_message_destroy(m); }
};
using MessagePtr = std::unique_ptr<rd_kafka_message_t, MessageDeleter>;

/// The key columns' values of a run of messages (KeyReader::Read).
struct KeyRows {
  /// One row per message, the key columns (all null where the key could not
  /// be read).
  std::shared_ptr<arrow::RecordBatch> rows;
  /// Per message: "" when its key was read, else why not.
  std::vector<std::string> errors;
};

/// Reads message keys into the key columns (KafkaOptions::key_columns,
/// key_format): for tombstones (deletes by key) and to fill the key columns of
/// upsert rows. The reader thread, with the connector's mutex held.
class KeyReader {
 public:
  KeyReader(std::vector<std::string> columns, KafkaKeyFormat format);
  ~KeyReader();

  /// Remember the target table's schema (KafkaConnector::SetTargetSchema), for
  /// its primary key.
  void SetTableSchema(std::shared_ptr<arrow::Schema> schema) { table_schema_ = std::move(schema); }
  /// The key columns for values decoded into `value_schema` (null: not known
  /// yet): key_columns, else under kString the one-column primary key
  /// (metadata "primary_key") of `value_schema` or of the table. Empty: keys
  /// cannot be read.
  std::vector<std::string> Columns(const std::shared_ptr<arrow::Schema>& value_schema) const;
  /// Read the keys of messages[begin, end) as the key columns of
  /// `value_schema` (their types; utf8 when a column is not in it or it is
  /// null). Fails only when Arrow cannot allocate.
  Result<KeyRows> Read(const std::vector<MessagePtr>& messages, size_t begin, size_t end,
                       const std::shared_ptr<arrow::Schema>& value_schema);

 private:
  std::vector<std::string> columns_;
  KafkaKeyFormat format_;
  std::unique_ptr<JsonDecoder> decoder_;  ///< decodes the key records
  std::shared_ptr<arrow::Schema> key_schema_;
  std::shared_ptr<arrow::Schema> table_schema_;
};

/// Return `rows` (values decoded from messages, `row_messages[r]` the index
/// in `keys` of row r's message) with the null key columns filled from the
/// messages' keys. Columns `rows` does not have are left out.
Result<std::shared_ptr<arrow::RecordBatch>> FillKeyColumns(
    const std::shared_ptr<arrow::RecordBatch>& rows, const std::vector<int64_t>& row_messages,
    const KeyRows& keys);

/// What a run of messages decoded into.
struct DecodedMessages {
  std::vector<std::shared_ptr<arrow::RecordBatch>> rows;
  /// Bad records and undecodable messages, positions filled in (connector
  /// names left empty).
  std::vector<RejectedRecord> rejects;
  int64_t received_bytes = 0;
  int64_t received_records = 0;
  int64_t unknown_fields = 0;
  int64_t tombstones = 0;  ///< messages with a null value
  /// How many messages from the first one the rows and rejects account for;
  /// fewer than given only when `error` is set.
  size_t messages = 0;
  /// Why the messages from `messages` on were not decoded (adding the metadata
  /// columns failed: the caller keeps them and tries again).
  Status error;
};

/// "topic t, partition 0, offset 17".
std::string MessagePosition(const rd_kafka_message_t& m);

/// Add (or replace) the metadata columns _topic, _partition, _offset, _key and
/// _timestamp to `rows`, whose row i came from the message `of_row[i]`.
Result<std::shared_ptr<arrow::RecordBatch>> AddMessageMetadata(
    std::shared_ptr<arrow::RecordBatch> rows, const std::vector<const rd_kafka_message_t*>& of_row,
    arrow::MemoryPool* pool);

/// Decode the values of `messages[begin, end)` with `decoder`: runs of NDJSON
/// messages are decoded together; a message holding a JSON array alone (an
/// array is a whole input of the decoder, so a neighbour's rows never end up
/// inside it). A run the decoder fails on (it fails only when Arrow cannot
/// allocate) is decoded message by message, and a message it still fails on
/// becomes a reject holding its bytes. With `metadata_columns`, the _topic,
/// _partition, _offset, _key and _timestamp columns are added from `pool`.
/// Tombstones (null values) are runs of their own: deletes of their keys read
/// by `keys` (null: no key columns; they are then skipped under format
/// debezium, rejects otherwise), and `keys` fills the key columns of the
/// values' rows that lack them. The caller holds the decoder's lock.
DecodedMessages DecodeMessages(JsonDecoder* decoder, const JsonDecodeOptions& options,
                               const std::vector<MessagePtr>& messages, size_t begin,
                               size_t end, bool metadata_columns, arrow::MemoryPool* pool,
                               KeyReader* keys = nullptr);

}  // namespace rill::kafka_internal
