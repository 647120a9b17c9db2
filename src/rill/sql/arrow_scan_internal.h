// Private to src/rill/sql: Arrow stream factories that DuckDB scans through
// views, and the table function that scans them.
//
// A ScanSource is what a view points at. DuckDB calls back into it at bind time
// (schema) and at every scan (a fresh stream), so a view always reads the data
// the source holds at scan time. Sources are owned by SqlEngine and must outlive
// every query that may still scan them.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include <arrow/type_fwd.h>

#include "rill/common/status.h"

namespace duckdb {
class Connection;
class DatabaseInstance;
}  // namespace duckdb

namespace rill {

class LiveTable;
class TableVersion;

namespace sql_internal {

/// Name of the table function that scans a ScanSource: DuckDB's arrow_scan with
/// projection pushdown (only the referenced columns are exported) and without
/// filter pushdown (DuckDB applies every filter itself).
inline constexpr char kScanFunctionName[] = "rill_arrow_scan";

/// What a view reads. Implementations must be callable from any thread.
class ScanSource {
 public:
  virtual ~ScanSource() = default;
  /// Return the schema every stream of this source has. Must not change.
  virtual std::shared_ptr<arrow::Schema> schema() const = 0;
  /// Return a reader over the source's current rows.
  virtual Result<std::shared_ptr<arrow::RecordBatchReader>> Open() const = 0;
};

/// Reads a live table: the version pinned for the running query, or else the
/// version current when the scan starts.
class LiveTableSource : public ScanSource {
 public:
  explicit LiveTableSource(std::shared_ptr<LiveTable> table);
  ~LiveTableSource() override;
  const std::shared_ptr<LiveTable>& table() const { return table_; }
  std::shared_ptr<arrow::Schema> schema() const override;
  Result<std::shared_ptr<arrow::RecordBatchReader>> Open() const override;
  /// Make every scan read the version current now, until Unpin(). Called by the
  /// thread that runs a query on the connection owning this source, before and
  /// after the query; scans (on DuckDB's threads) may run in between.
  void Pin();
  void Unpin();

 private:
  std::shared_ptr<LiveTable> table_;
  mutable std::mutex mu_;
  std::shared_ptr<const TableVersion> pinned_;  // guarded by mu_
};

/// Return a source over a fixed Arrow table.
std::shared_ptr<ScanSource> MakeTableSource(std::shared_ptr<arrow::Table> table);

/// Register kScanFunctionName in `db`. Call once, before any view is created.
void RegisterScanFunction(duckdb::DatabaseInstance& db);

/// Create (or replace) a view `name` over `source` on `conn`. The caller keeps
/// `source` alive while the view may be scanned. Throws DuckDB exceptions.
void CreateScanView(duckdb::Connection& conn, const std::string& name,
                    const ScanSource& source, bool temporary);

}  // namespace sql_internal
}  // namespace rill
