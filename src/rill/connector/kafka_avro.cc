// KafkaConnector: Avro message values into rows and rejects (kafka_avro_internal.h).
#include "rill/connector/kafka_avro_internal.h"

#include <arrow/builder.h>
#include <arrow/memory_pool.h>
#include <arrow/record_batch.h>
#include <arrow/type.h>

namespace rill::kafka_internal {

namespace {

/// Add the metadata columns to `rows`, whose row i came from messages[of[i]].
Result<std::shared_ptr<arrow::RecordBatch>> AddAvroMetadata(
    std::shared_ptr<arrow::RecordBatch> rows, const std::vector<MessagePtr>& messages,
    const std::vector<size_t>& of, arrow::MemoryPool* pool) {
  std::vector<const rd_kafka_message_t*> of_row;
  of_row.reserve(of.size());
  for (size_t i : of) of_row.push_back(messages[i].get());
  return AddMessageMetadata(std::move(rows), of_row, pool);
}

}  // namespace

DecodedMessages DecodeAvroMessages(AvroSource* source, AvroDecoder* decoder,
                                   const std::vector<MessagePtr>& messages, size_t begin,
                                   size_t end, bool metadata_columns, arrow::MemoryPool* pool,
                                   int64_t max_raw_bytes) {
  DecodedMessages out;
  pool = pool ? pool : arrow::default_memory_pool();
  std::vector<size_t> row_of;
  size_t i = begin;
  auto reject = [&](const rd_kafka_message_t& m, std::string error, int64_t byte) {
    RejectedRecord r;
    r.position = MessagePosition(m);
    r.error = std::move(error);
    std::string_view value(static_cast<const char*>(m.payload), m.payload ? m.len : 0);
    r.raw = TruncateRaw(value, max_raw_bytes);
    r.raw_size = static_cast<int64_t>(value.size());
    r.byte_offset = byte;
    out.rejects.push_back(std::move(r));
  };
  for (; i < end; ++i) {
    const rd_kafka_message_t& m = *messages[i];
    if (m.payload == nullptr) {
      out.received_records += 1;
      reject(m, "null message value (a tombstone): nothing to decode as Avro", -1);
      continue;
    }
    std::string_view value(static_cast<const char*>(m.payload), m.len);
    auto resolved = source->Resolve(value);
    if (resolved.status().IsIOError()) {
      out.error = resolved.status();
      break;  // the registry is unreachable: these messages are decoded again later
    }
    out.received_records += 1;
    out.received_bytes += static_cast<int64_t>(m.len);
    if (!resolved.ok()) {
      reject(m, resolved.status().message(), 0);
      continue;
    }
    Status st = decoder->Append(resolved->writer, resolved->body, resolved->body_offset);
    if (!st.ok()) {
      if (!st.IsInvalid()) {  // Arrow could not allocate: retried as a whole
        out.error = st;
        break;
      }
      reject(m, st.message(), 0);
      continue;
    }
    if (metadata_columns) row_of.push_back(i);
  }
  out.messages = i - begin;
  auto batch = decoder->Flush();
  if (!batch.ok()) {
    // Nothing of this run is delivered: decode it all again.
    out = DecodedMessages();
    out.error = batch.status();
    return out;
  }
  std::shared_ptr<arrow::RecordBatch> rows = *batch;
  if (rows && metadata_columns) {
    auto with = AddAvroMetadata(rows, messages, row_of, pool);
    if (!with.ok()) {
      out = DecodedMessages();
      out.error = with.status();
      return out;
    }
    rows = *with;
  }
  if (rows && rows->num_rows() > 0) out.rows.push_back(std::move(rows));
  return out;
}

}  // namespace rill::kafka_internal
