// Catalog: creating each kind of object (see catalog.h).
#include <algorithm>
#include <chrono>

#include <arrow/table.h>
#include <arrow/type.h>

#include "rill/engine/stream_sql_task.h"
#include "rill/engine/task.h"
#include "rill/engine/window_task.h"
#include "rill/metrics/metrics_store.h"
#include "rill/pipeline/global_reader.h"
#include "rill/pipeline/catalog_internal.h"
#include "rill/sink/sink_set.h"

namespace rill::pipeline::catalog_internal {

namespace {

// incremental = true: refuse (0A000) a query the engine cannot maintain
// incrementally, naming the part of the plan that cannot, before anything is
// added. `bound`: the query was bound already (SQL); a pipeline file's query
// that does not bind yet (it reads a table a later declaration makes) is left
// to the task's first run.
Status CheckIncremental(Engine* engine, const MaterializedViewDecl& decl, bool bound) {
  if (decl.incremental != IncrementalMode::kOn) return Status::OK();
  if (!bound &&
      !engine->Query("SELECT * FROM (" + decl.sql + "\n) AS rill_check LIMIT 0").ok()) {
    return Status::OK();
  }
  Status st = ScheduledSqlTask::CheckIncremental(engine->sql(), decl.sql);
  if (st.ok()) return st;
  if (!st.IsInvalid()) return Refused(st, decl.name);
  return DeclError(kSqlStateNotSupported,
                   "\"" + decl.name +
                       "\": incremental = true, but the query cannot be maintained "
                       "incrementally: " +
                       st.message() +
                       " (incremental = auto or false re-runs it instead)");
}

// `given` with the value of `incremental` as the engine names it ("true" for
// YAML's yes or SQL's 'on'), so dumps and SHOW read one spelling.
Options CanonicalIncremental(Options given, IncrementalMode mode) {
  for (auto& [name, value] : given) {
    if (name == "incremental") value = OptionValue::Scalar(IncrementalModeName(mode));
  }
  return given;
}

}  // namespace

// Creation ---------------------------------------------------------------------

Status CatalogImpl::CreateTable(const TableDecl& decl, const std::string& origin) {
  std::lock_guard<std::mutex> lock(mu_);
  return CreateTableLocked(decl, origin);
}
Status CatalogImpl::CreateSource(const SourceDecl& decl, const std::string& origin) {
  std::lock_guard<std::mutex> lock(mu_);
  return CreateSourceLocked(decl, origin);
}
Status CatalogImpl::CreateMaterializedView(const MaterializedViewDecl& decl,
                                           const std::string& origin) {
  std::lock_guard<std::mutex> lock(mu_);
  return CreateMaterializedViewLocked(decl, origin);
}
Status CatalogImpl::CreateStreamView(const StreamViewDecl& decl, const std::string& origin) {
  std::lock_guard<std::mutex> lock(mu_);
  return CreateStreamViewLocked(decl, origin);
}
Status CatalogImpl::CreateWindow(const WindowDecl& decl, const std::string& origin) {
  std::lock_guard<std::mutex> lock(mu_);
  return CreateWindowLocked(decl, origin);
}
Status CatalogImpl::CreateSink(const SinkDecl& decl, const std::string& origin) {
  Status st;
  {
    std::lock_guard<std::mutex> lock(mu_);
    st = CreateSinkLocked(decl, origin);
  }
  StartPendingSinks();
  return st;
}
Status CatalogImpl::CreateKpi(const KpiDecl& decl, const std::string& origin) {
  std::lock_guard<std::mutex> lock(mu_);
  return CreateKpiLocked(decl, origin);
}
Status CatalogImpl::CreateAlertRule(const AlertRuleDecl& decl, const std::string& origin) {
  std::lock_guard<std::mutex> lock(mu_);
  return CreateAlertRuleLocked(decl, origin);
}

Status CatalogImpl::CreateTableLocked(const TableDecl& decl, const std::string& origin) {
  RILL_RETURN_NOT_OK(CheckFreeLocked(DdlObject::kTable, decl.name));
  TableOptions options = decl.options;
  options.clock = engine_->options().clock;
  auto made = engine_->RegisterTable(decl.name, decl.schema, options);
  if (!made.ok()) return Refused(made.status(), decl.name);
  CatalogEntry e;
  e.kind = DdlObject::kTable;
  e.name = decl.name;
  e.writes = {decl.name};
  e.origin = origin;
  DdlStatement& s = e.statement;
  s.object = DdlObject::kTable;
  s.name = decl.name;
  s.columns = decl.columns;
  if (s.columns.empty()) {  // declared in a pipeline file: the columns from the schema
    for (const auto& f : decl.schema->fields()) {
      DdlColumn c;
      c.name = f->name();
      c.sql_type = SqlTypeOf(*f->type());
      c.type = PipelineTypeName(*f->type());
      // A key column is NOT NULL in SQL (as the DDL parser makes it).
      const auto& key = decl.options.primary_key;
      c.not_null = !f->nullable() || std::find(key.begin(), key.end(), c.name) != key.end();
      s.columns.push_back(std::move(c));
    }
  }
  s.primary_key = decl.options.primary_key;
  // The options in effect (YAML nests retention; SQL writes it flat).
  auto add = [&](const char* name, std::string text) {
    s.with.emplace_back(name, OptionValue::Scalar(std::move(text)));
  };
  add("mode", TableModeName(decl.options.mode.value_or(TableMode::kSnapshot)));
  if (decl.options.retention) {
    const RetentionPolicy& r = *decl.options.retention;
    if (r.max_rows) add("max_rows", std::to_string(*r.max_rows));
    if (r.max_age_seconds) add("max_age_seconds", FormatNumber(*r.max_age_seconds));
    if (r.time_column != RetentionPolicy{}.time_column) add("time_column", r.time_column);
  }
  RecordLocked(std::move(e));
  return Status::OK();
}

Status CatalogImpl::CreateSourceLocked(const SourceDecl& decl, const std::string& origin) {
  RILL_RETURN_NOT_OK(CheckFreeLocked(DdlObject::kSource, decl.name));
  auto table = engine_->GetTable(decl.target_table);
  if (!table.ok()) return Missing(DdlObject::kTable, decl.target_table);
  auto made = MakeSource(decl, (*table)->user_schema());
  if (!made.ok()) return Refused(made.status(), decl.name);
  if (Status st = engine_->AddConnector(*made); !st.ok()) return Refused(st, decl.name);
  CatalogEntry e;
  e.kind = DdlObject::kSource;
  e.name = decl.name;
  e.writes = {decl.target_table};
  e.origin = origin;
  e.statement.object = DdlObject::kSource;
  e.statement.name = decl.name;
  e.statement.into = decl.target_table;
  e.statement.with.emplace_back("connector", OptionValue::Scalar(decl.kind));
  std::vector<std::string> drop = {"name", "target_table", "connector", "type"};
  if (decl.kind != "postgres_cdc") drop.push_back("table");
  for (auto& option : Without(decl.given, drop)) e.statement.with.push_back(std::move(option));
  RecordLocked(std::move(e));
  return Status::OK();
}

Status CatalogImpl::CreateMaterializedViewLocked(const MaterializedViewDecl& decl,
                                                 const std::string& origin) {
  RILL_RETURN_NOT_OK(CheckFreeLocked(DdlObject::kMaterializedView, decl.name));
  if (decl.output != decl.name) {
    RILL_RETURN_NOT_OK(CheckFreeLocked(DdlObject::kTable, decl.output));
  }
  if (decl.scope == "global") return CreateGlobalViewLocked(decl, origin);
  RILL_ASSIGN_OR_RAISE(std::vector<std::string> reads,
                       QueryTablesLocked(decl.sql, Strict(origin)));
  RILL_RETURN_NOT_OK(CheckIncremental(engine_, decl, Strict(origin)));
  auto task = MakeMaterializedView(decl);
  if (!task.ok()) return Refused(task.status(), decl.name);
  if (Status st = engine_->AddSqlTask(*task); !st.ok()) return Refused(st, decl.name);
  // A first run now makes the output table, so views and sinks over it can
  // follow at once (a failing query is refused and nothing stays).
  Status ran = Strict(origin) ? engine_->RunTaskNow(decl.name) : Status::OK();
  auto stats = engine_->TaskStatistics();
  auto it = stats.find(decl.name);
  if (Strict(origin) && ran.ok() && it != stats.end() && it->second.errors > 0) {
    ran = Status::Invalid(it->second.last_error);
  }
  if (!ran.ok()) {
    (void)engine_->RemoveSqlTask(decl.name);
    (void)engine_->DropTable(decl.output);
    return Refused(ran, decl.name);
  }
  RecordMaterializedViewLocked(decl, origin, std::move(reads), {decl.output});
  return Status::OK();
}

Status CatalogImpl::CreateGlobalViewLocked(const MaterializedViewDecl& decl,
                                           const std::string& origin) {
  if (decl.app_id.empty() != decl.bootstrap_servers.empty()) {
    return DeclError(kSqlStateBadValue,
                     "\"" + decl.name + "\": app_id and bootstrap_servers go together");
  }
  if (!global_views_ && decl.app_id.empty()) {
    return DeclError(kSqlStateBadValue,
                     "\"" + decl.name +
                         "\": scope = 'global' needs this engine to be an instance of an "
                         "application (a pipeline file's cluster: section, "
                         "RillEngine(app_id=..., instance_id=...), rill serve --app-id), or "
                         "app_id and bootstrap_servers to read an application's view");
  }
  if (decl.output != decl.name) {
    return DeclError(kSqlStateBadValue, "\"" + decl.name +
                                            "\": a global view's output is its name "
                                            "(output is not taken with scope = 'global')");
  }
  RILL_ASSIGN_OR_RAISE(std::vector<std::string> reads, QueryTablesLocked(decl.sql, true));
  const bool reader = !decl.app_id.empty();
  auto writes = reader ? CreateGlobalReaderLocked(decl) : global_views_->Create(decl);
  if (!writes.ok()) return Refused(writes.status(), decl.name);
  global_made_[decl.name] = reader;
  RecordMaterializedViewLocked(decl, origin, std::move(reads), std::move(*writes));
  if (!reader) global_views_->Declared(decl.name, entries_.back().sql);
  return Status::OK();
}

Result<std::vector<std::string>> CatalogImpl::CreateGlobalReaderLocked(
    const MaterializedViewDecl& decl) {
  RILL_ASSIGN_OR_RAISE(const GlobalPlan plan, PlanGlobalView(engine_, decl));
  RILL_RETURN_NOT_OK(CheckFreeLocked(DdlObject::kTable, decl.name + "__partials"));
  // The partial rows' columns, as the instances' partial views make them.
  RILL_ASSIGN_OR_RAISE(auto empty, engine_->Query("SELECT * FROM (" + plan.partial_sql +
                                                  ") AS rill_partials LIMIT 0"));
  GlobalReaderSpec spec;
  spec.decl = decl;
  spec.plan = plan;
  spec.partial_schema = empty->schema();
  spec.topic = GlobalPartialsTopic(decl.app_id, decl.name);
  spec.kafka.emplace_back("bootstrap.servers", OptionValue::Scalar(decl.bootstrap_servers));
  spec.group_id = "rill-reader-" + decl.name + "-" +
                  std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                     std::chrono::system_clock::now().time_since_epoch())
                                     .count());
  RILL_RETURN_NOT_OK(MakeGlobalReader(engine_, spec));
  return std::vector<std::string>{decl.name, decl.name + "__partials"};
}

void CatalogImpl::RecordMaterializedViewLocked(const MaterializedViewDecl& decl,
                                               const std::string& origin,
                                               std::vector<std::string> reads,
                                               std::vector<std::string> writes) {
  CatalogEntry e;
  e.kind = DdlObject::kMaterializedView;
  e.name = decl.name;
  e.reads = std::move(reads);
  e.writes = std::move(writes);
  e.origin = origin;
  e.statement.object = DdlObject::kMaterializedView;
  e.statement.name = decl.name;
  e.statement.query = decl.sql;
  e.statement.with = CanonicalIncremental(Without(decl.given, {"name", "sql", "type"}),
                                          decl.incremental);
  RecordLocked(std::move(e));
}

Status CatalogImpl::CreateStreamViewLocked(const StreamViewDecl& decl,
                                           const std::string& origin) {
  RILL_RETURN_NOT_OK(CheckFreeLocked(DdlObject::kStreamView, decl.name));
  if (decl.output != decl.name) {
    RILL_RETURN_NOT_OK(CheckFreeLocked(DdlObject::kTable, decl.output));
  }
  if (Strict(origin)) RILL_RETURN_NOT_OK(CheckTableLocked(decl.source, "source"));
  auto task = MakeStreamView(decl, engine_);
  if (!task.ok()) return Refused(task.status(), decl.name);
  if (Status st = engine_->AddSqlTask(*task); !st.ok()) return Refused(st, decl.name);
  CatalogEntry e;
  e.kind = DdlObject::kStreamView;
  e.name = decl.name;
  e.reads = {decl.source};
  e.writes = {decl.output};
  e.origin = origin;
  e.statement.object = DdlObject::kStreamView;
  e.statement.name = decl.name;
  e.statement.query = decl.sql;
  e.statement.with = Without(decl.given, {"name", "sql"});
  RecordLocked(std::move(e));
  return Status::OK();
}

Status CatalogImpl::CreateWindowLocked(const WindowDecl& decl, const std::string& origin) {
  const WindowTaskOptions& o = decl.options;
  RILL_RETURN_NOT_OK(CheckFreeLocked(DdlObject::kWindow, o.name));
  if (o.output_table != o.name) {
    RILL_RETURN_NOT_OK(CheckFreeLocked(DdlObject::kTable, o.output_table));
  }
  if (Strict(origin)) RILL_RETURN_NOT_OK(CheckTableLocked(o.source_table, "source"));
  auto task = MakeWindow(decl);
  if (!task.ok()) return Refused(task.status(), o.name);
  if (Status st = engine_->AddWindowTask(*task); !st.ok()) return Refused(st, o.name);
  CatalogEntry e;
  e.kind = DdlObject::kWindow;
  e.name = o.name;
  e.reads = {o.source_table};
  e.writes = {o.output_table};
  e.origin = origin;
  e.statement.object = DdlObject::kWindow;
  e.statement.name = o.name;
  e.statement.with = Without(decl.given, {"name"});
  RecordLocked(std::move(e));
  return Status::OK();
}

Status CatalogImpl::CreateSinkLocked(const SinkDecl& decl, const std::string& origin) {
  const std::string& name = decl.options.name;
  RILL_RETURN_NOT_OK(CheckFreeLocked(DdlObject::kSink, name));
  if (Strict(origin)) RILL_RETURN_NOT_OK(CheckTableLocked(decl.options.table, "FROM"));
  if (engine_->GetTable(decl.options.table).ok()) {
    auto started = StartSink(decl, engine_);
    if (!started.ok()) return Refused(started.status(), name);
  } else {
    pending_sinks_[name] = decl;  // the table is a view's output still to come
  }
  CatalogEntry e;
  e.kind = DdlObject::kSink;
  e.name = name;
  e.reads = {decl.options.table};
  e.origin = origin;
  e.statement.object = DdlObject::kSink;
  e.statement.name = name;
  e.statement.from = decl.options.table;
  e.statement.with.emplace_back("connector", OptionValue::Scalar(decl.kind));
  for (auto& option : Without(decl.given, {"name", "table", "connector", "type"})) {
    e.statement.with.push_back(std::move(option));
  }
  RecordLocked(std::move(e));
  return Status::OK();
}

Status CatalogImpl::CreateKpiLocked(const KpiDecl& decl, const std::string& origin) {
  const std::string& name = decl.query.name;
  RILL_RETURN_NOT_OK(CheckFreeLocked(DdlObject::kKpi, name));
  if (metrics_ == nullptr) {
    return DeclError(kSqlStateBadValue, "KPI queries need a metrics store");
  }
  RILL_ASSIGN_OR_RAISE(std::vector<std::string> reads,
                       QueryTablesLocked(decl.query.sql, Strict(origin)));
  if (Status st = metrics_->AddKpiQuery(decl.query); !st.ok()) return Refused(st, name);
  CatalogEntry e;
  e.kind = DdlObject::kKpi;
  e.name = name;
  e.reads = std::move(reads);
  e.origin = origin;
  e.statement.object = DdlObject::kKpi;
  e.statement.name = name;
  e.statement.query = decl.query.sql;
  e.statement.with = Without(decl.given, {"name", "sql"});
  RecordLocked(std::move(e));
  return Status::OK();
}

Status CatalogImpl::CreateAlertRuleLocked(const AlertRuleDecl& decl, const std::string& origin) {
  const std::string& name = decl.rule.name;
  RILL_RETURN_NOT_OK(CheckFreeLocked(DdlObject::kAlertRule, name));
  if (metrics_ == nullptr) {
    return DeclError(kSqlStateBadValue, "alert rules need a metrics store");
  }
  if (Status st = metrics_->AddAlertRule(decl.rule); !st.ok()) return Refused(st, name);
  CatalogEntry e;
  e.kind = DdlObject::kAlertRule;
  e.name = name;
  e.origin = origin;
  e.statement.object = DdlObject::kAlertRule;
  e.statement.name = name;
  e.statement.with = Without(decl.given, {"name"});
  RecordLocked(std::move(e));
  return Status::OK();
}

void CatalogImpl::RecordLocked(CatalogEntry entry) {
  entry.statement.verb = DdlStatement::Verb::kCreate;
  entry.sql = CreateSql(entry.statement);
  entry.options = OptionsText(entry.statement.with);
  entries_.push_back(std::move(entry));
}

}  // namespace rill::pipeline::catalog_internal
