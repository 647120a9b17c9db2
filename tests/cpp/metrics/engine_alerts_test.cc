// Every kind of internal failure reaches rill_alerts as an engine alert with
// the right component, and repeated failures are rate-limited.
#include <arrow/api.h>
#include <gtest/gtest.h>

#include "metrics/metrics_test_util.h"
#include "rill/connector/memory_connector.h"
#include "rill/engine/engine.h"
#include "rill/engine/task.h"
#include "rill/metrics/metrics_store.h"

namespace rill {
namespace {

using testing_metrics::Count;
using testing_metrics::FakeClock;
using testing_metrics::Orders;
using testing_metrics::OrdersSchema;
using testing_metrics::Text;

class FailingConnector : public Connector {
 public:
  FailingConnector() : Connector("flaky_feed", "orders", nullptr) {}
  Result<std::vector<std::shared_ptr<arrow::RecordBatch>>> Poll() override {
    return Status::IOError("connection reset by peer");
  }
  ConnectorStats stats() const override { return {}; }
};

class EngineAlerts : public ::testing::Test {
 protected:
  void SetUp() override { MakeAll(EngineOptions{}); }

  void MakeAll(EngineOptions options, double rate_limit_window = 60) {
    store_.reset();
    options.clock = clock_.clock();
    auto engine = Engine::Make(std::move(options));
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = std::move(*engine);
    auto orders =
        engine_->RegisterTable("orders", OrdersSchema(), {.primary_key = {"order_id"}});
    ASSERT_TRUE(orders.ok()) << orders.status();
    orders_ = *orders;
    MetricsOptions metrics;
    metrics.path = ":memory:";
    metrics.rate_limit_window_seconds = rate_limit_window;
    auto store = MetricsStore::Make(engine_.get(), metrics);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
  }

  void TearDown() override { store_.reset(); }

  void StepAndFlush() {
    clock_.Advance(1);
    ASSERT_TRUE(engine_->Step().ok());
    ASSERT_TRUE(store_->Flush().ok());
  }

  /// "source|severity" of the single alert of `component`.
  std::string AlertOf(const std::string& component) {
    return Text(*store_, "SELECT source || '|' || severity FROM rill_alerts "
                         "WHERE component = '" + component + "'");
  }

  FakeClock clock_;
  std::unique_ptr<Engine> engine_;
  std::shared_ptr<LiveTable> orders_;
  std::unique_ptr<MetricsStore> store_;
};

TEST_F(EngineAlerts, RecordsConnectorReadErrors) {
  ASSERT_TRUE(engine_->AddConnector(std::make_shared<FailingConnector>()).ok());
  StepAndFlush();
  EXPECT_EQ(AlertOf("flaky_feed"), "engine|error");
  EXPECT_NE(Text(*store_, "SELECT detail FROM rill_alerts WHERE component = 'flaky_feed'")
                .find("connection reset"),
            std::string::npos);
}

TEST_F(EngineAlerts, RecordsRejectedBatches) {
  auto connector = std::make_shared<MemoryConnector>("orders", nullptr, BufferLimits{}, "feed");
  ASSERT_TRUE(engine_->AddConnector(connector).ok());
  arrow::StringBuilder bad;
  ASSERT_TRUE(bad.Append("not a number").ok());
  arrow::Int64Builder id;
  ASSERT_TRUE(id.Append(1).ok());
  auto schema = arrow::schema({arrow::field("order_id", arrow::int64()),
                               arrow::field("bogus_column", arrow::utf8())});
  ASSERT_TRUE(connector->Push(arrow::RecordBatch::Make(schema, 1, {*id.Finish(),
                                                                   *bad.Finish()})).ok());
  StepAndFlush();
  EXPECT_EQ(AlertOf("feed"), "engine|error");
  EXPECT_NE(Text(*store_, "SELECT message FROM rill_alerts WHERE component = 'feed'")
                .find("Rejected"),
            std::string::npos);
}

TEST_F(EngineAlerts, RecordsSqlTaskErrors) {
  ASSERT_TRUE(engine_->AddSqlTask(std::make_shared<ScheduledSqlTask>(
                  "tier_revenue", "SELECT nope FROM orders", "revenue_by_tier", 1.0))
                  .ok());
  StepAndFlush();
  EXPECT_EQ(AlertOf("tier_revenue"), "engine|error");
  EXPECT_NE(Text(*store_, "SELECT detail FROM rill_alerts WHERE component = 'tier_revenue'")
                .find("SELECT nope FROM orders"),
            std::string::npos);
}

TEST_F(EngineAlerts, RecordsJoinTaskErrors) {
  JoinTaskOptions options;
  options.name = "enrich";
  options.left_table = "orders";
  options.right_table = "missing_profiles";
  options.keys = {"order_id"};
  options.output_table = "orders_enriched";
  auto task = TableJoinTask::Make(options);
  ASSERT_TRUE(task.ok()) << task.status();
  ASSERT_TRUE(engine_->AddJoinTask(*task).ok());
  StepAndFlush();
  EXPECT_EQ(AlertOf("enrich"), "engine|error");
}

TEST_F(EngineAlerts, RecordsSubscriberExceptions) {
  ASSERT_TRUE(engine_->Subscribe("orders", [](const auto&) {
                       throw std::runtime_error("subscriber exploded");
                     }).ok());
  ASSERT_TRUE(orders_->Write(Orders({1}, {"Gold"}, {1})).ok());
  StepAndFlush();
  EXPECT_EQ(AlertOf("subscriber:orders"), "engine|error");
  EXPECT_EQ(Text(*store_, "SELECT detail FROM rill_alerts "
                          "WHERE component = 'subscriber:orders'"),
            "subscriber exploded");
}

TEST_F(EngineAlerts, RecordsBusinessMetricCallbackExceptions) {
  ASSERT_TRUE(engine_->RegisterBusinessMetric("revenue", []() -> Result<double> {
                       throw std::runtime_error("metric exploded");
                     }).ok());
  StepAndFlush();
  EXPECT_EQ(AlertOf("metric:revenue"), "engine|error");
}

TEST_F(EngineAlerts, RecordsMemoryBudgetCrossingsAndCallbackFailures) {
  EngineOptions options;
  options.memory_budget_bytes = 1;  // anything allocated crosses it
  options.on_memory_warning = [](int64_t, int64_t) {
    throw std::runtime_error("warning handler exploded");
  };
  MakeAll(std::move(options));
  ASSERT_TRUE(orders_->Write(Orders({1, 2}, {"Gold", "Gold"}, {1, 2})).ok());
  StepAndFlush();
  EXPECT_EQ(AlertOf("memory_budget"), "engine|warning");
  EXPECT_EQ(AlertOf("on_memory_warning"), "engine|error");
}

TEST_F(EngineAlerts, RecordsUserAlertsThroughTheEngine) {
  ASSERT_TRUE(store_->Warn("Order queue backlog exceeds threshold").ok());
  StepAndFlush();
  EXPECT_EQ(Text(*store_, "SELECT source FROM rill_alerts"), "user");
  bool seen = false;
  for (const auto& event : engine_->RecentEvents()) {
    seen = seen || event.message == "Order queue backlog exceeds threshold";
  }
  EXPECT_TRUE(seen) << "user alerts also reach the engine's recent events";
}

TEST_F(EngineAlerts, RateLimitsARepeatedlyFailingTask) {
  ASSERT_TRUE(engine_->AddSqlTask(std::make_shared<ScheduledSqlTask>(
                  "broken", "SELECT * FROM nowhere", "out", 1.0))
                  .ok());
  for (int i = 0; i < 20; ++i) StepAndFlush();  // 20 failures in 20 s
  EXPECT_EQ(Count(*store_, "SELECT count(*) FROM rill_alerts WHERE component = 'broken'"), 1);
  clock_.Advance(60);  // the window ends
  ASSERT_TRUE(store_->Flush().ok());
  EXPECT_EQ(Count(*store_, "SELECT count(*) FROM rill_alerts WHERE component = 'broken'"), 2);
  EXPECT_EQ(Count(*store_, "SELECT sum(count)::BIGINT FROM rill_alerts WHERE component = 'broken'"),
            20);
  EXPECT_EQ(Count(*store_, "SELECT max(count) FROM rill_alerts WHERE component = 'broken'"),
            19);
  EXPECT_EQ(store_->stats().alerts_suppressed, 19);
}

}  // namespace
}  // namespace rill
