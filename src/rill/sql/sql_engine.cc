// SqlEngine: a pool of DuckDB connections, each holding one temporary view per
// registered table.
//
// Why per-connection views: DuckDB's arrow_scan tells the stream factory nothing
// about the query that scans it, so a view shared by all connections cannot
// know which version a query should see. Giving every connection its own
// LiveTableSource per table lets a query pin the current version of every table
// before it starts; all scans of that query (self-joins included) then read the
// same version, while the next query sees newer data. A connection is used by
// one thread at a time, so its sources are never pinned by two queries at once.
//
// Views are kept in step with the registry lazily: the registry has a
// generation number and a connection re-syncs its views when it is leased or
// returned with an older generation. Idle connections are synced eagerly on
// (un)registration so they do not keep dropped tables alive.
#include "rill/sql/sql_engine.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <unordered_map>

#include <arrow/record_batch.h>
#include <arrow/table.h>

#include <duckdb.hpp>
#include <duckdb/common/arrow/result_arrow_wrapper.hpp>
#include <duckdb/execution/operator/helper/physical_result_collector.hpp>
#include <duckdb/execution/operator/projection/physical_projection.hpp>
#include <duckdb/execution/physical_operator.hpp>
#include <duckdb/execution/physical_plan_generator.hpp>
#include <duckdb/main/prepared_statement_data.hpp>
#include <duckdb/parallel/task_scheduler.hpp>
#include <duckdb/parser/query_node/select_node.hpp>
#include <duckdb/parser/statement/select_statement.hpp>
#include <duckdb/storage/buffer_manager.hpp>
#include <arrow/c/bridge.h>

#include "rill/sql/arrow_collector_internal.h"
#include "rill/sql/arrow_scan_internal.h"
#include "rill/sql/point_lookup_internal.h"
#include "rill/sql/sql_engine_access_internal.h"
#include "rill/sql/duckdb_result.h"
#include "rill/sql/query_interrupt.h"
#include "rill/sql/sql_session.h"
#include "rill/table/live_table.h"
#include "rill/table/schema.h"

namespace rill {
namespace {

using sql_internal::CreateScanView;
using sql_internal::LiveTableSource;

constexpr size_t kMaxIdleConnections = 8;
constexpr size_t kMaxPreparedStatements = 64;
// DuckDB 1.4 allocates each execution's result collector in the prepared
// plan's arena, freed only with the plan: a statement is prepared again after
// this many executions, so a task running every tick does not grow without
// bound (a few hundred bytes per execution; one prepare per 1,000 runs is
// about 0.1% of the runs' time).
constexpr uint64_t kMaxExecutionsPerPrepare = 1000;
// Rows per batch of a QueryPreparedWith result (about: a batch ends at the
// first DuckDB chunk that reaches it), as ResultToArrowTable's default.
constexpr int64_t kCollectedBatchRows = 128 * 1024;

std::string ErrorMessage(const std::exception& e) { return duckdb::ErrorData(e).Message(); }

Status QueryError(const std::string& message, std::string_view sql) {
  return Status::Invalid(message, " [query: ", sql, "]");
}

// As QueryError, carrying DuckDB's error class.
Status DuckError(const std::string& message, duckdb::ExceptionType type, std::string_view sql) {
  return QueryError(message, sql).WithDetail(
      std::make_shared<SqlErrorDetail>(duckdb::Exception::ExceptionTypeToString(type)));
}

// A materialized DuckDB result as an Arrow table, or its error.
Result<std::shared_ptr<arrow::Table>> ArrowOrError(duckdb::unique_ptr<duckdb::QueryResult> result,
                                                   std::string_view sql) {
  if (result->HasError()) {
    return DuckError(result->GetError(), result->GetErrorType(), sql);
  }
  auto table = ResultToArrowTable(std::move(result));
  if (!table.ok()) {
    return QueryError(table.status().message(), sql);
  }
  return table;
}

std::string DropTempViewSql(const std::string& name) {
  return "DROP VIEW IF EXISTS temp.main." + QuoteIdentifier(name);
}

struct PooledConnection {
  std::unique_ptr<duckdb::Connection> conn;
  // Views without row counts, statistics or encodings, so plans prepared on this
  // connection stay valid for every version (prepared statements only).
  bool plain = false;
  uint64_t generation = 0;  // registry generation `views` matches; 0 = unknown
  std::map<std::string, std::shared_ptr<LiveTableSource>> views;
};

// A statement prepared once and executed many times, on a connection of its own
// (DuckDB prepared statements belong to the connection that prepared them).
struct PreparedEntry {
  std::mutex mu;  // serializes executions; guards everything below
  std::unique_ptr<PooledConnection> pc;
  duckdb::unique_ptr<duckdb::PreparedStatement> statement;
  uint64_t prepared_generation = 0;  // pc->generation when `statement` was prepared
  uint64_t executions = 0;           // of `statement`
  uint64_t last_used = 0;            // guarded by SqlEngine::Impl::mu; for eviction
  // QueryPreparedWith only: the generation (of pc) for which the statement was
  // found to read tables other than the substituted views (0: not found so),
  // and the buffers of the running execution's substituted rows (read by the
  // connection's result collector hook; null outside the execution).
  uint64_t reads_other_tables_generation = 0;
  std::shared_ptr<const sql_internal::SharedInputBuffers> shared_inputs;
};

// Shows each of a query's views its substitute rows (LiveTableSource::
// Substitute) until destroyed, however the query ends.
class SubstituteGuard {
 public:
  void Add(const std::shared_ptr<LiveTableSource>& view,
           std::shared_ptr<sql_internal::ScanSource> rows) {
    view->Substitute(std::move(rows));
    views_.push_back(view);
  }
  ~SubstituteGuard() {
    for (const auto& view : views_) view->Substitute(nullptr);
  }

 private:
  std::vector<std::shared_ptr<LiveTableSource>> views_;
};

// The live SqlSessions of an engine, so (un)registration can sync their
// connections (an idle session must not keep a dropped table alive). Shared
// with the sessions: a session may outlive its engine's last call.
struct SessionRegistry {
  std::mutex mu;
  std::set<SqlSession::State*> sessions;  // guarded by mu
};

// Unpins the sources of a connection when a query ends, however it ends.
class PinGuard {
 public:
  explicit PinGuard(PooledConnection& pc) : pc_(pc) {
    for (auto& [name, source] : pc_.views) {
      source->Pin();
    }
  }
  ~PinGuard() {
    for (auto& [name, source] : pc_.views) {
      source->Unpin();
    }
  }
  PinGuard(const PinGuard&) = delete;
  PinGuard& operator=(const PinGuard&) = delete;

 private:
  PooledConnection& pc_;
};

}  // namespace

std::string SqlErrorType(const Status& status) {
  const auto& detail = status.detail();
  if (detail == nullptr || std::string_view(detail->type_id()) != SqlErrorDetail::kTypeId) {
    return "";
  }
  return static_cast<const SqlErrorDetail&>(*detail).error_type();
}

std::string QuoteIdentifier(std::string_view name) {
  std::string out;
  out.reserve(name.size() + 2);
  out.push_back('"');
  for (char c : name) {
    if (c == '"') {
      out.push_back('"');
    }
    out.push_back(c);
  }
  out.push_back('"');
  return out;
}

struct SqlEngine::Impl {
  std::unique_ptr<duckdb::DuckDB> db;  // declared first: destroyed last
  // Column summaries and dictionary encodings of the chunks of all registered
  // tables, shared by every connection's sources (the chunks are the same
  // whichever connection scans them).
  const std::shared_ptr<sql_internal::ChunkCache> chunk_cache =
      std::make_shared<sql_internal::ChunkCache>();

  mutable std::mutex mu;
  std::map<std::string, std::shared_ptr<LiveTable>> tables;  // guarded by mu
  uint64_t generation = 1;                                   // guarded by mu
  std::vector<std::unique_ptr<PooledConnection>> idle;       // guarded by mu
  // Prepared statements by SQL text, guarded by mu (each entry has its own lock).
  std::map<std::string, std::shared_ptr<PreparedEntry>> prepared;
  uint64_t prepared_clock = 0;  // guarded by mu
  const std::shared_ptr<SessionRegistry> sessions = std::make_shared<SessionRegistry>();
  // The database of the sessions' constant plans (ConstantDatabase), made
  // with the first one; `options` are the main database's.
  SqlOptions options;
  std::mutex constant_mu;
  std::shared_ptr<duckdb::DuckDB> constant_db;        // guarded by constant_mu
  std::vector<std::string> helpers;                   // DefineHelpers' statements, constant_mu
  // point_lookups(); relaxed: counters read by tests and metrics only.
  std::atomic<int64_t> point_lookups{0};
  std::atomic<int64_t> point_answers{0};

  // Bring the views of `pc` in line with the registry. On error the connection
  // must be discarded.
  Status Sync(PooledConnection& pc) {
    std::map<std::string, std::shared_ptr<LiveTable>> wanted;
    uint64_t gen;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (pc.generation == generation) {
        return Status::OK();
      }
      wanted = tables;
      gen = generation;
    }
    try {
      for (auto it = pc.views.begin(); it != pc.views.end();) {
        if (wanted.count(it->first) == 0) {
          auto result = pc.conn->Query(DropTempViewSql(it->first));
          if (result->HasError()) {
            return Status::Invalid(result->GetError());
          }
          it = pc.views.erase(it);
        } else {
          ++it;
        }
      }
      for (auto& [name, table] : wanted) {
        auto it = pc.views.find(name);
        if (it != pc.views.end() && it->second->table() == table) {
          continue;
        }
        auto source = std::make_shared<LiveTableSource>(table, pc.plain ? nullptr : chunk_cache);
        CreateScanView(*pc.conn, name, *source, /*temporary=*/true);
        pc.views[name] = std::move(source);
      }
    } catch (const std::exception& e) {
      return Status::Invalid(ErrorMessage(e));
    }
    pc.generation = gen;
    return Status::OK();
  }

  Result<std::unique_ptr<PooledConnection>> Acquire() {
    std::unique_ptr<PooledConnection> pc;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!idle.empty()) {
        pc = std::move(idle.back());
        idle.pop_back();
      }
    }
    if (pc == nullptr) {
      pc = std::make_unique<PooledConnection>();
      try {
        pc->conn = std::make_unique<duckdb::Connection>(*db);
      } catch (const std::exception& e) {
        return Status::Invalid("cannot open a DuckDB connection: ", ErrorMessage(e));
      }
    }
    RILL_RETURN_NOT_OK(Sync(*pc));
    return pc;
  }

  // Return `pc` to the pool (synced, so it holds no dropped table), or drop it.
  void Release(std::unique_ptr<PooledConnection> pc) {
    if (pc == nullptr || !Sync(*pc).ok()) {
      return;
    }
    std::lock_guard<std::mutex> lock(mu);
    if (idle.size() < kMaxIdleConnections) {
      idle.push_back(std::move(pc));
    }
  }

  // A second, single-threaded database for the constant plans of SqlSessions
  // (plans that read no table): they run on the calling thread and never wake
  // the main database's task scheduler. Made on first use, with the main
  // database's options and memory limit and the statements of DefineHelpers
  // (macros a constant query may call).
  Result<duckdb::DuckDB*> ConstantDatabase();

  // Sync the connections of the idle SqlSessions now (after a registry change);
  // a session running a query syncs before its next one.
  void SyncSessions();

  // Sync every idle connection now (after a registry change).
  void SyncIdle() {
    std::vector<std::unique_ptr<PooledConnection>> taken;
    {
      std::lock_guard<std::mutex> lock(mu);
      taken.swap(idle);
    }
    for (auto& pc : taken) {
      Release(std::move(pc));
    }
  }

  Result<std::shared_ptr<arrow::Table>> Run(PooledConnection& pc, std::string_view sql,
                                            QueryInterrupt* interrupt = nullptr) {
    if (interrupt == nullptr) {
      return RunStatement(pc, sql);
    }
    if (interrupt->interrupted()) {
      return Status::Cancelled("query interrupted before it started");
    }
    duckdb::Connection* conn = pc.conn.get();
    interrupt->Attach([conn] { conn->Interrupt(); });
    auto result = RunStatement(pc, sql);
    interrupt->Detach();
    if (interrupt->interrupted() && !result.ok()) {
      return Status::Cancelled("query interrupted: ", result.status().message());
    }
    return result;
  }

  // The prepared entry of `sql`, created (empty) on first use. Evicts the
  // least recently used entry beyond kMaxPreparedStatements.
  std::shared_ptr<PreparedEntry> PreparedFor(const std::string& sql) {
    std::shared_ptr<PreparedEntry> evicted;  // destroyed outside the lock
    std::lock_guard<std::mutex> lock(mu);
    auto& entry = prepared[sql];
    if (entry == nullptr) {
      entry = std::make_shared<PreparedEntry>();
      if (prepared.size() > kMaxPreparedStatements) {
        auto oldest = prepared.end();
        for (auto it = prepared.begin(); it != prepared.end(); ++it) {
          if (it->second != entry &&
              (oldest == prepared.end() || it->second->last_used < oldest->second->last_used)) {
            oldest = it;
          }
        }
        evicted = std::move(oldest->second);
        prepared.erase(oldest);
      }
    }
    entry->last_used = ++prepared_clock;
    return entry;
  }

  // Give `entry` a connection of its own if it has none, never pooled: its
  // views are plain (see PooledConnection::plain), since the plan outlives the
  // version it was bound on and must not rely on that version's statistics or
  // encodings. Entry locked.
  Status OpenPreparedConnection(PreparedEntry& entry) {
    if (entry.pc != nullptr) return Status::OK();
    auto pc = std::make_unique<PooledConnection>();
    pc->plain = true;
    try {
      pc->conn = std::make_unique<duckdb::Connection>(*db);
    } catch (const std::exception& e) {
      return Status::Invalid("cannot open a DuckDB connection: ", ErrorMessage(e));
    }
    entry.pc = std::move(pc);
    return Status::OK();
  }

  // Whether `entry` must (re)prepare its statement: none yet, the connection's
  // views changed, or kMaxExecutionsPerPrepare runs (DuckDB 1.4 keeps each
  // run's result collector in the plan until the plan goes).
  static bool MustPrepare(const PreparedEntry& entry, const PooledConnection& pc) {
    return entry.statement == nullptr || entry.prepared_generation != pc.generation ||
           entry.executions >= kMaxExecutionsPerPrepare;
  }

  // The one statement of `sql`, parsed on `pc`; refused unless it only reads.
  static Result<duckdb::unique_ptr<duckdb::SQLStatement>> OneReadStatement(
      PooledConnection& pc, const std::string& sql) {
    auto statements = pc.conn->ExtractStatements(sql);
    if (statements.size() != 1) {
      return QueryError("expected exactly one SQL statement, got " +
                            std::to_string(statements.size()),
                        sql);
    }
    if (!IsReadStatement(*statements[0])) {
      return QueryError("only SELECT and EXPLAIN statements may run on live tables", sql);
    }
    return std::move(statements[0]);
  }

  // Prepare `statement` on `pc` and keep it in `entry`.
  static Status PrepareInto(PreparedEntry& entry, PooledConnection& pc,
                            duckdb::unique_ptr<duckdb::SQLStatement> statement,
                            const std::string& sql) {
    auto prepared = pc.conn->Prepare(std::move(statement));
    if (prepared->HasError()) {
      return DuckError(prepared->GetError(), prepared->error.Type(), sql);
    }
    entry.statement = std::move(prepared);
    entry.prepared_generation = pc.generation;
    return Status::OK();
  }

  // Prepare (or re-prepare, after the views changed) and execute. Entry locked.
  Result<std::shared_ptr<arrow::Table>> ExecutePrepared(PreparedEntry& entry,
                                                        const std::string& sql) {
    RILL_RETURN_NOT_OK(OpenPreparedConnection(entry));
    RILL_RETURN_NOT_OK(Sync(*entry.pc));
    PooledConnection& pc = *entry.pc;
    try {
      if (MustPrepare(entry, pc)) {
        entry.statement.reset();
        entry.executions = 0;
        RILL_ASSIGN_OR_RAISE(auto statement, OneReadStatement(pc, sql));
        RILL_RETURN_NOT_OK(PrepareInto(entry, pc, std::move(statement), sql));
      }
      PinGuard pins(pc);
      duckdb::vector<duckdb::Value> no_parameters;
      ++entry.executions;
      auto result = entry.statement->Execute(no_parameters, /*allow_stream_result=*/false);
      return ArrowOrError(std::move(result), sql);
    } catch (const std::exception& e) {
      duckdb::ErrorData error(e);
      return DuckError(error.Message(), error.Type(), sql);
    }
  }

  // QueryPreparedWith's execution. Sets *substituted to false (and runs
  // nothing) when a view is not a registered table of the same columns, or the
  // statement reads other tables too. Entry locked.
  Result<std::shared_ptr<arrow::Table>> ExecutePreparedWith(
      PreparedEntry& entry, const std::string& sql,
      const std::vector<std::pair<std::string, std::shared_ptr<arrow::Table>>>& views,
      bool* substituted) {
    *substituted = false;
    const bool new_connection = entry.pc == nullptr;
    RILL_RETURN_NOT_OK(OpenPreparedConnection(entry));
    PooledConnection& pc = *entry.pc;
    if (new_connection) {
      // The statement's executions collect their result as Arrow, sharing
      // the buffers of the substituted rows they run over; the connection's
      // other statements (its views' DDL) keep DuckDB's own collectors.
      PreparedEntry* owner = &entry;  // owns the connection: outlives the hook
      duckdb::ClientConfig::GetConfig(*pc.conn->context).get_result_collector =
          [owner](duckdb::ClientContext& context,
                  duckdb::PreparedStatementData& data) -> duckdb::PhysicalOperator& {
        if (owner->shared_inputs == nullptr) {
          return duckdb::PhysicalResultCollector::GetResultCollector(context, data);
        }
        return sql_internal::MakeArrowTableCollector(context, data, owner->shared_inputs,
                                                     kCollectedBatchRows);
      };
    }
    RILL_RETURN_NOT_OK(Sync(pc));
    if (entry.reads_other_tables_generation == pc.generation) return nullptr;
    auto shared = std::make_shared<sql_internal::SharedInputBuffers>();
    for (const auto& [name, table] : views) {
      auto live = pc.views.find(name);
      if (live == pc.views.end() ||
          !SameColumnNamesAndTypes(*live->second->schema(), *table->schema())) {
        return nullptr;
      }
      shared->AddTable(*table);
    }
    shared->Seal();
    try {
      SubstituteGuard substitutes;
      for (const auto& [name, table] : views) {
        // No row count: the plan is kept for every later batch.
        substitutes.Add(pc.views[name], sql_internal::MakeTableSource(table,
                                                                      /*report_rows=*/false));
      }
      if (MustPrepare(entry, pc)) {
        entry.statement.reset();
        entry.executions = 0;
        RILL_ASSIGN_OR_RAISE(auto statement, OneReadStatement(pc, sql));
        // A plan over other tables too is left to QueryWith, which plans each
        // run with those tables' row counts and statistics (join orders).
        for (const auto& table : pc.conn->GetTableNames(sql)) {
          bool view = false;
          for (const auto& [name, rows] : views) {
            view = view || duckdb::StringUtil::CIEquals(name, table);
          }
          if (!view) {
            entry.reads_other_tables_generation = pc.generation;
            return nullptr;
          }
        }
        RILL_RETURN_NOT_OK(PrepareInto(entry, pc, std::move(statement), sql));
      }
      *substituted = true;
      PinGuard pins(pc);
      duckdb::vector<duckdb::Value> no_parameters;
      ++entry.executions;
      entry.shared_inputs = std::move(shared);
      auto result = entry.statement->Execute(no_parameters, /*allow_stream_result=*/false);
      entry.shared_inputs = nullptr;
      if (result->HasError()) {
        return DuckError(result->GetError(), result->GetErrorType(), sql);
      }
      auto table = sql_internal::TakeCollectedTable(*result);
      if (!table.ok()) {
        return QueryError(table.status().message(), sql);
      }
      return table;
    } catch (const std::exception& e) {
      entry.shared_inputs = nullptr;
      duckdb::ErrorData error(e);
      return DuckError(error.Message(), error.Type(), sql);
    }
  }

  // Sync the connections of the prepared statements (after a registry change),
  // so they hold no dropped table.
  void SyncPrepared() {
    std::vector<std::shared_ptr<PreparedEntry>> entries;
    {
      std::lock_guard<std::mutex> lock(mu);
      for (auto& [sql, entry] : prepared) entries.push_back(entry);
    }
    for (auto& entry : entries) {
      std::lock_guard<std::mutex> lock(entry->mu);
      if (entry->pc != nullptr && !Sync(*entry->pc).ok()) {
        entry->statement.reset();
        entry->pc.reset();
      }
    }
  }

  Result<std::shared_ptr<arrow::Table>> RunStatement(PooledConnection& pc,
                                                     std::string_view sql) {
    try {
      RILL_ASSIGN_OR_RAISE(auto statement, OneReadStatement(pc, std::string(sql)));
      // A point query of a keyed table reads only the rows of its keys
      // (point_lookup_internal.h), or is answered from them.
      auto lookup = sql_internal::FindPointLookup(*statement, pc.views);
      if (lookup.has_value()) point_lookups.fetch_add(1, std::memory_order_relaxed);
      if (lookup.has_value() && lookup->answer != nullptr) {
        point_answers.fetch_add(1, std::memory_order_relaxed);
        return lookup->answer;
      }
      PinGuard pins(pc);
      SubstituteGuard substitutes;
      if (lookup.has_value()) {
        substitutes.Add(lookup->view, sql_internal::MakeTableSource(lookup->rows));
      }
      auto result = pc.conn->Query(std::move(statement));
      return ArrowOrError(std::move(result), sql);
    } catch (const std::exception& e) {
      duckdb::ErrorData error(e);
      return DuckError(error.Message(), error.Type(), sql);
    }
  }
};

SqlEngine::SqlEngine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

SqlEngine::~SqlEngine() {
  if (impl_ == nullptr) {
    return;
  }
  // Connections (and the sources their views point at) go before the database.
  impl_->prepared.clear();
  impl_->idle.clear();
}

namespace {

// DuckDB's configuration for `options` (the main database and the constant one).
void Configure(const SqlOptions& options, duckdb::DBConfig& config) {
  if (options.threads > 0) {
    config.SetOptionByName("threads", duckdb::Value::BIGINT(options.threads));
  }
  if (options.memory_limit_bytes > 0) {
    config.SetOptionByName("memory_limit",
                           duckdb::Value(std::to_string(options.memory_limit_bytes) + "B"));
  }
  // The machine reaches no extension repository; never try to download.
  config.SetOptionByName("autoinstall_known_extensions", duckdb::Value::BOOLEAN(false));
  config.SetOptionByName("enable_external_access",
                         duckdb::Value::BOOLEAN(options.enable_external_access));
  if (!options.enable_external_access) {
    // DuckDB could not spill to its temp directory anyway (file access is
    // off): a query over the memory limit then fails with "Out of Memory
    // Error" rather than a permission error on ".tmp".
    config.options.use_temporary_directory = false;
  }
}

Status LockConfiguration(duckdb::DuckDB& db, const SqlOptions& options) {
  if (options.lock_configuration) {
    duckdb::Connection conn(db);
    auto result = conn.Query("SET lock_configuration = true");
    if (result->HasError()) {
      return Status::Invalid("cannot lock DuckDB configuration: ", result->GetError());
    }
  }
  return Status::OK();
}

}  // namespace

Result<duckdb::DuckDB*> SqlEngine::Impl::ConstantDatabase() {
  std::lock_guard<std::mutex> lock(constant_mu);
  if (constant_db != nullptr) {
    return constant_db.get();
  }
  SqlOptions single = options;
  single.threads = 1;  // no worker thread: a plan runs on the calling thread
  single.memory_limit_bytes = static_cast<int64_t>(
      duckdb::BufferManager::GetBufferManager(*db->instance).GetMaxMemory());
  try {
    duckdb::DBConfig config;
    Configure(single, config);
    auto constant = std::make_shared<duckdb::DuckDB>(nullptr, &config);
    duckdb::Connection conn(*constant);
    for (const auto& sql : helpers) {
      auto result = conn.Query(sql);
      if (result->HasError()) {
        return QueryError(result->GetError(), sql);
      }
    }
    RILL_RETURN_NOT_OK(LockConfiguration(*constant, single));
    constant_db = std::move(constant);
  } catch (const std::exception& e) {
    return Status::Invalid("cannot start DuckDB: ", ErrorMessage(e));
  }
  return constant_db.get();
}

Result<std::unique_ptr<SqlEngine>> SqlEngine::Make(SqlOptions options) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  try {
    duckdb::DBConfig config;
    Configure(options, config);
    impl->db = std::make_unique<duckdb::DuckDB>(nullptr, &config);
    sql_internal::RegisterScanFunction(*impl->db->instance);
    RILL_RETURN_NOT_OK(LockConfiguration(*impl->db, options));
  } catch (const std::exception& e) {
    return Status::Invalid("cannot start DuckDB: ", ErrorMessage(e));
  }
  return std::unique_ptr<SqlEngine>(new SqlEngine(std::move(impl)));
}

Status SqlEngine::RegisterTable(std::shared_ptr<LiveTable> table) {
  if (table == nullptr) {
    return Status::Invalid("RegisterTable: null table");
  }
  const std::string name = table->name();
  // Create the view on one connection first, so that a schema DuckDB cannot
  // read fails here rather than in every later query.
  RILL_ASSIGN_OR_RAISE(auto pc, impl_->Acquire());
  auto source = std::make_shared<LiveTableSource>(table, impl_->chunk_cache);
  try {
    CreateScanView(*pc->conn, name, *source, /*temporary=*/true);
  } catch (const std::exception& e) {
    impl_->Release(std::move(pc));
    return Status::Invalid("cannot expose table '", name, "' to SQL: ", ErrorMessage(e));
  }
  pc->views[name] = std::move(source);
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->tables[name] = std::move(table);
    // pc matched the registry before this change and now holds it too.
    pc->generation = pc->generation == impl_->generation ? impl_->generation + 1 : 0;
    ++impl_->generation;
  }
  impl_->Release(std::move(pc));
  impl_->SyncIdle();
  impl_->SyncSessions();
  return Status::OK();
}

Status SqlEngine::UnregisterTable(const std::string& name) {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (impl_->tables.erase(name) == 0) {
      return Status::KeyError("no table named '", name, "' is registered for SQL");
    }
    ++impl_->generation;
  }
  impl_->SyncIdle();
  impl_->SyncSessions();
  impl_->SyncPrepared();
  // Free what the cache holds for chunks that are gone now.
  impl_->chunk_cache->Prune();
  return Status::OK();
}

Result<std::shared_ptr<arrow::Schema>> SqlEngine::TableSchema(const std::string& name) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto it = impl_->tables.find(name);
  if (it == impl_->tables.end()) {
    return Status::KeyError("no table named '", name, "' is registered for SQL");
  }
  return it->second->schema();
}

std::vector<std::string> SqlEngine::TableNames() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  std::vector<std::string> names;
  names.reserve(impl_->tables.size());
  for (const auto& [name, table] : impl_->tables) {
    names.push_back(name);
  }
  return names;
}

Result<std::shared_ptr<arrow::Table>> SqlEngine::Query(std::string_view sql) {
  RILL_ASSIGN_OR_RAISE(auto pc, impl_->Acquire());
  auto result = impl_->Run(*pc, sql);
  impl_->Release(std::move(pc));
  return result;
}

Result<std::shared_ptr<arrow::Table>> SqlEngine::Query(std::string_view sql,
                                                       QueryInterrupt* interrupt) {
  RILL_ASSIGN_OR_RAISE(auto pc, impl_->Acquire());
  auto result = impl_->Run(*pc, sql, interrupt);
  impl_->Release(std::move(pc));
  return result;
}

Result<std::shared_ptr<arrow::Table>> SqlEngine::QueryPrepared(const std::string& sql) {
  auto entry = impl_->PreparedFor(sql);
  std::lock_guard<std::mutex> lock(entry->mu);
  auto result = impl_->ExecutePrepared(*entry, sql);
  if (!result.ok()) {
    // Prepare again next time: the failure may have left the connection unusable.
    entry->statement.reset();
    entry->pc.reset();
  }
  return result;
}

void SqlEngine::ForgetPrepared(const std::string& sql) {
  std::shared_ptr<PreparedEntry> entry;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    auto it = impl_->prepared.find(sql);
    if (it == impl_->prepared.end()) return;
    entry = std::move(it->second);
    impl_->prepared.erase(it);
  }
  std::lock_guard<std::mutex> lock(entry->mu);  // wait for a running execution
  entry->statement.reset();
  entry->pc.reset();
}

Result<std::shared_ptr<arrow::Table>> SqlEngine::QueryWith(
    std::string_view sql,
    const std::vector<std::pair<std::string, std::shared_ptr<arrow::Table>>>& views) {
  RILL_ASSIGN_OR_RAISE(auto pc, impl_->Acquire());
  std::vector<std::shared_ptr<sql_internal::ScanSource>> sources;
  std::vector<std::string> created;
  std::vector<std::shared_ptr<LiveTableSource>> substituted;
  Status status;
  for (const auto& [name, table] : views) {
    if (table == nullptr) {
      status = Status::Invalid("QueryWith: null table for view '", name, "'");
      break;
    }
    auto source = sql_internal::MakeTableSource(table);
    // Rows with a registered table's columns (a StreamSqlTask's new rows):
    // its view reads them for this query; no view to create and drop.
    auto live = pc->views.find(name);
    if (live != pc->views.end() &&
        SameColumnNamesAndTypes(*live->second->schema(), *table->schema())) {
      live->second->Substitute(std::move(source));
      substituted.push_back(live->second);
      continue;
    }
    try {
      CreateScanView(*pc->conn, name, *source, /*temporary=*/true);
    } catch (const std::exception& e) {
      status = QueryError("cannot create view '" + name + "': " + ErrorMessage(e), sql);
      break;
    }
    created.push_back(name);
    sources.push_back(std::move(source));
    // A registered table's view of the same name was replaced: re-sync later.
    if (pc->views.erase(name) > 0) {
      pc->generation = 0;
    }
  }
  Result<std::shared_ptr<arrow::Table>> result =
      status.ok() ? impl_->Run(*pc, sql) : Result<std::shared_ptr<arrow::Table>>(status);
  for (const auto& live : substituted) live->Substitute(nullptr);
  bool healthy = true;
  for (const auto& name : created) {
    try {
      healthy = healthy && !pc->conn->Query(DropTempViewSql(name))->HasError();
    } catch (const std::exception&) {
      healthy = false;
    }
  }
  if (healthy) {
    impl_->Release(std::move(pc));
  }
  return result;
}

Result<std::shared_ptr<arrow::Table>> SqlEngine::QueryPreparedWith(
    const std::string& sql,
    const std::vector<std::pair<std::string, std::shared_ptr<arrow::Table>>>& views) {
  // Keyed by the view names too, apart from QueryPrepared's entries ('\x01'
  // starts no SQL text).
  std::string key = "\x01";
  for (const auto& [name, table] : views) {
    if (table == nullptr) {
      return Status::Invalid("QueryPreparedWith: null table for view '", name, "'");
    }
    key += name + '\x01';
  }
  key += sql;
  auto entry = impl_->PreparedFor(key);
  std::unique_lock<std::mutex> lock(entry->mu);
  bool substituted = false;
  auto result = impl_->ExecutePreparedWith(*entry, sql, views, &substituted);
  if (!result.ok()) {
    // Prepare again next time: the failure may have left the connection unusable.
    entry->statement.reset();
    entry->pc.reset();
    return result;
  }
  if (substituted) return result;
  lock.unlock();
  return QueryWith(sql, views);
}

std::shared_ptr<LiveTable> SqlEngine::RegisteredTable(const std::string& name) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto it = impl_->tables.find(name);
  return it == impl_->tables.end() ? nullptr : it->second;
}

Status SqlEngineAccess::WithConnection(SqlEngine& sql,
                                       const std::function<Status(duckdb::Connection&)>& fn) {
  RILL_ASSIGN_OR_RAISE(auto pc, sql.impl_->Acquire());
  Status status;
  try {
    status = fn(*pc->conn);
  } catch (const std::exception& e) {
    status = Status::Invalid(ErrorMessage(e));
  }
  sql.impl_->Release(std::move(pc));
  return status;
}

Status SqlEngine::DefineHelpers(const std::vector<std::string>& statements) {
  RILL_ASSIGN_OR_RAISE(auto pc, impl_->Acquire());
  Status status;
  try {
    for (const auto& sql : statements) {
      auto parsed = pc->conn->ExtractStatements(sql);
      if (parsed.size() != 1 || parsed[0]->type != duckdb::StatementType::CREATE_STATEMENT) {
        status = Status::Invalid("DefineHelpers runs one CREATE statement at a time [query: ",
                                 sql, "]");
        break;
      }
      auto result = pc->conn->Query(std::move(parsed[0]));
      if (result->HasError()) {
        status = QueryError(result->GetError(), sql);
        break;
      }
    }
  } catch (const std::exception& e) {
    status = Status::Invalid(ErrorMessage(e));
  }
  impl_->Release(std::move(pc));
  RILL_RETURN_NOT_OK(status);
  {
    std::lock_guard<std::mutex> lock(impl_->constant_mu);
    impl_->helpers.insert(impl_->helpers.end(), statements.begin(), statements.end());
    if (impl_->constant_db != nullptr) {
      try {
        duckdb::Connection conn(*impl_->constant_db);
        for (const auto& sql : statements) {
          auto result = conn.Query(sql);
          if (result->HasError()) {
            return QueryError(result->GetError(), sql);
          }
        }
      } catch (const std::exception& e) {
        return Status::Invalid(ErrorMessage(e));
      }
      return Status::OK();
    }
  }
  // Made now rather than in a session's first query, which a statement
  // timeout may cover: a client of the helpers (pgwire) will have sessions.
  return impl_->ConstantDatabase().status();
}

SqlEngine::PointLookupCounts SqlEngine::point_lookups() const {
  return {impl_->point_lookups.load(std::memory_order_relaxed),
          impl_->point_answers.load(std::memory_order_relaxed)};
}

int64_t SqlEngine::MemoryUsage() const {
  return static_cast<int64_t>(impl_->db->instance->GetBufferManager().GetUsedMemory());
}

Result<std::vector<std::string>> SqlEngine::ParameterTypes(std::string_view sql) {
  RILL_ASSIGN_OR_RAISE(auto pc, impl_->Acquire());
  Result<std::vector<std::string>> types;
  try {
    auto statements = pc->conn->ExtractStatements(std::string(sql));
    if (statements.size() != 1) {
      types = QueryError(
          "expected exactly one SQL statement, got " + std::to_string(statements.size()), sql);
    } else if (!IsReadStatement(*statements[0])) {
      types = QueryError("only SELECT and EXPLAIN statements may run on live tables", sql);
    } else {
      // Binding reads no version: the views' plain schemas suffice.
      types = PreparedParameterTypes(*pc->conn, std::move(statements[0]));
    }
  } catch (const std::exception& e) {
    duckdb::ErrorData error(e);
    types = DuckError(error.Message(), error.Type(), sql);
  }
  impl_->Release(std::move(pc));
  return types;
}

Status SqlEngine::SetMemoryLimit(int64_t bytes) {
  RILL_RETURN_NOT_OK(SetDuckMemoryLimit(*impl_->db->instance, bytes));
  std::lock_guard<std::mutex> lock(impl_->constant_mu);
  if (impl_->constant_db != nullptr) {
    return SetDuckMemoryLimit(*impl_->constant_db->instance, bytes);
  }
  return Status::OK();
}

Status SqlEngine::SetThreads(int threads) {
  if (threads < 1) return Status::Invalid("threads must be >= 1, got ", threads);
  duckdb::DatabaseInstance& db = *impl_->db->instance;
  auto& config = duckdb::DBConfig::GetConfig(db);
  config.options.maximum_threads = static_cast<duckdb::idx_t>(threads);
  auto& scheduler = duckdb::TaskScheduler::GetScheduler(db);
  scheduler.SetThreads(static_cast<duckdb::idx_t>(threads), config.options.external_threads);
  scheduler.RelaunchThreads();
  return Status::OK();
}

int SqlEngine::Threads() const {
  return duckdb::TaskScheduler::GetScheduler(*impl_->db->instance).NumberOfThreads();
}

int64_t SqlEngine::MemoryLimit() const {
  return static_cast<int64_t>(
      duckdb::BufferManager::GetBufferManager(*impl_->db->instance).GetMaxMemory());
}

// Streaming results ------------------------------------------------------------

struct SqlResultStream::State {
  std::function<void(std::unique_ptr<PooledConnection>)> release;  // to the pool
  std::unique_ptr<PooledConnection> pc;
  std::unique_ptr<PinGuard> pins;  // the versions the query reads, while it runs
  QueryInterrupt* interrupt = nullptr;
  std::shared_ptr<arrow::RecordBatchReader> reader;
  std::shared_ptr<arrow::Schema> schema;
  std::string sql;
  bool failed = false;

  ~State() {
    reader.reset();  // the DuckDB result goes before its connection is reused
    if (interrupt != nullptr) interrupt->Detach();
    pins.reset();
    // A connection whose query failed or stopped half-way is dropped, not pooled.
    if (release && !failed) release(std::move(pc));
  }
};

SqlResultStream::SqlResultStream(std::unique_ptr<State> state) : state_(std::move(state)) {}

SqlResultStream::~SqlResultStream() = default;

const std::shared_ptr<arrow::Schema>& SqlResultStream::schema() const {
  return state_->schema;
}

Result<std::shared_ptr<arrow::RecordBatch>> SqlResultStream::Next() {
  State& st = *state_;
  if (st.reader == nullptr) return nullptr;
  std::shared_ptr<arrow::RecordBatch> batch;
  Status read;
  try {
    read = st.reader->ReadNext(&batch);
  } catch (const std::exception& e) {
    read = Status::Invalid(ErrorMessage(e));
  }
  if (!read.ok()) {
    st.failed = true;
    st.reader.reset();
    if (st.interrupt != nullptr && st.interrupt->interrupted()) {
      return Status::Cancelled("query interrupted: ", read.message());
    }
    return QueryError(read.message(), st.sql);
  }
  if (batch == nullptr) {
    st.reader.reset();  // done: the connection may serve the next query
  }
  return batch;
}

Result<std::unique_ptr<SqlResultStream>> SqlEngine::QueryStream(std::string_view sql,
                                                                QueryInterrupt* interrupt,
                                                                int64_t batch_rows) {
  if (interrupt != nullptr && interrupt->interrupted()) {
    return Status::Cancelled("query interrupted before it started");
  }
  auto state = std::make_unique<SqlResultStream::State>();
  state->sql = std::string(sql);
  RILL_ASSIGN_OR_RAISE(state->pc, impl_->Acquire());
  state->release = [impl = impl_.get()](std::unique_ptr<PooledConnection> pc) {
    impl->Release(std::move(pc));
  };
  duckdb::Connection* conn = state->pc->conn.get();
  if (interrupt != nullptr) {
    state->interrupt = interrupt;
    interrupt->Attach([conn] { conn->Interrupt(); });
  }
  try {
    RILL_ASSIGN_OR_RAISE(auto statement, Impl::OneReadStatement(*state->pc, state->sql));
    state->pins = std::make_unique<PinGuard>(*state->pc);
    auto pending = conn->PendingQuery(std::move(statement), /*allow_stream_result=*/true);
    if (pending->HasError()) {
      state->failed = true;
      return DuckError(pending->GetError(), pending->GetErrorType(), sql);
    }
    auto result = pending->Execute();
    if (result->HasError()) {
      state->failed = true;
      if (interrupt != nullptr && interrupt->interrupted()) {
        return Status::Cancelled("query interrupted: ", result->GetError());
      }
      return DuckError(result->GetError(), result->GetErrorType(), sql);
    }
    auto wrapper = std::make_unique<duckdb::ResultArrowArrayStreamWrapper>(
        std::move(result), static_cast<duckdb::idx_t>(std::max<int64_t>(1, batch_rows)));
    // The stream's release callback deletes the wrapper, so the stream owns it.
    ArrowArrayStream* stream = &wrapper.release()->stream;
    auto reader = arrow::ImportRecordBatchReader(stream);
    if (!reader.ok()) {
      state->failed = true;
      return QueryError(reader.status().message(), sql);
    }
    state->reader = std::move(*reader);
    state->schema = state->reader->schema();
  } catch (const std::exception& e) {
    state->failed = true;
    duckdb::ErrorData error(e);
    return DuckError(error.Message(), error.Type(), sql);
  }
  return std::make_unique<SqlResultStream>(std::move(state));
}

// Sessions ---------------------------------------------------------------------

namespace {

// True when `op` reads no table: a chain of projections, filters and limits
// over DuckDB's one-row dummy scan (or an empty result). Such a plan is cheap
// whatever the data and does not depend on any table's version.
bool IsConstantPlan(const duckdb::PhysicalOperator& op) {
  using Type = duckdb::PhysicalOperatorType;
  switch (op.type) {
    case Type::DUMMY_SCAN:
    case Type::EMPTY_RESULT:
      return op.children.empty();
    case Type::PROJECTION:
    case Type::FILTER:
    case Type::LIMIT:
    case Type::STREAMING_LIMIT:
    case Type::RESULT_COLLECTOR:
      break;
    default:
      return false;
  }
  return op.children.size() == 1 && IsConstantPlan(op.children[0].get());
}

// True when a constant plan (IsConstantPlan) gives the same rows every time:
// projections of constants only (DuckDB folded every deterministic
// expression; what is left, random() or now(), is evaluated per run) over the
// one-row scan, or an empty result.
bool IsInvariantPlan(const duckdb::PhysicalOperator& op) {
  using Type = duckdb::PhysicalOperatorType;
  if (op.type == Type::DUMMY_SCAN || op.type == Type::EMPTY_RESULT) {
    return op.children.empty();
  }
  if (op.type != Type::PROJECTION || op.children.size() != 1) {
    return false;
  }
  for (const auto& expression : op.Cast<duckdb::PhysicalProjection>().select_list) {
    if (expression->GetExpressionClass() != duckdb::ExpressionClass::BOUND_CONSTANT) {
      return false;
    }
  }
  return IsInvariantPlan(op.children[0].get());  // one child, checked above
}

// A SELECT without FROM and without CTEs: the only statements whose plan may
// be constant (others are not prepared for the session's cache).
bool MayHaveConstantPlan(const duckdb::SQLStatement& statement) {
  if (statement.type != duckdb::StatementType::SELECT_STATEMENT) {
    return false;
  }
  const auto& select = statement.Cast<duckdb::SelectStatement>();
  if (select.node == nullptr || select.node->type != duckdb::QueryNodeType::SELECT_NODE ||
      !select.node->cte_map.map.empty()) {
    return false;
  }
  const auto& node = select.node->Cast<duckdb::SelectNode>();
  return node.from_table == nullptr ||
         node.from_table->type == duckdb::TableReferenceType::EMPTY_FROM;
}

// True when `sql` may read a DuckDB setting (current_setting), whose values
// in the constant database are not the main database's (threads).
bool ReadsSettings(const std::string& sql) {
  std::string lower = sql;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return lower.find("setting") != std::string::npos;
}

}  // namespace

struct SqlSession::State {
  SqlEngine::Impl* engine;
  std::shared_ptr<SessionRegistry> registry;
  // Held while a query runs (and by SyncSessions): guards everything below.
  std::mutex mu;
  std::unique_ptr<PooledConnection> pc;
  // On the engine's constant database (ConstantDatabase): where constant plans
  // are prepared and run. Holds that database alive.
  std::shared_ptr<duckdb::DuckDB> constant_db;
  std::unique_ptr<duckdb::Connection> constant;
  struct Plan {
    duckdb::unique_ptr<duckdb::PreparedStatement> statement;
    uint64_t last_used = 0;
    // Gives the same rows every run (IsInvariantPlan): kept after the first
    // run and shared (results are immutable) instead of running it again.
    bool invariant = false;
    std::shared_ptr<arrow::Table> result;
  };
  std::unordered_map<std::string, Plan> plans;  // constant plans by statement text
  // Texts whose plan is not constant (tried once), by last use.
  std::unordered_map<std::string, uint64_t> others;
  uint64_t clock = 0;

  // Drop the least recently used entry of `map` beyond kMaxPlans.
  template <typename Map, typename LastUsed>
  static void Trim(Map& map, LastUsed last_used) {
    if (map.size() <= kMaxPlans) {
      return;
    }
    auto oldest = map.begin();
    for (auto it = map.begin(); it != map.end(); ++it) {
      if (last_used(it->second) < last_used(oldest->second)) {
        oldest = it;
      }
    }
    map.erase(oldest);
  }

  // The cached constant plan of `sql`, prepared now if `sql` may have one and
  // was not tried before; null when it has none.
  Plan* ConstantPlan(const std::string& sql) {
    if (auto it = plans.find(sql); it != plans.end()) {
      it->second.last_used = ++clock;
      return &it->second;
    }
    if (auto it = others.find(sql); it != others.end()) {
      it->second = ++clock;
      return nullptr;
    }
    duckdb::unique_ptr<duckdb::PreparedStatement> prepared;
    try {
      if (constant == nullptr) {
        auto db = engine->ConstantDatabase();
        if (!db.ok()) {
          return nullptr;  // the ordinary way, every time
        }
        {
          std::lock_guard<std::mutex> lock(engine->constant_mu);
          constant_db = engine->constant_db;
        }
        constant = std::make_unique<duckdb::Connection>(**db);
      }
      auto statements = constant->ExtractStatements(sql);
      if (statements.size() == 1 && MayHaveConstantPlan(*statements[0]) &&
          !ReadsSettings(sql)) {
        // Names that are not there (live tables, the catalog's views) fail to
        // bind here, and the statement runs the ordinary way.
        prepared = constant->Prepare(std::move(statements[0]));
        if (prepared->HasError() || prepared->data == nullptr ||
            prepared->data->physical_plan == nullptr ||
            !IsConstantPlan(prepared->data->physical_plan->Root())) {
          prepared.reset();
        }
      }
    } catch (const std::exception&) {
      prepared.reset();  // the query runs the ordinary way and reports its error
    }
    if (prepared == nullptr) {
      others[sql] = ++clock;
      Trim(others, [](uint64_t used) { return used; });
      return nullptr;
    }
    auto& plan = plans[sql];
    plan.invariant = IsInvariantPlan(prepared->data->physical_plan->Root());
    plan.statement = std::move(prepared);
    plan.last_used = ++clock;
    Trim(plans, [](const Plan& p) { return p.last_used; });
    return &plans[sql];
  }

  Result<std::shared_ptr<arrow::Table>> Execute(duckdb::PreparedStatement& statement,
                                                const std::string& sql) {
    try {
      duckdb::vector<duckdb::Value> no_parameters;
      auto result = statement.Execute(no_parameters, /*allow_stream_result=*/false);
      return ArrowOrError(std::move(result), sql);
    } catch (const std::exception& e) {
      duckdb::ErrorData error(e);
      return DuckError(error.Message(), error.Type(), sql);
    }
  }

  Result<std::shared_ptr<arrow::Table>> Query(const std::string& sql,
                                              QueryInterrupt* interrupt) {
    Plan* plan = ConstantPlan(sql);
    if (plan == nullptr) {
      if (pc == nullptr) {
        RILL_ASSIGN_OR_RAISE(pc, engine->Acquire());
      } else if (Status synced = engine->Sync(*pc); !synced.ok()) {
        pc.reset();  // a connection that failed to sync is discarded
        RILL_ASSIGN_OR_RAISE(pc, engine->Acquire());
      }
      return engine->Run(*pc, sql, interrupt);
    }
    if (interrupt != nullptr && interrupt->interrupted()) {
      return Status::Cancelled("query interrupted before it started");
    }
    if (plan->result != nullptr) {
      return plan->result;
    }
    duckdb::Connection* conn = constant.get();
    if (interrupt != nullptr) {
      interrupt->Attach([conn] { conn->Interrupt(); });
    }
    auto result = Execute(*plan->statement, sql);
    if (interrupt != nullptr) {
      interrupt->Detach();
    }
    if (!result.ok()) {
      plans.erase(sql);  // prepared again next time
      if (interrupt != nullptr && interrupt->interrupted()) {
        return Status::Cancelled("query interrupted: ", result.status().message());
      }
      return result;
    }
    if (plan->invariant) {
      plan->result = *result;
    }
    return result;
  }
};

void SqlEngine::Impl::SyncSessions() {
  std::lock_guard<std::mutex> lock(sessions->mu);
  for (SqlSession::State* state : sessions->sessions) {
    std::unique_lock<std::mutex> busy(state->mu, std::try_to_lock);
    if (busy.owns_lock() && state->pc != nullptr && !Sync(*state->pc).ok()) {
      state->pc.reset();
    }
  }
}

SqlSession::SqlSession(SqlEngine* engine) : state_(std::make_unique<State>()) {
  state_->engine = engine->impl_.get();
  state_->registry = engine->impl_->sessions;
  std::lock_guard<std::mutex> lock(state_->registry->mu);
  state_->registry->sessions.insert(state_.get());
}

SqlSession::~SqlSession() {
  {
    std::lock_guard<std::mutex> lock(state_->registry->mu);
    state_->registry->sessions.erase(state_.get());
  }
  // Plans go before their connections. The connection is not returned to the
  // pool: the engine may be gone (its DuckDB instance lives on in the
  // connection until then).
  state_->plans.clear();
  state_->constant.reset();
  state_->constant_db.reset();
  state_->pc.reset();
}

Result<std::shared_ptr<arrow::Table>> SqlSession::Query(const std::string& sql,
                                                        QueryInterrupt* interrupt) {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->Query(sql, interrupt);
}

bool SqlSession::HasConstantPlan(const std::string& sql) const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->plans.count(sql) > 0;
}

size_t SqlSession::cached_plans() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->plans.size();
}

}  // namespace rill
