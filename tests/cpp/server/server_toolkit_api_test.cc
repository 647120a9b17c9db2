// Seed 001's toolkit over HTTP on real sockets: queues, analytics metrics and
// window task results (docs/api.md).
#include <map>
#include <random>

#include <boost/json.hpp>

#include "rill/engine/window_task.h"
#include "rill/toolkit/toolkit.h"
#include "server/server_test_util.h"

namespace rill::server::testing {
namespace {

namespace json = boost::json;

constexpr const char* kToken = "test-token";

json::value Body(const Reply& r) { return json::parse(r.body); }

Reply Delete(const std::string& a, const std::string& target) {
  return Request(a, http::verb::delete_, target, "", kToken);
}

TEST(ServerToolkitApi, QueuesCreateEnqueueDequeueStats) {
  Harness h;
  std::string a = h.server->address();
  EXPECT_EQ(Post(a, "/api/v1/queues", R"({"name":"events"})").status, 401);
  Reply created = Post(a, "/api/v1/queues", R"({"name":"events","max_size":3})", kToken);
  ASSERT_EQ(created.status, 201) << created.body;
  EXPECT_EQ(Body(created).at("max_size").as_int64(), 3);
  EXPECT_EQ(Post(a, "/api/v1/queues", R"({"name":"events"})", kToken).status, 409);
  EXPECT_EQ(Post(a, "/api/v1/queues", R"({"name":"x","on_overflow":"maybe"})", kToken).status,
            400);
  EXPECT_EQ(Post(a, "/api/v1/queues", R"({"max_size":3})", kToken).status, 400);
  EXPECT_EQ(Post(a, "/api/v1/queues", "{not json", kToken).status, 400);

  const std::string q = "/api/v1/queues/events";
  ASSERT_EQ(Post(a, q + "/enqueue", R"({"message":{"event":"user_login","user_id":1}})", kToken)
                .status, 201);
  ASSERT_EQ(Post(a, q + "/enqueue", R"({"message":{"event":"alert"},"priority":10})", kToken)
                .status, 201);
  ASSERT_EQ(Post(a, q + "/enqueue", R"({"message":"third"})", kToken).status, 201);
  Reply full = Post(a, q + "/enqueue", R"({"message":"fourth"})", kToken);
  EXPECT_EQ(full.status, 429) << full.body;
  EXPECT_EQ(Post(a, q + "/enqueue", R"({"priority":1})", kToken).status, 400);
  EXPECT_EQ(Post(a, q + "/enqueue", R"({"message":1,"priority":1.5})", kToken).status, 400);

  EXPECT_EQ(Body(Get(a, q + "/peek", kToken)).at("message").at("event").as_string(), "alert");
  Reply first = Post(a, q + "/dequeue", "", kToken);
  ASSERT_EQ(first.status, 200) << first.body;
  EXPECT_EQ(Body(first).at("message").at("event").as_string(), "alert");
  EXPECT_EQ(Body(first).at("size").as_int64(), 2);
  Reply rest = Post(a, q + "/dequeue?count=5", "", kToken);
  auto messages = Body(rest).at("messages").as_array();
  ASSERT_EQ(messages.size(), 2u);
  EXPECT_EQ(messages[0].at("user_id").as_int64(), 1);
  EXPECT_EQ(messages[1].as_string(), "third");
  EXPECT_TRUE(Body(Post(a, q + "/dequeue", "", kToken)).at("message").is_null());

  auto stats = Body(Get(a, q + "/stats", kToken)).as_object();
  EXPECT_EQ(stats.at("current_size").as_int64(), 0);
  EXPECT_EQ(stats.at("total_enqueued").as_int64(), 3);
  EXPECT_EQ(stats.at("total_dequeued").as_int64(), 3);
  EXPECT_FALSE(stats.at("last_dequeue_at").is_null());

  ASSERT_EQ(Post(a, "/api/v1/queues", R"({"name":"lossy","max_size":2,"on_overflow":"drop_newest"})",
                 kToken).status, 201);
  auto batch = Body(Post(a, "/api/v1/queues/lossy/enqueue", R"({"messages":[1,2,3]})", kToken));
  EXPECT_EQ(batch.at("queued").as_int64(), 2);
  EXPECT_EQ(batch.at("dropped").as_int64(), 1);
  auto all = Body(Get(a, "/api/v1/queues", kToken)).as_object();
  EXPECT_EQ(all.at("total_queues").as_int64(), 2);
  EXPECT_EQ(all.at("total_messages").as_int64(), 2);
  EXPECT_EQ(all.at("total_enqueued").as_int64(), 5);
  EXPECT_EQ(Get(a, "/api/v1/queues/nope/stats", kToken).status, 404);
  EXPECT_EQ(Get(a, q + "/explode", kToken).status, 404);
  ASSERT_EQ(Delete(a, "/api/v1/queues/lossy").status, 200);
  EXPECT_EQ(Delete(a, "/api/v1/queues/lossy").status, 404);
}

TEST(ServerToolkitApi, SharedToolkitQueuesPersistAcrossServers) {
  std::string path = ::testing::TempDir() + "/rill_toolkit_api_" + std::to_string(::getpid()) +
                     ".db";
  std::remove(path.c_str());
  {
    ServerOptions options;
    toolkit::ToolkitOptions to;
    to.queue_db = path;
    options.toolkit = toolkit::Toolkit::Make(to).ValueOrDie();
    Harness h(options);
    std::string a = h.server->address();
    ASSERT_EQ(Post(a, "/api/v1/queues", R"({"name":"jobs"})", kToken).status, 201);
    ASSERT_EQ(Post(a, "/api/v1/queues/jobs/enqueue", R"({"messages":["a","b"]})", kToken).status,
              201);
    // The same Toolkit is visible in C++.
    EXPECT_EQ(options.toolkit->queues->GetQueue("jobs").ValueOrDie()->size(), 2);
  }
  ServerOptions options;
  toolkit::ToolkitOptions to;
  to.queue_db = path;
  options.toolkit = toolkit::Toolkit::Make(to).ValueOrDie();
  Harness h(options);
  std::string a = h.server->address();
  auto stats = Body(Get(a, "/api/v1/queues/jobs", kToken));
  EXPECT_EQ(stats.at("current_size").as_int64(), 2);
  EXPECT_TRUE(stats.at("persistent").as_bool());
  EXPECT_EQ(Body(Post(a, "/api/v1/queues/jobs/dequeue", "", kToken)).at("message").as_string(),
            "a");
  std::remove(path.c_str());
}

TEST(ServerToolkitApi, AnalyticsMetricsMatchPlainStatistics) {
  Harness h;
  std::string a = h.server->address();
  std::mt19937 rng(3);
  std::vector<double> values;
  for (int i = 0; i < 50; ++i) {
    double v = static_cast<double>(rng() % 10000) / 100.0;
    values.push_back(v);
    Reply r = Post(a, "/api/v1/analytics/metrics",
                   "{\"name\":\"api_calls\",\"value\":" + std::to_string(v) + "}", kToken);
    ASSERT_EQ(r.status, 201) << r.body;
  }
  ASSERT_EQ(Post(a, "/api/v1/analytics/metrics", R"({"name":"page_views"})", kToken).status,
            201);
  EXPECT_EQ(Post(a, "/api/v1/analytics/metrics", R"({"value":1})", kToken).status, 400);
  EXPECT_EQ(Post(a, "/api/v1/analytics/metrics", R"({"name":"x","value":"big"})", kToken)
                .status, 400);
  auto m = Body(Get(a, "/api/v1/analytics/metrics/api_calls", kToken)).as_object();
  double sum = 0, lo = 1e300, hi = -1e300;
  for (double v : values) {
    double parsed = std::stod(std::to_string(v));
    sum += parsed;
    lo = std::min(lo, parsed);
    hi = std::max(hi, parsed);
  }
  EXPECT_EQ(m.at("count").as_int64(), 50);
  EXPECT_NEAR(m.at("sum").to_number<double>(), sum, 1e-6);
  EXPECT_NEAR(m.at("avg").to_number<double>(), sum / 50, 1e-6);
  EXPECT_DOUBLE_EQ(m.at("min").to_number<double>(), lo);
  EXPECT_DOUBLE_EQ(m.at("max").to_number<double>(), hi);
  EXPECT_GT(m.at("rate_per_second").to_number<double>(), 0);
  auto all = Body(Get(a, "/api/v1/analytics/metrics", kToken)).at("metrics").as_object();
  EXPECT_EQ(all.size(), 2u);
  EXPECT_EQ(all.at("page_views").at("count").as_int64(), 1);
  EXPECT_DOUBLE_EQ(all.at("page_views").at("sum").to_number<double>(), 1.0);
  EXPECT_EQ(Get(a, "/api/v1/analytics/metrics/nope", kToken).status, 404);
  EXPECT_EQ(Delete(a, "/api/v1/analytics/metrics/page_views").status, 200);
  EXPECT_EQ(Get(a, "/api/v1/analytics/metrics/page_views", kToken).status, 404);
}

std::shared_ptr<arrow::RecordBatch> Events(const std::vector<double>& ts,
                                           const std::vector<std::string>& keys,
                                           const std::vector<double>& values) {
  arrow::DoubleBuilder t, v;
  arrow::StringBuilder k;
  EXPECT_TRUE(t.AppendValues(ts).ok());
  EXPECT_TRUE(k.AppendValues(keys).ok());
  EXPECT_TRUE(v.AppendValues(values).ok());
  auto schema = arrow::schema({arrow::field("ts", arrow::float64()),
                               arrow::field("k", arrow::utf8()),
                               arrow::field("v", arrow::float64())});
  return arrow::RecordBatch::Make(schema, static_cast<int64_t>(ts.size()),
                                  {*t.Finish(), *k.Finish(), *v.Finish()});
}

TEST(ServerToolkitApi, WindowTaskResultsMatchPlainSums) {
  Harness h;
  std::string a = h.server->address();
  TableOptions append;
  append.mode = TableMode::kAppend;
  append.retention = RetentionPolicy{int64_t{100000}, std::nullopt, "z_insert_ts"};
  auto ev = h.engine->RegisterTable("ev", Events({}, {}, {})->schema(), append).ValueOrDie();
  WindowTaskOptions o;
  o.name = "per_10s";
  o.source_table = "ev";
  o.output_table = "per_10s_out";
  o.spec.time_column = "ts";
  o.spec.size_seconds = 10;
  o.spec.group_by = {"k"};
  o.spec.aggregations = {ParseWindowAggregation("n", "count(*)").ValueOrDie(),
                         ParseWindowAggregation("s", "sum(v)").ValueOrDie()};
  ASSERT_TRUE(h.engine->AddWindowTask(WindowTask::Make(o).ValueOrDie()).ok());
  EXPECT_EQ(Body(Get(a, "/api/v1/windows/per_10s/results", kToken)).at("row_count").as_int64(),
            0);
  std::mt19937 rng(11);
  std::vector<double> ts, vs;
  std::vector<std::string> ks;
  std::map<std::pair<double, std::string>, std::pair<int64_t, double>> expect;
  for (int i = 0; i < 200; ++i) {
    ts.push_back(1000 + i * 0.37);
    ks.push_back(rng() % 2 ? "a" : "b");
    vs.push_back(static_cast<double>(rng() % 100));
  }
  ASSERT_TRUE(ev->Write(Events(ts, ks, vs)).ok());
  ASSERT_TRUE(h.engine->Step().ok());
  double watermark = ts.back();
  for (size_t i = 0; i < ts.size(); ++i) {
    double start = std::floor(ts[i] / 10) * 10;
    if (start + 10 > watermark) continue;  // still open
    auto& e = expect[{start, ks[i]}];
    e.first += 1;
    e.second += vs[i];
  }
  Reply r = Get(a, "/api/v1/windows/per_10s/results?limit=1000", kToken);
  ASSERT_EQ(r.status, 200) << r.body;
  auto rows = Body(r).at("rows").as_array();
  ASSERT_EQ(rows.size(), expect.size());
  for (const auto& row : rows) {
    auto start = row.at("window_start");
    double s = start.is_number() ? start.to_number<double>() : 0;
    std::string key(row.at("k").as_string());
    auto it = expect.find({s, key});
    ASSERT_NE(it, expect.end()) << json::serialize(row);
    EXPECT_EQ(row.at("n").as_int64(), it->second.first);
    EXPECT_DOUBLE_EQ(row.at("s").to_number<double>(), it->second.second);
  }
  auto list = Body(Get(a, "/api/v1/windows", kToken)).at("windows").as_array();
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].at("rows_in").as_int64(), 200);
  EXPECT_EQ(list[0].at("window").as_string(), "tumbling");
  EXPECT_EQ(Get(a, "/api/v1/windows/nope/results", kToken).status, 404);
  EXPECT_EQ(Get(a, "/api/v1/windows/per_10s/late", kToken).status, 200);
}

}  // namespace
}  // namespace rill::server::testing
