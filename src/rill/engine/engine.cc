// Engine: construction, the registry (tables, connectors, tasks, observers),
// events and their log lines, the background loop and the memory budget. The
// tick itself is in engine_tick.cc; the system tables in system_tables.cc.
#include "rill/engine/engine.h"

#include <algorithm>
#include <cstdlib>
#include <atomic>
#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include <arrow/builder.h>
#include <arrow/record_batch.h>
#include <arrow/table.h>
#include <arrow/util/base64.h>
#include <fmt/format.h>

#include "rill/common/arrow_init.h"
#include "rill/common/logging.h"
#include "rill/common/reaper.h"
#include "rill/connector/connector.h"
#include "rill/connector/kafka_connector.h"
#include "rill/connector/memory_connector.h"
#include "rill/engine/system_tables_internal.h"
#include "rill/engine/window_task.h"
#include "rill/sql/sql_engine.h"

namespace rill {

using engine_internal::kMetricsTable;
using engine_internal::kRejectsTable;
using engine_internal::MetricsSchema;
using engine_internal::RejectsSchema;

namespace {

spdlog::level::level_enum LogLevel(Severity severity) {
  switch (severity) {
    case Severity::kError: return spdlog::level::err;
    case Severity::kWarning: return spdlog::level::warn;
    case Severity::kInfo: return spdlog::level::info;
  }
  return spdlog::level::err;
}

std::shared_ptr<spdlog::logger> EventLogger(const EngineEvent& event) {
  return Logger(event.component.empty() ? std::string("engine") : event.component);
}

// Shedding ends once allocated memory is below this fraction of the budget, so
// the engine does not flip between shedding and taking input on every tick.
constexpr double kShedResumeFraction = 0.9;

/// A throw-away batch for the warm-up: an int64 key (each twice: the later
/// row wins), a string, a double, a boolean and a timestamp.
std::shared_ptr<arrow::RecordBatch> WarmUpBatch() {
  constexpr int64_t kRows = 16;
  arrow::Int64Builder keys;
  arrow::StringBuilder names;
  arrow::DoubleBuilder values;
  arrow::BooleanBuilder flags;
  arrow::TimestampBuilder times(arrow::timestamp(arrow::TimeUnit::MICRO),
                                arrow::default_memory_pool());
  for (int64_t i = 0; i < kRows; ++i) {
    (void)keys.Append(i % (kRows / 2));
    (void)names.Append("n" + std::to_string(i));
    (void)values.Append(0.5 * static_cast<double>(i));
    (void)flags.Append(i % 2 == 0);
    (void)times.Append(i);
  }
  std::vector<std::shared_ptr<arrow::Array>> columns(5);
  (void)keys.Finish(&columns[0]);
  (void)names.Finish(&columns[1]);
  (void)values.Finish(&columns[2]);
  (void)flags.Finish(&columns[3]);
  (void)times.Finish(&columns[4]);
  auto schema = arrow::schema({arrow::field("key", arrow::int64()), arrow::field("name", arrow::utf8()),
                               arrow::field("value", arrow::float64()),
                               arrow::field("flag", arrow::boolean()),
                               arrow::field("at", arrow::timestamp(arrow::TimeUnit::MICRO))});
  return arrow::RecordBatch::Make(std::move(schema), kRows, std::move(columns));
}

/// Once per process, when the first engine is made: one tick of a throw-away
/// engine that writes a batch from a MemoryConnector into a keyed table, so
/// the first real engine's first tick does not pay for first use (code and
/// data paths of the tick, the connector, the table's write and publish).
/// Issue 29: a 1K-row load's step on a fresh process took ~115 us, ~55 us once
/// another engine had ticked once; warming the table's write path alone did
/// not help. Costs one more engine (a DuckDB instance) at the first Make.
/// Failures are ignored: this only warms caches. RILL_WARM_UP=0 skips it.
void WarmUpProcessOnce() {
  static std::atomic<bool> started{false};
  if (started.exchange(true)) return;
  if (const char* env = std::getenv("RILL_WARM_UP"); env && std::string_view(env) == "0") return;
  auto engine = Engine::Make({});  // its own WarmUpProcessOnce returns at once: started is set
  if (!engine.ok()) return;
  auto batch = WarmUpBatch();
  TableOptions table;
  table.primary_key = {"key"};
  if (!(*engine)->RegisterTable("warm_up", batch->schema(), table).ok()) return;
  auto connector = std::make_shared<MemoryConnector>("warm_up", batch->schema());
  if (!(*engine)->AddConnector(connector).ok() || !connector->Push(batch).ok()) return;
  (void)(*engine)->Step();
}

}  // namespace

Result<MemoryBudgetPolicy> ParseMemoryBudgetPolicy(std::string_view text) {
  if (text == "warn") return MemoryBudgetPolicy::kWarn;
  if (text == "shed") return MemoryBudgetPolicy::kShed;
  return Status::Invalid("memory_budget_policy must be 'warn' or 'shed', got '", text, "'");
}

const char* MemoryBudgetPolicyName(MemoryBudgetPolicy policy) {
  return policy == MemoryBudgetPolicy::kShed ? "shed" : "warn";
}

Engine::Engine(EngineOptions options)
    : options_(std::move(options)), clock_(OrSystemClock(options_.clock)) {}

// GCC 12 pairs `new Engine` with the usual operator delete only, so the
// destroying delete run when Make fails reads to it as a mismatch.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
Result<std::unique_ptr<Engine>> Engine::Make(EngineOptions options) {
  ApplyTransparentHugePagesSetting();  // before the tables' first allocations
  if (options.trigger_interval_ms <= 0) {
    return Status::Invalid("trigger_interval_ms must be > 0, got ", options.trigger_interval_ms);
  }
  if (options.memory_budget_bytes < 0) {
    return Status::Invalid("memory_budget_bytes must be >= 0, got ", options.memory_budget_bytes);
  }
  if (options.memory_budget_policy == MemoryBudgetPolicy::kShed &&
      options.memory_budget_bytes <= 0) {
    return Status::Invalid(
        "memory_budget_policy 'shed' needs a memory budget (memory_budget_bytes > 0)");
  }
  if (options.max_records_per_tick < 0) {
    return Status::Invalid("max_records_per_tick must be >= 0, got ",
                           options.max_records_per_tick);
  }
  std::unique_ptr<Engine> engine(new Engine(std::move(options)));
  RILL_RETURN_NOT_OK(engine->Init());
  WarmUpProcessOnce();
  return engine;
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

Status Engine::Init() {
  RILL_RETURN_NOT_OK(InitializeArrowCompute());
  host_sampler_ = std::make_shared<HostSampler>();
  log_limiter_ = std::make_unique<RepeatLimiter<EventRepeatKey, EngineEvent>>(
      options_.log_repeat_window_seconds);
  SqlOptions sql_options;
  sql_options.threads = options_.sql_threads;
  RILL_ASSIGN_OR_RAISE(sql_, SqlEngine::Make(sql_options));

  TableOptions rejects;
  rejects.mode = TableMode::kAppend;
  rejects.retention = RetentionPolicy{options_.max_reject_rows, std::nullopt, "z_insert_ts"};
  rejects.clock = clock_;
  RILL_ASSIGN_OR_RAISE(rejects_, LiveTable::Make(kRejectsTable, RejectsSchema(), rejects));
  TableOptions metrics;
  metrics.clock = clock_;
  RILL_ASSIGN_OR_RAISE(metrics_table_, LiveTable::Make(kMetricsTable, MetricsSchema(), metrics));
  metrics_table_->SetRefresher([this] { WriteMetricsRow(); });
  for (const auto& t : {rejects_, metrics_table_}) {
    RILL_RETURN_NOT_OK(sql_->RegisterTable(t));
    tables_[t->name()] = t;
  }
  return Status::OK();
}

void Engine::operator delete(Engine* engine, std::destroying_delete_t) {
  // operator new allocates with the global one, of the default alignment.
  static_assert(alignof(Engine) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__);
  if (!engine->InsideOwnTick()) {
    engine->~Engine();
    ::operator delete(engine);
    return;
  }
  // The rest of the tick still runs on this thread over the engine's members:
  // end the loop after it, and destroy the engine elsewhere. ~Engine joins the
  // loop thread and waits for a tick running in Step(), so nothing runs engine
  // code once the members go.
  engine->Stop();  // inside a tick: only asks
  DeferDestruction([engine] {
    engine->~Engine();
    ::operator delete(engine);
  });
}

bool Engine::InsideOwnTick() {
  const auto self = std::this_thread::get_id();
  if (tick_owner_.load() == self) return true;
  std::lock_guard<std::mutex> lock(loop_mu_);
  return loop_thread_.joinable() && loop_thread_.get_id() == self;
}

Engine::~Engine() {
  Stop();  // joins the loop thread: operator delete never runs this on it
  {
    // A tick running in Step() on the thread whose callback let go of the
    // engine (operator delete deferred us) ends before the members go.
    std::lock_guard<std::mutex> tick(tick_mu_);
  }
  // Extensions (the sinks) go first: their threads read the tables and call
  // the engine, so they stop while everything is still there.
  std::map<std::string, std::unique_ptr<EngineExtension>> extensions;
  {
    std::lock_guard<std::mutex> lock(extensions_mu_);
    extensions.swap(extensions_);
  }
  extensions.clear();
  if (metrics_table_) {
    // rill_metrics may outlive the engine (a Python handle, a DuckDB scan):
    // write the last tick's row now, and the refresher must not call us later.
    metrics_table_->snapshot();
    metrics_table_->SetRefresher(nullptr);
  }
  std::vector<std::shared_ptr<Connector>> connectors;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [name, c] : connectors_) connectors.push_back(c);
  }
  for (auto& c : connectors) c->Stop();
  // Report repeats still held back, so no occurrence goes unlogged.
  std::vector<Counted<EngineEvent>> held;
  {
    std::lock_guard<std::mutex> lock(log_mu_);
    if (log_limiter_) log_limiter_->FlushAll(&held);
  }
  for (const auto& h : held) {
    EventLogger(h.item)->log(LogLevel(h.item.severity), "{} (repeated {} more times; last: {})",
                             h.item.message, h.count, h.item.detail);
  }
}

// Tables -------------------------------------------------------------------

Result<std::shared_ptr<LiveTable>> Engine::RegisterTable(const std::string& name,
                                                         std::shared_ptr<arrow::Schema> schema,
                                                         TableOptions options) {
  return CreateTable(name, std::move(schema), std::move(options), /*from_declaration=*/false);
}

std::shared_ptr<LiveTable> Engine::FindTable(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = tables_.find(name);
  return it == tables_.end() ? nullptr : it->second;
}

Result<std::shared_ptr<LiveTable>> Engine::GetTable(const std::string& name) const {
  auto t = FindTable(name);
  if (!t) return Status::KeyError("Unknown table '", name, "'");
  return t;
}

Result<std::shared_ptr<LiveTable>> Engine::GetOrCreateTable(const std::string& name,
                                                            std::shared_ptr<arrow::Schema> schema,
                                                            TableOptions options) {
  if (auto t = FindTable(name)) return t;
  // A declared table is created with its declared options.
  auto created = CreateTable(name, std::move(schema), std::move(options),
                             /*from_declaration=*/true);
  if (!created.ok()) {
    // Lost a race with another creator: return theirs.
    if (auto t = FindTable(name)) return t;
  }
  return created;
}

std::vector<std::string> Engine::TableNames() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> names;
  for (const auto& [name, t] : tables_) {
    if (name.rfind("rill_", 0) != 0) names.push_back(name);
  }
  return names;
}

Status Engine::DropTable(const std::string& name) {
  if (name.rfind("rill_", 0) == 0) {
    return Status::Invalid("Table '", name, "' belongs to the engine and cannot be dropped");
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (declared_.erase(name)) return Status::OK();  // never had a schema nor a view
    if (!tables_.erase(name)) return Status::KeyError("Unknown table '", name, "'");
  }
  return sql_->UnregisterTable(name);
}

// Connectors -----------------------------------------------------------------

Status Engine::AddConnector(std::shared_ptr<Connector> connector) {
  if (!connector) return Status::Invalid("add_connector: null connector");
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (connectors_.count(connector->name())) {
      return Status::Invalid("A connector named '", connector->name(), "' is already added");
    }
    connectors_[connector->name()] = connector;
  }
  if (auto table = FindTable(connector->target_table())) {
    connector->SetTargetSchema(table->user_schema());
  }
  Status st = Status::OK();
  KafkaGroupProvider group;
  {
    std::lock_guard<std::mutex> lock(mu_);
    group = kafka_group_;
  }
  if (group) {
    if (auto* kafka = dynamic_cast<KafkaConnector*>(connector.get())) {
      auto consumer = group(kafka->bootstrap_servers());
      st = consumer.ok() ? kafka->JoinGroup(*consumer) : consumer.status();
    }
  }
  if (st.ok()) st = connector->Start();
  if (!st.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    connectors_.erase(connector->name());
    return st;
  }
  return Status::OK();
}

void Engine::SetKafkaGroupProvider(KafkaGroupProvider provider) {
  std::lock_guard<std::mutex> lock(mu_);
  kafka_group_ = std::move(provider);
}

Status Engine::RemoveConnector(const std::string& name) {
  std::shared_ptr<Connector> connector;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = connectors_.find(name);
    if (it == connectors_.end()) return Status::KeyError("Unknown connector '", name, "'");
    connector = it->second;
    connectors_.erase(it);
  }
  connector->Stop();
  // Write what it still buffered, so removing a connector loses nothing.
  auto batches = connector->Poll();
  if (!batches.ok()) batches = connector->Poll();  // an error reported once keeps the rows
  {
    std::lock_guard<std::mutex> tick(tick_mu_);
    TakeConnectorRejects(*connector, clock_());
  }
  if (batches.ok() && !batches->empty()) {
    std::lock_guard<std::mutex> tick(tick_mu_);
    double now = clock_();
    for (const auto& b : *batches) {
      // As a tick would: a declared or unknown target is created from the batch.
      auto table = GetOrCreateTable(connector->target_table(), b->schema());
      if (!table.ok()) {
        RejectBatch(connector->target_table(), name, b, table.status(), now);
        continue;
      }
      auto written = (*table)->Write(b, now);
      if (!written.ok()) RejectBatch((*table)->name(), name, b, written.status(), now);
    }
  }
  if (batches.ok() && (!commits_follow_checkpoints_.load() || connector->CommitsFollowTicks())) {
    connector->CommitApplied();
  }
  if (batches.ok()) connector->Applied();
  return Status::OK();
}

std::vector<std::shared_ptr<Connector>> Engine::Connectors() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::shared_ptr<Connector>> out;
  for (const auto& [name, c] : connectors_) out.push_back(c);
  return out;
}

// Tasks -------------------------------------------------------------------

namespace {

Status AddTask(std::map<std::string, std::shared_ptr<Task>>& tasks,
               std::map<std::string, std::string>& kinds, std::shared_ptr<Task> task,
               const char* kind) {
  if (!task) return Status::Invalid("null task");
  if (task->name().empty()) return Status::Invalid("A task needs a name");
  if (task->interval_seconds() < 0) {
    return Status::Invalid("Task '", task->name(), "': interval_seconds must be >= 0");
  }
  if (tasks.count(task->name())) {
    return Status::Invalid("A task named '", task->name(), "' is already added");
  }
  kinds[task->name()] = kind;
  tasks[task->name()] = std::move(task);
  return Status::OK();
}

Status RemoveTask(std::map<std::string, std::shared_ptr<Task>>& tasks,
                  std::map<std::string, std::string>& kinds, const std::string& name,
                  const char* kind) {
  auto it = kinds.find(name);
  if (it == kinds.end() || it->second != kind) {
    return Status::KeyError("Unknown ", kind, " task '", name, "'");
  }
  kinds.erase(it);
  tasks.erase(name);
  return Status::OK();
}

}  // namespace

Status Engine::AddSqlTask(std::shared_ptr<ScheduledSqlTask> task) {
  std::lock_guard<std::mutex> lock(mu_);
  return AddTask(tasks_, task_kinds_, std::move(task), "sql");
}
Status Engine::RemoveSqlTask(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  return RemoveTask(tasks_, task_kinds_, name, "sql");
}
Status Engine::AddJoinTask(std::shared_ptr<TableJoinTask> task) {
  std::lock_guard<std::mutex> lock(mu_);
  return AddTask(tasks_, task_kinds_, std::move(task), "join");
}
Status Engine::RemoveJoinTask(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  return RemoveTask(tasks_, task_kinds_, name, "join");
}

Status Engine::AddWindowTask(std::shared_ptr<WindowTask> task) {
  if (!task) return Status::Invalid("null window task");
  task->Attach(this);  // before the tick can run it
  {
    std::lock_guard<std::mutex> lock(mu_);
    RILL_RETURN_NOT_OK(AddTask(tasks_, task_kinds_, task, "window"));
  }
  return task->RegisterMetrics(this);
}
void Engine::SkipNewRowsOf(const std::string& table) {
  auto t = GetTable(table);
  if (!t.ok()) return;
  for (const auto& task : Tasks()) task->SkipNewRowsOf(**t);
}

void Engine::PauseNewRowsOf(const std::string& table) {
  auto t = GetTable(table);
  if (!t.ok()) return;
  for (const auto& task : Tasks()) task->PauseNewRowsOf(**t);
}

void Engine::SetPartitionShards(
    std::function<bool(const std::string&)> sharded,
    std::function<void(const std::string&, const std::string&)> state_made) {
  std::lock_guard<std::mutex> lock(mu_);
  sharded_ = std::move(sharded);
  state_made_ = std::move(state_made);
}

bool Engine::HeldPerPartition(const std::string& table) const {
  std::function<bool(const std::string&)> sharded;
  {
    std::lock_guard<std::mutex> lock(mu_);
    sharded = sharded_;
  }
  return sharded && sharded(table);
}

void Engine::StateTableMade(const std::string& state, const std::string& table) {
  std::function<void(const std::string&, const std::string&)> made;
  {
    std::lock_guard<std::mutex> lock(mu_);
    made = state_made_;
  }
  if (made) made(state, table);
}

std::vector<std::string> Engine::PartitionedStateTables(const std::string& table) {
  std::vector<std::string> out;
  for (const auto& task : Tasks()) {
    auto state = task->PartitionedStateTable(table);
    if (!state.ok()) {
      RecordEvent(EngineEvent::Engine(Severity::kError, task->name(),
                                      "The task's partitioned state table could not be made",
                                      state.status().ToString(), Now()));
    } else if (!state->empty()) {
      out.push_back(*state);
    }
  }
  return out;
}

namespace {
/// Call `fn` on every task; the first failure, the others still called.
template <typename F>
Status EveryTask(const std::vector<std::shared_ptr<Task>>& tasks, F fn) {
  Status first;
  for (const auto& task : tasks) {
    Status st = fn(*task);
    if (!st.ok() && first.ok()) first = st;
  }
  return first;
}
}  // namespace

Status Engine::DropTaskPartitions(const std::string& table,
                                  const std::vector<int32_t>& partitions) {
  return EveryTask(Tasks(), [&](Task& t) { return t.DropPartitions(table, partitions); });
}

Status Engine::RestoreTaskPartitions(const std::string& table,
                                     const std::vector<int32_t>& partitions) {
  const double now = Now();
  return EveryTask(Tasks(),
                   [&](Task& t) { return t.RestorePartitions(table, partitions, now); });
}

Status Engine::RemoveWindowTask(const std::string& name) {
  std::shared_ptr<Task> task;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (tasks_.count(name)) task = tasks_[name];
    RILL_RETURN_NOT_OK(RemoveTask(tasks_, task_kinds_, name, "window"));
  }
  std::static_pointer_cast<WindowTask>(task)->Detach(this);
  return Status::OK();
}

std::map<std::string, TaskStats> Engine::TaskStatistics() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::string, TaskStats> out;
  for (const auto& [name, t] : tasks_) out[name] = t->stats;
  return out;
}

Result<std::string> Engine::SaveTaskStates() {
  std::vector<std::shared_ptr<Task>> tasks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [name, t] : tasks_) tasks.push_back(t);
  }
  // One line per task with state: base64(name) base64(state).
  std::string text;
  for (const auto& task : tasks) {
    RILL_ASSIGN_OR_RAISE(std::string state, task->SaveState());
    if (state.empty()) continue;
    text += arrow::util::base64_encode(task->name()) + " " + arrow::util::base64_encode(state) +
            "\n";
  }
  return text;
}

Status Engine::RestoreTaskStates(std::string_view text) {
  while (!text.empty()) {
    const size_t end = std::min(text.find('\n'), text.size());
    std::string_view line = text.substr(0, end);
    text.remove_prefix(std::min(end + 1, text.size()));
    const size_t space = line.find(' ');
    if (space == std::string_view::npos) {
      return Status::Invalid("task_states: a line without a space");
    }
    RILL_ASSIGN_OR_RAISE(const std::string name, arrow::util::base64_decode(line.substr(0, space)));
    std::shared_ptr<Task> task;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = tasks_.find(name);
      if (it != tasks_.end()) task = it->second;
    }
    if (task == nullptr) continue;
    RILL_ASSIGN_OR_RAISE(const std::string state, arrow::util::base64_decode(line.substr(space + 1)));
    Status st = task->RestoreState(*sql_, state);
    if (!st.ok()) {
      // The task rebuilds its state from the tables instead (its first run).
      Logger("engine")->warn("task '{}' could not restore its state: {}", name, st.ToString());
    }
  }
  return Status::OK();
}

// Observers -----------------------------------------------------------------

Result<LiveTable::SubscriptionId> Engine::Subscribe(const std::string& table,
                                                    LiveTable::Subscriber callback) {
  if (auto t = FindTable(table)) return t->Subscribe(std::move(callback));
  return SubscribeDeclared(table, std::move(callback));
}

Status Engine::Unsubscribe(const std::string& table, LiveTable::SubscriptionId id) {
  id = ResolveSubscription(table, id);
  if (id == 0) return Status::OK();  // it was waiting for a declared table
  RILL_ASSIGN_OR_RAISE(auto t, GetTable(table));
  if (!t->Unsubscribe(id)) {
    return Status::KeyError("No subscription ", id, " on table '", table, "'");
  }
  return Status::OK();
}

Status Engine::RegisterBusinessMetric(const std::string& name, BusinessMetric evaluator) {
  if (name.empty()) return Status::Invalid("A business metric needs a name");
  if (!evaluator) return Status::Invalid("Business metric '", name, "' needs an evaluator");
  std::lock_guard<std::mutex> lock(mu_);
  business_metrics_[name] = std::move(evaluator);
  return Status::OK();
}

Status Engine::UnregisterBusinessMetric(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!business_metrics_.erase(name)) {
    return Status::KeyError("Unknown business metric '", name, "'");
  }
  return Status::OK();
}

uint64_t Engine::AddEventListener(EventListener listener) {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t id = next_listener_++;
  listeners_[id] = std::move(listener);
  return id;
}

void Engine::RemoveEventListener(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  listeners_.erase(id);
}

// Events ----------------------------------------------------------------------

void Engine::RecordEvent(EngineEvent event) {
  if (event.ts == 0) event.ts = clock_();
  LogEvent(event);
  std::vector<EventListener> listeners;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (event.severity == Severity::kError) ++metrics_.errors;
    recent_events_.push_back(event);
    while (static_cast<int64_t>(recent_events_.size()) > options_.max_recent_events) {
      recent_events_.pop_front();
    }
    for (const auto& [id, l] : listeners_) listeners.push_back(l);
  }
  for (const auto& l : listeners) {
    try {
      l(event);
    } catch (const std::exception& e) {
      Logger("engine")->error("event listener failed: {}", e.what());
    } catch (...) {
      Logger("engine")->error("event listener failed");
    }
  }
}

void Engine::RecordCheckpointFailure(uint64_t checkpoint_id, const Status& status) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++metrics_.checkpoint_failures;
  }
  RecordEvent(EngineEvent::Engine(
      Severity::kError, "checkpoint",
      fmt::format("Checkpoint {} failed; the earlier checkpoints are kept", checkpoint_id),
      status.ToString()));
}

std::vector<EngineEvent> Engine::RecentEvents() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {recent_events_.begin(), recent_events_.end()};
}

void Engine::LogEvent(const EngineEvent& event) {
  std::vector<Counted<EngineEvent>> lines;
  {
    std::lock_guard<std::mutex> lock(log_mu_);
    log_limiter_->Offer(RepeatKeyOf(event), event, event.ts, &lines);
  }
  // Logged after the lock is released: sinks may block.
  for (const auto& line : lines) {
    const EngineEvent& e = line.item;
    auto logger = EventLogger(e);
    if (line.count > 1) {  // a repeat that closed a window no tick swept
      logger->log(LogLevel(e.severity), "{} (repeated {} times; last: {})", e.message,
                  line.count, e.detail);
    } else if (e.detail.empty()) {
      logger->log(LogLevel(e.severity), "{}", e.message);
    } else {
      logger->log(LogLevel(e.severity), "{} ({})", e.message, e.detail);
    }
  }
}

void Engine::FlushRepeatedLogs(double now) {
  std::vector<Counted<EngineEvent>> lines;
  {
    std::lock_guard<std::mutex> lock(log_mu_);
    if (log_limiter_->tracked() == 0) return;
    log_limiter_->Sweep(now, &lines);
  }
  for (const auto& line : lines) {
    const EngineEvent& e = line.item;
    EventLogger(e)->log(LogLevel(e.severity),
                        "{} (repeated {} times in the last {:g} s; last: {})", e.message,
                        line.count, log_limiter_->window_seconds(), e.detail);
  }
}

// SQL ---------------------------------------------------------------------------

Result<std::shared_ptr<arrow::Table>> Engine::Query(std::string_view sql) {
  auto result = sql_->Query(sql);
  if (!result.ok()) return ExplainDeclaredTables(result.status());
  return result;
}

// Loop ------------------------------------------------------------------------------

Status Engine::Start() {
  std::lock_guard<std::mutex> lock(loop_mu_);
  if (running_.load()) return Status::OK();
  if (loop_thread_.joinable()) {
    // Stopped earlier from its own thread; it has finished or is about to.
    loop_thread_.join();
  }
  stop_requested_.store(false);
  running_.store(true);
  loop_thread_ = std::thread([this] { Loop(); });
  loop_thread_id_ = loop_thread_.get_id();
  return Status::OK();
}

void Engine::Loop() {
  const double interval = options_.trigger_interval_ms / 1000.0;
  auto next = std::chrono::steady_clock::now();
  while (!stop_requested_.load()) {
    auto latency = Step();
    if (!latency.ok()) {
      Logger("engine")->error("tick failed: {}", latency.status().ToString());
    }
    next += std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double>(interval));
    const auto now = std::chrono::steady_clock::now();
    // Overloaded (the tick overran, or a connector's backlog is over
    // max_records_per_tick): run the next tick at once, don't pile up.
    if (next < now || backlog_.load()) next = now;
    std::unique_lock<std::mutex> lock(loop_mu_);
    loop_cv_.wait_until(lock, next, [this] { return stop_requested_.load(); });
  }
  running_.store(false);
}

void Engine::Stop() {
  std::thread to_join;
  {
    std::lock_guard<std::mutex> lock(loop_mu_);
    stop_requested_.store(true);
    loop_cv_.notify_all();
    if (!loop_thread_.joinable()) return;
    if (loop_thread_id_ == std::this_thread::get_id() ||
        tick_owner_.load() == std::this_thread::get_id()) {
      // Called from inside a tick: the loop ends after its current tick. On a
      // thread running Step() the loop may be waiting for that tick's lock, so
      // joining it here would never return.
      return;
    }
    to_join = std::move(loop_thread_);
  }
  to_join.join();
  running_.store(false);
}

// Metrics and memory -------------------------------------------------------------------

EngineMetrics Engine::GetMetrics() const {
  std::lock_guard<std::mutex> lock(mu_);
  return metrics_;
}

int64_t Engine::AllocatedBytes() const {
  // Incremental views' state (groups, multisets) is heap memory outside Arrow's pool.
  return ArrowAllocatedBytes() + sql_->MemoryUsage() + task_state_bytes_.load();
}

bool Engine::CheckMemoryBudget() { return CheckMemoryBudgetAt(clock_(), /*notify_always=*/true); }

bool Engine::CheckMemoryBudgetAt(double now, bool notify_always) {
  const int64_t budget = options_.memory_budget_bytes;
  if (budget <= 0) return true;
  const int64_t allocated = AllocatedBytes();
  const bool over = allocated > budget;
  const bool shed = options_.memory_budget_policy == MemoryBudgetPolicy::kShed;
  const int64_t resume_below = static_cast<int64_t>(budget * kShedResumeFraction);
  bool crossed;
  bool shed_started = false;
  bool shed_ended = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    crossed = over && !over_budget_;
    over_budget_ = over;
    if (over && (crossed || notify_always)) ++metrics_.memory_warnings;
    if (shed) {
      const bool was = shedding_.load();
      shed_started = !was && over;
      shed_ended = was && allocated < resume_below;
      if (shed_started || shed_ended) shedding_.store(shed_started);
      metrics_.shedding = shedding_.load();
      std::lock_guard<std::mutex> row_lock(metrics_row_mu_);  // a leaf lock, inside mu_
      metrics_row_.shedding = metrics_.shedding;
    }
  }
  if (shed_started) {
    RecordEvent(EngineEvent::Engine(
        Severity::kWarning, "memory_budget",
        "Memory budget exceeded: shedding input (connectors are not drained)",
        fmt::format("{} bytes allocated, budget {} bytes; input is taken again below {} "
                    "bytes; meanwhile the connectors' buffers fill and their on_overflow "
                    "policy applies",
                    allocated, budget, resume_below),
        now));
  }
  if (shed_ended) {
    RecordEvent(EngineEvent::Engine(
        Severity::kInfo, "memory_budget", "Memory back under budget: taking input again",
        fmt::format("{} bytes allocated, budget {} bytes", allocated, budget), now));
  }
  if (over && (crossed || notify_always)) {
    RecordEvent(EngineEvent::Engine(
        Severity::kWarning, "memory_budget",
        fmt::format("Memory budget exceeded: {} bytes allocated, budget {} bytes", allocated,
                    budget),
        "", now));
    if (options_.on_memory_warning) {
      try {
        options_.on_memory_warning(allocated, budget);
      } catch (const std::exception& e) {
        RecordEvent(EngineEvent::Engine(Severity::kError, "on_memory_warning",
                                        "on_memory_warning callback failed", e.what(), now));
      }
    }
  }
  return !over;
}

Status Engine::CompactAll(bool full) {
  std::vector<std::shared_ptr<LiveTable>> tables;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [name, t] : tables_) tables.push_back(t);
  }
  for (const auto& t : tables) RILL_RETURN_NOT_OK(t->Compact(full));
  return Status::OK();
}

}  // namespace rill
