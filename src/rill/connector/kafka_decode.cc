// KafkaConnector: message values into rows and rejects (kafka_connector_internal.h).
#include <algorithm>
#include <string>

#include <arrow/array/util.h>
#include <arrow/builder.h>
#include <arrow/compute/api.h>
#include <arrow/memory_pool.h>
#include <arrow/record_batch.h>
#include <arrow/type.h>

#include "rill/connector/change_envelope_internal.h"
#include "rill/connector/kafka_connector_internal.h"

namespace rill::kafka_internal {

namespace {

std::string_view ValueOf(const rd_kafka_message_t& m) {
  if (m.payload == nullptr) return {};
  return {static_cast<const char*>(m.payload), m.len};
}

/// A message with a null value (Kafka's delete marker for compaction).
bool IsTombstone(const rd_kafka_message_t& m) { return m.payload == nullptr; }

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
                 arrow::MemoryPool* pool, KeyReader* keys)
      : decoder_(decoder),
        keys_(keys),
        options_(options),
        messages_(messages),
        metadata_columns_(metadata_columns),
        pool_(pool ? pool : arrow::default_memory_pool()) {}

  DecodedMessages Run(size_t begin, size_t end) {
    out_.messages = 0;
    for (size_t i = begin; i < end;) {
      size_t j = i + 1;
      const bool tombstones = IsTombstone(*messages_[i]);
      if (tombstones) {
        while (j < end && IsTombstone(*messages_[j])) ++j;
      } else if (!HoldsArray(*messages_[i])) {
        while (j < end && !HoldsArray(*messages_[j]) && !IsTombstone(*messages_[j])) ++j;
      }
      Status st = tombstones ? DecodeTombstones(i, j) : DecodeRun(i, j);
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
    auto message_of = [&](int64_t offset) {
      auto it = std::upper_bound(starts.begin(), starts.end(), offset);
      return i + static_cast<size_t>(it - starts.begin()) - 1;
    };
    if (decoded.batch && keys_ != nullptr) {
      RILL_ASSIGN_OR_RAISE(decoded.batch, FillKeys(decoded.batch, decoded.row_offsets, i, j,
                                                   message_of));
    }
    if (decoded.batch && metadata_columns_) {
      RILL_ASSIGN_OR_RAISE(decoded.batch,
                           AddMetadata(decoded.batch, decoded.row_offsets, starts, i));
    }
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

  /// Fill the null key columns of `rows` (of messages [i, j)) from the keys.
  template <typename MessageOf>
  Result<std::shared_ptr<arrow::RecordBatch>> FillKeys(
      std::shared_ptr<arrow::RecordBatch> rows, const std::vector<int64_t>& row_offsets,
      size_t i, size_t j, MessageOf&& message_of) {
    bool missing = false;
    for (const auto& c : keys_->Columns(decoder_->schema())) {
      auto col = rows->GetColumnByName(c);
      missing = missing || (col && col->null_count() > 0);
    }
    if (!missing || static_cast<int64_t>(row_offsets.size()) != rows->num_rows()) return rows;
    RILL_ASSIGN_OR_RAISE(KeyRows keys, keys_->Read(messages_, i, j, decoder_->schema()));
    std::vector<int64_t> row_messages;
    row_messages.reserve(row_offsets.size());
    for (int64_t offset : row_offsets) {
      row_messages.push_back(static_cast<int64_t>(message_of(offset) - i));
    }
    return FillKeyColumns(rows, row_messages, keys);
  }

  /// Tombstones [i, j): deletes of their keys (see DecodeMessages). Counted
  /// only once everything succeeded (a failure leaves them for a retry).
  Status DecodeTombstones(size_t i, size_t j) {
    std::vector<RejectedRecord> rejects;
    std::shared_ptr<arrow::RecordBatch> rows;
    const auto columns = keys_ ? keys_->Columns(decoder_->schema()) : std::vector<std::string>{};
    if (columns.empty()) {
      // Under debezium: the compaction marker after a delete event, skipped.
      for (size_t k = i; k < j && options_.format != JsonFormat::kDebezium; ++k) {
        rejects.push_back(TombstoneReject(
            k, "a tombstone (a null value) deletes by key only when the connector knows the "
               "key columns: set key_columns=[...] (the message key as JSON) or "
               "key_format='string' (the key bytes are the one key column's value)"));
      }
    } else {
      RILL_ASSIGN_OR_RAISE(KeyRows keys, keys_->Read(messages_, i, j, decoder_->schema()));
      std::vector<int64_t> good;
      for (size_t k = i; k < j; ++k) {
        const std::string& error = keys.errors[k - i];
        if (error.empty()) {
          good.push_back(static_cast<int64_t>(k - i));
        } else {
          rejects.push_back(TombstoneReject(k, "tombstone (a null value): " + error));
        }
      }
      if (!good.empty()) {
        RILL_ASSIGN_OR_RAISE(rows, DeleteRows(keys, good));
        if (metadata_columns_) {
          std::vector<int64_t> starts(j - i);
          for (size_t k = 0; k < starts.size(); ++k) starts[k] = static_cast<int64_t>(k);
          RILL_ASSIGN_OR_RAISE(rows, AddMetadata(rows, good, starts, i));
        }
      }
    }
    out_.tombstones += static_cast<int64_t>(j - i);
    out_.received_records += static_cast<int64_t>(j - i);
    out_.messages += j - i;
    for (auto& r : rejects) out_.rejects.push_back(std::move(r));
    if (rows) out_.rows.push_back(std::move(rows));
    return Status::OK();
  }

  /// Delete rows of the keys `good` (indices into keys.rows): the columns of
  /// the values' schema (null but the key columns; the key columns alone while
  /// the schema is not known), then the operation column.
  Result<std::shared_ptr<arrow::RecordBatch>> DeleteRows(const KeyRows& keys,
                                                         const std::vector<int64_t>& good) {
    arrow::Int64Builder take_builder(pool_);
    RILL_RETURN_NOT_OK(take_builder.AppendValues(good));
    std::shared_ptr<arrow::Array> take;
    RILL_RETURN_NOT_OK(take_builder.Finish(&take));
    RILL_ASSIGN_OR_RAISE(auto key_rows, arrow::compute::Take(keys.rows, take));
    auto key_batch = key_rows.record_batch();
    auto schema = decoder_->schema() ? decoder_->schema() : key_batch->schema();
    const int64_t n = static_cast<int64_t>(good.size());
    std::vector<std::shared_ptr<arrow::Field>> fields;
    std::vector<std::shared_ptr<arrow::Array>> columns;
    for (const auto& f : schema->fields()) {
      auto key = key_batch->GetColumnByName(f->name());
      std::shared_ptr<arrow::Array> col;
      if (key) {
        col = key;
        if (!col->type()->Equals(*f->type())) {
          RILL_ASSIGN_OR_RAISE(col, arrow::compute::Cast(*col, f->type()));
        }
      } else {
        RILL_ASSIGN_OR_RAISE(col, arrow::MakeArrayOfNull(f->type(), n, pool_));
      }
      fields.push_back(f);
      columns.push_back(std::move(col));
    }
    arrow::Int8Builder ops(pool_);
    for (int64_t r = 0; r < n; ++r) {
      RILL_RETURN_NOT_OK(ops.Append(static_cast<int8_t>(json_internal::OpCode::kDelete)));
    }
    columns.emplace_back();
    RILL_RETURN_NOT_OK(ops.Finish(&columns.back()));
    fields.push_back(arrow::field(json_internal::kOpColumn, arrow::int8(), /*nullable=*/false));
    return arrow::RecordBatch::Make(arrow::schema(fields), n, std::move(columns));
  }

  RejectedRecord TombstoneReject(size_t k, std::string error) const {
    const rd_kafka_message_t& m = *messages_[k];
    RejectedRecord r;
    r.position = MessagePosition(m);
    r.error = std::move(error);
    std::string_view key = m.key ? std::string_view(static_cast<const char*>(m.key), m.key_len)
                                 : std::string_view();
    r.raw = TruncateRaw(key, options_.max_raw_bytes);
    r.raw_size = static_cast<int64_t>(key.size());
    return r;
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
    std::vector<const rd_kafka_message_t*> of_row;
    of_row.reserve(row_offsets.size());
    for (int64_t row_offset : row_offsets) {
      auto it = std::upper_bound(starts.begin(), starts.end(), row_offset);
      of_row.push_back(messages_[first + static_cast<size_t>(it - starts.begin()) - 1].get());
    }
    return AddMessageMetadata(std::move(rows), of_row, pool_);
  }

  JsonDecoder* decoder_;
  KeyReader* keys_;  ///< null: no key columns
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

Result<std::shared_ptr<arrow::RecordBatch>> AddMessageMetadata(
    std::shared_ptr<arrow::RecordBatch> rows, const std::vector<const rd_kafka_message_t*>& of_row,
    arrow::MemoryPool* pool) {
  arrow::StringBuilder topic(pool);
  arrow::Int32Builder partition(pool);
  arrow::Int64Builder offset(pool);
  arrow::BinaryBuilder key(pool);
  arrow::TimestampBuilder ts(arrow::timestamp(arrow::TimeUnit::MILLI), pool);
  Status st;
  for (const rd_kafka_message_t* m : of_row) {
    st &= topic.Append(rd_kafka_topic_name(m->rkt));
    st &= partition.Append(m->partition);
    st &= offset.Append(m->offset);
    st &= m->key ? key.Append(static_cast<const uint8_t*>(m->key), static_cast<int32_t>(m->key_len))
                 : key.AppendNull();
    rd_kafka_timestamp_type_t type;
    const int64_t t = rd_kafka_message_timestamp(m, &type);
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

DecodedMessages DecodeMessages(JsonDecoder* decoder, const JsonDecodeOptions& options,
                               const std::vector<MessagePtr>& messages, size_t begin,
                               size_t end, bool metadata_columns, arrow::MemoryPool* pool,
                               KeyReader* keys) {
  return MessageDecoder(decoder, options, messages, metadata_columns, pool, keys)
      .Run(begin, end);
}

}  // namespace rill::kafka_internal
