// JsonStreamConnector: NDJSON / JSON-array bytes pushed by application code,
// decoded on the pushing thread into a bounded buffer.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "rill/connector/bounded_buffer.h"
#include "rill/connector/connector.h"
#include "rill/connector/json_decoder.h"

namespace rill {

/// Options of a JsonStreamConnector.
struct JsonStreamOptions {
  /// Decoding: an explicit schema (else the target table's, else inferred from
  /// the first push), unknown-field policy, size bounds.
  JsonDecodeOptions decode;
  /// Backpressure of the decoded rows (same contract as MemoryConnector).
  BufferLimits limits;
  /// Unique name within an engine (default: the target table's name).
  std::string name;
};

/// How one push's records are framed (HTTP ingest's ?format= and ?op_column=):
/// JsonDecodeOptions' format, op_column and ts_ms_column.
struct PushFormat {
  JsonFormat format = JsonFormat::kJson;
  std::string op_column;
  std::string ts_ms_column;

  bool operator==(const PushFormat& o) const {
    return format == o.format && op_column == o.op_column && ts_ms_column == o.ts_ms_column;
  }
};

/// What one push did (JsonStreamConnector::Push, PushBatches).
struct PushReceipt {
  int64_t records = 0;   ///< records offered (lines, array elements, rows)
  int64_t accepted = 0;  ///< rows buffered
  int64_t rejected = 0;  ///< records that failed to decode (also in TakeRejects)
  int64_t dropped = 0;   ///< rows of this push dropped at once (drop_newest)
  /// Copies of the first rejects of this push (at most the number asked for).
  std::vector<RejectedRecord> first_rejects;
  /// The push's place in the buffer: IsSettled(sequence) once the engine has
  /// drained (or drop_oldest has dropped) all of its rows.
  int64_t sequence = 0;
};

/// A connector fed with raw JSON bytes by PushBytes() from any thread.
///
/// Each push is decoded on the caller's thread (pushes are serialized) and
/// buffered as one batch; bad records become rejects that the engine writes
/// to `rill_rejects`; the good records of the same push are kept. With
/// drop_oldest, earlier pushes are dropped before later ones.
class JsonStreamConnector : public Connector {
 public:
  /// Make a connector. Invalid for bad decode options.
  static Result<std::shared_ptr<JsonStreamConnector>> Make(std::string target_table,
                                                           JsonStreamOptions options);

  /// Decode `data` (NDJSON or a JSON array) and buffer its rows. Fails only
  /// with CapacityError (on_overflow = error and the rows do not fit: nothing
  /// of this push is buffered, its rejects are still kept), Invalid after
  /// Stop(), or an allocation failure. Any thread.
  Status PushBytes(std::string_view data);
  /// PushBytes, returning what the push did, with copies of at most
  /// `max_receipt_rejects` of its rejects. Same errors. Any thread.
  Result<PushReceipt> Push(std::string_view data, int64_t max_receipt_rejects = 10);
  /// Push, with the records framed as `format` says instead of as the
  /// connector's options do (a decoder per format, made on first use, with the
  /// same schema). Invalid for a bad format (ts_ms_column without debezium,
  /// ...); otherwise the same errors. Any thread.
  Result<PushReceipt> Push(std::string_view data, int64_t max_receipt_rejects,
                           const PushFormat& format);
  /// Buffer already decoded batches (Arrow IPC or CSV bodies) as one push; the
  /// engine casts them to the table's schema. Same errors as PushBytes. Any thread.
  Result<PushReceipt> PushBatches(
      const std::vector<std::shared_ptr<arrow::RecordBatch>>& batches);
  /// PushBatches with the records the caller's own decoder refused (Avro
  /// bodies): kept for TakeRejects (rill_rejects), counted as received and
  /// rejected, and copied into the receipt (at most `max_receipt_rejects`).
  /// Same errors. Any thread.
  Result<PushReceipt> PushBatches(const std::vector<std::shared_ptr<arrow::RecordBatch>>& batches,
                                  std::vector<RejectedRecord> rejects,
                                  int64_t max_receipt_rejects);
  /// True once every row of the push that returned `sequence` has left the
  /// buffer (drained by a tick, or dropped by drop_oldest). Any thread.
  bool IsSettled(int64_t sequence) const;
  /// The backpressure limits. Any thread.
  const BufferLimits& limits() const { return buffer_.limits(); }

  Result<std::vector<std::shared_ptr<arrow::RecordBatch>>> Poll() override;
  Result<std::vector<std::shared_ptr<arrow::RecordBatch>>> PollAtMost(
      int64_t max_records) override;
  std::vector<RejectedRecord> TakeRejects() override;
  void SetTargetSchema(const std::shared_ptr<arrow::Schema>& schema) override;
  /// Accept pushes again (after Stop). Engine threads.
  Status Start() override;
  /// Refuse further pushes (Invalid). Engine threads.
  void Stop() override;
  ConnectorStats stats() const override;

  /// The schema the decoder produces now (null before the first push when
  /// inferring). Any thread.
  std::shared_ptr<arrow::Schema> decode_schema() const;

 private:
  JsonStreamConnector(std::string target_table, JsonStreamOptions options,
                      std::unique_ptr<JsonDecoder> decoder);
  /// Buffer `batches`, filling the receipt's accepted/dropped/sequence. Holds mu_.
  Status BufferLocked(const std::vector<std::shared_ptr<arrow::RecordBatch>>& batches,
                      PushReceipt* receipt);

  /// The decoder of `format` (decoder_ for the connector's own). Holds mu_.
  Result<JsonDecoder*> DecoderFor(const PushFormat& format);

  const bool explicit_schema_;
  const JsonDecodeOptions decode_options_;
  const int64_t max_pending_rejects_;
  BoundedBuffer buffer_;
  mutable std::mutex mu_;
  std::unique_ptr<JsonDecoder> decoder_;      // guarded by mu_
  /// Decoders of other push formats.
  std::vector<std::pair<PushFormat, std::unique_ptr<JsonDecoder>>> other_decoders_;  // mu_
  std::vector<RejectedRecord> rejects_;       // guarded by mu_
  ConnectorStats counters_;                   // decode counters, guarded by mu_
  bool stopped_ = false;                      // guarded by mu_
};

/// Add `result`'s rejects (named after `connector`) to `out`, keeping at most
/// `max_pending` (the oldest beyond that are dropped and counted in
/// `*dropped`). Shared by the decoding connectors.
void CollectRejects(const std::string& connector, std::vector<RejectedRecord> rejects,
                    int64_t max_pending, std::vector<RejectedRecord>* out, int64_t* dropped);

}  // namespace rill
