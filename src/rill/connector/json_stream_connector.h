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

  Result<std::vector<std::shared_ptr<arrow::RecordBatch>>> Poll() override;
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

  const bool explicit_schema_;
  const int64_t max_pending_rejects_;
  BoundedBuffer buffer_;
  mutable std::mutex mu_;
  std::unique_ptr<JsonDecoder> decoder_;      // guarded by mu_
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
