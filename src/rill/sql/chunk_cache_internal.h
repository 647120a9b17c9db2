// Private to src/rill/sql: what the scan derives from live-table chunks once
// and reuses for every query, keyed by chunk.
//
// A chunk (an immutable record batch of a TableVersion) never changes once
// published, so its column summaries (for DuckDB statistics) and dictionary
// encodings (for DuckDB dictionary vectors) are computed on the first query
// that needs them and kept while the chunk lives.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include <arrow/type_fwd.h>

#include "rill/sql/column_stats_internal.h"

namespace rill::sql_internal {

/// Per-chunk, per-column summaries and dictionary encodings.
///
/// The cache holds only weak references to chunks: it never keeps a batch
/// alive. It does own the encodings (allocated from TableMemoryPool(), so they
/// count as Arrow memory); the entries of destroyed batches, encodings
/// included, are swept out whenever the cache meets a batch it has not seen.
/// While a batch lives, every call returns the same encoding object for a
/// column, so equal dictionary buffers mean equal dictionaries.
///
/// Threads: any thread may call any method.
class ChunkCache {
 public:
  /// Return the summary of column `column` of `batch` (see SummarizeArray).
  /// `batch` must never be modified once passed here.
  std::optional<ColumnSummary> Summary(const std::shared_ptr<arrow::RecordBatch>& batch,
                                       int column);
  /// Return column `column` of `batch` dictionary-encoded (see
  /// EncodeStringDictionary), or nullptr when it is not a string column or
  /// encoding does not pay. `batch` must never be modified once passed here.
  std::shared_ptr<arrow::Array> Dictionary(const std::shared_ptr<arrow::RecordBatch>& batch,
                                           int column);
  /// Return the number of cached batches (live or not yet swept).
  size_t size() const;
  /// Remove the entries of destroyed batches now.
  void Prune();

 private:
  struct Column {
    bool summarized = false;
    std::optional<ColumnSummary> summary;
    bool encoded = false;  // `dictionary` is known (it may be null)
    std::shared_ptr<arrow::Array> dictionary;
  };
  struct Entry {
    std::weak_ptr<arrow::RecordBatch> batch;
    std::vector<Column> columns;
  };

  // Return the entry of `batch`, creating it (and sweeping) if needed.
  Entry& EntryLocked(const std::shared_ptr<arrow::RecordBatch>& batch);
  void PruneLocked();

  mutable std::mutex mu_;
  // Keyed by address; an entry is valid only while its weak_ptr still owns the
  // batch (a destroyed batch's address may be reused by a new one).
  std::unordered_map<const arrow::RecordBatch*, Entry> entries_;  // guarded by mu_
};

}  // namespace rill::sql_internal
