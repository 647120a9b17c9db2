// Catalog: statements, checks, drops, pending sinks and checkpoints (see
// catalog.h; creation is catalog_create.cc).
#include "rill/pipeline/catalog.h"

#include <algorithm>
#include <chrono>
#include <set>

#include <arrow/type.h>

#include "rill/engine/checkpoint.h"
#include "rill/engine/task.h"
#include "rill/metrics/metrics_store.h"
#include "rill/pipeline/catalog_internal.h"
#include "rill/pipeline/global_reader.h"
#include "rill/sink/sink_set.h"
#include "rill/sql/sql_engine.h"

namespace rill::pipeline {

using catalog_internal::CatalogImpl;

namespace {

constexpr char kExtensionKey[] = "rill.catalog";

}  // namespace

std::vector<std::string> QueryNames(std::string_view sql) {
  std::set<std::string> names;
  for (size_t i = 0; i < sql.size();) {
    char c = sql[i];
    if (c == '\'') {  // a literal: skipped ('' inside)
      for (++i; i < sql.size(); ++i) {
        if (sql[i] == '\'' && (i + 1 >= sql.size() || sql[i + 1] != '\'')) break;
        if (sql[i] == '\'') ++i;
      }
      ++i;
    } else if (c == '"') {  // a quoted name, kept as written ("" inside)
      std::string name;
      for (++i; i < sql.size(); ++i) {
        if (sql[i] == '"' && (i + 1 >= sql.size() || sql[i + 1] != '"')) break;
        if (sql[i] == '"') ++i;
        name.push_back(sql[i]);
      }
      ++i;
      names.insert(name);
    } else if (c == '-' && i + 1 < sql.size() && sql[i + 1] == '-') {
      size_t end = sql.find('\n', i);
      i = end == std::string_view::npos ? sql.size() : end;
    } else if (c == '/' && i + 1 < sql.size() && sql[i + 1] == '*') {
      size_t end = sql.find("*/", i + 2);
      i = end == std::string_view::npos ? sql.size() : end + 2;
    } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t b = i;
      while (i < sql.size() && (std::isalnum(static_cast<unsigned char>(sql[i])) ||
                                sql[i] == '_' || sql[i] == '$')) {
        ++i;
      }
      names.insert(catalog_internal::Lower(std::string(sql.substr(b, i - b))));  // unquoted: folded
    } else {
      ++i;
    }
  }
  return {names.begin(), names.end()};
}

Catalog& Catalog::For(Engine* engine) {
  EngineExtension* extension = engine->Extension(
      kExtensionKey, [engine] { return std::make_unique<CatalogImpl>(engine); });
  return *static_cast<CatalogImpl*>(extension);
}

const char* CatalogKindName(DdlObject kind) {
  switch (kind) {
    case DdlObject::kTable: return "table";
    case DdlObject::kSource: return "source";
    case DdlObject::kMaterializedView: return "materialized view";
    case DdlObject::kStreamView: return "stream view";
    case DdlObject::kWindow: return "window";
    case DdlObject::kSink: return "sink";
    case DdlObject::kKpi: return "kpi";
    case DdlObject::kAlertRule: return "alert rule";
  }
  return "object";
}

std::vector<std::string> SplitStatements(std::string_view sql) {
  std::vector<std::string> out;
  std::string current;
  auto flush = [&] {
    size_t b = current.find_first_not_of(" \t\r\n");
    if (b != std::string::npos) {
      size_t e = current.find_last_not_of(" \t\r\n");
      out.push_back(current.substr(b, e - b + 1));
    }
    current.clear();
  };
  for (size_t i = 0; i < sql.size(); ++i) {
    char c = sql[i];
    if (c == '\'' || c == '"') {  // a literal or quoted name; a doubled quote stays inside
      size_t j = i + 1;
      while (j < sql.size()) {
        if (sql[j] == c) {
          if (j + 1 < sql.size() && sql[j + 1] == c) {
            j += 2;
            continue;
          }
          break;
        }
        ++j;
      }
      current.append(sql.substr(i, std::min(j + 1, sql.size()) - i));
      i = j;
      continue;
    }
    if (c == '-' && i + 1 < sql.size() && sql[i + 1] == '-') {  // a line comment
      size_t end = sql.find('\n', i);
      i = end == std::string_view::npos ? sql.size() : end;
      current.push_back('\n');
      continue;
    }
    if (c == '/' && i + 1 < sql.size() && sql[i + 1] == '*') {  // a block comment
      size_t end = sql.find("*/", i + 2);
      i = end == std::string_view::npos ? sql.size() : end + 1;
      current.push_back(' ');
      continue;
    }
    if (c == ';') {
      flush();
      continue;
    }
    current.push_back(c);
  }
  flush();
  return out;
}

namespace catalog_internal {

bool Relational(DdlObject kind) {
  return kind == DdlObject::kTable || kind == DdlObject::kMaterializedView ||
         kind == DdlObject::kStreamView || kind == DdlObject::kWindow;
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool Strict(const std::string& origin) { return origin == "sql"; }

Status Missing(DdlObject kind, const std::string& name) {
  return DeclError(kSqlStateUndefined,
                   Lower(DdlObjectName(kind)) + " \"" + name + "\" does not exist");
}

Status Refused(const Status& status, const std::string& name) {
  if (!SqlStateOf(status).empty()) return status;
  std::string message = status.message();
  const char* state = kSqlStateBadValue;
  if (message.find("Catalog Error") != std::string::npos) state = kSqlStateUndefined;
  if (message.find("Parser Error") != std::string::npos) state = kSqlStateSyntax;
  if (message.find("Binder Error") != std::string::npos) state = "42703";
  return DeclError(state, "\"" + name + "\": " + message);
}

CatalogImpl::CatalogImpl(Engine* engine) : engine_(engine) {}

CatalogImpl::~CatalogImpl() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  watch_cv_.notify_all();
  if (watcher_.joinable()) watcher_.join();
}

void CatalogImpl::SetMetricsStore(MetricsStore* metrics) {
  std::lock_guard<std::mutex> lock(mu_);
  metrics_ = metrics;
}

void CatalogImpl::SetGlobalViewMaker(std::shared_ptr<GlobalViewMaker> maker) {
  std::lock_guard<std::mutex> lock(mu_);
  global_views_ = std::move(maker);
}

Result<DdlResult> CatalogImpl::Execute(std::string_view sql) {
  RILL_ASSIGN_OR_RAISE(DdlStatement s, ParseDdl(sql));
  return Execute(s, "sql");
}

Result<DdlResult> CatalogImpl::Execute(const DdlStatement& statement, const std::string& origin) {
  Result<DdlResult> result;
  {
    std::lock_guard<std::mutex> lock(mu_);
    result = ExecuteLocked(statement, origin);
  }
  StartPendingSinks();
  return result;
}

Result<std::vector<DdlResult>> CatalogImpl::ExecuteScript(std::string_view sql) {
  std::vector<DdlResult> results;
  std::vector<std::string> statements = SplitStatements(sql);
  for (size_t i = 0; i < statements.size(); ++i) {
    auto r = Execute(statements[i]);
    if (!r.ok()) {
      return PrefixError(r.status(), "statement " + std::to_string(i + 1) + ": ");
    }
    results.push_back(std::move(*r));
  }
  return results;
}

Result<DdlResult> CatalogImpl::ExecuteLocked(const DdlStatement& s, const std::string& origin) {
  switch (s.verb) {
    case DdlStatement::Verb::kCreate: return CreateLocked(s, origin);
    case DdlStatement::Verb::kDrop: return DropLocked(s);
    case DdlStatement::Verb::kShow: return ShowLocked(s);
  }
  return DeclError(kSqlStateSyntax, "unknown statement");
}

Result<DdlResult> CatalogImpl::CreateLocked(const DdlStatement& s, const std::string& origin) {
  DdlResult result;
  result.tag = std::string("CREATE ") + DdlObjectName(s.object);
  if (Status free = CheckFreeLocked(s.object, s.name); !free.ok()) {
    if (!s.if_not_exists) return free;
    result.notice = Lower(DdlObjectName(s.object)) + " \"" + s.name +
                    "\" already exists, skipping";
    return result;
  }
  const std::string where = Lower(DdlObjectName(s.object)) + " \"" + s.name + "\"";
  // The statement's connector = '...' picks a source's or sink's kind.
  auto kind_of = [&](const char* what) -> Result<std::string> {
    for (const auto& [name, value] : s.with) {
      if (name == "connector") return Lower(value.text);
    }
    return DeclError(kSqlStateSyntax,
                     std::string("missing required option 'connector' of a ") + what);
  };
  Options rest = Without(s.with, {"connector"});
  switch (s.object) {
    case DdlObject::kTable: {
      RILL_ASSIGN_OR_RAISE(TableDecl decl,
                           ReadTable(s.name, s.columns, s.primary_key, s.with, where));
      RILL_RETURN_NOT_OK(CreateTableLocked(decl, origin));
      break;
    }
    case DdlObject::kSource: {
      RILL_ASSIGN_OR_RAISE(std::string kind, kind_of("source"));
      RILL_ASSIGN_OR_RAISE(SourceDecl decl, ReadSource(kind, rest, where, s.into));
      decl.name = s.name;
      RILL_RETURN_NOT_OK(CreateSourceLocked(decl, origin));
      break;
    }
    case DdlObject::kMaterializedView: {
      RILL_ASSIGN_OR_RAISE(MaterializedViewDecl decl,
                           ReadMaterializedView(s.with, where, s.name, s.query));
      RILL_RETURN_NOT_OK(CreateMaterializedViewLocked(decl, origin));
      break;
    }
    case DdlObject::kStreamView: {
      RILL_ASSIGN_OR_RAISE(StreamViewDecl decl, ReadStreamView(s.with, where, s.name, s.query));
      RILL_RETURN_NOT_OK(CreateStreamViewLocked(decl, origin));
      break;
    }
    case DdlObject::kWindow: {
      RILL_ASSIGN_OR_RAISE(WindowDecl decl, ReadWindow(s.with, where, s.name));
      RILL_RETURN_NOT_OK(CreateWindowLocked(decl, origin));
      break;
    }
    case DdlObject::kSink: {
      RILL_ASSIGN_OR_RAISE(std::string kind, kind_of("sink"));
      RILL_ASSIGN_OR_RAISE(SinkDecl decl, ReadSink(kind, rest, where, s.name, s.from));
      RILL_RETURN_NOT_OK(CreateSinkLocked(decl, origin));
      break;
    }
    case DdlObject::kKpi: {
      RILL_ASSIGN_OR_RAISE(KpiDecl decl, ReadKpi(s.with, where, s.name, s.query));
      RILL_RETURN_NOT_OK(CreateKpiLocked(decl, origin));
      break;
    }
    case DdlObject::kAlertRule: {
      RILL_ASSIGN_OR_RAISE(AlertRuleDecl decl, ReadAlertRule(s.with, where, s.name));
      RILL_RETURN_NOT_OK(CreateAlertRuleLocked(decl, origin));
      break;
    }
  }
  return result;
}

// Checks -----------------------------------------------------------------------

const CatalogEntry* CatalogImpl::FindLocked(DdlObject kind, const std::string& name) const {
  for (const CatalogEntry& e : entries_) {
    if (e.name != name) continue;
    if (e.kind == kind || (Relational(kind) && Relational(e.kind))) return &e;
  }
  return nullptr;
}

Status CatalogImpl::CheckFreeLocked(DdlObject kind, const std::string& name) const {
  if (name.empty()) return DeclError(kSqlStateSyntax, "a name must not be empty");
  const CatalogEntry* found = FindLocked(kind, name);
  bool taken = found != nullptr;
  if (!taken && Relational(kind)) {
    // Outputs of views and tables made outside the catalog count too.
    taken = engine_->GetTable(name).ok();
    for (const CatalogEntry& e : entries_) {
      if (std::find(e.writes.begin(), e.writes.end(), name) != e.writes.end() &&
          e.kind != DdlObject::kSource) {
        taken = true;
      }
    }
  }
  if (!taken && kind == DdlObject::kSource) {
    for (const auto& c : engine_->Connectors()) taken = taken || c->name() == name;
  }
  if (!taken && kind == DdlObject::kSink) {
    taken = SinkSet::For(engine_).Find(name) != nullptr;
  }
  if (!taken) return Status::OK();
  const char* what = found != nullptr ? CatalogKindName(found->kind) : CatalogKindName(kind);
  if (Relational(kind) && found == nullptr) what = "relation";
  return DeclError(kSqlStateDuplicate, std::string(what) + " \"" + name + "\" already exists");
}

Status CatalogImpl::CheckTableLocked(const std::string& table, const std::string& what) const {
  if (engine_->GetTable(table).ok()) return Status::OK();
  for (const CatalogEntry& e : entries_) {
    if (e.kind == DdlObject::kSource) continue;
    if (std::find(e.writes.begin(), e.writes.end(), table) != e.writes.end()) {
      return Status::OK();
    }
  }
  return DeclError(kSqlStateUndefined,
                   "relation \"" + table + "\" (" + what + ") does not exist");
}

Result<std::vector<std::string>> CatalogImpl::QueryTablesLocked(const std::string& sql,
                                                               bool strict) const {
  // Every name of the query that is a table (of the engine, or an output of
  // an entry) is a dependency: a column or alias spelled like a table only
  // makes a DROP ask for CASCADE, never misses one.
  std::set<std::string> known;
  for (const std::string& t : engine_->TableNames()) known.insert(t);
  for (const CatalogEntry& e : entries_) {
    if (e.kind != DdlObject::kSource) known.insert(e.writes.begin(), e.writes.end());
  }
  std::vector<std::string> reads;
  for (const std::string& name : QueryNames(sql)) {
    if (known.count(name) != 0) reads.push_back(name);
  }
  if (strict) {
    // Bind it now (no rows): a missing table is 42704, a bad column 42703.
    auto probe = engine_->Query("SELECT * FROM (" + sql + "\n) AS rill_check LIMIT 0");
    if (!probe.ok()) return Refused(probe.status(), "query");
  }
  return reads;
}

// Drops ------------------------------------------------------------------------

std::vector<const CatalogEntry*> CatalogImpl::DependentsLocked(const CatalogEntry& entry) const {
  std::vector<const CatalogEntry*> out;
  std::set<const CatalogEntry*> seen = {&entry};
  std::vector<const CatalogEntry*> frontier = {&entry};
  while (!frontier.empty()) {
    const CatalogEntry* at = frontier.back();
    frontier.pop_back();
    for (const CatalogEntry& e : entries_) {
      if (seen.count(&e) != 0) continue;
      bool reads = false;
      for (const std::string& t : at->writes) {
        reads = reads || std::find(e.reads.begin(), e.reads.end(), t) != e.reads.end();
      }
      // A source writes into a table: dropping the table takes its sources.
      bool feeds = at->kind == DdlObject::kTable && e.kind == DdlObject::kSource &&
                   !e.writes.empty() && e.writes.front() == at->name;
      if (reads || feeds) {
        seen.insert(&e);
        out.push_back(&e);
        frontier.push_back(&e);
      }
    }
  }
  return out;
}

Result<DdlResult> CatalogImpl::DropLocked(const DdlStatement& s) {
  DdlResult result;
  result.tag = std::string("DROP ") + DdlObjectName(s.object);
  const CatalogEntry* entry = FindLocked(s.object, s.name);
  if (entry != nullptr && entry->kind != s.object) {
    return DeclError("42809", "\"" + s.name + "\" is a " + CatalogKindName(entry->kind) +
                                  ", not a " + CatalogKindName(s.object));
  }
  if (entry == nullptr) {
    // A table made outside the catalog (Python, HTTP ingest) drops too.
    if (s.object == DdlObject::kTable && engine_->GetTable(s.name).ok()) {
      for (const CatalogEntry& e : entries_) {
        if (std::find(e.reads.begin(), e.reads.end(), s.name) != e.reads.end() && !s.cascade) {
          return DeclError(kSqlStateDependent,
                           "cannot drop table \"" + s.name + "\" because " +
                               CatalogKindName(e.kind) + " \"" + e.name + "\" depends on it");
        }
      }
      RILL_RETURN_NOT_OK(engine_->DropTable(s.name));
      return result;
    }
    if (s.if_exists) {
      result.notice = Lower(DdlObjectName(s.object)) + " \"" + s.name +
                      "\" does not exist, skipping";
      return result;
    }
    return Missing(s.object, s.name);
  }
  std::vector<const CatalogEntry*> dependents = DependentsLocked(*entry);
  if (!dependents.empty() && !s.cascade) {
    std::string list;
    for (const CatalogEntry* d : dependents) {
      list += std::string(list.empty() ? "" : ", ") + CatalogKindName(d->kind) + " \"" +
              d->name + "\"";
    }
    return DeclError(kSqlStateDependent,
                     "cannot drop " + std::string(CatalogKindName(entry->kind)) + " \"" +
                         s.name + "\" because other objects depend on it: " + list +
                         " (use DROP ... CASCADE to drop them too)");
  }
  // Dependents first, the most distant first.
  std::vector<CatalogEntry> doomed;
  for (auto it = dependents.rbegin(); it != dependents.rend(); ++it) doomed.push_back(**it);
  doomed.push_back(*entry);
  for (const CatalogEntry& d : doomed) {
    RILL_RETURN_NOT_OK(DropEntryLocked(d));
    entries_.erase(std::remove_if(entries_.begin(), entries_.end(),
                                  [&](const CatalogEntry& e) {
                                    return e.kind == d.kind && e.name == d.name;
                                  }),
                   entries_.end());
  }
  if (!dependents.empty()) {
    result.notice = "drop cascades to " + std::to_string(dependents.size()) + " other object" +
                    (dependents.size() == 1 ? "" : "s");
  }
  return result;
}

Status CatalogImpl::DropEntryLocked(const CatalogEntry& e) {
  auto drop_outputs = [&] {
    for (const std::string& t : e.writes) {
      (void)engine_->DropTable(t);  // absent until a first result: nothing to drop
    }
  };
  switch (e.kind) {
    case DdlObject::kTable: {
      Status st = engine_->DropTable(e.name);
      return st.IsKeyError() ? Status::OK() : st;
    }
    case DdlObject::kSource: {
      Status st = engine_->RemoveConnector(e.name);
      return st.IsKeyError() ? Status::OK() : st;
    }
    case DdlObject::kMaterializedView:
      if (auto g = global_made_.find(e.name); g != global_made_.end()) {
        const bool read_only = g->second;
        global_made_.erase(g);
        if (read_only) {
          DropGlobalReader(engine_, e.name);
          return Status::OK();
        }
        return global_views_ ? global_views_->Drop(e.name) : Status::OK();
      }
      [[fallthrough]];
    case DdlObject::kStreamView: {
      Status st = engine_->RemoveSqlTask(e.name);
      if (!st.ok() && !st.IsKeyError()) return st;
      drop_outputs();
      return Status::OK();
    }
    case DdlObject::kWindow: {
      Status st = engine_->RemoveWindowTask(e.name);
      if (!st.ok() && !st.IsKeyError()) return st;
      drop_outputs();
      (void)engine_->DropTable(e.writes.empty() ? "" : e.writes.front() + "_late");
      return Status::OK();
    }
    case DdlObject::kSink:
      pending_sinks_.erase(e.name);
      SinkSet::For(engine_).Remove(e.name);
      return Status::OK();
    case DdlObject::kKpi:
      return metrics_ == nullptr ? Status::OK() : metrics_->RemoveKpiQuery(e.name);
    case DdlObject::kAlertRule:
      return metrics_ == nullptr ? Status::OK() : metrics_->RemoveAlertRule(e.name);
  }
  return Status::OK();
}

// Pending sinks ----------------------------------------------------------------

void CatalogImpl::StartPendingSinks() {
  std::unique_lock<std::mutex> lock(mu_);
  for (auto it = pending_sinks_.begin(); it != pending_sinks_.end();) {
    if (!engine_->GetTable(it->second.options.table).ok()) {
      ++it;
      continue;
    }
    auto started = StartSink(it->second, engine_);
    if (!started.ok()) {
      // Kept pending: retried while the watcher runs (the error shows in SHOW SINKS).
      sink_errors_[it->first] = started.status().message();
      ++it;
      continue;
    }
    sink_errors_.erase(it->first);
    it = pending_sinks_.erase(it);
  }
  if (!pending_sinks_.empty() && !watcher_.joinable() && !stopping_) {
    watcher_ = std::thread([this] { WatchPendingSinks(); });
  }
}

void CatalogImpl::WatchPendingSinks() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    watch_cv_.wait_for(lock, std::chrono::milliseconds(100));
    if (stopping_) break;
    if (pending_sinks_.empty()) continue;
    lock.unlock();
    StartPendingSinks();
    lock.lock();
  }
}

std::vector<std::string> CatalogImpl::PendingSinks() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  for (const auto& [name, decl] : pending_sinks_) out.push_back(name);
  return out;
}

std::vector<CatalogEntry> CatalogImpl::Entries() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_;
}

// Checkpoints ------------------------------------------------------------------

void CatalogImpl::AttachCheckpointer(Checkpointer* checkpointer) {
  checkpointer->AddSection(
      "catalog", [this]() -> Result<std::string> { return DumpSql(); },
      [this](std::string_view text) { return Replay(text); });
}

Status CatalogImpl::Replay(std::string_view saved) {
  for (const std::string& text : SplitStatements(saved)) {
    RILL_ASSIGN_OR_RAISE(DdlStatement s, ParseDdl(text));
    if (s.verb != DdlStatement::Verb::kCreate) continue;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (FindLocked(s.object, s.name) != nullptr) continue;  // declared already
      if (s.object == DdlObject::kTable && engine_->GetTable(s.name).ok()) {
        // Restored from the checkpoint's files already: adopt it.
        RILL_ASSIGN_OR_RAISE(TableDecl decl,
                             ReadTable(s.name, s.columns, s.primary_key, s.with, s.name));
        CatalogEntry e;
        e.kind = DdlObject::kTable;
        e.name = s.name;
        e.writes = {s.name};
        e.origin = "sql";
        e.statement = s;
        RecordLocked(std::move(e));
        continue;
      }
    }
    auto done = Execute(s, "sql");
    if (!done.ok()) {
      return PrefixError(done.status(), "restoring the catalog: " + text + ": ");
    }
  }
  return Status::OK();
}

}  // namespace catalog_internal

}  // namespace rill::pipeline
