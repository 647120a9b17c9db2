// Engine telemetry: the `rill_metrics` columns (names and meanings that code
// written for the seed reads), the shared host sampler, and rate-limited log
// lines for events that repeat on every tick.
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <arrow/api.h>
#include <gtest/gtest.h>
#include <spdlog/sinks/base_sink.h>

#include "rill/common/host_stats.h"
#include "rill/common/logging.h"
#include "rill/connector/memory_connector.h"
#include "rill/engine/engine.h"
#include "table/test_util.h"

namespace rill {
namespace {

using test::BatchOf;
using test::FakeClock;
using test::SchemaOf;

constexpr double kT0 = 1'700'000'000.0;

std::shared_ptr<arrow::Schema> OrdersSchema() {
  return SchemaOf({arrow::field("order_id", arrow::int64()), arrow::field("amount", arrow::float64())});
}

std::unique_ptr<Engine> MakeEngine(const FakeClock& clock, EngineOptions options = {}) {
  options.clock = clock.clock();
  auto engine = Engine::Make(std::move(options));
  EXPECT_TRUE(engine.ok()) << engine.status();
  return std::move(*engine);
}

/// The one row of rill_metrics, as a table.
std::shared_ptr<arrow::Table> MetricsRow(Engine& engine) {
  auto table = engine.Query("SELECT * FROM rill_metrics");
  EXPECT_TRUE(table.ok()) << table.status();
  EXPECT_EQ((*table)->num_rows(), 1);
  return *table;
}

double Cell(const arrow::Table& table, const std::string& column) {
  auto chunked = table.GetColumnByName(column);
  EXPECT_NE(chunked, nullptr) << column;
  auto scalar = chunked->GetScalar(0);
  EXPECT_TRUE(scalar.ok());
  auto as_double = (*scalar)->CastTo(arrow::float64());
  EXPECT_TRUE(as_double.ok());
  return std::static_pointer_cast<arrow::DoubleScalar>(*as_double)->value;
}

/// MemTotal of /proc/meminfo in bytes, read here independently of the engine.
int64_t MemTotalBytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kb = 0;
  std::string unit;
  while (in >> key >> kb >> unit) {
    if (key == "MemTotal:") return kb * 1024;
  }
  return 0;
}

TEST(RillMetrics, HasTheDocumentedColumnsInOrder) {
  FakeClock clock(kT0);
  auto engine = MakeEngine(clock);
  ASSERT_TRUE(engine->Step().ok());
  // The interface documented in src/rill/engine/README.md; the dashboard and
  // ported scripts read these names.
  const std::vector<std::string> expected = {
      "timestamp",          "total_records_processed", "last_batch_records",
      "last_batch_latency_ms", "avg_batch_latency_ms", "max_batch_latency_ms",
      "records_per_second", "ticks",                   "cpu_usage",
      "used_memory",        "total_memory",            "process_cpu_percent",
      "process_rss_bytes",  "arrow_allocated_bytes",   "arrow_peak_allocated_bytes",
      "pyarrow_allocated_bytes", "pyarrow_max_memory",
      "duckdb_memory_bytes", "rejected_batches",       "rejected_records",
      "engine_errors",      "memory_warnings",         "checkpoint_failures",
      "shedding",           "dropped_records",         "rejects_overflowed",
      "business_metrics",
      "z_insert_ts",        "z_update_ts"};  // every live table's system columns
  EXPECT_EQ(MetricsRow(*engine)->schema()->field_names(), expected);
}

TEST(RillMetrics, CarriesHostCpuAndHostMemorySoThatUsedOverTotalIsTheHostsShare) {
  FakeClock clock(kT0);
  auto engine = MakeEngine(clock);
  ASSERT_TRUE(engine->Step().ok());
  auto row = MetricsRow(*engine);
  const double total = Cell(*row, "total_memory");
  const double used = Cell(*row, "used_memory");
  EXPECT_EQ(total, static_cast<double>(MemTotalBytes()));  // the host's, not the process's
  EXPECT_GT(used, 0);
  EXPECT_LE(used, total);
  EXPECT_GE(Cell(*row, "cpu_usage"), 0);
  EXPECT_LE(Cell(*row, "cpu_usage"), 100);
  // The process's own figures are separate columns.
  EXPECT_GT(Cell(*row, "process_rss_bytes"), 0);
  EXPECT_LT(Cell(*row, "process_rss_bytes"), total);
  EXPECT_GE(Cell(*row, "process_cpu_percent"), 0);
  EXPECT_LE(Cell(*row, "process_cpu_percent"), 100.0 * std::thread::hardware_concurrency());
  // They are the engine's sampler's latest reading, the one the metrics store reads.
  const HostSample latest = engine->host_sampler()->Latest();
  EXPECT_EQ(used, static_cast<double>(latest.used_memory_bytes));
  EXPECT_EQ(Cell(*row, "process_rss_bytes"), static_cast<double>(latest.process_rss_bytes));
}

TEST(RillMetrics, CountsRecordsLatencyAndRateLikeGetMetrics) {
  FakeClock clock(kT0);
  auto engine = MakeEngine(clock);
  TableOptions keyed;
  keyed.primary_key = {"order_id"};
  ASSERT_TRUE(engine->RegisterTable("orders", OrdersSchema(), keyed).ok());
  auto connector = std::make_shared<MemoryConnector>("orders");
  ASSERT_TRUE(engine->AddConnector(connector).ok());
  ASSERT_TRUE(connector->Push(BatchOf(OrdersSchema(), {"[1, 2, 3]", "[1.0, 2.0, 3.0]"})).ok());
  ASSERT_TRUE(engine->Step().ok());
  clock.Advance(1);
  ASSERT_TRUE(connector->Push(BatchOf(OrdersSchema(), {"[4, 5]", "[4.0, 5.0]"})).ok());
  ASSERT_TRUE(engine->Step().ok());
  auto row = MetricsRow(*engine);
  const EngineMetrics m = engine->GetMetrics();
  EXPECT_EQ(Cell(*row, "total_records_processed"), 5);
  EXPECT_EQ(Cell(*row, "last_batch_records"), 2);
  EXPECT_EQ(Cell(*row, "ticks"), 2);
  EXPECT_EQ(Cell(*row, "timestamp"), kT0 + 1);
  EXPECT_DOUBLE_EQ(Cell(*row, "last_batch_latency_ms"), m.last_batch_latency_s * 1e3);
  EXPECT_DOUBLE_EQ(Cell(*row, "avg_batch_latency_ms"), m.avg_batch_latency_s * 1e3);
  EXPECT_DOUBLE_EQ(Cell(*row, "max_batch_latency_ms"), m.max_batch_latency_s * 1e3);
  EXPECT_GE(Cell(*row, "max_batch_latency_ms"), Cell(*row, "avg_batch_latency_ms"));
  EXPECT_DOUBLE_EQ(Cell(*row, "records_per_second"), m.records_per_second);
  EXPECT_GT(Cell(*row, "records_per_second"), 0);
  EXPECT_GT(Cell(*row, "arrow_allocated_bytes"), 0);
  EXPECT_GE(Cell(*row, "arrow_peak_allocated_bytes"), Cell(*row, "arrow_allocated_bytes"));
}

// Log lines ------------------------------------------------------------------

/// Collects the formatted lines of the loggers it is attached to.
class CollectingSink : public spdlog::sinks::base_sink<std::mutex> {
 public:
  std::vector<std::string> lines() {
    std::lock_guard<std::mutex> lock(mutex_);
    return lines_;
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    lines_.emplace_back(msg.payload.data(), msg.payload.size());
  }
  void flush_() override {}

 private:
  std::vector<std::string> lines_;
};

/// Attaches a CollectingSink to Logger(component) for the scope.
class CapturedLog {
 public:
  explicit CapturedLog(const std::string& component)
      : logger_(Logger(component)), sink_(std::make_shared<CollectingSink>()) {
    logger_->sinks().push_back(sink_);
  }
  ~CapturedLog() { logger_->sinks().pop_back(); }
  std::vector<std::string> lines() { return sink_->lines(); }

 private:
  std::shared_ptr<spdlog::logger> logger_;
  std::shared_ptr<CollectingSink> sink_;
};

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

TEST(EngineLog, AFailingTaskLogsOncePerWindowWithARepeatCount) {
  FakeClock clock(kT0);
  EngineOptions options;
  options.log_repeat_window_seconds = 10;
  auto engine = MakeEngine(clock, options);
  CapturedLog log("failing_task");
  int heard = 0;
  engine->AddEventListener([&](const EngineEvent& e) { heard += e.component == "failing_task"; });
  ASSERT_TRUE(engine
                  ->AddSqlTask(std::make_shared<ScheduledSqlTask>(
                      "failing_task", "SELECT * FROM no_such_table", "out", /*interval=*/0.0))
                  .ok());
  for (int i = 0; i < 50; ++i) {  // 5 s of ticks every 0.1 s, each failing
    ASSERT_TRUE(engine->Step().ok());
    clock.Advance(0.1);
  }
  // Every failure is recorded and counted; only the first is logged so far.
  EXPECT_EQ(heard, 50);
  EXPECT_EQ(engine->TaskStatistics().at("failing_task").errors, 50);
  auto lines = log.lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_TRUE(Contains(lines[0], "Task 'failing_task' failed")) << lines[0];
  EXPECT_TRUE(Contains(lines[0], "no_such_table")) << lines[0];

  // The task goes away; once the window has passed, one line reports the repeats.
  ASSERT_TRUE(engine->RemoveSqlTask("failing_task").ok());
  clock.Advance(10);
  ASSERT_TRUE(engine->Step().ok());
  lines = log.lines();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_TRUE(Contains(lines[1], "repeated 49 times in the last 10 s")) << lines[1];
  ASSERT_TRUE(engine->Step().ok());
  EXPECT_EQ(log.lines().size(), 2u);  // nothing more to report
}

TEST(EngineLog, ASteadyFailureLogsOneLinePerWindowAndAccountsForEveryOccurrence) {
  FakeClock clock(kT0);
  EngineOptions options;
  options.log_repeat_window_seconds = 1;
  auto engine = MakeEngine(clock, options);
  CapturedLog log("steady_task");
  ASSERT_TRUE(engine
                  ->AddSqlTask(std::make_shared<ScheduledSqlTask>(
                      "steady_task", "SELECT * FROM missing", "out", /*interval=*/0.0))
                  .ok());
  for (int i = 0; i < 100; ++i) {  // 10 s of failures every 0.1 s
    ASSERT_TRUE(engine->Step().ok());
    clock.Advance(0.1);
  }
  engine.reset();  // reports what is still held back
  const auto lines = log.lines();
  EXPECT_GE(lines.size(), 9u);
  EXPECT_LE(lines.size(), 12u);
  // Each line stands for 1 occurrence, or for the count it names.
  int64_t total = 0;
  for (const std::string& line : lines) {
    const size_t at = line.find("repeated ");
    total += at == std::string::npos ? 1 : std::stoll(line.substr(at + 9));
  }
  EXPECT_EQ(total, 100);
}

TEST(EngineLog, ZeroWindowLogsEveryEvent) {
  FakeClock clock(kT0);
  EngineOptions options;
  options.log_repeat_window_seconds = 0;
  auto engine = MakeEngine(clock, options);
  CapturedLog log("chatty");
  for (int i = 0; i < 5; ++i) {
    engine->RecordEvent(EngineEvent::Engine(Severity::kWarning, "chatty", "same message"));
  }
  EXPECT_EQ(log.lines().size(), 5u);
}

TEST(EngineLog, KeepsDifferentMessagesApart) {
  FakeClock clock(kT0);
  auto engine = MakeEngine(clock);
  CapturedLog log("mixed");
  for (int i = 0; i < 3; ++i) {
    engine->RecordEvent(EngineEvent::Engine(Severity::kError, "mixed", "first problem"));
    engine->RecordEvent(EngineEvent::Engine(Severity::kError, "mixed", "second problem"));
  }
  const auto lines = log.lines();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_TRUE(Contains(lines[0], "first problem"));
  EXPECT_TRUE(Contains(lines[1], "second problem"));
}

TEST(EngineEvent, BuildsThroughNamedFactoriesAndParsesSources) {
  EngineEvent e = EngineEvent::Engine(Severity::kWarning, "orders", "Read failed", "EOF", 5);
  EXPECT_EQ(e.source, EventSource::kEngine);
  EXPECT_EQ(e.component, "orders");
  EXPECT_EQ(e.detail, "EOF");
  EXPECT_EQ(e.ts, 5);
  EXPECT_EQ(EngineEvent::User(Severity::kInfo, "hello").source, EventSource::kUser);
  for (EventSource s : {EventSource::kEngine, EventSource::kUser, EventSource::kRule}) {
    auto parsed = ParseEventSource(EventSourceName(s));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, s);
  }
  auto bad = ParseEventSource("system");
  ASSERT_TRUE(bad.status().IsInvalid());
  EXPECT_TRUE(Contains(bad.status().message(), "'system'"));
}

}  // namespace
}  // namespace rill
