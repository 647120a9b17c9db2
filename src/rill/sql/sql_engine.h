// SqlEngine: DuckDB over live tables. The only part of Rill that includes DuckDB.
//
// Each registered LiveTable becomes a DuckDB view backed by `arrow_scan` over a
// stream factory: every scan loads the table's current published version and
// streams its chunks to DuckDB without copying them (chunks with dead rows are
// filtered first). A query therefore sees one consistent version of each table.
// As for its own tables, DuckDB gets the row count and column statistics of
// that version, and low-cardinality string columns as dictionaries; the engine
// computes both once per chunk and keeps them while the chunk lives (the
// encodings, 2 bytes per row of each such column, count as Arrow memory).
//
// Query and QueryWith run only read statements (SELECT, EXPLAIN): they cannot
// drop or replace the registered views or change DuckDB's settings.
//
// Threads: every method may be called from any thread; queries run
// concurrently, each on its own pooled connection.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <arrow/status.h>
#include <arrow/type_fwd.h>

#include "rill/common/status.h"
#include "rill/sql/query_interrupt.h"

namespace rill {

class LiveTable;
class SqlResultStream;

struct SqlOptions {
  /// DuckDB threads for queries (0 = DuckDB's default).
  int threads = 0;
  /// DuckDB memory limit in bytes (0 = DuckDB's default).
  int64_t memory_limit_bytes = 0;
  /// Let SQL read and write files and URLs (read_csv, COPY, ATTACH, ...). Off by
  /// default: remote SQL must not touch the file system. Views over live tables
  /// work either way.
  bool enable_external_access = false;
  /// Forbid changing DuckDB settings after start (`SET ...` fails).
  bool lock_configuration = true;
};

/// Attached to the Status of a query DuckDB refused: DuckDB's error class, so
/// callers can tell a missing table ("Catalog") from a syntax error ("Parser")
/// or a type error ("Binder") without parsing the message.
class SqlErrorDetail : public arrow::StatusDetail {
 public:
  explicit SqlErrorDetail(std::string error_type) : error_type_(std::move(error_type)) {}
  static constexpr const char* kTypeId = "rill::SqlErrorDetail";
  const char* type_id() const override { return kTypeId; }
  std::string ToString() const override { return error_type_ + " Error"; }
  /// DuckDB's name of the class: "Catalog", "Parser", "Binder", "Conversion",
  /// "Invalid Input", "Out of Range", "Constraint", "Interrupt", ...
  const std::string& error_type() const { return error_type_; }

 private:
  std::string error_type_;
};

/// Return DuckDB's error class carried by `status` (see SqlErrorDetail), or ""
/// when it carries none.
std::string SqlErrorType(const Status& status);

/// Return `name` as a double-quoted SQL identifier (inner quotes doubled), so
/// any table or column name can be used in generated SQL.
std::string QuoteIdentifier(std::string_view name);


/// Owns the in-memory DuckDB database that serves live tables.
class SqlEngine {
 public:
  static Result<std::unique_ptr<SqlEngine>> Make(SqlOptions options = {});
  ~SqlEngine();

  /// Expose `table` as a view named after it (quoted, so any name works). Every
  /// scan of the view reads the table's version current at that moment.
  /// Replaces an earlier registration of the same name. The engine keeps
  /// `table` alive until it is unregistered and no query uses it.
  Status RegisterTable(std::shared_ptr<LiveTable> table);
  /// Drop the view. KeyError if unknown.
  Status UnregisterTable(const std::string& name);

  /// Run `sql` (one SELECT or EXPLAIN statement) and return its result.
  /// Invalid with DuckDB's message and the query text when the query fails or is
  /// not a read statement. Every table is read at one version for the whole
  /// query.
  Result<std::shared_ptr<arrow::Table>> Query(std::string_view sql);
  /// As Query, but `interrupt` (may be null) can stop the query from another
  /// thread: the query then fails with Cancelled. Already interrupted: fails
  /// at once.
  Result<std::shared_ptr<arrow::Table>> Query(std::string_view sql,
                                              QueryInterrupt* interrupt);

  /// As Query, but the result is read batch by batch as DuckDB produces it
  /// (a streaming result: DuckDB runs the query as the batches are read), so a
  /// large result never sits in memory whole. Binding and planning errors are
  /// returned here; errors while running come from SqlResultStream::Next.
  /// `interrupt` (may be null) stops the query from another thread while the
  /// stream lives (Next then fails with Cancelled); it must outlive the
  /// stream. The stream holds a pooled connection and the versions of the
  /// tables it reads until destroyed; this SqlEngine must outlive it.
  Result<std::unique_ptr<SqlResultStream>> QueryStream(std::string_view sql,
                                                       QueryInterrupt* interrupt,
                                                       int64_t batch_rows = 8192);

  /// As Query, through a prepared statement kept for this SQL text: the first
  /// call parses, binds and plans `sql` on a connection reserved for it, later
  /// calls only execute the plan (it is prepared again after a table was
  /// registered or dropped, since the views it binds changed). Each execution
  /// reads the current version of every table, like Query. Calls with the
  /// same text are serialized. At most 64 statements are kept (the least
  /// recently used goes first); ForgetPrepared drops one.
  Result<std::shared_ptr<arrow::Table>> QueryPrepared(const std::string& sql);
  /// Drop the prepared statement of `sql`, if any (and its connection).
  void ForgetPrepared(const std::string& sql);

  /// Run `sql` with each (name, table) pair of `views` exposed as a temporary
  /// view called `name`, visible to this query only (it hides a registered
  /// table of the same name). The tables are scanned without copying. Used by
  /// tasks that query a batch that is not a registered table. A table with
  /// exactly the columns (names, types) of the registered table it hides is
  /// read through that table's own view instead of a new one, which saves
  /// creating and dropping a view (about 2 ms) per call (StreamSqlTask's new
  /// rows).
  Result<std::shared_ptr<arrow::Table>> QueryWith(
      std::string_view sql,
      const std::vector<std::pair<std::string, std::shared_ptr<arrow::Table>>>& views);

  /// As QueryWith for `views` that each hide a registered table with exactly
  /// their columns (StreamSqlTask's new rows), through a statement prepared
  /// once and kept for this SQL text and these view names, as QueryPrepared
  /// keeps one: later calls only execute the plan over the new rows (no
  /// parsing, binding or planning). The plan is made without the views' row
  /// counts, so it holds for every later call. The result is built as Arrow
  /// while DuckDB produces it (no intermediate copy), and a fixed-width result
  /// column whose values are those of a view's column (projected, not
  /// computed) shares that column's buffers instead of copying them: the
  /// result holds `views`' buffers alive, and Arrow data is never modified.
  /// Falls back to QueryWith when a view does not hide a registered table of
  /// the same columns, or the statement reads other tables too (then each
  /// run is planned with their current row counts and statistics, as join
  /// orders need). Calls with the same text and views are serialized; the
  /// entries count towards QueryPrepared's 64.
  Result<std::shared_ptr<arrow::Table>> QueryPreparedWith(
      const std::string& sql,
      const std::vector<std::pair<std::string, std::shared_ptr<arrow::Table>>>& views);

  /// Run DDL that defines shared helper objects (CREATE SCHEMA, CREATE [OR
  /// REPLACE] VIEW, CREATE [OR REPLACE] MACRO), visible to the queries of
  /// every connection; views and macros see each connection's live tables.
  /// Used by the pgwire catalog layer. Invalid (nothing run) for any other
  /// statement, with DuckDB's message when one fails.
  Status DefineHelpers(const std::vector<std::string>& statements);

  /// Return the full schema (system columns included) of a registered table.
  /// KeyError if unknown.
  Result<std::shared_ptr<arrow::Schema>> TableSchema(const std::string& name) const;

  /// Return the names of the registered tables, sorted.
  std::vector<std::string> TableNames() const;
  /// The registered table `name`, or null.
  std::shared_ptr<LiveTable> RegisteredTable(const std::string& name) const;

  /// How many statements were point queries of a keyed table (a SELECT whose
  /// WHERE clause pins the primary key to constants), read through the key
  /// index instead of a scan: `looked_up` all of them, `answered` those that
  /// were plain projections, answered without DuckDB.
  struct PointLookupCounts {
    int64_t looked_up = 0;
    int64_t answered = 0;
  };
  PointLookupCounts point_lookups() const;

  /// Bytes DuckDB's buffer manager holds.
  int64_t MemoryUsage() const;

  /// Return the type DuckDB binds for each parameter ($1 is element 0) of
  /// `sql` (one read statement), as DuckDB names it ("BIGINT",
  /// "DECIMAL(18,3)", "VARCHAR", "TIMESTAMP"); "" where DuckDB leaves it open
  /// (`SELECT $1`). Prepares the statement without running it. Invalid as
  /// Query for statements that fail to prepare or do not only read. Any thread.
  Result<std::vector<std::string>> ParameterTypes(std::string_view sql);

  /// Set DuckDB's memory limit (bytes > 0) for everything this database runs:
  /// a query that needs more fails with DuckDB's "Out of Memory Error" and
  /// later queries run normally. Invalid when DuckDB cannot shrink to it now.
  /// Any thread.
  Status SetMemoryLimit(int64_t bytes);
  /// DuckDB's memory limit in bytes.
  int64_t MemoryLimit() const;
  /// Set the number of threads DuckDB runs queries on (>= 1; the calling
  /// thread counts as one), as `SET threads = n` would on a database whose
  /// configuration is not locked. Any thread.
  Status SetThreads(int threads);
  /// DuckDB's number of threads.
  int Threads() const;

 private:
  friend struct SqlEngineAccess;  // sql/ internals (ivm_plan.cc): a pooled connection
  friend class SqlSession;        // sql_session.h: a connection kept for one client
  struct Impl;
  explicit SqlEngine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// The result of SqlEngine::QueryStream, read one batch at a time. Any one
/// thread at a time (not thread-safe); may move between threads between calls.
class SqlResultStream {
 public:
  struct State;
  explicit SqlResultStream(std::unique_ptr<State> state);
  /// Release the DuckDB result, the table versions and the connection.
  ~SqlResultStream();
  SqlResultStream(const SqlResultStream&) = delete;
  SqlResultStream& operator=(const SqlResultStream&) = delete;

  /// The schema of every batch.
  const std::shared_ptr<arrow::Schema>& schema() const;
  /// Return the next batch (at most batch_rows rows), or null after the last.
  /// Invalid with DuckDB's message when the query fails while running;
  /// Cancelled when it was interrupted.
  Result<std::shared_ptr<arrow::RecordBatch>> Next();

 private:
  std::unique_ptr<State> state_;
};

}  // namespace rill
