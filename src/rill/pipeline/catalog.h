// The catalog: every object declared in one engine — by the pipeline file
// (`rill serve pipeline.yaml`), by SQL DDL (pgwire, POST /api/v1/sql,
// `engine.execute_ddl`) or by a restored checkpoint — applied to the engine,
// listed (SHOW), dropped (DROP [CASCADE]), dumped (as SQL or as a pipeline
// file) and saved in checkpoints.
//
//     Catalog& catalog = Catalog::For(engine);
//     catalog.SetMetricsStore(metrics);             // KPIs and alert rules go there
//     RILL_ASSIGN_OR_RAISE(DdlResult r, catalog.Execute("CREATE TABLE t (id BIGINT, "
//                                                       "PRIMARY KEY (id))"));
//
// Objects and the tables they read and write (the dependency graph):
//   TABLE              writes itself
//   SOURCE s INTO t    writes t (a connector)
//   MATERIALIZED VIEW  reads the tables of its query, writes its output table
//                      (a ScheduledSqlTask; the output is the view's name)
//   STREAM VIEW        reads `source`, writes its output (a StreamSqlTask)
//   WINDOW             reads `source`, writes its output (a WindowTask)
//   SINK s FROM t      reads t (sink/)
//   KPI, ALERT RULE    the metrics store's (a KPI reads the tables of its query)
// Tables, views and windows share one namespace (their names are tables);
// sources, sinks, KPIs and alert rules have one each. A CREATE whose
// dependency is missing is refused (42704) and changes nothing; a DROP of an
// object others read is refused (2BP01) unless CASCADE, which drops them first.
//
// A sink whose table does not exist yet (a stream view's output appears with
// its first rows) waits and starts when the table appears: the catalog's
// watcher thread checks every 100 ms while any sink waits.
//
// Persistence: AttachCheckpointer saves DumpSql() as the checkpoint section
// "catalog"; `rill serve` replays the newest checkpoint's catalog (Replay)
// before it restores the tables' rows and the sources' positions.
//
// Threads: every method may be called from any thread except from inside a
// tick (an engine callback); statements are serialized by the catalog's lock.
// The catalog is owned by the engine (an EngineExtension) and destroyed with
// it; the metrics store must outlive the engine's use of it (SetMetricsStore).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <arrow/type_fwd.h>

#include "rill/common/status.h"
#include "rill/pipeline/ddl.h"
#include "rill/pipeline/options.h"
#include "rill/pipeline/sinks.h"
#include "rill/pipeline/sources.h"
#include "rill/pipeline/tables.h"
#include "rill/pipeline/tasks.h"
#include "rill/pipeline/windows.h"

namespace rill {
class Checkpointer;
class Engine;
class MetricsStore;
}  // namespace rill

namespace rill::pipeline {

/// The answer to one statement.
struct DdlResult {
  /// The command tag a PostgreSQL client sees: "CREATE TABLE", "DROP SINK",
  /// "SHOW".
  std::string tag;
  /// SHOW: one row per object (name, kind, options, status, counters); null
  /// for CREATE and DROP.
  std::shared_ptr<arrow::Table> rows;
  /// A notice for the client ("table \"x\" does not exist, skipping"), or "".
  std::string notice;
};

/// One declared object.
struct CatalogEntry {
  DdlObject kind = DdlObject::kTable;
  std::string name;
  /// The statement that recreates it (without the trailing `;`).
  std::string sql;
  /// Tables it reads and writes (see the file comment).
  std::vector<std::string> reads;
  std::vector<std::string> writes;
  /// Where it was declared: "sql" or the pipeline file's name.
  std::string origin;
  /// Its options as `name = 'value'` pairs, as SHOW lists them.
  std::string options;
  /// The parts the dumps are made of.
  DdlStatement statement;
};

/// Makes the parts of a materialized view declared with scope = 'global'
/// (the cluster layer's GlobalViews, set by cluster::Application::Start when
/// the engine becomes an application's instance).
class GlobalViewMaker {
 public:
  virtual ~GlobalViewMaker() = default;
  /// Make view `decl` over every instance of the application. Returns the
  /// tables it writes, its output (decl.name) first. Refused (with a SQLSTATE)
  /// naming what does not fit; nothing stays.
  virtual Result<std::vector<std::string>> Create(const MaterializedViewDecl& decl) = 0;
  /// Remove what Create made for view `name` (its tables too): a DROP.
  virtual Status Drop(const std::string& name) = 0;
  /// View `name` is declared (its entry recorded); `statement` recreates it.
  /// Default: nothing.
  virtual void Declared(const std::string& name, const std::string& statement) {
    (void)name;
    (void)statement;
  }
};

/// See the file comment.
class Catalog {
 public:
  /// The engine's catalog, made on first call (owned by the engine).
  static Catalog& For(Engine* engine);
  virtual ~Catalog() = default;

  /// The metrics store that KPIs and alert rules are added to (borrowed; null:
  /// CREATE KPI / ALERT RULE are refused).
  virtual void SetMetricsStore(MetricsStore* metrics) = 0;
  /// What makes views of scope 'global' (null: they are refused, 22023).
  virtual void SetGlobalViewMaker(std::shared_ptr<GlobalViewMaker> maker) = 0;

  /// Parse and run one statement (ddl.h). Errors carry their SQLSTATE
  /// (options.h: SqlStateOf).
  virtual Result<DdlResult> Execute(std::string_view sql) = 0;
  /// Run a parsed statement; `origin` is recorded in its entry.
  virtual Result<DdlResult> Execute(const DdlStatement& statement,
                                    const std::string& origin = "sql") = 0;
  /// Run the statements of a script (separated by `;` outside quotes and
  /// comments) in order; stop at the first error, which names the statement's
  /// position ("statement 3: ...").
  virtual Result<std::vector<DdlResult>> ExecuteScript(std::string_view sql) = 0;

  /// Create a declared object (the pipeline file and Execute both come here).
  /// `origin` as in CatalogEntry.
  virtual Status CreateTable(const TableDecl& decl, const std::string& origin) = 0;
  virtual Status CreateSource(const SourceDecl& decl, const std::string& origin) = 0;
  virtual Status CreateMaterializedView(const MaterializedViewDecl& decl,
                                        const std::string& origin) = 0;
  virtual Status CreateStreamView(const StreamViewDecl& decl, const std::string& origin) = 0;
  virtual Status CreateWindow(const WindowDecl& decl, const std::string& origin) = 0;
  virtual Status CreateSink(const SinkDecl& decl, const std::string& origin) = 0;
  virtual Status CreateKpi(const KpiDecl& decl, const std::string& origin) = 0;
  virtual Status CreateAlertRule(const AlertRuleDecl& decl, const std::string& origin) = 0;

  /// The declared objects in the order they were created.
  virtual std::vector<CatalogEntry> Entries() const = 0;
  /// Sinks waiting for their table (see the file comment).
  virtual std::vector<std::string> PendingSinks() const = 0;

  /// The catalog as SQL statements, one per object, each ending in ";\n", in
  /// an order that recreates it (ExecuteScript of the text rebuilds it).
  virtual std::string DumpSql() const = 0;
  /// The catalog as a pipeline file (LoadPipeline of the text rebuilds it).
  virtual std::string DumpYaml() const = 0;
  /// The catalog as a graph for the dashboard: {"nodes":[...],"edges":[...]}
  /// with each node's kind, name, DDL, status and counters (docs/api.md).
  virtual std::string GraphJson() const = 0;

  /// Save the catalog with every checkpoint of `checkpointer` (section
  /// "catalog"); its restore creates what does not exist yet.
  virtual void AttachCheckpointer(Checkpointer* checkpointer) = 0;
  /// Create each object of a saved catalog (DumpSql text) that does not
  /// exist yet; tables the engine has already (restored) are adopted.
  virtual Status Replay(std::string_view saved) = 0;
};

/// Split a script into statements at `;` outside quotes and comments; blank
/// statements are dropped.
std::vector<std::string> SplitStatements(std::string_view sql);

/// The names a query mentions (identifiers outside literals and comments:
/// unquoted ones in lower case, quoted ones as written), sorted: the catalog
/// keeps those that are tables as the query's dependencies.
std::vector<std::string> QueryNames(std::string_view sql);

/// "table", "source", "materialized view", ... (SHOW's kind column).
const char* CatalogKindName(DdlObject kind);

/// The pipeline file's options of every kind that has an option table
/// (connectors, tasks of type sql, stream_tasks, windows, sinks, kpis,
/// alert_rules) as Markdown: `rill pipeline options`, docs/pipelines.md.
std::string PipelineFileOptionsMarkdown();

/// Every kind's options as Markdown: the body of docs/sql.md's option lists.
std::string DdlOptionsMarkdown();

}  // namespace rill::pipeline
