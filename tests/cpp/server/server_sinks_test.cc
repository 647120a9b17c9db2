// The sinks' counters over HTTP: /api/v1/telemetry/sinks, Prometheus /metrics,
// and the metrics store's rill_sink_stats history.
#include <boost/json.hpp>
#include <gtest/gtest.h>

#include "rill/sink/sink_set.h"
#include "server/server_test_util.h"

namespace rill::server::testing {
namespace {

/// Counts what it is given; commits always succeed.
class CountingWriter : public SinkWriter {
 public:
  Status Open(const std::shared_ptr<arrow::Schema>&, const std::vector<std::string>&) override {
    return Status::OK();
  }
  Result<std::optional<SinkProgress>> LoadProgress() override { return std::nullopt; }
  Status Write(const ChangeSet& changes, SinkMode) override {
    bytes_ += changes.num_rows * 10;
    return Status::OK();
  }
  Status Commit(const CommitPoint&) override { return Status::OK(); }
  void Abort() override {}
  void Close() override {}
  int64_t bytes_written() const override { return bytes_; }
  const char* type() const override { return "counting"; }

 private:
  std::atomic<int64_t> bytes_{0};
};

TEST(ServerSinks, TelemetryPrometheusAndTheMetricsStoreShowEachSinksCounters) {
  Harness h;  // table orders with 100 rows
  SinkOptions o;
  o.name = "out";
  o.table = "orders";
  o.mode = SinkMode::kUpsert;
  o.interval_seconds = 0.01;
  auto sink = SinkSet::For(h.engine.get()).Add(o, std::make_unique<CountingWriter>()).ValueOrDie();
  ASSERT_TRUE(sink->Flush(10).ok());

  Reply r = Get(h.server->address(), "/api/v1/telemetry/sinks", "test-token");
  ASSERT_EQ(r.status, 200) << r.body;
  auto sinks = boost::json::parse(r.body).as_object().at("sinks").as_array();
  ASSERT_EQ(sinks.size(), 1u);
  const auto& s = sinks[0].as_object();
  EXPECT_EQ(s.at("sink").as_string(), "out");
  EXPECT_EQ(s.at("type").as_string(), "counting");
  EXPECT_EQ(s.at("table").as_string(), "orders");
  EXPECT_EQ(s.at("mode").as_string(), "upsert");
  EXPECT_EQ(s.at("rows_written").as_int64(), 100);
  EXPECT_EQ(s.at("bytes").as_int64(), 1000);
  EXPECT_EQ(s.at("lag_versions").as_int64(), 0);
  EXPECT_FALSE(s.at("backpressure").as_bool());

  Reply m = Get(h.server->address(), "/metrics", "test-token");
  ASSERT_EQ(m.status, 200);
  EXPECT_NE(m.body.find("rill_sink_rows_written_total{sink=\"out\",type=\"counting\"} 100\n"),
            std::string::npos)
      << m.body;
  EXPECT_NE(m.body.find("# TYPE rill_sink_lag_versions gauge"), std::string::npos);

  ASSERT_TRUE(h.metrics->Flush().ok());
  auto rows = h.metrics
                  ->QueryMetrics("SELECT max(rows_written) AS n FROM rill_sink_stats "
                                 "WHERE sink = 'out'")
                  .ValueOrDie();
  ASSERT_EQ(rows->num_rows(), 1);
  EXPECT_EQ(rows->column(0)->GetScalar(0).ValueOrDie()->ToString(), "100");
}

}  // namespace
}  // namespace rill::server::testing
