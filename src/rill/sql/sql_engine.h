// SqlEngine: DuckDB over live tables. The only part of Rill that includes DuckDB.
//
// Each registered LiveTable becomes a DuckDB view backed by `arrow_scan` over a
// stream factory: every scan loads the table's current published version and
// streams its chunks to DuckDB without copying them (chunks with dead rows are
// filtered first). A query therefore sees one consistent version of each table.
//
// Threads: every method may be called from any thread; queries run
// concurrently on per-call connections.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <arrow/type_fwd.h>

#include "rill/common/status.h"

namespace rill {

class LiveTable;

struct SqlOptions {
  /// DuckDB threads for queries (0 = DuckDB's default).
  int threads = 0;
  /// DuckDB memory limit in bytes (0 = DuckDB's default).
  int64_t memory_limit_bytes = 0;
};

/// Owns the in-memory DuckDB database that serves live tables.
class SqlEngine {
 public:
  static Result<std::unique_ptr<SqlEngine>> Make(SqlOptions options = {});
  ~SqlEngine();

  /// Expose `table` as a view named after it (quoted, so any name works).
  /// Replaces an earlier registration of the same name.
  Status RegisterTable(std::shared_ptr<LiveTable> table);
  /// Drop the view. KeyError if unknown.
  Status UnregisterTable(const std::string& name);

  /// Run `sql` and return its result. Invalid with DuckDB's message when the
  /// query fails.
  Result<std::shared_ptr<arrow::Table>> Query(std::string_view sql);

  /// Run `sql` with `params` bound to `$name` placeholders as temporary views:
  /// each (name, table) pair is visible to this query only. Used by tasks that
  /// query a batch that is not a registered table.
  Result<std::shared_ptr<arrow::Table>> QueryWith(
      std::string_view sql,
      const std::vector<std::pair<std::string, std::shared_ptr<arrow::Table>>>& views);

  /// Bytes DuckDB's buffer manager holds.
  int64_t MemoryUsage() const;

 private:
  struct Impl;
  explicit SqlEngine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace rill
