// What kafka_sink.cc (the producer, transactions, progress) and
// kafka_sink_encode.cc (change rows into message keys and JSON values) share.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <arrow/record_batch.h>

#include "rill/common/status.h"
#include "rill/connector/schema_registry.h"
#include "rill/sink/sink.h"

namespace rill::kafka_sink_internal {

/// One message to produce. The views point into the encoder's buffers and are
/// valid until the next row is encoded.
struct EncodedMessage {
  std::optional<std::string_view> key;    ///< nullopt: no key
  std::optional<std::string_view> value;  ///< nullopt: a tombstone
  int32_t partition = -1;                 ///< -1 (RD_KAFKA_PARTITION_UA): by the key
};

/// Turns the rows of change batches (ChangeSchema) into messages. One per
/// writer; the sink's thread only.
class MessageEncoder {
 public:
  /// `key_columns` must be columns of the batches (checked per batch);
  /// `key_as_string` needs exactly one key column.
  MessageEncoder(std::vector<std::string> key_columns, bool key_as_string)
      : key_columns_(std::move(key_columns)), key_as_string_(key_as_string) {}

  /// Call `emit(const EncodedMessage&)` for each row of `batch` that `mode`
  /// writes: changelog every row (values with _op and _version), upsert
  /// inserts and updates as values and deletes as tombstones (update_before
  /// rows skipped), append inserts only. Stops at the first error of `emit`.
  template <typename Emit>
  Status Encode(const arrow::RecordBatch& batch, SinkMode mode, Emit&& emit);
  /// Send each row to the partition its int32 column `name` holds (checked
  /// per batch); "": by the key.
  void SetPartitionColumn(std::string name) { partition_column_ = std::move(name); }
  /// Whether messages have keys (there are key columns).
  bool has_key() const { return !key_columns_.empty(); }
  /// format="avro": write values as Avro binary in the Confluent wire format,
  /// the Avro schema of the written columns (ArrowToAvroSchemaJson) registered
  /// under `subject` (on the first batch of each column layout).
  void SetAvro(std::shared_ptr<SchemaRegistryClient> registry, std::string subject,
               std::string record_name) {
    registry_ = std::move(registry);
    subject_ = std::move(subject);
    record_name_ = std::move(record_name);
  }

 private:
  struct Layout;
  /// The column indices of `batch` (cached per schema).
  Result<const Layout*> LayoutOf(const arrow::RecordBatch& batch);
  /// format="avro": register (once per layout and mode) the schema of the
  /// columns `mode` writes and remember its id in avro_id_.
  Status PrepareAvro(const arrow::RecordBatch& batch, const Layout& layout, SinkMode mode);
  /// Encode row `row`; false when `mode` skips it.
  Result<bool> EncodeRow(const arrow::RecordBatch& batch, const Layout& layout, int64_t row,
                         SinkMode mode, EncodedMessage* out);

  std::vector<std::string> key_columns_;
  bool key_as_string_;
  std::string partition_column_;
  std::shared_ptr<const arrow::Schema> cached_schema_;
  std::shared_ptr<Layout> cached_layout_;
  std::string key_;
  std::string value_;
  std::shared_ptr<SchemaRegistryClient> registry_;  // format="avro" only
  std::string subject_;
  std::string record_name_;
  int32_t avro_ids_[2] = {-1, -1};  // per cached layout: [values, changelog]
  int32_t avro_id_ = -1;            // of the batch being encoded
};

/// The layout of a change batch: where the key columns, the value columns and
/// _op are.
struct MessageEncoder::Layout {
  std::vector<int> key;            ///< key column indices
  std::vector<int> value;          ///< columns of a value (all but _op/_version unless changelog)
  std::vector<int> changelog;      ///< all columns
  std::vector<std::string> names;  ///< per column: "\"name\":"
  int op = -1;
  int partition = -1;              ///< the partition column (SetPartitionColumn), or -1
};

template <typename Emit>
Status MessageEncoder::Encode(const arrow::RecordBatch& batch, SinkMode mode, Emit&& emit) {
  RILL_ASSIGN_OR_RAISE(const Layout* layout, LayoutOf(batch));
  if (registry_) RILL_RETURN_NOT_OK(PrepareAvro(batch, *layout, mode));
  EncodedMessage message;
  const int64_t rows = batch.num_rows();
  for (int64_t row = 0; row < rows; ++row) {
    RILL_ASSIGN_OR_RAISE(bool write, EncodeRow(batch, *layout, row, mode, &message));
    if (write) RILL_RETURN_NOT_OK(emit(message));
  }
  return Status::OK();
}

/// Append row `row` of `array` as an Avro union [null, T] value (kafka_sink_avro.cc).
/// NotImplemented for a type ArrowToAvroSchemaJson does not map; Invalid for a
/// uint64 over 2^63-1.
Status AppendAvroField(const arrow::Array& array, int64_t row, std::string* out);

/// "rill:v=<version>;e=<epoch>": the offset metadata of the progress group.
std::string FormatProgress(const SinkProgress& progress);
/// The inverse of FormatProgress; Invalid for anything else.
Result<SinkProgress> ParseProgress(std::string_view metadata);

}  // namespace rill::kafka_sink_internal
