#include "rill/server/pgwire/pg_executor.h"

#include <chrono>
#include <condition_variable>
#include <thread>

#include "rill/engine/engine.h"
#include "rill/metrics/metrics_store.h"
#include "rill/server/pgwire/pg_catalog.h"
#include "rill/sql/query_interrupt.h"
#include "rill/sql/sql_engine.h"

namespace rill::pgwire {

EnginePgExecutor::EnginePgExecutor(Engine* engine, MetricsStore* metrics,
                                   int64_t query_timeout_ms)
    : engine_(engine), metrics_(metrics), query_timeout_ms_(query_timeout_ms) {}

Status EnginePgExecutor::Init() { return engine_->sql().DefineHelpers(CatalogDefinitionSql()); }

Result<std::shared_ptr<arrow::Table>> EnginePgExecutor::Run(const std::string& database,
                                                            std::string_view sql,
                                                            PgQueryControl* control) {
  if (database == kMetricsDatabase) {
    if (metrics_ == nullptr) {
      return Status::KeyError("database \"", kMetricsDatabase, "\" is not available here");
    }
    return metrics_->QueryMetrics(sql);
  }
  QueryInterrupt interrupt;
  if (control != nullptr) {
    control->SetInterrupt([&interrupt] { interrupt.Interrupt(); });
    if (control->cancelled()) {
      interrupt.Interrupt();
    }
  }
  // The statement timeout: a watchdog that interrupts the query when it is due.
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  bool timed_out = false;
  std::thread watchdog;
  if (query_timeout_ms_ > 0) {
    watchdog = std::thread([&] {
      std::unique_lock<std::mutex> lock(mu);
      if (!cv.wait_for(lock, std::chrono::milliseconds(query_timeout_ms_), [&] { return done; })) {
        timed_out = true;
        interrupt.Interrupt();
      }
    });
  }
  auto result = engine_->sql().Query(sql, &interrupt);
  if (watchdog.joinable()) {
    {
      std::lock_guard<std::mutex> lock(mu);
      done = true;
    }
    cv.notify_all();
    watchdog.join();
  }
  if (control != nullptr) {
    control->SetInterrupt(nullptr);
  }
  if (timed_out && !result.ok()) {
    return Status::Cancelled("canceling statement due to statement timeout (",
                             query_timeout_ms_, " ms)");
  }
  return result;
}

}  // namespace rill::pgwire
