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
  arrow::StringBuilder topic(pool);
  arrow::Int32Builder partition(pool);
  arrow::Int64Builder offset(pool);
  arrow::BinaryBuilder key(pool);
  arrow::TimestampBuilder ts(arrow::timestamp(arrow::TimeUnit::MILLI), pool);
  Status st;
  for (size_t i : of) {
    const auto& m = messages[i];
    st &= topic.Append(rd_kafka_topic_name(m->rkt));
    st &= partition.Append(m->partition);
    st &= offset.Append(m->offset);
    st &= m->key ? key.Append(static_cast<const uint8_t*>(m->key), static_cast<int32_t>(m->key_len))
                 : key.AppendNull();
    rd_kafka_timestamp_type_t type;
    const int64_t t = rd_kafka_message_timestamp(m.get(), &type);
    st &= t >= 0 ? ts.Append(t) : ts.AppendNull();
  }
  std::shared_ptr<arrow::Array> arrays[5];
  st &= topic.Finish(&arrays[0]);
  st &= partition.Finish(&arrays[1]);
  st &= offset.Finish(&arrays[2]);
  st &= key.Finish(&arrays[3]);
  st &= ts.Finish(&arrays[4]);
  RILL_RETURN_NOT_OK(st);
  const char* names[5] = {"_topic", "_partition", "_offset", "_key", "_timestamp"};
  for (int i = 0; i < 5; ++i) {
    auto field = arrow::field(names[i], arrays[i]->type());
    const int at = rows->schema()->GetFieldIndex(names[i]);
    RILL_ASSIGN_OR_RAISE(rows, at >= 0 ? rows->SetColumn(at, field, arrays[i])
                                       : rows->AddColumn(rows->num_columns(), field, arrays[i]));
  }
  return rows;
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
