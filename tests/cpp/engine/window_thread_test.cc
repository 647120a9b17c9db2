// Window tasks under threads: a connector pushing from its own thread, the
// background tick loop running the window task, readers of stats, metrics and
// the output table, and a remove/add of the task, all at once. At the end
// every pushed row is either counted in an emitted window or kept as late.
//
// Runs under ThreadSanitizer too (label "threads"); keep it short.
#include <atomic>
#include <chrono>
#include <random>
#include <thread>

#include <arrow/api.h>
#include <gtest/gtest.h>

#include "rill/connector/memory_connector.h"
#include "rill/engine/engine.h"
#include "rill/engine/window_task.h"

namespace rill {
namespace {

std::shared_ptr<arrow::Schema> Schema() {
  return arrow::schema({arrow::field("t", arrow::float64()), arrow::field("k", arrow::int64())});
}

std::shared_ptr<WindowTask> MakeTask(const std::string& output) {
  WindowTaskOptions o;
  o.name = "w";
  o.source_table = "ev";
  o.output_table = output;
  o.spec.time_column = "t";
  o.spec.size_seconds = 1;
  o.spec.group_by = {"k"};
  o.spec.aggregations = {*ParseWindowAggregation("n", "count(*)")};
  return *WindowTask::Make(o);
}

TEST(WindowThreads, PushersTickerAndReadersAgreeOnEveryRow) {
  EngineOptions options;
  options.trigger_interval_ms = 2;
  auto engine = Engine::Make(options).ValueOrDie();
  TableOptions append;
  append.mode = TableMode::kAppend;
  append.retention = RetentionPolicy{int64_t{10000000}, std::nullopt, "z_insert_ts"};
  ASSERT_TRUE(engine->RegisterTable("ev", Schema(), append).ok());
  auto connector = std::make_shared<MemoryConnector>("ev", Schema(), BufferLimits{}, "pusher");
  ASSERT_TRUE(engine->AddConnector(connector).ok());
  auto task = MakeTask("out");
  ASSERT_TRUE(engine->AddWindowTask(task).ok());
  ASSERT_TRUE(engine->Start().ok());

  constexpr int kBatches = 200;
  std::atomic<bool> done{false};
  std::thread pusher([&] {
    std::mt19937 rng(5);
    for (int b = 0; b < kBatches; ++b) {
      arrow::DoubleBuilder t;
      arrow::Int64Builder k;
      for (int i = 0; i < 20; ++i) {
        // Mostly in order; every batch also has a row 5 s behind (late).
        EXPECT_TRUE(t.Append(i == 0 ? b * 0.1 - 5 : b * 0.1 + (rng() % 100) / 1000.0).ok());
        EXPECT_TRUE(k.Append(rng() % 3).ok());
      }
      auto batch = arrow::RecordBatch::Make(Schema(), 20, {t.Finish().ValueOrDie(),
                                                           k.Finish().ValueOrDie()});
      EXPECT_TRUE(connector->Push(batch).ok());
      std::this_thread::sleep_for(std::chrono::microseconds(300));
    }
    done = true;
  });
  std::thread reader([&] {
    int64_t last_rows_in = 0;
    while (!done) {
      auto stats = task->stats_snapshot();
      EXPECT_GE(stats.window.rows_in, stats.window.late_rows);
      EXPECT_GE(stats.window.rows_in, last_rows_in) << "the counter went back";
      last_rows_in = stats.window.rows_in;
      (void)engine->TaskStatistics();
      (void)engine->GetMetrics();
      (void)engine->Query("SELECT count(*) FROM ev");
    }
  });
  pusher.join();
  reader.join();
  // Let the loop drain the connector, then close every window.
  for (int i = 0; i < 500 && task->stats_snapshot().window.rows_in < kBatches * 20; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  engine->Stop();
  ASSERT_EQ(task->stats_snapshot().window.rows_in, kBatches * 20);
  // One far-future row closes every window that holds the pushed rows.
  arrow::DoubleBuilder t;
  arrow::Int64Builder k;
  ASSERT_TRUE(t.Append(1e6).ok() && k.Append(0).ok());
  auto far = arrow::RecordBatch::Make(Schema(), 1, {t.Finish().ValueOrDie(), k.Finish().ValueOrDie()});
  ASSERT_TRUE(engine->GetTable("ev").ValueOrDie()->Write(far).ok());
  ASSERT_TRUE(engine->Step().ok());
  auto stats = task->stats_snapshot();
  auto emitted = engine->Query("SELECT coalesce(sum(n), 0)::BIGINT FROM out").ValueOrDie();
  const int64_t in_windows =
      std::static_pointer_cast<arrow::Int64Array>(emitted->column(0)->chunk(0))->Value(0);
  auto late = engine->Query("SELECT count(*) FROM out_late").ValueOrDie();
  const int64_t kept =
      std::static_pointer_cast<arrow::Int64Array>(late->column(0)->chunk(0))->Value(0);
  EXPECT_EQ(in_windows + kept, kBatches * 20);  // every row: in a window or kept as late
  EXPECT_EQ(kept, stats.window.late_rows);
  EXPECT_GT(kept, 0);
  EXPECT_EQ(stats.window.groups_open, 1);  // the far-future row's window

  // Remove and add again while stopped, then tick once from this thread.
  ASSERT_TRUE(engine->RemoveWindowTask("w").ok());
  ASSERT_TRUE(engine->AddWindowTask(MakeTask("out2")).ok());
  ASSERT_TRUE(engine->Step().ok());
  EXPECT_EQ(engine->TaskStatistics()["w"].errors, 0);
}

}  // namespace
}  // namespace rill
