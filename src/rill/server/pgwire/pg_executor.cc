#include "rill/server/pgwire/pg_executor.h"

#include "rill/engine/engine.h"
#include "rill/metrics/metrics_store.h"
#include "rill/sql/sql_engine.h"
#include "rill/server/pgwire/pg_catalog.h"

namespace rill::pgwire {

EnginePgExecutor::EnginePgExecutor(Engine* engine, MetricsStore* metrics)
    : engine_(engine), metrics_(metrics) {}

Status EnginePgExecutor::Init() { return engine_->sql().DefineHelpers(CatalogDefinitionSql()); }

Result<std::shared_ptr<arrow::Table>> EnginePgExecutor::Run(const std::string& database,
                                                            std::string_view sql,
                                                            PgQueryControl* control) {
  (void)control;
  if (database == kMetricsDatabase) {
    if (metrics_ == nullptr) {
      return Status::KeyError("database \"", kMetricsDatabase, "\" is not available here");
    }
    return metrics_->QueryMetrics(sql);
  }
  return engine_->Query(sql);
}

}  // namespace rill::pgwire
