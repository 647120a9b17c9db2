// The catalog's implementation, shared by catalog.cc (statements, checks,
// drops), catalog_create.cc (creation), catalog_show.cc (SHOW and the graph)
// and catalog_dump.cc (SQL and YAML dumps). Private to src/rill/pipeline.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "rill/engine/engine.h"
#include "rill/pipeline/catalog.h"

namespace rill::pipeline::catalog_internal {

/// The options of `given` without those a statement writes elsewhere (its
/// name, INTO / FROM table, query), as `name = 'value'` pairs.
std::string OptionsText(const Options& given);
/// True for the kinds whose names are tables (one namespace).
bool Relational(DdlObject kind);
std::string Lower(std::string s);
/// SQL is checked as it is declared; a pipeline file keeps its lenient
/// order (a task may read a table that a later task or join makes), so its
/// dependencies are recorded, not checked, and queries fail at run time.
bool Strict(const std::string& origin);
/// `kind` "name" does not exist (42704).
Status Missing(DdlObject kind, const std::string& name);
/// The status of an engine call that failed while creating `name`, with a
/// SQLSTATE: a DuckDB catalog error is a missing relation (42704), a parser
/// error 42601, a binder error 42703, anything else a bad definition (22023).
Status Refused(const Status& status, const std::string& name);

/// `value` as SQL and YAML write a number: an integer without a fraction.
std::string FormatNumber(double value);
/// `given` without the options named in `drop`.
Options Without(const Options& given, const std::vector<std::string>& drop);
/// The CREATE statement of `s` (no trailing `;`).
std::string CreateSql(const DdlStatement& s);

class CatalogImpl : public Catalog, public EngineExtension {
 public:
  explicit CatalogImpl(Engine* engine);
  ~CatalogImpl() override;

  void SetMetricsStore(MetricsStore* metrics) override;
  void SetGlobalViewMaker(std::shared_ptr<GlobalViewMaker> maker) override;
  Result<DdlResult> Execute(std::string_view sql) override;
  Result<DdlResult> Execute(const DdlStatement& statement, const std::string& origin) override;
  Result<std::vector<DdlResult>> ExecuteScript(std::string_view sql) override;
  Status CreateTable(const TableDecl& decl, const std::string& origin) override;
  Status CreateSource(const SourceDecl& decl, const std::string& origin) override;
  Status CreateMaterializedView(const MaterializedViewDecl& decl,
                                const std::string& origin) override;
  Status CreateStreamView(const StreamViewDecl& decl, const std::string& origin) override;
  Status CreateWindow(const WindowDecl& decl, const std::string& origin) override;
  Status CreateSink(const SinkDecl& decl, const std::string& origin) override;
  Status CreateKpi(const KpiDecl& decl, const std::string& origin) override;
  Status CreateAlertRule(const AlertRuleDecl& decl, const std::string& origin) override;
  std::vector<CatalogEntry> Entries() const override;
  std::vector<std::string> PendingSinks() const override;
  std::string DumpSql() const override;
  std::string DumpYaml() const override;
  std::string GraphJson() const override;
  void AttachCheckpointer(Checkpointer* checkpointer) override;
  Status Replay(std::string_view saved) override;

 private:
  // Under mu_ (the *Locked functions).
  Result<DdlResult> ExecuteLocked(const DdlStatement& s, const std::string& origin);
  Result<DdlResult> CreateLocked(const DdlStatement& s, const std::string& origin);
  Result<DdlResult> DropLocked(const DdlStatement& s);
  Result<DdlResult> ShowLocked(const DdlStatement& s) const;
  Status CreateTableLocked(const TableDecl& decl, const std::string& origin);
  Status CreateSourceLocked(const SourceDecl& decl, const std::string& origin);
  Status CreateMaterializedViewLocked(const MaterializedViewDecl& decl,
                                      const std::string& origin);
  Status CreateGlobalViewLocked(const MaterializedViewDecl& decl, const std::string& origin);
  /// scope global with app_id: the read half only (global_reader.h).
  Result<std::vector<std::string>> CreateGlobalReaderLocked(const MaterializedViewDecl& decl);
  /// The catalog entry of a materialized view (local or global).
  void RecordMaterializedViewLocked(const MaterializedViewDecl& decl, const std::string& origin,
                                    std::vector<std::string> reads,
                                    std::vector<std::string> writes);
  Status CreateStreamViewLocked(const StreamViewDecl& decl, const std::string& origin);
  Status CreateWindowLocked(const WindowDecl& decl, const std::string& origin);
  Status CreateSinkLocked(const SinkDecl& decl, const std::string& origin);
  Status CreateKpiLocked(const KpiDecl& decl, const std::string& origin);
  Status CreateAlertRuleLocked(const AlertRuleDecl& decl, const std::string& origin);
  /// Drop `entry` (its dependents are gone already).
  Status DropEntryLocked(const CatalogEntry& entry);

  /// The entry of `kind` named `name`, or null. Tables, views and windows
  /// are looked up together (one namespace).
  const CatalogEntry* FindLocked(DdlObject kind, const std::string& name) const;
  /// 42710 when `name` is taken in `kind`'s namespace (catalog or engine).
  Status CheckFreeLocked(DdlObject kind, const std::string& name) const;
  /// 42704 unless `table` is a table of the engine or an output of an entry.
  Status CheckTableLocked(const std::string& table, const std::string& what) const;
  /// The tables `sql` reads; when `strict`, 42704 for one that does not
  /// exist and 42601 for a query DuckDB cannot parse.
  Result<std::vector<std::string>> QueryTablesLocked(const std::string& sql, bool strict) const;
  /// The entries that read a table `entry` writes, recursively, dependents last.
  std::vector<const CatalogEntry*> DependentsLocked(const CatalogEntry& entry) const;
  void RecordLocked(CatalogEntry entry);

  /// Start the pending sinks whose table exists now.
  void StartPendingSinks();
  void WatchPendingSinks();

  Engine* engine_;
  MetricsStore* metrics_ = nullptr;  // guarded by mu_
  std::shared_ptr<GlobalViewMaker> global_views_;  // guarded by mu_
  // Views of scope global: name -> read only (app_id: global_reader.h), or
  // made by global_views_. Guarded by mu_.
  std::map<std::string, bool> global_made_;
  mutable std::mutex mu_;
  std::vector<CatalogEntry> entries_;     // guarded by mu_, creation order
  std::map<std::string, SinkDecl> pending_sinks_;  // guarded by mu_
  std::map<std::string, std::string> sink_errors_;  // guarded by mu_: last start error
  std::condition_variable watch_cv_;
  bool stopping_ = false;  // guarded by mu_
  std::thread watcher_;    // runs while a sink is pending
};

}  // namespace rill::pipeline::catalog_internal
