#include "rill/server/pgwire/pg_executor.h"

#include <algorithm>
#include <chrono>

#include "rill/engine/engine.h"
#include "rill/metrics/metrics_store.h"
#include "rill/server/pgwire/pg_catalog.h"
#include "rill/sql/query_interrupt.h"
#include "rill/sql/sql_engine.h"
#include "rill/sql/sql_session.h"

namespace rill::pgwire {
namespace {

// How long the watchdog sleeps with no deadline (or one further away) before
// it looks again. Add wakes it only for a deadline due before that, so
// statements with the usual timeouts (seconds) never wake it: each wake-up
// is a context switch on the query's critical path.
constexpr auto kIdleWake = std::chrono::seconds(1);

class EngineSession : public PgExecutorSession {
 public:
  explicit EngineSession(SqlEngine* sql) : session(sql) {}
  SqlSession session;
};

}  // namespace

PgDeadlines::~PgDeadlines() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

uint64_t PgDeadlines::Add(Clock::time_point due, std::function<void()> fire) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!thread_.joinable()) {
    thread_ = std::thread([this] { Loop(); });
  }
  const uint64_t id = next_id_++;
  due_.emplace(due, std::make_pair(id, std::move(fire)));
  if (due < wake_at_) {
    cv_.notify_all();
  }
  return id;
}

bool PgDeadlines::Remove(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = due_.begin(); it != due_.end(); ++it) {
    if (it->second.first == id) {
      due_.erase(it);
      return false;
    }
  }
  return true;  // fired (Loop erases an entry when it fires it)
}

void PgDeadlines::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    const Clock::time_point now = Clock::now();
    if (due_.empty() || due_.begin()->first > now) {
      // wake_at_ is a copy of the due time: Remove may erase the entry meanwhile.
      wake_at_ = due_.empty() ? now + kIdleWake : std::min(due_.begin()->first, now + kIdleWake);
      cv_.wait_until(lock, wake_at_);
      continue;
    }
    auto first = due_.begin();
    first->second.second();
    due_.erase(first);
  }
}

EnginePgExecutor::EnginePgExecutor(Engine* engine, MetricsStore* metrics,
                                   int64_t query_timeout_ms)
    : engine_(engine), metrics_(metrics), query_timeout_ms_(query_timeout_ms) {}

Status EnginePgExecutor::Init() {
  RILL_RETURN_NOT_OK(engine_->sql().DefineHelpers(CatalogDefinitionSql()));
  if (metrics_ != nullptr) {
    // The same catalogs in the metrics database (psql -d rill_metrics: \dt, \d).
    RILL_RETURN_NOT_OK(metrics_->DefineHelpers(CatalogDefinitionSql(CatalogTables::kMainTables)));
  }
  return Status::OK();
}

Result<std::shared_ptr<arrow::Table>> EnginePgExecutor::Run(const std::string& database,
                                                            std::string_view sql,
                                                            PgQueryControl* control) {
  return RunInSession(nullptr, database, sql, control);
}

std::unique_ptr<PgExecutorSession> EnginePgExecutor::OpenSession(const std::string& database) {
  if (database == kMetricsDatabase) {
    return nullptr;
  }
  return std::make_unique<EngineSession>(&engine_->sql());
}

bool EnginePgExecutor::IsCheap(PgExecutorSession* session, const std::string& sql) {
  return session != nullptr && static_cast<EngineSession*>(session)->session.HasConstantPlan(sql);
}

Result<std::shared_ptr<arrow::Table>> EnginePgExecutor::RunInSession(PgExecutorSession* session,
                                                                     const std::string& database,
                                                                     std::string_view sql,
                                                                     PgQueryControl* control) {
  const bool metrics_db = database == kMetricsDatabase;
  if (metrics_db && metrics_ == nullptr) {
    return Status::KeyError("database \"", kMetricsDatabase, "\" is not available here");
  }
  QueryInterrupt interrupt;
  if (control != nullptr) {
    control->SetInterrupt([&interrupt] { interrupt.Interrupt(); });
    if (control->cancelled()) {
      interrupt.Interrupt();
    }
  }
  // The statement timeout: the shared watchdog interrupts the query when due.
  uint64_t deadline = 0;
  if (query_timeout_ms_ > 0) {
    deadline = deadlines_.Add(
        PgDeadlines::Clock::now() + std::chrono::milliseconds(query_timeout_ms_),
        [&interrupt] { interrupt.Interrupt(); });
  }
  Result<std::shared_ptr<arrow::Table>> result;
  if (metrics_db) {
    result = metrics_->QueryMetrics(sql, &interrupt);
  } else if (session != nullptr) {
    result = static_cast<EngineSession*>(session)->session.Query(std::string(sql), &interrupt);
  } else {
    result = engine_->sql().Query(sql, &interrupt);
  }
  const bool timed_out = deadline != 0 && deadlines_.Remove(deadline);
  if (control != nullptr) {
    control->SetInterrupt(nullptr);
  }
  if (timed_out && !result.ok()) {
    return Status::Cancelled("canceling statement due to statement timeout (",
                             query_timeout_ms_, " ms)");
  }
  return result;
}

Result<std::vector<std::string>> EnginePgExecutor::ParameterTypes(const std::string& database,
                                                                  std::string_view sql) {
  if (database == kMetricsDatabase) {
    if (metrics_ == nullptr) {
      return Status::KeyError("database \"", kMetricsDatabase, "\" is not available here");
    }
    return metrics_->MetricsParameterTypes(sql);
  }
  return engine_->sql().ParameterTypes(sql);
}

}  // namespace rill::pgwire
