#include "rill/engine/engine.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <sstream>

#include <arrow/array.h>
#include <arrow/builder.h>
#include <arrow/io/memory.h>
#include <arrow/ipc/writer.h>
#include <arrow/memory_pool.h>
#include <arrow/record_batch.h>
#include <arrow/table.h>
#include <arrow/type.h>

#include "rill/common/arrow_init.h"
#include "rill/common/logging.h"
#include "rill/connector/connector.h"
#include "rill/sql/sql_engine.h"

namespace rill {

namespace {

constexpr char kRejectsTable[] = "rill_rejects";
constexpr char kMetricsTable[] = "rill_metrics";

double SteadySeconds() {
  using namespace std::chrono;
  return duration_cast<nanoseconds>(steady_clock::now().time_since_epoch()).count() / 1e9;
}

double ProcessCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

int64_t ProcessRssBytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0;
  if (statm >> size >> resident) {
    return resident * sysconf(_SC_PAGESIZE);
  }
  return 0;
}

std::string JsonEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out;
}

Result<std::string> SerializeIpc(const std::shared_ptr<arrow::RecordBatch>& batch) {
  RILL_ASSIGN_OR_RAISE(auto sink, arrow::io::BufferOutputStream::Create());
  RILL_ASSIGN_OR_RAISE(auto writer, arrow::ipc::MakeStreamWriter(sink, batch->schema()));
  RILL_RETURN_NOT_OK(writer->WriteRecordBatch(*batch));
  RILL_RETURN_NOT_OK(writer->Close());
  RILL_ASSIGN_OR_RAISE(auto buffer, sink->Finish());
  return buffer->ToString();
}

std::shared_ptr<arrow::Schema> RejectsSchema() {
  return arrow::schema({
      arrow::field("ts", arrow::float64()),
      arrow::field("table_name", arrow::utf8()),
      arrow::field("source", arrow::utf8()),
      arrow::field("reason", arrow::utf8()),
      arrow::field("rows", arrow::int64()),
      arrow::field("data", arrow::binary()),  // the rejected batch as an Arrow IPC stream
      arrow::field("position", arrow::utf8()),  // a rejected record: where it was
      arrow::field("raw", arrow::binary()),     // a rejected record: its bytes (truncated)
  });
}

std::shared_ptr<arrow::Schema> MetricsSchema() {
  return arrow::schema({
      arrow::field("timestamp", arrow::float64()),
      arrow::field("cpu_usage", arrow::float64()),
      arrow::field("total_memory", arrow::int64()),
      arrow::field("pyarrow_allocated_bytes", arrow::int64()),
      arrow::field("pyarrow_max_memory", arrow::int64()),
      arrow::field("duckdb_memory_bytes", arrow::int64()),
      arrow::field("records_processed", arrow::int64()),
      arrow::field("last_batch_records", arrow::int64()),
      arrow::field("last_latency_ms", arrow::float64()),
      arrow::field("avg_latency_ms", arrow::float64()),
      arrow::field("rows_per_second", arrow::float64()),
      arrow::field("ticks", arrow::int64()),
      arrow::field("business_metrics", arrow::utf8()),  // JSON object name -> value
  });
}

}  // namespace

Engine::Engine(EngineOptions options)
    : options_(std::move(options)), clock_(OrSystemClock(options_.clock)) {}

Result<std::unique_ptr<Engine>> Engine::Make(EngineOptions options) {
  if (options.trigger_interval_ms <= 0) {
    return Status::Invalid("trigger_interval_ms must be > 0, got ", options.trigger_interval_ms);
  }
  if (options.memory_budget_bytes < 0) {
    return Status::Invalid("memory_budget_bytes must be >= 0, got ", options.memory_budget_bytes);
  }
  std::unique_ptr<Engine> engine(new Engine(std::move(options)));
  RILL_RETURN_NOT_OK(engine->Init());
  return engine;
}

Status Engine::Init() {
  RILL_RETURN_NOT_OK(InitializeArrowCompute());
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
  for (const auto& t : {rejects_, metrics_table_}) {
    RILL_RETURN_NOT_OK(sql_->RegisterTable(t));
    tables_[t->name()] = t;
  }
  return Status::OK();
}

Engine::~Engine() {
  Stop();
  {
    std::lock_guard<std::mutex> lock(loop_mu_);
    if (loop_thread_.joinable()) {
      if (loop_thread_.get_id() == std::this_thread::get_id()) {
        loop_thread_.detach();
      } else {
        loop_thread_.join();
      }
    }
  }
  std::vector<std::shared_ptr<Connector>> connectors;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [name, c] : connectors_) connectors.push_back(c);
  }
  for (auto& c : connectors) c->Stop();
}

// Tables -------------------------------------------------------------------

Result<std::shared_ptr<LiveTable>> Engine::RegisterTable(const std::string& name,
                                                         std::shared_ptr<arrow::Schema> schema,
                                                         TableOptions options) {
  if (name.rfind("rill_", 0) == 0) {
    return Status::Invalid("Table name '", name, "' is reserved: names starting with 'rill_' ",
                           "belong to the engine");
  }
  if (!options.clock) options.clock = clock_;
  if (options.auto_compact_chunks == TableOptions{}.auto_compact_chunks) {
    options.auto_compact_chunks = options_.auto_compact_chunks;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (tables_.count(name)) {
      return Status::Invalid("Table '", name, "' is already registered");
    }
  }
  RILL_ASSIGN_OR_RAISE(auto table, LiveTable::Make(name, std::move(schema), std::move(options)));
  table->SetErrorHandler([this](const std::string& t, const std::string& what) {
    RecordEvent(EngineEvent{0, Severity::kError, "engine", "subscriber:" + t,
                            "Subscriber of table '" + t + "' failed", what, ""});
  });
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (tables_.count(name)) {
      return Status::Invalid("Table '", name, "' is already registered");
    }
    tables_[name] = table;
  }
  RILL_RETURN_NOT_OK(sql_->RegisterTable(table));
  return table;
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
  auto created = RegisterTable(name, std::move(schema), std::move(options));
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
  Status st = connector->Start();
  if (!st.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    connectors_.erase(connector->name());
    return st;
  }
  return Status::OK();
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
  {
    std::lock_guard<std::mutex> tick(tick_mu_);
    TakeConnectorRejects(*connector, clock_());
  }
  if (batches.ok() && !batches->empty()) {
    std::lock_guard<std::mutex> tick(tick_mu_);
    auto table = FindTable(connector->target_table());
    double now = clock_();
    for (const auto& b : *batches) {
      if (!table) {
        RejectBatch(connector->target_table(), name, b,
                    Status::KeyError("Unknown table '", connector->target_table(), "'"), now);
        continue;
      }
      auto written = table->Write(b, now);
      if (!written.ok()) RejectBatch(table->name(), name, b, written.status(), now);
    }
  }
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

std::map<std::string, TaskStats> Engine::TaskStatistics() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::string, TaskStats> out;
  for (const auto& [name, t] : tasks_) out[name] = t->stats;
  return out;
}

// Observers -----------------------------------------------------------------

Result<LiveTable::SubscriptionId> Engine::Subscribe(const std::string& table,
                                                    LiveTable::Subscriber callback) {
  RILL_ASSIGN_OR_RAISE(auto t, GetTable(table));
  return t->Subscribe(std::move(callback));
}

Status Engine::Unsubscribe(const std::string& table, LiveTable::SubscriptionId id) {
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
  auto logger = Logger(event.component.empty() ? std::string("engine") : event.component);
  const auto level = event.severity == Severity::kError     ? spdlog::level::err
                     : event.severity == Severity::kWarning ? spdlog::level::warn
                                                            : spdlog::level::info;
  if (event.detail.empty()) {
    logger->log(level, "{}", event.message);
  } else {
    logger->log(level, "{} ({})", event.message, event.detail);
  }
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

std::vector<EngineEvent> Engine::RecentEvents() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {recent_events_.begin(), recent_events_.end()};
}

// SQL ---------------------------------------------------------------------------

Result<std::shared_ptr<arrow::Table>> Engine::Query(std::string_view sql) {
  return sql_->Query(sql);
}

// Tick ----------------------------------------------------------------------------

void Engine::RejectBatch(const std::string& table, const std::string& source,
                         const std::shared_ptr<arrow::RecordBatch>& batch, const Status& reason,
                         double now) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++metrics_.rejected_batches;
    metrics_.rejected_records += batch->num_rows();
  }
  auto ipc = SerializeIpc(batch);
  arrow::DoubleBuilder ts;
  arrow::StringBuilder t, s, r;
  arrow::Int64Builder rows;
  arrow::BinaryBuilder data;
  bool ok = ts.Append(now).ok() && t.Append(table).ok() && s.Append(source).ok() &&
            r.Append(reason.message()).ok() && rows.Append(batch->num_rows()).ok() &&
            (ipc.ok() ? data.Append(*ipc) : data.AppendNull()).ok();
  if (ok) {
    std::vector<std::shared_ptr<arrow::Array>> cols(8);
    ok = ts.Finish(&cols[0]).ok() && t.Finish(&cols[1]).ok() && s.Finish(&cols[2]).ok() &&
         r.Finish(&cols[3]).ok() && rows.Finish(&cols[4]).ok() && data.Finish(&cols[5]).ok();
    cols[6] = arrow::MakeArrayOfNull(arrow::utf8(), 1).ValueOr(nullptr);
    cols[7] = arrow::MakeArrayOfNull(arrow::binary(), 1).ValueOr(nullptr);
    ok = ok && cols[6] != nullptr && cols[7] != nullptr;
    if (ok) {
      ok = rejects_->Write(arrow::RecordBatch::Make(RejectsSchema(), 1, cols), now).ok();
    }
  }
  RecordEvent(EngineEvent{now, Severity::kError, "engine", source,
                          "Rejected " + std::to_string(batch->num_rows()) + " rows for table '" +
                              table + "'" + (ok ? " (kept in rill_rejects)" : ""),
                          reason.message(), ""});
}

void Engine::IngestLocked(double now, int64_t* records) {
  for (const auto& connector : Connectors()) {
    auto polled = connector->Poll();
    if (!polled.ok()) {
      RecordEvent(EngineEvent{now, Severity::kError, "engine", connector->name(),
                              "Connector '" + connector->name() + "' failed to read",
                              polled.status().ToString(), ""});
      continue;
    }
    TakeConnectorRejects(*connector, now);
    if (polled->empty()) continue;
    auto table = FindTable(connector->target_table());
    if (!table) {
      // Create the target from the first batch, as get_or_create_table would.
      auto created = GetOrCreateTable(connector->target_table(), (*polled)[0]->schema());
      if (!created.ok()) {
        for (const auto& b : *polled) {
          RejectBatch(connector->target_table(), connector->name(), b, created.status(), now);
        }
        continue;
      }
      table = *created;
      connector->SetTargetSchema(table->user_schema());
      RecordEvent(EngineEvent{now, Severity::kInfo, "engine", connector->name(),
                              "Created table '" + table->name() + "' from connector data", "",
                              ""});
    }
    std::vector<std::shared_ptr<arrow::RecordBatch>> good;
    for (const auto& b : *polled) {
      auto reconciled = table->Reconcile(b);
      if (!reconciled.ok()) {
        RejectBatch(table->name(), connector->name(), b, reconciled.status(), now);
        continue;
      }
      good.push_back(*reconciled);
    }
    if (good.empty()) continue;
    auto written = table->Write(good, now);
    if (!written.ok()) {
      for (const auto& b : good) {
        RejectBatch(table->name(), connector->name(), b, written.status(), now);
      }
      continue;
    }
    *records += written->rows_in;
  }
}

void Engine::RunTasksLocked(double now) {
  std::vector<std::shared_ptr<Task>> tasks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [name, t] : tasks_) tasks.push_back(t);
  }
  for (const auto& task : tasks) {
    if (!task->Due(now)) continue;
    task->MarkRun(now);
    const double t0 = SteadySeconds();
    Status st;
    auto output = task->Run(*sql_, now);
    if (!output.ok()) {
      st = output.status();
    } else if (output->table) {
      auto table = FindTable(task->output_table());
      if (!table) {
        TableOptions options;
        options.primary_key = task->primary_key();
        options.retention = task->retention();
        if (task->retention() && task->primary_key().empty() && !output->replace) {
          options.mode = TableMode::kAppend;
        }
        auto created = GetOrCreateTable(task->output_table(), output->table->schema(), options);
        if (created.ok()) {
          table = *created;
        } else {
          st = created.status();
        }
      }
      if (table) {
        st = output->replace ? table->ReplaceState(output->table, now).status()
                             : table->Write(output->table, now).status();
      }
    }
    const double duration = SteadySeconds() - t0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      task->stats.runs++;
      task->stats.last_duration_s = duration;
      task->stats.total_duration_s += duration;
      task->stats.last_run_at = now;
      if (!st.ok()) {
        task->stats.errors++;
        task->stats.last_error = st.message();
      }
    }
    if (!st.ok()) {
      RecordEvent(EngineEvent{now, Severity::kError, "engine", task->name(),
                              "Task '" + task->name() + "' failed: " + st.message(),
                              "query: " + task->Describe() + "\nerror: " + st.ToString(), ""});
    }
  }
}

void Engine::UpdateMetricsLocked(double now, double latency, int64_t records) {
  // Business metrics are evaluated without the registry lock (they may be Python).
  std::vector<std::pair<std::string, BusinessMetric>> evaluators;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [name, fn] : business_metrics_) evaluators.emplace_back(name, fn);
  }
  std::vector<BusinessMetricValue> values;
  for (const auto& [name, fn] : evaluators) {
    BusinessMetricValue v{name, 0, false, ""};
    try {
      auto r = fn();
      if (r.ok()) {
        v.value = *r;
        v.ok = true;
      } else {
        v.error = r.status().ToString();
      }
    } catch (const std::exception& e) {
      v.error = e.what();
    } catch (...) {
      v.error = "unknown exception";
    }
    if (!v.ok) {
      RecordEvent(EngineEvent{now, Severity::kError, "engine", "metric:" + name,
                              "Business metric '" + name + "' failed", v.error, ""});
    }
    values.push_back(std::move(v));
  }

  // Process CPU % since the previous tick (tick_mu_ guards the two samples).
  const double cpu = ProcessCpuSeconds();
  const double wall = SteadySeconds();
  const double cpu_usage = last_cpu_wall_ > 0 && wall > last_cpu_wall_
                               ? 100.0 * (cpu - last_cpu_s_) / (wall - last_cpu_wall_)
                               : 0;
  last_cpu_s_ = cpu;
  last_cpu_wall_ = wall;

  const int64_t duckdb_bytes = sql_->MemoryUsage();
  EngineMetrics m;
  {
    std::lock_guard<std::mutex> lock(mu_);
    metrics_.timestamp = now;
    metrics_.ticks++;
    metrics_.records_processed += records;
    metrics_.last_batch_records = records;
    metrics_.last_latency_s = latency;
    total_latency_s_ += latency;
    metrics_.avg_latency_s = total_latency_s_ / metrics_.ticks;
    metrics_.max_latency_s = std::max(metrics_.max_latency_s, latency);
    rate_window_.emplace_back(wall, records);
    while (rate_window_.size() > 1 && wall - rate_window_.front().first > 1.0) {
      rate_window_.pop_front();
    }
    int64_t window_records = 0;
    for (const auto& [t, r] : rate_window_) window_records += r;
    const double span = std::max(wall - rate_window_.front().first,
                                 options_.trigger_interval_ms / 1000.0);
    metrics_.rows_per_second = window_records / span;
    metrics_.arrow_allocated_bytes = ArrowAllocatedBytes();
    metrics_.arrow_max_memory = ArrowPeakBytes();
    metrics_.duckdb_memory_bytes = duckdb_bytes;
    metrics_.business_metrics = std::move(values);
    m = metrics_;
  }

  std::string json = "{";
  for (const auto& v : m.business_metrics) {
    if (json.size() > 1) json += ",";
    json += "\"" + JsonEscape(v.name) + "\":";
    json += v.ok && std::isfinite(v.value) ? fmt::format("{}", v.value) : "null";
  }
  json += "}";
  // One row; Finish() resets a builder, so one builder per type is reused.
  arrow::DoubleBuilder f64_builder;
  arrow::Int64Builder i64_builder;
  arrow::StringBuilder str_builder;
  std::vector<std::shared_ptr<arrow::Array>> cols;
  auto f64 = [&](double v) {
    std::shared_ptr<arrow::Array> a;
    if (f64_builder.Append(v).ok() && f64_builder.Finish(&a).ok()) cols.push_back(a);
  };
  auto i64 = [&](int64_t v) {
    std::shared_ptr<arrow::Array> a;
    if (i64_builder.Append(v).ok() && i64_builder.Finish(&a).ok()) cols.push_back(a);
  };
  // In the order of MetricsSchema().
  f64(now);
  f64(cpu_usage);
  i64(ProcessRssBytes());
  i64(m.arrow_allocated_bytes);
  i64(m.arrow_max_memory);
  i64(m.duckdb_memory_bytes);
  i64(m.records_processed);
  i64(m.last_batch_records);
  f64(m.last_latency_s * 1e3);
  f64(m.avg_latency_s * 1e3);
  f64(m.rows_per_second);
  i64(m.ticks);
  {
    std::shared_ptr<arrow::Array> a;
    if (str_builder.Append(json).ok() && str_builder.Finish(&a).ok()) cols.push_back(a);
  }
  if (cols.size() == 13) {
    auto batch = arrow::RecordBatch::Make(MetricsSchema(), 1, cols);
    auto st = metrics_table_->ReplaceState(*arrow::Table::FromRecordBatches({batch}), now);
    if (!st.ok()) Logger("engine")->error("updating rill_metrics failed: {}", st.status().ToString());
  }
}

Result<double> Engine::Step() {
  std::unique_lock<std::mutex> lock(tick_mu_, std::try_to_lock);
  if (!lock.owns_lock()) {
    if (tick_owner_ == std::this_thread::get_id()) {
      return Status::Invalid("step() called from inside a tick (from a callback)");
    }
    lock.lock();
  }
  tick_owner_ = std::this_thread::get_id();
  auto result = StepLocked();
  tick_owner_ = std::thread::id();
  return result;
}

Result<double> Engine::StepLocked() {
  const double t0 = SteadySeconds();
  double now = clock_();
  // Tick times strictly increase, so "written since the last tick" is well defined.
  if (now <= last_tick_now_) now = std::nextafter(last_tick_now_, INFINITY);
  last_tick_now_ = now;

  int64_t records = 0;
  IngestLocked(now, &records);
  std::vector<std::shared_ptr<LiveTable>> tables;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [name, t] : tables_) tables.push_back(t);
  }
  for (const auto& t : tables) {
    if (!t->retention()) continue;
    auto expired = t->ApplyRetention(now);
    if (!expired.ok()) {
      RecordEvent(EngineEvent{now, Severity::kError, "engine", t->name(),
                              "Retention failed on table '" + t->name() + "'",
                              expired.status().ToString(), ""});
    }
  }
  RunTasksLocked(now);
  const double latency = SteadySeconds() - t0;
  UpdateMetricsLocked(now, latency, records);
  CheckMemoryBudgetAt(now, /*notify_always=*/false);
  return latency;
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
    if (next < now) next = now;  // overloaded: run the next tick at once, don't pile up
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
    if (loop_thread_id_ == std::this_thread::get_id()) {
      // Called from a callback on the loop thread: the loop ends after this tick.
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
  return ArrowAllocatedBytes() + sql_->MemoryUsage();
}

bool Engine::CheckMemoryBudget() { return CheckMemoryBudgetAt(clock_(), /*notify_always=*/true); }

bool Engine::CheckMemoryBudgetAt(double now, bool notify_always) {
  const int64_t budget = options_.memory_budget_bytes;
  if (budget <= 0) return true;
  const int64_t allocated = AllocatedBytes();
  const bool over = allocated > budget;
  bool crossed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    crossed = over && !over_budget_;
    over_budget_ = over;
    if (over && (crossed || notify_always)) ++metrics_.memory_warnings;
  }
  if (over && (crossed || notify_always)) {
    RecordEvent(EngineEvent{now, Severity::kWarning, "engine", "memory_budget",
                            fmt::format("Memory budget exceeded: {} bytes allocated, budget {} bytes",
                                        allocated, budget),
                            "", ""});
    if (options_.on_memory_warning) {
      try {
        options_.on_memory_warning(allocated, budget);
      } catch (const std::exception& e) {
        RecordEvent(EngineEvent{now, Severity::kError, "engine", "on_memory_warning",
                                "on_memory_warning callback failed", e.what(), ""});
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
