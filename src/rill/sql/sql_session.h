// SqlSession: one client's DuckDB connection (a pgwire session's), kept warm
// between its statements instead of leased from SqlEngine's pool for each.
//
// Statements that read no table (a SELECT of constants and functions, as
// drivers and health checks send) are prepared once per statement text and
// later run from the cached plan: no parsing, binding or planning. Such a
// plan is a projection of one row, so it is cheap by construction and valid
// for every version of every table; HasConstantPlan tells callers (the
// pgwire io thread) that running it takes microseconds. These plans live in
// a second, single-threaded DuckDB database of the engine (same options,
// memory limit and DefineHelpers objects, no tables), so they run on the
// calling thread without waking the task scheduler's workers (a statement that
// reads a setting, whose values differ there, runs the ordinary way). A plan
// whose every expression DuckDB folded to a constant (`SELECT 42, 'x'`; not
// `SELECT random()` or `now()`) gives the same rows every time: its first
// result is kept and shared (results are immutable). Every other
// statement runs as SqlEngine::Query runs it (one pinned version per table,
// the views' statistics and encodings), on the session's connection.
//
// Threads: a session is used by one thread at a time (its statements run one
// after the other, possibly on different threads). The QueryInterrupt given
// to Query may be interrupted from any thread. The SqlEngine must outlive it.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include <arrow/type_fwd.h>

#include "rill/common/status.h"
#include "rill/sql/query_interrupt.h"

namespace rill {

class SqlEngine;

class SqlSession {
 public:
  /// Plans kept per session (the least recently used goes first).
  static constexpr size_t kMaxPlans = 64;

  /// A session over `engine`. The connection opens with the first query.
  explicit SqlSession(SqlEngine* engine);
  ~SqlSession();
  SqlSession(const SqlSession&) = delete;
  SqlSession& operator=(const SqlSession&) = delete;

  /// Run `sql` (one SELECT or EXPLAIN) with SqlEngine::Query's semantics and
  /// errors. `interrupt` (may be null) stops it from another thread
  /// (Cancelled).
  Result<std::shared_ptr<arrow::Table>> Query(const std::string& sql,
                                              QueryInterrupt* interrupt);

  /// True when `sql` ran before and has a cached plan that reads no table.
  bool HasConstantPlan(const std::string& sql) const;
  /// Statements with a cached plan.
  size_t cached_plans() const;

  struct State;  // sql_engine.cc

 private:
  std::unique_ptr<State> state_;
};

}  // namespace rill
