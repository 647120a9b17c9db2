// Engine: table registry, the tick (Step), the background loop, failures that
// must not stop the loop, rejects, memory budget, metrics and SQL tasks.
#include "rill/engine/engine.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

#include <arrow/api.h>
#include <gtest/gtest.h>

#include "rill/connector/memory_connector.h"
#include "engine/engine_test_util.h"
#include "table/test_util.h"

namespace rill {
namespace {

using test::BatchOf;
using test::FakeClock;
using test::RowStrings;
using test::SchemaOf;
using test::SortedRows;

constexpr double kT0 = 1'700'000'000.0;

std::shared_ptr<arrow::Schema> OrdersSchema() {
  return SchemaOf({arrow::field("order_id", arrow::int64()), arrow::field("tier", arrow::utf8()),
                   arrow::field("amount", arrow::float64())});
}

std::shared_ptr<arrow::RecordBatch> Orders(const std::string& ids, const std::string& tiers,
                                           const std::string& amounts) {
  return BatchOf(OrdersSchema(), {ids, tiers, amounts});
}

using test::Watchdog;
using test::WaitFor;

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

class EngineTest : public ::testing::Test {
 protected:
  void SetUp() override { MakeEngine({}); }
  void MakeEngine(EngineOptions options) {
    options.clock = clock_.clock();
    if (options.trigger_interval_ms == 1000) options.trigger_interval_ms = 10;
    engine_.reset();
    auto result = Engine::Make(std::move(options));
    ASSERT_TRUE(result.ok()) << result.status().ToString();
    engine_ = std::move(*result);
  }
  std::shared_ptr<LiveTable> RegisterOrders(TableOptions options = {}) {
    if (options.primary_key.empty() && !options.mode) options.primary_key = {"order_id"};
    auto result = engine_->RegisterTable("orders", OrdersSchema(), options);
    EXPECT_TRUE(result.ok()) << result.status().ToString();
    return result.ok() ? *result : nullptr;
  }
  std::shared_ptr<MemoryConnector> AddConnector(const std::string& table, BufferLimits limits = {},
                                                const std::string& name = "") {
    auto connector = std::make_shared<MemoryConnector>(table, nullptr, limits, name);
    auto st = engine_->AddConnector(connector);
    EXPECT_TRUE(st.ok()) << st.ToString();
    return connector;
  }
  std::vector<std::string> QueryRows(const std::string& sql) {
    auto result = engine_->Query(sql);
    EXPECT_TRUE(result.ok()) << sql << ": " << result.status().ToString();
    return result.ok() ? RowStrings(**result) : std::vector<std::string>{};
  }
  bool HasEvent(const std::function<bool(const EngineEvent&)>& match) {
    for (const auto& e : engine_->RecentEvents()) {
      if (match(e)) return true;
    }
    return false;
  }
  std::string EventsText() {
    std::string out;
    for (const auto& e : engine_->RecentEvents()) {
      out += std::string(SeverityName(e.severity)) + " [" + e.component + "] " + e.message +
             " | " + e.detail + "\n";
    }
    return out;
  }

  FakeClock clock_{kT0};
  std::unique_ptr<Engine> engine_;
};

// Tables ----------------------------------------------------------------------

TEST_F(EngineTest, RegistersAndReturnsTables) {
  auto orders = RegisterOrders();
  ASSERT_NE(orders, nullptr);
  RILL_ASSERT_OK_AND_ASSIGN(auto again, engine_->GetTable("orders"));
  EXPECT_EQ(again.get(), orders.get());
  EXPECT_EQ(orders->primary_key(), (std::vector<std::string>{"order_id"}));
}

TEST_F(EngineTest, ReportsAnUnknownTableAsKeyErrorNamingIt) {
  auto result = engine_->GetTable("nowhere");
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(result.status().IsKeyError()) << result.status().ToString();
  EXPECT_TRUE(Contains(result.status().message(), "nowhere"));
  EXPECT_TRUE(engine_->DropTable("nowhere").IsKeyError());
  EXPECT_TRUE(engine_->Subscribe("nowhere", [](const auto&) {}).status().IsKeyError());
}

TEST_F(EngineTest, GetOrCreateTableCreatesOnceThenReturnsTheSameTable) {
  RILL_ASSERT_OK_AND_ASSIGN(auto first, engine_->GetOrCreateTable("orders", OrdersSchema()));
  RILL_ASSERT_OK_AND_ASSIGN(auto second, engine_->GetOrCreateTable("orders", OrdersSchema()));
  EXPECT_EQ(first.get(), second.get());
  EXPECT_EQ(engine_->TableNames(), (std::vector<std::string>{"orders"}));
}

TEST_F(EngineTest, RefusesDuplicateAndReservedTableNames) {
  RegisterOrders();
  auto duplicate = engine_->RegisterTable("orders", OrdersSchema());
  EXPECT_TRUE(duplicate.status().IsInvalid()) << duplicate.status().ToString();
  auto reserved = engine_->RegisterTable("rill_mine", OrdersSchema());
  EXPECT_TRUE(reserved.status().IsInvalid()) << reserved.status().ToString();
}

TEST_F(EngineTest, ListsUserTablesSortedWithoutSystemTables) {
  RILL_ASSERT_OK(engine_->RegisterTable("zeta", OrdersSchema()));
  RILL_ASSERT_OK(engine_->RegisterTable("alpha", OrdersSchema()));
  RILL_ASSERT_OK(engine_->RegisterTable("mid", OrdersSchema()));
  EXPECT_EQ(engine_->TableNames(), (std::vector<std::string>{"alpha", "mid", "zeta"}));
}

TEST_F(EngineTest, DropsATableAndItsView) {
  RegisterOrders();
  EXPECT_EQ(QueryRows("SELECT count(*) FROM orders"), (std::vector<std::string>{"0"}));
  RILL_ASSERT_OK(engine_->DropTable("orders"));
  EXPECT_TRUE(engine_->GetTable("orders").status().IsKeyError());
  EXPECT_FALSE(engine_->Query("SELECT count(*) FROM orders").ok());
  EXPECT_TRUE(engine_->TableNames().empty());
}

TEST_F(EngineTest, PassesAppendTableValidationErrorsOn) {
  TableOptions options;
  options.mode = TableMode::kAppend;
  auto result = engine_->RegisterTable("events", OrdersSchema(), options);
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(Contains(result.status().message(), "mandatory for append-only tables"))
      << result.status().ToString();
}

// Step --------------------------------------------------------------------------

TEST_F(EngineTest, StepIngestsConnectorDataAndReturnsItsLatency) {
  auto orders = RegisterOrders();
  auto connector = AddConnector("orders");
  RILL_ASSERT_OK(connector->Push(Orders("[1, 2, 3]", R"(["Gold", "Silver", "Gold"])",
                                        "[100.5, 45.0, 250.0]")));
  EXPECT_EQ(orders->num_rows(), 0) << "nothing is written before a tick";
  RILL_ASSERT_OK_AND_ASSIGN(double latency, engine_->Step());
  EXPECT_GE(latency, 0.0);
  EXPECT_LT(latency, 30.0);
  EXPECT_EQ(orders->num_rows(), 3);
  EXPECT_EQ(SortedRows(*orders->snapshot()->ToTable().ValueOrDie(), {"order_id", "z_insert_ts"}),
            (std::vector<std::string>{"1|" + test::FormatDouble(kT0), "2|" + test::FormatDouble(kT0),
                                      "3|" + test::FormatDouble(kT0)}));
  EXPECT_EQ(QueryRows("SELECT tier, sum(amount) FROM orders GROUP BY tier ORDER BY tier"),
            (std::vector<std::string>{"Gold|350.5", "Silver|45"}));
  EXPECT_EQ(connector->stats().drained_records, 3);
}

TEST_F(EngineTest, StepUpsertsAcrossTicksWithTheEngineClock) {
  auto orders = RegisterOrders();
  auto connector = AddConnector("orders");
  RILL_ASSERT_OK(connector->Push(Orders("[1, 2]", R"(["Gold", "Silver"])", "[1.0, 2.0]")));
  RILL_ASSERT_OK(engine_->Step());
  clock_.Advance(2);
  RILL_ASSERT_OK(connector->Push(Orders("[2]", R"(["Gold"])", "[20.0]")));
  RILL_ASSERT_OK(engine_->Step());
  EXPECT_EQ(SortedRows(*orders->snapshot()->ToTable().ValueOrDie(),
                       {"order_id", "tier", "z_insert_ts", "z_update_ts"}),
            (std::vector<std::string>{
                "1|Gold|" + test::FormatDouble(kT0) + "|" + test::FormatDouble(kT0),
                "2|Gold|" + test::FormatDouble(kT0) + "|" + test::FormatDouble(kT0 + 2)}));
}

/// `n` orders with ids [first, first + n), one batch.
std::shared_ptr<arrow::RecordBatch> OrderRange(int64_t first, int64_t n) {
  arrow::Int64Builder ids;
  arrow::StringBuilder tiers;
  arrow::DoubleBuilder amounts;
  for (int64_t i = first; i < first + n; ++i) {
    EXPECT_TRUE(ids.Append(i).ok());
    EXPECT_TRUE(tiers.Append("t").ok());
    EXPECT_TRUE(amounts.Append(static_cast<double>(i)).ok());
  }
  return arrow::RecordBatch::Make(OrdersSchema(), n,
                                  {ids.Finish().ValueOrDie(), tiers.Finish().ValueOrDie(),
                                   amounts.Finish().ValueOrDie()});
}

TEST_F(EngineTest, MaxRecordsPerTickTakesTheOldestRowsAndLeavesTheRestForTheNextTicks) {
  EngineOptions options;
  options.max_records_per_tick = 40;
  MakeEngine(options);
  auto orders = RegisterOrders();
  auto connector = AddConnector("orders");
  for (int64_t first = 0; first < 100; first += 25) RILL_ASSERT_OK(connector->Push(OrderRange(first, 25)));
  RILL_ASSERT_OK(engine_->Step());
  EXPECT_EQ(orders->num_rows(), 40);
  EXPECT_EQ(connector->stats().buffered_records, 60);
  EXPECT_EQ(engine_->GetMetrics().last_batch_records, 40);
  EXPECT_EQ(QueryRows("SELECT min(order_id), max(order_id) FROM orders"),
            (std::vector<std::string>{"0|39"}))
      << "the oldest rows first, the second batch sliced";
  RILL_ASSERT_OK(engine_->Step());
  RILL_ASSERT_OK(engine_->Step());
  EXPECT_EQ(orders->num_rows(), 100);
  EXPECT_EQ(QueryRows("SELECT count(DISTINCT order_id), min(order_id), max(order_id) FROM orders"),
            (std::vector<std::string>{"100|0|99"}));
  EXPECT_EQ(connector->stats().buffered_records, 0);
  EXPECT_EQ(connector->stats().dropped_records, 0);
}

TEST_F(EngineTest, ABacklogOverMaxRecordsPerTickIsWorkedOffInTicksBackToBack) {
  // A 10-minute interval: only the first tick would run within the test's
  // wait if the loop waited for the interval while rows are left behind.
  EngineOptions options;
  options.trigger_interval_ms = 600'000;
  options.max_records_per_tick = 100;
  MakeEngine(options);
  auto orders = RegisterOrders();
  auto connector = AddConnector("orders");
  RILL_ASSERT_OK(connector->Push(OrderRange(0, 1000)));
  Watchdog watchdog(60, "catch-up ticks");
  RILL_ASSERT_OK(engine_->Start());
  EXPECT_TRUE(WaitFor([&] { return orders->num_rows() == 1000; }, 30))
      << orders->num_rows() << " rows after the catch-up ticks";
  const auto ticks = engine_->GetMetrics().ticks;
  EXPECT_GE(ticks, 10) << "at most 100 rows a tick";
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(engine_->GetMetrics().ticks, ticks) << "no backlog left: back to the interval";
  engine_->Stop();
}

TEST(EngineOptionsValidation, RefusesANegativeMaxRecordsPerTick) {
  EngineOptions options;
  options.max_records_per_tick = -1;
  auto made = Engine::Make(options);
  ASSERT_FALSE(made.ok());
  EXPECT_TRUE(made.status().IsInvalid());
  EXPECT_NE(made.status().message().find("max_records_per_tick"), std::string::npos);
}

TEST_F(EngineTest, StepCreatesAMissingTargetTableFromTheFirstBatch) {
  auto connector = AddConnector("fresh");
  RILL_ASSERT_OK(connector->Push(Orders("[1]", R"(["Gold"])", "[1.0]")));
  RILL_ASSERT_OK(engine_->Step());
  RILL_ASSERT_OK_AND_ASSIGN(auto table, engine_->GetTable("fresh"));
  EXPECT_EQ(table->num_rows(), 1);
}

TEST_F(EngineTest, RefusesADuplicateConnectorName) {
  AddConnector("orders", {}, "feed");
  auto status = engine_->AddConnector(std::make_shared<MemoryConnector>("orders", nullptr,
                                                                        BufferLimits{}, "feed"));
  EXPECT_TRUE(status.IsInvalid()) << status.ToString();
  EXPECT_EQ(engine_->Connectors().size(), 1u);
}

TEST_F(EngineTest, RemovingAConnectorWritesWhatItStillBuffered) {
  auto orders = RegisterOrders();
  auto connector = AddConnector("orders");
  RILL_ASSERT_OK(connector->Push(Orders("[1, 2]", R"(["a", "b"])", "[1.0, 2.0]")));
  RILL_ASSERT_OK(engine_->RemoveConnector("orders"));
  EXPECT_EQ(orders->num_rows(), 2);
  EXPECT_TRUE(engine_->Connectors().empty());
  EXPECT_FALSE(engine_->RemoveConnector("orders").ok());
}

TEST_F(EngineTest, AppliesRetentionEveryTick) {
  TableOptions options;
  options.mode = TableMode::kAppend;
  options.retention = test::Retention(std::nullopt, 5);
  RILL_ASSERT_OK_AND_ASSIGN(auto events, engine_->RegisterTable("events", OrdersSchema(), options));
  auto connector = AddConnector("events");
  RILL_ASSERT_OK(connector->Push(Orders("[1, 1]", R"(["a", "b"])", "[1.0, 2.0]")));
  RILL_ASSERT_OK(engine_->Step());
  EXPECT_EQ(events->num_rows(), 2);
  clock_.Advance(6);
  RILL_ASSERT_OK(engine_->Step());
  EXPECT_EQ(events->num_rows(), 0);
}

// Subscribers, listeners ------------------------------------------------------

TEST_F(EngineTest, CallsSubscribersWithNewVersions) {
  RegisterOrders();
  auto connector = AddConnector("orders");
  std::vector<int64_t> rows;
  RILL_ASSERT_OK_AND_ASSIGN(auto id, engine_->Subscribe("orders", [&](const auto& version) {
    rows.push_back(version->num_rows());
  }));
  RILL_ASSERT_OK(connector->Push(Orders("[1, 2]", R"(["a", "b"])", "[1.0, 2.0]")));
  RILL_ASSERT_OK(engine_->Step());
  RILL_ASSERT_OK(engine_->Unsubscribe("orders", id));
  RILL_ASSERT_OK(connector->Push(Orders("[3]", R"(["c"])", "[3.0]")));
  RILL_ASSERT_OK(engine_->Step());
  EXPECT_EQ(rows, (std::vector<int64_t>{2}));
}

TEST_F(EngineTest, SendsRecordedEventsToListenersAndKeepsTheLatest) {
  EngineOptions options;
  options.max_recent_events = 3;
  MakeEngine(options);
  std::vector<std::string> heard;
  auto id = engine_->AddEventListener([&](const EngineEvent& e) { heard.push_back(e.message); });
  for (int i = 0; i < 5; ++i) {
    EngineEvent event = EngineEvent::User(Severity::kWarning, "event " + std::to_string(i));
    event.component = "app";
    engine_->RecordEvent(std::move(event));
  }
  engine_->RemoveEventListener(id);
  engine_->RecordEvent(EngineEvent::User(Severity::kInfo, "unheard"));
  EXPECT_EQ(heard.size(), 5u);
  auto recent = engine_->RecentEvents();
  ASSERT_EQ(recent.size(), 3u);
  EXPECT_EQ(recent[0].message, "event 3");
  EXPECT_EQ(recent[2].message, "unheard");
  EXPECT_EQ(recent[2].ts, kT0) << "an event without a time gets the engine clock's";
}

// The loop ---------------------------------------------------------------------

TEST_F(EngineTest, StartRunsTheLoopAndStopEndsItTwiceSafely) {
  auto orders = RegisterOrders();
  auto connector = AddConnector("orders");
  Watchdog watchdog(30, "start/stop");
  RILL_ASSERT_OK(engine_->Start());
  EXPECT_TRUE(engine_->running());
  RILL_ASSERT_OK(engine_->Start());  // no-op
  RILL_ASSERT_OK(connector->Push(Orders("[1, 2]", R"(["a", "b"])", "[1.0, 2.0]")));
  EXPECT_TRUE(WaitFor([&] { return orders->num_rows() == 2; }))
      << "the background loop did not ingest";
  EXPECT_TRUE(WaitFor([&] { return engine_->GetMetrics().ticks >= 3; }));
  engine_->Stop();
  EXPECT_FALSE(engine_->running());
  engine_->Stop();
  EXPECT_FALSE(engine_->running());
  const auto ticks = engine_->GetMetrics().ticks;
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(engine_->GetMetrics().ticks, ticks) << "no ticks after Stop";
  // And it can start again.
  RILL_ASSERT_OK(engine_->Start());
  RILL_ASSERT_OK(connector->Push(Orders("[3]", R"(["c"])", "[3.0]")));
  EXPECT_TRUE(WaitFor([&] { return orders->num_rows() == 3; }));
  engine_->Stop();
}

TEST_F(EngineTest, StopFromASubscriberOnTheLoopThreadDoesNotDeadlock) {
  RegisterOrders();
  auto connector = AddConnector("orders");
  std::atomic<bool> stop_returned{false};
  std::atomic<bool> on_loop_thread{false};
  std::thread::id test_thread = std::this_thread::get_id();
  RILL_ASSERT_OK(engine_->Subscribe("orders", [&](const auto&) {
    on_loop_thread = std::this_thread::get_id() != test_thread;
    engine_->Stop();
    stop_returned = true;
  }));
  Watchdog watchdog(30, "Stop() from a subscriber");
  RILL_ASSERT_OK(engine_->Start());
  RILL_ASSERT_OK(connector->Push(Orders("[1]", R"(["a"])", "[1.0]")));
  EXPECT_TRUE(WaitFor([&] { return stop_returned.load(); })) << "Stop() in the callback hung";
  EXPECT_TRUE(on_loop_thread.load());
  EXPECT_TRUE(WaitFor([&] { return !engine_->running(); }));
  engine_->Stop();  // from the test thread too: still fine
  EXPECT_FALSE(engine_->running());
}

TEST_F(EngineTest, StopFromABusinessMetricOnTheLoopThreadDoesNotDeadlock) {
  std::atomic<bool> stop_returned{false};
  RILL_ASSERT_OK(engine_->RegisterBusinessMetric("stopper", [&]() -> Result<double> {
    engine_->Stop();
    stop_returned = true;
    return 1.0;
  }));
  Watchdog watchdog(30, "Stop() from a business metric");
  RILL_ASSERT_OK(engine_->Start());
  EXPECT_TRUE(WaitFor([&] { return stop_returned.load(); }));
  EXPECT_TRUE(WaitFor([&] { return !engine_->running(); }));
}

TEST_F(EngineTest, StepFromACallbackReturnsInsteadOfDeadlocking) {
  RegisterOrders();
  auto connector = AddConnector("orders");
  Status inner = Status::OK();
  bool called = false;
  RILL_ASSERT_OK(engine_->Subscribe("orders", [&](const auto&) {
    called = true;
    inner = engine_->Step().status();
  }));
  Watchdog watchdog(30, "Step() from a subscriber");
  RILL_ASSERT_OK(connector->Push(Orders("[1]", R"(["a"])", "[1.0]")));
  RILL_ASSERT_OK(engine_->Step());
  EXPECT_TRUE(called);
  // The nested Step() is refused, saying why, instead of running a tick inside a tick.
  EXPECT_TRUE(inner.IsInvalid()) << inner.ToString();
  EXPECT_TRUE(Contains(inner.message(), "inside a tick")) << inner.ToString();
}

TEST_F(EngineTest, DestructorStopsARunningLoop) {
  RegisterOrders();
  AddConnector("orders");
  Watchdog watchdog(30, "~Engine with a running loop");
  RILL_ASSERT_OK(engine_->Start());
  engine_.reset();
}

// Failures do not stop the loop -------------------------------------------------

class FailingConnector : public Connector {
 public:
  explicit FailingConnector(std::string target)
      : Connector("broken-feed", std::move(target), nullptr) {}
  Result<std::vector<std::shared_ptr<arrow::RecordBatch>>> Poll() override {
    polls++;
    return Status::IOError("socket closed by peer");
  }
  ConnectorStats stats() const override { return {}; }
  std::atomic<int> polls{0};
};

TEST_F(EngineTest, RecordsAFailingConnectorAndGoesOn) {
  auto orders = RegisterOrders();
  auto broken = std::make_shared<FailingConnector>("orders");
  RILL_ASSERT_OK(engine_->AddConnector(broken));
  auto good = AddConnector("orders");
  RILL_ASSERT_OK(good->Push(Orders("[1, 2]", R"(["a", "b"])", "[1.0, 2.0]")));
  RILL_ASSERT_OK(engine_->Step());
  EXPECT_EQ(orders->num_rows(), 2) << "the other connector was read in the same tick";
  EXPECT_EQ(broken->polls.load(), 1);
  EXPECT_TRUE(HasEvent([](const EngineEvent& e) {
    return e.severity == Severity::kError && e.component == "broken-feed" &&
           Contains(e.message + e.detail, "socket closed by peer");
  })) << EventsText();
  EXPECT_GE(engine_->GetMetrics().errors, 1);

  RILL_ASSERT_OK(good->Push(Orders("[3]", R"(["c"])", "[3.0]")));
  RILL_ASSERT_OK(engine_->Step());
  EXPECT_EQ(broken->polls.load(), 2) << "polled again on the next tick";
  EXPECT_EQ(orders->num_rows(), 3);
}

TEST_F(EngineTest, KeepsTheBackgroundLoopRunningWithAFailingConnector) {
  auto orders = RegisterOrders();
  auto broken = std::make_shared<FailingConnector>("orders");
  RILL_ASSERT_OK(engine_->AddConnector(broken));
  auto good = AddConnector("orders");
  Watchdog watchdog(30, "loop with a failing connector");
  RILL_ASSERT_OK(engine_->Start());
  EXPECT_TRUE(WaitFor([&] { return broken->polls.load() >= 3; }));
  RILL_ASSERT_OK(good->Push(Orders("[1]", R"(["a"])", "[1.0]")));
  EXPECT_TRUE(WaitFor([&] { return orders->num_rows() == 1; }));
  EXPECT_TRUE(engine_->running());
  engine_->Stop();
}

TEST_F(EngineTest, SendsARejectedBatchToRillRejectsAndWritesTheOthers) {
  auto orders = RegisterOrders();
  auto connector = AddConnector("orders");
  RILL_ASSERT_OK(connector->Push(Orders("[1]", R"(["a"])", "[1.0]")));
  auto bad_schema = SchemaOf({arrow::field("order_id", arrow::int64()),
                              arrow::field("amount", arrow::list(arrow::float64()))});
  RILL_ASSERT_OK(connector->Push(BatchOf(bad_schema, {"[7, 8]", "[[1.0], [2.0]]"})));
  RILL_ASSERT_OK(connector->Push(Orders("[2]", R"(["b"])", "[2.0]")));
  RILL_ASSERT_OK(engine_->Step());

  EXPECT_EQ(SortedRows(*orders->snapshot()->ToTable().ValueOrDie(), {"order_id"}),
            (std::vector<std::string>{"1", "2"}));
  auto rejects = QueryRows("SELECT table_name, source, \"rows\" FROM rill_rejects");
  EXPECT_EQ(rejects, (std::vector<std::string>{"orders|orders|2"}));
  auto reasons = QueryRows("SELECT reason FROM rill_rejects");
  ASSERT_EQ(reasons.size(), 1u);
  EXPECT_TRUE(Contains(reasons[0], "amount")) << reasons[0];
  auto metrics = engine_->GetMetrics();
  EXPECT_EQ(metrics.rejected_batches, 1);
  EXPECT_EQ(metrics.rejected_records, 2);
  EXPECT_EQ(metrics.total_records_processed, 2);
  EXPECT_TRUE(HasEvent([](const EngineEvent& e) {
    return e.severity == Severity::kError && Contains(e.message + e.detail, "amount");
  })) << EventsText();
  EXPECT_TRUE(engine_->GetTable("rill_rejects").ok());
  EXPECT_EQ(engine_->TableNames(), (std::vector<std::string>{"orders"}));
}

TEST_F(EngineTest, RecordsAThrowingSubscriberAndGoesOn) {
  auto orders = RegisterOrders();
  auto connector = AddConnector("orders");
  RILL_ASSERT_OK(engine_->Subscribe("orders", [](const auto&) -> void {
    throw std::runtime_error("subscriber blew up");
  }));
  RILL_ASSERT_OK(connector->Push(Orders("[1]", R"(["a"])", "[1.0]")));
  RILL_ASSERT_OK(engine_->Step());
  RILL_ASSERT_OK(connector->Push(Orders("[2]", R"(["b"])", "[2.0]")));
  RILL_ASSERT_OK(engine_->Step());
  EXPECT_EQ(orders->num_rows(), 2);
  EXPECT_TRUE(HasEvent([](const EngineEvent& e) {
    return Contains(e.message + e.detail, "subscriber blew up");
  })) << EventsText();
}

// Memory budget -----------------------------------------------------------------

TEST_F(EngineTest, CallsOnMemoryWarningWhenAllocationsCrossTheBudget) {
  std::vector<std::pair<int64_t, int64_t>> warnings;
  EngineOptions options;
  options.memory_budget_bytes = 1;
  options.on_memory_warning = [&](int64_t allocated, int64_t budget) {
    warnings.emplace_back(allocated, budget);
  };
  MakeEngine(options);
  RegisterOrders();
  auto connector = AddConnector("orders");
  RILL_ASSERT_OK(connector->Push(Orders("[1, 2, 3]", R"(["a", "b", "c"])", "[1.0, 2.0, 3.0]")));
  RILL_ASSERT_OK(engine_->Step());
  ASSERT_GE(warnings.size(), 1u);
  EXPECT_EQ(warnings[0].second, 1);
  EXPECT_GT(warnings[0].first, 1);
  EXPECT_GE(engine_->GetMetrics().memory_warnings, 1);
  EXPECT_TRUE(HasEvent([](const EngineEvent& e) { return e.severity == Severity::kWarning; }))
      << EventsText();
  EXPECT_FALSE(engine_->CheckMemoryBudget());
  EXPECT_GT(engine_->AllocatedBytes(), 1);
}

TEST_F(EngineTest, StaysQuietWithinTheMemoryBudget) {
  int warnings = 0;
  EngineOptions options;
  options.memory_budget_bytes = int64_t{1} << 50;
  options.on_memory_warning = [&](int64_t, int64_t) { ++warnings; };
  MakeEngine(options);
  RegisterOrders();
  auto connector = AddConnector("orders");
  RILL_ASSERT_OK(connector->Push(Orders("[1]", R"(["a"])", "[1.0]")));
  RILL_ASSERT_OK(engine_->Step());
  EXPECT_EQ(warnings, 0);
  EXPECT_TRUE(engine_->CheckMemoryBudget());
  EXPECT_EQ(engine_->GetMetrics().memory_warnings, 0);
}

TEST_F(EngineTest, SurvivesAThrowingMemoryWarningCallback) {
  EngineOptions options;
  options.memory_budget_bytes = 1;
  options.on_memory_warning = [](int64_t, int64_t) { throw std::runtime_error("callback died"); };
  MakeEngine(options);
  auto orders = RegisterOrders();
  auto connector = AddConnector("orders");
  RILL_ASSERT_OK(connector->Push(Orders("[1]", R"(["a"])", "[1.0]")));
  RILL_ASSERT_OK(engine_->Step());
  RILL_ASSERT_OK(engine_->Step());
  EXPECT_EQ(orders->num_rows(), 1);
}

// Metrics ------------------------------------------------------------------------

TEST_F(EngineTest, CountsTicksAndRecords) {
  RegisterOrders();
  auto connector = AddConnector("orders");
  RILL_ASSERT_OK(connector->Push(Orders("[1, 2, 3]", R"(["a", "b", "c"])", "[1.0, 2.0, 3.0]")));
  RILL_ASSERT_OK(engine_->Step());
  clock_.Advance(1);
  RILL_ASSERT_OK(connector->Push(Orders("[4, 5]", R"(["d", "e"])", "[4.0, 5.0]")));
  RILL_ASSERT_OK(engine_->Step());
  auto m = engine_->GetMetrics();
  EXPECT_EQ(m.ticks, 2);
  EXPECT_EQ(m.total_records_processed, 5);
  EXPECT_EQ(m.last_batch_records, 2);
  EXPECT_EQ(m.timestamp, kT0 + 1);
  EXPECT_GT(m.last_batch_latency_s, 0);  // measured, not left at 0
  EXPECT_GE(m.max_batch_latency_s, m.last_batch_latency_s);
  EXPECT_GE(m.max_batch_latency_s, m.avg_batch_latency_s);
  EXPECT_GT(m.records_per_second, 0);
  EXPECT_EQ(m.errors, 0);
  EXPECT_EQ(m.rejected_batches, 0);
  EXPECT_GT(m.arrow_allocated_bytes, 0);
  EXPECT_GE(m.arrow_peak_allocated_bytes, m.arrow_allocated_bytes);
}

TEST_F(EngineTest, PublishesMetricsAsTheRillMetricsTable) {
  RegisterOrders();
  auto connector = AddConnector("orders");
  RILL_ASSERT_OK(connector->Push(Orders("[1, 2]", R"(["a", "b"])", "[1.0, 2.0]")));
  RILL_ASSERT_OK(engine_->Step());
  EXPECT_EQ(QueryRows("SELECT ticks, total_records_processed, last_batch_records "
                      "FROM rill_metrics"),
            (std::vector<std::string>{"1|2|2"}));
}

TEST_F(EngineTest, EvaluatesBusinessMetricsEveryTick) {
  auto orders = RegisterOrders();
  auto connector = AddConnector("orders");
  RILL_ASSERT_OK(engine_->RegisterBusinessMetric(
      "order_count", [&]() -> Result<double> { return static_cast<double>(orders->num_rows()); }));
  RILL_ASSERT_OK(engine_->RegisterBusinessMetric(
      "broken", []() -> Result<double> { return Status::Invalid("metric source offline"); }));
  RILL_ASSERT_OK(connector->Push(Orders("[1, 2, 3]", R"(["a", "b", "c"])", "[1.0, 2.0, 3.0]")));
  RILL_ASSERT_OK(engine_->Step());
  auto m = engine_->GetMetrics();
  ASSERT_EQ(m.business_metrics.size(), 2u);
  std::map<std::string, BusinessMetricValue> by_name;
  for (const auto& v : m.business_metrics) by_name[v.name] = v;
  ASSERT_TRUE(by_name.count("order_count"));
  EXPECT_TRUE(by_name["order_count"].ok);
  EXPECT_EQ(by_name["order_count"].value, 3);
  ASSERT_TRUE(by_name.count("broken"));
  EXPECT_FALSE(by_name["broken"].ok);
  EXPECT_TRUE(Contains(by_name["broken"].error, "metric source offline"));

  RILL_ASSERT_OK(engine_->UnregisterBusinessMetric("broken"));
  RILL_ASSERT_OK(connector->Push(Orders("[4]", R"(["d"])", "[4.0]")));
  RILL_ASSERT_OK(engine_->Step());
  m = engine_->GetMetrics();
  ASSERT_EQ(m.business_metrics.size(), 1u);
  EXPECT_EQ(m.business_metrics[0].value, 4);
}

// SQL tasks -------------------------------------------------------------------------

TEST_F(EngineTest, RunsScheduledSqlTasksIntoOutputTables) {
  RegisterOrders();
  auto connector = AddConnector("orders");
  RILL_ASSERT_OK(engine_->AddSqlTask(std::make_shared<ScheduledSqlTask>(
      "tier_revenue",
      "SELECT tier, SUM(amount) AS total_revenue, COUNT(*) AS order_count FROM orders GROUP BY tier",
      "revenue_by_tier", /*interval_seconds=*/1.0)));
  RILL_ASSERT_OK(connector->Push(Orders("[1, 2, 3]", R"(["Gold", "Silver", "Gold"])",
                                        "[100.5, 45.0, 250.0]")));
  RILL_ASSERT_OK(engine_->Step());
  const std::string sql =
      "SELECT tier, total_revenue, order_count FROM revenue_by_tier ORDER BY tier";
  EXPECT_EQ(QueryRows(sql), (std::vector<std::string>{"Gold|350.5|2", "Silver|45|1"}));
  EXPECT_EQ(engine_->TaskStatistics()["tier_revenue"].runs, 1);

  // Not due yet: the output keeps the old result.
  RILL_ASSERT_OK(connector->Push(Orders("[4]", R"(["Bronze"])", "[5.0]")));
  clock_.Advance(0.5);
  RILL_ASSERT_OK(engine_->Step());
  EXPECT_EQ(QueryRows(sql), (std::vector<std::string>{"Gold|350.5|2", "Silver|45|1"}));
  EXPECT_EQ(engine_->TaskStatistics()["tier_revenue"].runs, 1);

  clock_.Advance(0.5);
  RILL_ASSERT_OK(engine_->Step());
  EXPECT_EQ(QueryRows(sql),
            (std::vector<std::string>{"Bronze|5|1", "Gold|350.5|2", "Silver|45|1"}));
  auto stats = engine_->TaskStatistics()["tier_revenue"];
  EXPECT_EQ(stats.runs, 2);
  EXPECT_EQ(stats.errors, 0);
  EXPECT_EQ(stats.last_run_at, kT0 + 1);
}

TEST_F(EngineTest, RecordsAFailingSqlTaskWithItsQueryAndRunsTheOthers) {
  RegisterOrders();
  auto connector = AddConnector("orders");
  const std::string bad_query = "SELECT no_such_column FROM orders";
  RILL_ASSERT_OK(engine_->AddSqlTask(
      std::make_shared<ScheduledSqlTask>("bad_task", bad_query, "bad_out", 1.0)));
  RILL_ASSERT_OK(engine_->AddSqlTask(std::make_shared<ScheduledSqlTask>(
      "count_task", "SELECT count(*) AS n FROM orders", "counts", 1.0)));
  RILL_ASSERT_OK(connector->Push(Orders("[1, 2]", R"(["a", "b"])", "[1.0, 2.0]")));
  RILL_ASSERT_OK(engine_->Step());

  EXPECT_EQ(QueryRows("SELECT n FROM counts"), (std::vector<std::string>{"2"}));
  auto stats = engine_->TaskStatistics();
  EXPECT_EQ(stats["bad_task"].errors, 1);
  EXPECT_EQ(stats["bad_task"].runs, 1);
  EXPECT_TRUE(Contains(stats["bad_task"].last_error, "no_such_column"))
      << stats["bad_task"].last_error;
  EXPECT_EQ(stats["count_task"].errors, 0);
  EXPECT_TRUE(HasEvent([&](const EngineEvent& e) {
    return e.severity == Severity::kError && Contains(e.component + e.message, "bad_task") &&
           Contains(e.message + e.detail, bad_query);
  })) << EventsText();
  EXPECT_GE(engine_->GetMetrics().errors, 1);

  // The loop goes on, and the failing task is retried when due.
  clock_.Advance(1);
  RILL_ASSERT_OK(engine_->Step());
  EXPECT_EQ(engine_->TaskStatistics()["bad_task"].errors, 2);
}

TEST_F(EngineTest, RemovesSqlTasks) {
  RegisterOrders();
  RILL_ASSERT_OK(engine_->AddSqlTask(std::make_shared<ScheduledSqlTask>(
      "count_task", "SELECT count(*) AS n FROM orders", "counts", 1.0)));
  EXPECT_FALSE(engine_->AddSqlTask(std::make_shared<ScheduledSqlTask>(
                                       "count_task", "SELECT 1", "other", 1.0))
                   .ok());
  RILL_ASSERT_OK(engine_->RemoveSqlTask("count_task"));
  RILL_ASSERT_OK(engine_->Step());
  EXPECT_TRUE(engine_->GetTable("counts").status().IsKeyError());
  EXPECT_FALSE(engine_->RemoveSqlTask("count_task").ok());
}

}  // namespace
}  // namespace rill
