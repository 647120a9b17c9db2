// KafkaConnector: message values into rows and rejects (kafka_connector_internal.h).
#include <algorithm>
#include <string>

#include <arrow/builder.h>
#include <arrow/memory_pool.h>
#include <arrow/record_batch.h>
#include <arrow/type.h>

#include "rill/connector/kafka_connector_internal.h"

namespace rill::kafka_internal {

namespace {

std::string_view ValueOf(const rd_kafka_message_t& m) {
  if (m.payload == nullptr) return {};
  return {static_cast<const char*>(m.payload), m.len};
}

bool HoldsArray(const rd_kafka_message_t& m) {
  for (char c : ValueOf(m)) {
    if (c != ' ' && c != '\t' && c != '\r' && c != '\n') return c == '[';
  }
  return false;
}

/// Decodes one batch of messages into a DecodedMessages, run by run.
class MessageDecoder {
 public:
  MessageDecoder(JsonDecoder* decoder, const JsonDecodeOptions& options,
                 const std::vector<MessagePtr>& messages, bool metadata_columns,
                 arrow::MemoryPool* pool)
      : decoder_(decoder),
        options_(options),
        messages_(messages),
        metadata_columns_(metadata_columns),
        pool_(pool ? pool : arrow::default_memory_pool()) {}

  DecodedMessages Run(size_t begin, size_t end) {
    out_.messages = 0;
    for (size_t i = begin; i < end;) {
      size_t j = i + 1;
      if (!HoldsArray(*messages_[i])) {
        while (j < end && !HoldsArray(*messages_[j])) ++j;
      }
      Status st = DecodeRun(i, j);
      if (!st.ok()) {
        out_.error = st;
        break;
      }
      i = j;
    }
    return std::move(out_);
  }

 private:
  /// Decode messages [i, j) as one input; on success out_.messages = j - first.
  Status DecodeRun(size_t i, size_t j) {
    std::string data;
    std::vector<int64_t> starts;
    starts.reserve(j - i);
    for (size_t k = i; k < j; ++k) {
      starts.push_back(static_cast<int64_t>(data.size()));
      std::string_view value = ValueOf(*messages_[k]);
      data.append(value);
      if (value.empty() || value.back() != '\n') data += '\n';
    }
    auto result = decoder_->Decode(data);
    if (!result.ok()) {
      if (j - i > 1) {
        for (size_t k = i; k < j; ++k) RILL_RETURN_NOT_OK(DecodeRun(k, k + 1));
        return Status::OK();
      }
      RejectMessage(i, "the decoder failed on this message: " + result.status().ToString());
      return Status::OK();
    }
    DecodeResult decoded = std::move(*result);
    if (decoded.batch && metadata_columns_) {
      RILL_ASSIGN_OR_RAISE(decoded.batch,
                           AddMetadata(decoded.batch, decoded.row_offsets, starts, i));
    }
    auto message_of = [&](int64_t offset) {
      auto it = std::upper_bound(starts.begin(), starts.end(), offset);
      return i + static_cast<size_t>(it - starts.begin()) - 1;
    };
    for (auto& r : decoded.rejects) {
      const size_t k = message_of(std::max<int64_t>(0, r.byte_offset));
      r.position = MessagePosition(*messages_[k]);
      r.byte_offset -= starts[k - i];  // within the message's value
      out_.rejects.push_back(std::move(r));
    }
    if (decoded.batch && decoded.batch->num_rows() > 0) out_.rows.push_back(decoded.batch);
    out_.received_bytes += static_cast<int64_t>(data.size());
    out_.received_records += decoded.records;
    out_.unknown_fields += decoded.unknown_fields;
    out_.messages += j - i;
    return Status::OK();
  }

  void RejectMessage(size_t i, std::string error) {
    const rd_kafka_message_t& m = *messages_[i];
    RejectedRecord r;
    r.position = MessagePosition(m);
    r.error = std::move(error);
    r.raw = TruncateRaw(ValueOf(m), options_.max_raw_bytes);
    r.raw_size = static_cast<int64_t>(m.len);
    out_.rejects.push_back(std::move(r));
    out_.received_bytes += static_cast<int64_t>(m.len);
    out_.received_records += 1;
    out_.messages += 1;
  }

  /// Add the metadata columns to the rows of messages [first, …).
  Result<std::shared_ptr<arrow::RecordBatch>> AddMetadata(
      std::shared_ptr<arrow::RecordBatch> rows, const std::vector<int64_t>& row_offsets,
      const std::vector<int64_t>& starts, size_t first) {
    arrow::StringBuilder topic(pool_);
    arrow::Int32Builder partition(pool_);
    arrow::Int64Builder offset(pool_);
    arrow::BinaryBuilder key(pool_);
    arrow::TimestampBuilder ts(arrow::timestamp(arrow::TimeUnit::MILLI), pool_);
    Status st;
    for (int64_t row_offset : row_offsets) {
      auto it = std::upper_bound(starts.begin(), starts.end(), row_offset);
      const auto& m = messages_[first + static_cast<size_t>(it - starts.begin()) - 1];
      st &= topic.Append(rd_kafka_topic_name(m->rkt));
      st &= partition.Append(m->partition);
      st &= offset.Append(m->offset);
      st &= m->key ? key.Append(static_cast<const uint8_t*>(m->key),
                                static_cast<int32_t>(m->key_len))
                   : key.AppendNull();
      rd_kafka_timestamp_type_t type;
      int64_t t = rd_kafka_message_timestamp(m.get(), &type);
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
      int at = rows->schema()->GetFieldIndex(names[i]);
      RILL_ASSIGN_OR_RAISE(rows, at >= 0 ? rows->SetColumn(at, field, arrays[i])
                                         : rows->AddColumn(rows->num_columns(), field,
                                                           arrays[i]));
    }
    return rows;
  }

  JsonDecoder* decoder_;
  const JsonDecodeOptions& options_;
  const std::vector<MessagePtr>& messages_;
  const bool metadata_columns_;
  arrow::MemoryPool* pool_;
  DecodedMessages out_;
};

}  // namespace

std::string MessagePosition(const rd_kafka_message_t& m) {
  return std::string("topic ") + rd_kafka_topic_name(m.rkt) + ", partition " +
         std::to_string(m.partition) + ", offset " + std::to_string(m.offset);
}

DecodedMessages DecodeMessages(JsonDecoder* decoder, const JsonDecodeOptions& options,
                               const std::vector<MessagePtr>& messages, size_t begin,
                               size_t end, bool metadata_columns, arrow::MemoryPool* pool) {
  return MessageDecoder(decoder, options, messages, metadata_columns, pool).Run(begin, end);
}

}  // namespace rill::kafka_internal
