// Private to src/rill/sql: Arrow stream factories that DuckDB scans through
// views, and the table function that scans them.
//
// A ScanSource is what a view points at. DuckDB calls back into it at bind time
// (schema), while optimizing a query (row count, column statistics) and at every
// scan (a fresh stream), so a view always reads the data the source holds at
// scan time. Sources are owned by SqlEngine and must outlive every query that
// may still scan them.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <arrow/type_fwd.h>

#include "rill/common/status.h"
#include "rill/sql/chunk_cache_internal.h"
#include "rill/sql/column_stats_internal.h"

namespace duckdb {
class Connection;
class DatabaseInstance;
}  // namespace duckdb

namespace rill {

class LiveTable;
class TableVersion;

namespace sql_internal {

/// Name of the table function that scans a ScanSource: DuckDB's arrow_scan with
/// projection pushdown (only the referenced columns are exported), without
/// filter pushdown (DuckDB applies every filter itself), plus the row count,
/// the column statistics and the dictionary vectors the source can vouch for.
inline constexpr char kScanFunctionName[] = "rill_arrow_scan";

/// Field metadata key marking a dictionary-encoded string column whose every
/// dictionary comes from a ChunkCache and stays alive while the query runs: the
/// scan then tells DuckDB each dictionary's size and identity (its buffer
/// address), which turns on DuckDB's per-dictionary hashing and caching.
inline constexpr char kCachedDictionaryKey[] = "rill.cached_dictionary";

/// What a view reads. Implementations must be callable from any thread.
class ScanSource {
 public:
  virtual ~ScanSource() = default;
  /// Return the schema of the rows (the view's columns). Must not change.
  virtual std::shared_ptr<arrow::Schema> schema() const = 0;
  /// Return the schema of the streams Open() returns until the source changes:
  /// schema()'s columns and values, with some string columns possibly
  /// dictionary-encoded (and marked with kCachedDictionaryKey).
  virtual std::shared_ptr<arrow::Schema> ScanSchema() const { return schema(); }
  /// Return a reader over the source's current rows with only `columns`
  /// (names of schema() columns, in that order), typed as in ScanSchema().
  virtual Result<std::shared_ptr<arrow::RecordBatchReader>> Open(
      const std::vector<std::string>& columns) const = 0;
  /// Return the number of rows every Open() will read until the source changes,
  /// or nullopt if that is not fixed (DuckDB asks while optimizing a query).
  virtual std::optional<int64_t> FixedNumRows() const { return std::nullopt; }
  /// Return bounds that hold for every value of schema column `column` that
  /// any Open() will read until the source changes, or nullopt if unknown.
  /// DuckDB's optimizer relies on them for correctness: never guess.
  virtual std::optional<ColumnSummary> FixedColumnSummary(int column) const {
    return std::nullopt;
  }
};

/// Reads a live table: the version pinned for the running query, or else the
/// version current when the scan starts.
///
/// While pinned, it reports the pinned version's row count and column
/// summaries, and hands low-cardinality string columns over dictionary-encoded
/// (kCachedDictionaryKey) when every chunk's encoding pays; summaries and
/// encodings come from `cache`, shared by all sources of an engine. Unpinned, it
/// reports nothing and encodes nothing. Without a cache (null) it never reports
/// or encodes anything, pinned or not, so a plan bound over it holds for every
/// later version (prepared statements).
class LiveTableSource : public ScanSource {
 public:
  LiveTableSource(std::shared_ptr<LiveTable> table, std::shared_ptr<ChunkCache> cache);
  ~LiveTableSource() override;
  const std::shared_ptr<LiveTable>& table() const { return table_; }
  std::shared_ptr<arrow::Schema> schema() const override;
  std::shared_ptr<arrow::Schema> ScanSchema() const override;
  Result<std::shared_ptr<arrow::RecordBatchReader>> Open(
      const std::vector<std::string>& columns) const override;
  std::optional<int64_t> FixedNumRows() const override;
  std::optional<ColumnSummary> FixedColumnSummary(int column) const override;
  /// Make every scan read the version current now, until Unpin(). Called by the
  /// thread that runs a query on the connection owning this source, before and
  /// after the query; scans (on DuckDB's threads) may run in between.
  void Pin();
  void Unpin();
  /// Make the source read `rows` instead of the table until called again with
  /// null; `rows` must have schema()'s column names and types (the view's).
  /// SqlEngine::QueryWith shows a query other rows under a registered table's
  /// name this way, without creating and dropping a view per query (DDL that
  /// cost ~2 ms of every StreamSqlTask run). Same threads as Pin().
  void Substitute(std::shared_ptr<ScanSource> rows);
  /// True while the source reads substitute rows (Substitute).
  bool substituted() const { return substitute() != nullptr; }

 private:
  struct ScanPlan;

  // Return the plan of the pinned version (computed on first use), or of the
  // current version without encodings when unpinned.
  std::shared_ptr<const ScanPlan> Plan() const;
  std::shared_ptr<const TableVersion> pinned() const;
  std::shared_ptr<ScanSource> substitute() const;

  std::shared_ptr<LiveTable> table_;
  std::shared_ptr<ChunkCache> cache_;
  mutable std::mutex mu_;
  std::shared_ptr<const TableVersion> pinned_;   // guarded by mu_
  mutable std::shared_ptr<const ScanPlan> plan_;  // guarded by mu_; for pinned_
  std::shared_ptr<ScanSource> substitute_;        // guarded by mu_
};

/// Return a source over a fixed Arrow table (no column summaries, no
/// encodings; its row count if `report_rows`, which a plan kept for other
/// tables must not rely on).
std::shared_ptr<ScanSource> MakeTableSource(std::shared_ptr<arrow::Table> table,
                                            bool report_rows = true);

/// Return a reader over `reader`'s batches with only `columns` (zero copy).
/// KeyError for an unknown column.
Result<std::shared_ptr<arrow::RecordBatchReader>> ProjectReader(
    std::shared_ptr<arrow::RecordBatchReader> reader, const std::vector<std::string>& columns);

/// Register kScanFunctionName in `db`. Call once, before any view is created.
void RegisterScanFunction(duckdb::DatabaseInstance& db);

/// Create (or replace) a view `name` over `source` on `conn`. The caller keeps
/// `source` alive while the view may be scanned. Throws DuckDB exceptions.
void CreateScanView(duckdb::Connection& conn, const std::string& name,
                    const ScanSource& source, bool temporary);

}  // namespace sql_internal
}  // namespace rill
