// Declared views, KPI queries and alert rules: one option table per kind,
// shared by the pipeline file and the SQL DDL.
//
//   kind               YAML                        SQL DDL
//   materialized view  tasks: (type: sql)          CREATE MATERIALIZED VIEW n WITH (...)
//   AS q stream view        stream_tasks:               CREATE STREAM VIEW n WITH (...)
//   AS q KPI query          kpis:                       CREATE KPI n WITH (...) AS q
//   alert rule         alert_rules:                CREATE ALERT RULE n WITH (...)
//
// The name and the query are options in YAML (`name`, `sql`) and parts of the
// statement in SQL (the object's name, `AS <query>`); the Read* functions take
// them either way and refuse them given twice. Every other option has the same
// name, type and checks in both (options.h: ReadOptions):
//   materialized view: output (default: the name), interval_seconds (> 0,
//                      default 1), primary_key ("a, b" or a list),
//                      incremental (auto | true | false, default auto; YAML
//                      booleans too: engine/task.h IncrementalMode)
//   stream view:       source (required), output (default: the name),
//                      retention {max_rows, max_age_seconds, time_column} or
//                      flat max_rows / max_age_seconds (one of them required:
//                      the output is an append table), interval_seconds
//                      (>= 0; 0: every tick)
//   KPI query:         interval_seconds, chart_type (line | bar | scatter),
//                      x_col, y_col (metrics/kpi_query.h)
//   alert rule:        metric, op, threshold (required), cooldown_seconds,
//                      severity, message, enabled, webhook (an http(s) URL),
//                      webhook_format (slack | google_chat | custom). The
//                      pipeline file's mapping form `webhook: {url, format}`
//                      is flattened into webhook / webhook_format by the YAML
//                      parser before it reads the options.
//
// Errors carry SQLSTATEs (options.h): an unknown, repeated or missing option is
// 42601, a bad value 22023. Names of other objects (a view's source table) are
// not looked up here: that is the catalog's (42704).
//
// Threads: every function here is pure (the tables are built once, thread-safely)
// and may be called from any thread; MakeStreamView's engine must outlive the
// task it makes.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "rill/common/status.h"
#include "rill/engine/stream_sql_task.h"
#include "rill/engine/task.h"
#include "rill/metrics/alert_rule.h"
#include "rill/metrics/kpi_query.h"
#include "rill/pipeline/options.h"
#include "rill/table/retention.h"

namespace rill {
class Engine;
}  // namespace rill

namespace rill::pipeline {

/// A declared materialized view: a ScheduledSqlTask that keeps its output
/// table equal to the query's result, refreshed every `interval_seconds`.
struct MaterializedViewDecl {
  std::string name, sql, output;  ///< output: default the name
  double interval_seconds = 1.0;
  std::vector<std::string> primary_key;
  /// auto: maintained from the tables' changes when the query allows, else
  /// re-run; true: maintained incrementally (the catalog refuses a query that
  /// cannot be, 0A000); false: re-run every interval.
  IncrementalMode incremental = IncrementalMode::kAuto;
  /// "local" (default): over this engine's tables. "global": over every
  /// instance of the engine's application (cluster/global_view.h): each
  /// instance keeps partial aggregates per input partition and publishes them
  /// to a compacted topic, which every instance reads and merges.
  std::string scope = "local";
  /// scope global: read application `app_id`'s view on the Kafka cluster
  /// `bootstrap_servers` without being its instance (global_reader.h); the
  /// table of the query must be declared here with the application's columns.
  std::string app_id;
  std::string bootstrap_servers;
  /// The options as given (dump, SHOW VIEWS), without `name` and `sql`, which
  /// are the fields above.
  Options given;
};

/// A declared stream view: a StreamSqlTask over the rows `source` received
/// since its previous run, appended to `output`.
struct StreamViewDecl {
  std::string name, sql, source, output;  ///< output: default the name
  RetentionPolicy retention;              ///< enabled (max_rows or max_age_seconds)
  double interval_seconds = 0;
  Options given;  ///< as MaterializedViewDecl::given
};

/// A declared KPI query (query.name and query.sql set, query.Validate() holds).
struct KpiDecl {
  KpiQuery query;
  Options given;  ///< as MaterializedViewDecl::given
};

/// A declared alert rule (rule.name set, rule.Validate() holds).
struct AlertRuleDecl {
  AlertRule rule;
  Options given;  ///< as MaterializedViewDecl::given (no `name`)
};

/// The option tables of the four kinds (built once; the docs list them).
const OptionTable<MaterializedViewDecl>& MaterializedViewOptionTable();
const OptionTable<StreamViewDecl>& StreamViewOptionTable();
const OptionTable<KpiDecl>& KpiOptionTable();
const OptionTable<AlertRuleDecl>& AlertRuleOptionTable();

/// Read a declaration from `options`; `where` prefixes messages about the whole
/// declaration (e.g. "orders.yaml:12: tasks[0]" or "CREATE MATERIALIZED VIEW v").
/// `name` / `sql` may be given here (DDL) or among the options (YAML `name`,
/// `sql`), not both. Errors carry SQLSTATEs (options.h): unknown, repeated or
/// missing option 42601, bad value 22023.
Result<MaterializedViewDecl> ReadMaterializedView(const Options& options,
                                                  const std::string& where,
                                                  std::string name = "",
                                                  std::string sql = "");
Result<StreamViewDecl> ReadStreamView(const Options& options, const std::string& where,
                                      std::string name = "", std::string sql = "");
Result<KpiDecl> ReadKpi(const Options& options, const std::string& where,
                        std::string name = "", std::string sql = "");
Result<AlertRuleDecl> ReadAlertRule(const Options& options, const std::string& where,
                                    std::string name = "");

/// The four kinds' options as Markdown (a heading and a table each), like
/// SourceOptionsMarkdown(), for the docs and `rill pipeline options`.
std::string TaskOptionsMarkdown();

/// Make the task `decl` declares (with its `incremental` mode); add it with
/// Engine::AddSqlTask. Invalid for a declaration that ReadMaterializedView
/// would refuse (empty name, SQL or output; a non-positive interval). Whether
/// the query can be maintained incrementally is not checked here (it needs
/// the tables): see ScheduledSqlTask::CheckIncremental.
Result<std::shared_ptr<ScheduledSqlTask>> MakeMaterializedView(
    const MaterializedViewDecl& decl);

/// Make the stream task `decl` declares over `engine`'s tables (which must
/// outlive the task); add it with Engine::AddSqlTask. Invalid as
/// StreamSqlTask::Make.
Result<std::shared_ptr<StreamSqlTask>> MakeStreamView(const StreamViewDecl& decl,
                                                      Engine* engine);

}  // namespace rill::pipeline
