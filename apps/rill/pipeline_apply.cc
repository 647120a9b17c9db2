// ApplyPipeline: create what a parsed pipeline declares, through the engine's
// catalog (src/rill/pipeline/catalog.h), so that what a file declares is
// listed, dumped and saved like what SQL declares.
#include <arrow/api.h>

#include "pipeline.h"
#include "rill/pipeline/catalog.h"

namespace rill::app {

namespace {

Status AddGenerator(const ConnectorSpec& c, Engine& engine) {
  auto table = engine.GetTable(c.table);
  RILL_RETURN_NOT_OK(table.status());
  Clock clock = engine.options().clock;
  if (!clock) {
    clock = [&engine] { return engine.Now(); };
  }
  RILL_ASSIGN_OR_RAISE(auto made, GeneratorConnector::Make(c.name, c.table,
                                                           (*table)->user_schema(), c.generator,
                                                           c.limits, clock));
  return engine.AddConnector(std::move(made));
}

}  // namespace

Status ApplyPipeline(const Pipeline& pipeline, Engine& engine, MetricsStore* metrics) {
  if (metrics == nullptr && (!pipeline.kpis.empty() || !pipeline.rules.empty())) {
    const SourceRef& where =
        pipeline.kpis.empty() ? pipeline.rules.front().where : pipeline.kpis.front().where;
    return where.Wrap(Status::Invalid("KPI queries and alert rules need a metrics store"));
  }
  pipeline::Catalog& catalog = pipeline::Catalog::For(&engine);
  if (metrics != nullptr) catalog.SetMetricsStore(metrics);
  const std::string& origin = pipeline.file;
  for (const TableSpec& t : pipeline.tables) {
    pipeline::TableDecl decl;
    decl.name = t.name;
    decl.schema = t.schema;
    decl.options = t.options;
    RILL_RETURN_NOT_OK(t.where.Wrap(catalog.CreateTable(decl, origin)));
  }
  for (const ConnectorSpec& c : pipeline.connectors) {
    // The generator is the binary's own (not a kind SQL can declare).
    Status st = c.type == "generator" ? AddGenerator(c, engine)
                                      : catalog.CreateSource(c.source, origin);
    RILL_RETURN_NOT_OK(c.where.Wrap(st));
  }
  for (const SqlTaskSpec& t : pipeline.sql_tasks) {
    pipeline::MaterializedViewDecl decl;
    decl.name = t.name;
    decl.sql = t.sql;
    decl.output = t.output;
    decl.interval_seconds = t.interval_seconds;
    decl.primary_key = t.primary_key;
    decl.incremental = t.incremental;
    decl.scope = t.scope;
    decl.app_id = t.app_id;
    decl.bootstrap_servers = t.bootstrap_servers;
    decl.given = t.given;
    RILL_RETURN_NOT_OK(t.where.Wrap(catalog.CreateMaterializedView(decl, origin)));
  }
  for (const StreamTaskSpec& t : pipeline.stream_tasks) {
    pipeline::StreamViewDecl decl{t.name,      t.sql,
                                  t.source,    t.output,
                                  t.retention, t.interval_seconds,
                                  t.given};
    RILL_RETURN_NOT_OK(t.where.Wrap(catalog.CreateStreamView(decl, origin)));
  }
  for (const JoinTaskSpec& t : pipeline.join_tasks) {
    // Join tasks have no DDL: the engine runs them, the catalog does not list them.
    auto task = TableJoinTask::Make(t.options);
    RILL_RETURN_NOT_OK(t.where.Wrap(task.status()));
    RILL_RETURN_NOT_OK(t.where.Wrap(engine.AddJoinTask(*task)));
  }
  for (const WindowTaskSpec& t : pipeline.window_tasks) {
    RILL_RETURN_NOT_OK(t.where.Wrap(catalog.CreateWindow({t.options, t.given}, origin)));
  }
  for (const KpiSpec& k : pipeline.kpis) {
    RILL_RETURN_NOT_OK(k.where.Wrap(catalog.CreateKpi({k.query, k.given}, origin)));
  }
  for (const RuleSpec& r : pipeline.rules) {
    RILL_RETURN_NOT_OK(r.where.Wrap(catalog.CreateAlertRule({r.rule, r.given}, origin)));
  }
  // Sinks of tables that exist start now; those of task outputs wait in the
  // catalog until the table appears (its watcher starts them).
  for (const SinkSpec& s : pipeline.sinks) {
    RILL_RETURN_NOT_OK(s.where.Wrap(catalog.CreateSink(s, origin)));
  }
  return Status::OK();
}

}  // namespace rill::app
