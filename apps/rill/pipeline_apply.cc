// ApplyPipeline: create what a parsed pipeline declares.
#include <arrow/api.h>

#include "pipeline.h"
#include "rill/pipeline/sources.h"
#include "rill/engine/stream_sql_task.h"
#include "rill/engine/window_task.h"

namespace rill::app {

Status ApplyPipeline(const Pipeline& pipeline, Engine& engine, MetricsStore* metrics) {
  if (metrics == nullptr && (!pipeline.kpis.empty() || !pipeline.rules.empty())) {
    const SourceRef& where =
        pipeline.kpis.empty() ? pipeline.rules.front().where : pipeline.kpis.front().where;
    return where.Wrap(Status::Invalid("KPI queries and alert rules need a metrics store"));
  }
  for (const TableSpec& t : pipeline.tables) {
    TableOptions options = t.options;
    options.clock = engine.options().clock;
    RILL_RETURN_NOT_OK(t.where.Wrap(engine.RegisterTable(t.name, t.schema, options).status()));
  }
  for (const ConnectorSpec& c : pipeline.connectors) {
    auto table = engine.GetTable(c.table);
    RILL_RETURN_NOT_OK(c.where.Wrap(table.status()));
    std::shared_ptr<Connector> connector;
    if (c.type == "generator") {
      Clock clock = engine.options().clock;
      if (!clock) {
        clock = [&engine] { return engine.Now(); };
      }
      auto made = GeneratorConnector::Make(c.name, c.table, (*table)->user_schema(),
                                           c.generator, c.limits, clock);
      RILL_RETURN_NOT_OK(c.where.Wrap(made.status()));
      connector = *made;
    } else {
      std::shared_ptr<arrow::Schema> schema = (*table)->user_schema();
      auto made = pipeline::MakeSource(c.source, schema);
      RILL_RETURN_NOT_OK(c.where.Wrap(made.status()));
      connector = *made;
    }
    RILL_RETURN_NOT_OK(c.where.Wrap(engine.AddConnector(std::move(connector))));
  }
  for (const SqlTaskSpec& t : pipeline.sql_tasks) {
    RILL_RETURN_NOT_OK(t.where.Wrap(engine.AddSqlTask(std::make_shared<ScheduledSqlTask>(
        t.name, t.sql, t.output, t.interval_seconds, t.primary_key))));
  }
  for (const StreamTaskSpec& t : pipeline.stream_tasks) {
    auto task = StreamSqlTask::Make(t.name, t.sql, &engine, t.source, t.output, t.retention,
                                    t.interval_seconds);
    RILL_RETURN_NOT_OK(t.where.Wrap(task.status()));
    RILL_RETURN_NOT_OK(t.where.Wrap(engine.AddSqlTask(*task)));
  }
  for (const JoinTaskSpec& t : pipeline.join_tasks) {
    auto task = TableJoinTask::Make(t.options);
    RILL_RETURN_NOT_OK(t.where.Wrap(task.status()));
    RILL_RETURN_NOT_OK(t.where.Wrap(engine.AddJoinTask(*task)));
  }
  for (const WindowTaskSpec& t : pipeline.window_tasks) {
    auto task = WindowTask::Make(t.options);
    RILL_RETURN_NOT_OK(t.where.Wrap(task.status()));
    RILL_RETURN_NOT_OK(t.where.Wrap(engine.AddWindowTask(*task)));
  }
  for (const KpiSpec& k : pipeline.kpis) {
    RILL_RETURN_NOT_OK(k.where.Wrap(metrics->AddKpiQuery(k.query)));
  }
  for (const RuleSpec& r : pipeline.rules) {
    RILL_RETURN_NOT_OK(r.where.Wrap(metrics->AddAlertRule(r.rule)));
  }
  // Sinks of declared tables start now; those of task outputs when the table
  // appears (serve.cc calls AddPendingSinks again).
  return AddPendingSinks(pipeline, engine).status();
}

}  // namespace rill::app
