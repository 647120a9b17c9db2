#include "rill/connector/json_stream_connector.h"

#include "rill/connector/decode_counters.h"

#include <arrow/record_batch.h>
#include <arrow/type.h>

namespace rill {

namespace {
/// Rejects kept between two ticks (beyond: the oldest are dropped and counted).
constexpr int64_t kMaxPendingRejects = 10000;
}  // namespace

void CollectRejects(const std::string& connector, std::vector<RejectedRecord> rejects,
                    int64_t max_pending, std::vector<RejectedRecord>* out, int64_t* dropped) {
  for (auto& r : rejects) {
    r.connector = connector;
    out->push_back(std::move(r));
  }
  const int64_t over = static_cast<int64_t>(out->size()) - max_pending;
  if (over > 0) {
    out->erase(out->begin(), out->begin() + over);
    *dropped += over;
  }
}

Result<std::shared_ptr<JsonStreamConnector>> JsonStreamConnector::Make(
    std::string target_table, JsonStreamOptions options) {
  if (target_table.empty()) return Status::Invalid("JSONStreamConnector: empty target_table");
  RILL_ASSIGN_OR_RAISE(auto decoder, JsonDecoder::Make(options.decode));
  return std::shared_ptr<JsonStreamConnector>(
      new JsonStreamConnector(std::move(target_table), std::move(options), std::move(decoder)));
}

JsonStreamConnector::JsonStreamConnector(std::string target_table, JsonStreamOptions options,
                                         std::unique_ptr<JsonDecoder> decoder)
    : Connector(options.name, std::move(target_table), options.decode.schema),
      explicit_schema_(options.decode.schema != nullptr),
      decode_options_(options.decode),
      max_pending_rejects_(kMaxPendingRejects),
      buffer_(options.limits),
      decoder_(std::move(decoder)) {}

Status JsonStreamConnector::PushBytes(std::string_view data) {
  return Push(data, /*max_receipt_rejects=*/0).status();
}

Status JsonStreamConnector::BufferLocked(
    const std::vector<std::shared_ptr<arrow::RecordBatch>>& batches, PushReceipt* receipt) {
  // Pushes are serialized by mu_, so the buffer's counters move only by ours.
  const ConnectorStats before = buffer_.stats();
  RILL_RETURN_NOT_OK(buffer_.Push(batches));
  const ConnectorStats after = buffer_.stats();
  receipt->accepted = after.pushed_records - before.pushed_records;
  if (limits().on_overflow == OverflowPolicy::kDropNewest) {
    receipt->dropped = after.dropped_records - before.dropped_records;
  }
  receipt->sequence = after.pushed_records;
  return Status::OK();
}

Result<JsonDecoder*> JsonStreamConnector::DecoderFor(const PushFormat& format) {
  if (format == PushFormat{decode_options_.format, decode_options_.op_column,
                           decode_options_.ts_ms_column}) {
    return decoder_.get();
  }
  for (auto& [f, d] : other_decoders_) {
    if (f == format) return d.get();
  }
  JsonDecodeOptions options = decode_options_;
  options.format = format.format;
  options.op_column = format.op_column;
  options.ts_ms_column = format.ts_ms_column;
  options.schema = decoder_->schema();
  RILL_ASSIGN_OR_RAISE(auto decoder, JsonDecoder::Make(options));
  other_decoders_.emplace_back(format, std::move(decoder));
  return other_decoders_.back().second.get();
}

Result<PushReceipt> JsonStreamConnector::Push(std::string_view data,
                                              int64_t max_receipt_rejects) {
  return Push(data, max_receipt_rejects,
              PushFormat{decode_options_.format, decode_options_.op_column,
                         decode_options_.ts_ms_column});
}

Result<PushReceipt> JsonStreamConnector::Push(std::string_view data,
                                              int64_t max_receipt_rejects,
                                              const PushFormat& format) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopped_) return Status::Invalid("JSONStreamConnector '", name(), "' is closed");
  RILL_ASSIGN_OR_RAISE(JsonDecoder* decoder, DecoderFor(format));
  counters_.received_bytes += static_cast<int64_t>(data.size());
  auto decoded = decoder->Decode(data);
  if (!decoded.ok()) {
    ++counters_.errors;
    return decoded.status();
  }
  PushReceipt receipt;
  receipt.records = decoded->records;
  receipt.rejected = static_cast<int64_t>(decoded->rejects.size());
  for (const auto& r : decoded->rejects) {
    if (static_cast<int64_t>(receipt.first_rejects.size()) >= max_receipt_rejects) break;
    receipt.first_rejects.push_back(r);
    receipt.first_rejects.back().connector = name();
  }
  CountDecoded(name(), &*decoded, max_pending_rejects_, &rejects_, &counters_);
  {
    const ConnectorStats now = buffer_.stats();
    receipt.sequence = now.pushed_records;
  }
  if (!decoded->batch) return receipt;
  RILL_RETURN_NOT_OK(BufferLocked({decoded->batch}, &receipt));
  return receipt;
}

Result<PushReceipt> JsonStreamConnector::PushBatches(
    const std::vector<std::shared_ptr<arrow::RecordBatch>>& batches) {
  return PushBatches(batches, {}, 0);
}

Result<PushReceipt> JsonStreamConnector::PushBatches(
    const std::vector<std::shared_ptr<arrow::RecordBatch>>& batches,
    std::vector<RejectedRecord> rejects, int64_t max_receipt_rejects) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopped_) return Status::Invalid("JSONStreamConnector '", name(), "' is closed");
  PushReceipt receipt;
  receipt.rejected = static_cast<int64_t>(rejects.size());
  for (const auto& r : rejects) {
    if (static_cast<int64_t>(receipt.first_rejects.size()) >= max_receipt_rejects) break;
    receipt.first_rejects.push_back(r);
    receipt.first_rejects.back().connector = name();
  }
  counters_.received_records += receipt.rejected;
  counters_.rejected_records += receipt.rejected;
  CollectRejects(name(), std::move(rejects), max_pending_rejects_, &rejects_,
                 &counters_.rejects_overflowed);
  for (const auto& b : batches) {
    if (!b) continue;
    receipt.records += b->num_rows();
    counters_.received_bytes += EstimateBatchBytes(*b);
  }
  counters_.received_records += receipt.records;
  counters_.parsed_records += receipt.records;
  receipt.records += receipt.rejected;
  receipt.sequence = buffer_.stats().pushed_records;
  RILL_RETURN_NOT_OK(BufferLocked(batches, &receipt));
  return receipt;
}

bool JsonStreamConnector::IsSettled(int64_t sequence) const {
  return buffer_.removed_records() >= sequence;
}

Result<std::vector<std::shared_ptr<arrow::RecordBatch>>> JsonStreamConnector::Poll() {
  return buffer_.Drain();
}

Result<std::vector<std::shared_ptr<arrow::RecordBatch>>> JsonStreamConnector::PollAtMost(
    int64_t max_records) {
  return buffer_.Drain(max_records);
}

std::vector<RejectedRecord> JsonStreamConnector::TakeRejects() {
  std::lock_guard<std::mutex> lock(mu_);
  return std::move(rejects_);
}

void JsonStreamConnector::SetTargetSchema(const std::shared_ptr<arrow::Schema>& schema) {
  if (explicit_schema_ || !schema) return;
  std::lock_guard<std::mutex> lock(mu_);
  AdoptTargetSchema(decoder_.get(), schema, &counters_);
  for (auto& [format, decoder] : other_decoders_) {
    AdoptTargetSchema(decoder.get(), schema, &counters_);
  }
}

Status JsonStreamConnector::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  stopped_ = false;
  return Status::OK();
}

void JsonStreamConnector::Stop() {
  std::lock_guard<std::mutex> lock(mu_);
  stopped_ = true;
}

ConnectorStats JsonStreamConnector::stats() const {
  ConnectorStats s = buffer_.stats();
  std::lock_guard<std::mutex> lock(mu_);
  return WithDecodeCounters(s, counters_);
}

std::shared_ptr<arrow::Schema> JsonStreamConnector::decode_schema() const {
  std::lock_guard<std::mutex> lock(mu_);
  return decoder_->schema();
}

}  // namespace rill
