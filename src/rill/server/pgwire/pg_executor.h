// What a pgwire session needs from the engine: run one read-only SQL
// statement against a database, and let a CancelRequest interrupt it.
//
// Threads: Run may be called from any thread, concurrently for different
// sessions. PgQueryControl::Cancel may be called from any thread while Run
// is executing on another.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <arrow/type_fwd.h>

#include "rill/common/status.h"
#include "rill/pipeline/catalog.h"

namespace rill {
class Engine;
class MetricsStore;
}  // namespace rill

namespace rill::pgwire {

/// The database name that selects the metrics database.
constexpr const char* kMetricsDatabase = "rill_metrics";

/// Cancellation of the query a session is running. The executor installs an
/// interrupt hook while a query runs; Cancel() marks the query cancelled and
/// calls the hook under the control's lock (so hooks must only set flags).
class PgQueryControl {
 public:
  /// Mark the running query (if any) cancelled and interrupt it.
  void Cancel();
  /// True once Cancel() was called since the last Reset().
  bool cancelled() const { return cancelled_.load(); }
  /// Clear the cancelled mark (before a new query).
  void Reset() { cancelled_.store(false); }
  /// Install (or clear, with nullptr) the hook Cancel() calls.
  void SetInterrupt(std::function<void()> interrupt);

 private:
  std::atomic<bool> cancelled_{false};
  std::mutex mu_;
  std::function<void()> interrupt_;  // guarded by mu_
};

/// What an executor keeps for one session between its statements (a warm
/// connection, cached plans). Used by that session's thread only.
class PgExecutorSession {
 public:
  virtual ~PgExecutorSession() = default;
};

/// Runs SQL for pgwire sessions.
class PgExecutor {
 public:
  virtual ~PgExecutor() = default;
  /// Return the state a session on `database` keeps (null: none; Run then
  /// gets null). The session destroys it, possibly after this executor.
  virtual std::unique_ptr<PgExecutorSession> OpenSession(const std::string& database) {
    (void)database;
    return nullptr;
  }
  /// As Run, with the session's state from OpenSession (may be null).
  virtual Result<std::shared_ptr<arrow::Table>> RunInSession(PgExecutorSession* session,
                                                             const std::string& database,
                                                             std::string_view sql,
                                                             PgQueryControl* control) {
    (void)session;
    return Run(database, sql, control);
  }
  /// True when `sql` is known to run in microseconds in `session` (it ran
  /// before and its cached plan reads no table), so the session may run it on
  /// the network thread instead of the query pool. The default knows none.
  virtual bool IsCheap(PgExecutorSession* session, const std::string& sql) {
    (void)session;
    (void)sql;
    return false;
  }
  /// Run one read-only statement on `database` (kMetricsDatabase or anything
  /// else for the live tables). Errors keep DuckDB's message; Cancelled when
  /// `control` was cancelled.
  virtual Result<std::shared_ptr<arrow::Table>> Run(const std::string& database,
                                                    std::string_view sql,
                                                    PgQueryControl* control) = 0;
  /// Return the database's type of each parameter ($1 is element 0) of `sql`
  /// as DuckDB names it ("BIGINT", "VARCHAR", ...; "" where it is open),
  /// without running it. The default knows none (every element "").
  virtual Result<std::vector<std::string>> ParameterTypes(const std::string& database,
                                                          std::string_view sql) {
    (void)database;
    (void)sql;
    return std::vector<std::string>{};
  }
  /// Run a CREATE / DROP / SHOW of declared pipelines (the session checked
  /// the credential). Errors carry their SQLSTATE (pipeline::SqlStateOf).
  /// The default refuses (42501).
  virtual Result<pipeline::DdlResult> RunDdl(const pipeline::DdlStatement& statement) {
    (void)statement;
    return pipeline::DeclError(pipeline::kSqlStatePrivilege,
                               "this server does not run DDL statements");
  }
};

/// Statement timeouts of all sessions: one thread that interrupts the
/// queries whose deadline passed (no thread per query).
class PgDeadlines {
 public:
  using Clock = std::chrono::steady_clock;
  ~PgDeadlines();
  /// Call `fire` (under this object's lock: it must only set flags) at `due`
  /// unless Remove(id) comes first. Returns the id.
  uint64_t Add(Clock::time_point due, std::function<void()> fire);
  /// Forget `id`; true when it had fired already. After this returns, its
  /// `fire` is not running and will not run.
  bool Remove(uint64_t id);

 private:
  void Loop();
  std::mutex mu_;
  std::condition_variable cv_;
  std::multimap<Clock::time_point, std::pair<uint64_t, std::function<void()>>> due_;  // mu_
  uint64_t next_id_ = 1;  // guarded by mu_
  bool stop_ = false;     // guarded by mu_
  /// When Loop wakes next by itself (guarded by mu_): Add notifies only for
  /// an earlier deadline.
  Clock::time_point wake_at_ = Clock::time_point::min();
  std::thread thread_;    // started by the first Add
};

/// Executor over an Engine (live tables) and optionally a MetricsStore (the
/// `rill_metrics` database). Both must outlive it.
class EnginePgExecutor : public PgExecutor {
 public:
  /// `metrics` may be null: the metrics database is then unavailable.
  /// Queries (on live tables and on the metrics database) running longer
  /// than `query_timeout_ms` (0 = no limit) are interrupted and fail with
  /// Cancelled (SQLSTATE 57014).
  EnginePgExecutor(Engine* engine, MetricsStore* metrics, int64_t query_timeout_ms = 0);
  /// Install the catalog compatibility macros (pg_catalog.h) in the engine's
  /// DuckDB. Call once before serving.
  Status Init();
  Result<std::shared_ptr<arrow::Table>> Run(const std::string& database, std::string_view sql,
                                            PgQueryControl* control) override;
  /// On the live tables: a SqlSession (sql/sql_session.h) per session, so
  /// its statements run on one warm connection and its SELECTs of constants
  /// from cached plans. The metrics database has none.
  std::unique_ptr<PgExecutorSession> OpenSession(const std::string& database) override;
  Result<std::shared_ptr<arrow::Table>> RunInSession(PgExecutorSession* session,
                                                     const std::string& database,
                                                     std::string_view sql,
                                                     PgQueryControl* control) override;
  bool IsCheap(PgExecutorSession* session, const std::string& sql) override;
  Result<std::vector<std::string>> ParameterTypes(const std::string& database,
                                                  std::string_view sql) override;
  /// Through the engine's catalog (pipeline/catalog.h), pg_ddl.cc.
  Result<pipeline::DdlResult> RunDdl(const pipeline::DdlStatement& statement) override;

 private:
  Engine* engine_;
  MetricsStore* metrics_;
  int64_t query_timeout_ms_;
  PgDeadlines deadlines_;
};

}  // namespace rill::pgwire
