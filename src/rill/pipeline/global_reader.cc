#include "rill/pipeline/global_reader.h"

#include <arrow/type.h>

#include "rill/engine/engine.h"
#include "rill/engine/task.h"
#include "rill/pipeline/sources.h"
#include "rill/table/live_table.h"
#include "rill/table/schema.h"

namespace rill::pipeline {

namespace {

std::string Quoted(const std::string& name) {
  std::string out = "\"";
  for (char c : name) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

}  // namespace

std::string GlobalPartialsTopic(const std::string& app_id, const std::string& view) {
  return app_id + "-" + view + "-partials";
}

Result<GlobalPlan> PlanGlobalView(Engine* engine, const MaterializedViewDecl& decl) {
  auto not_global = [&decl](const Status& st) {
    return DeclError(kSqlStateNotSupported,
                     "\"" + decl.name + "\": scope = 'global': " + st.message());
  };
  auto planned = PlanGlobal(decl.sql);
  if (!planned.ok()) return not_global(planned.status());
  auto table = engine->GetTable(planned->table);
  if (!table.ok()) {
    return DeclError(kSqlStateUndefined,
                     "\"" + decl.name + "\": table \"" + planned->table + "\" does not exist");
  }
  if ((*table)->user_schema()->GetFieldIndex("_partition") < 0) {
    return DeclError(kSqlStateBadValue,
                     "\"" + decl.name + "\": scope = 'global' needs the input partition of "
                     "each row, and table \"" + planned->table +
                         "\" has no column _partition (declare it, with its Kafka source's "
                         "metadata_columns = true)");
  }
  return planned;
}

Status AddAndRunView(Engine* engine, const MaterializedViewDecl& view) {
  RILL_ASSIGN_OR_RAISE(auto task, MakeMaterializedView(view));
  RILL_RETURN_NOT_OK(engine->AddSqlTask(task));
  RILL_RETURN_NOT_OK(engine->RunTaskNow(view.name));
  auto stats = engine->TaskStatistics();
  auto it = stats.find(view.name);
  if (it != stats.end() && it->second.errors > 0) {
    return Status::Invalid("\"", view.name, "\": ", it->second.last_error);
  }
  return Status::OK();
}

Status MakeGlobalReader(Engine* engine, const GlobalReaderSpec& spec) {
  const std::string& view = spec.decl.name;
  const std::string partials = view + "__partials";
  Status made = [&]() -> Status {
    TableOptions keyed;
    keyed.primary_key = spec.plan.partial_key;
    keyed.clock = engine->options().clock;
    RILL_RETURN_NOT_OK(engine->RegisterTable(partials, spec.partial_schema, keyed).status());
    Options source = spec.kafka;
    source.emplace_back("name", OptionValue::Scalar(partials + "_in"));
    source.emplace_back("topics", OptionValue::Scalar(spec.topic));
    source.emplace_back("start", OptionValue::Scalar("earliest"));
    source.emplace_back("key_columns", OptionValue::List(spec.plan.partial_key));
    source.emplace_back("application_group", OptionValue::Scalar("false"));
    source.emplace_back("on_overflow", OptionValue::Scalar("error"));  // wait, never drop
    source.emplace_back("group.id", OptionValue::Scalar(spec.group_id));
    source.emplace_back("isolation.level", OptionValue::Scalar("read_committed"));
    // The partials arrive in small transactions every commit interval: a
    // fetch that waits for more data (librdkafka's 500 ms) would be most of
    // the view's delay.
    source.emplace_back("fetch.wait.max.ms", OptionValue::Scalar("20"));
    RILL_ASSIGN_OR_RAISE(SourceDecl decl,
                         ReadSource("kafka", source, "view \"" + view + "\"", partials));
    RILL_ASSIGN_OR_RAISE(auto connector, MakeSource(decl, spec.partial_schema));
    RILL_RETURN_NOT_OK(engine->AddConnector(connector));
    // The application-wide answer.
    MaterializedViewDecl final_view;
    final_view.name = final_view.output = view;
    final_view.sql = FinalSqlOver(spec.plan, Quoted(partials));
    final_view.primary_key = spec.plan.group_columns;
    final_view.interval_seconds = spec.decl.interval_seconds;
    final_view.incremental = spec.decl.incremental;
    return AddAndRunView(engine, final_view);
  }();
  if (!made.ok()) DropGlobalReader(engine, view);
  return made;
}

void DropGlobalReader(Engine* engine, const std::string& view) {
  (void)engine->RemoveSqlTask(view);
  (void)engine->DropTable(view);
  (void)engine->RemoveConnector(view + "__partials_in");
  (void)engine->DropTable(view + "__partials");
}

}  // namespace rill::pipeline
