// Incremental views in an engine: refusals, a restore from a checkpoint that
// keeps the view's state (no rebuild), a source dropped and made again.
#include <filesystem>
#include <string>
#include <unistd.h>
#include <vector>

#include <arrow/api.h>
#include <gtest/gtest.h>

#include "rill/engine/checkpoint.h"
#include "rill/engine/engine.h"
#include "rill/engine/task.h"
#include "rill/sql/sql_engine.h"
#include "rill/table/live_table.h"
#include "table/test_util.h"

namespace rill {
namespace {

namespace fs = std::filesystem;

std::shared_ptr<arrow::Schema> OrdersSchema() {
  return arrow::schema({arrow::field("id", arrow::int64(), false), arrow::field("region", arrow::utf8()),
                        arrow::field("amount", arrow::float64())});
}

std::shared_ptr<arrow::RecordBatch> Orders(const std::string& ids, const std::string& regions,
                                           const std::string& amounts) {
  return test::BatchOf(OrdersSchema(), {ids, regions, amounts});
}

const char kQuery[] =
    "SELECT region, count(*) AS n, sum(amount) AS total, min(amount) AS lo, max(amount) AS hi "
    "FROM orders GROUP BY region";

std::vector<std::string> Sorted(Engine& engine, const std::string& sql) {
  auto table = engine.Query(sql).ValueOrDie();
  std::vector<std::string> rows;
  auto combined = table->CombineChunks().ValueOrDie();
  for (int64_t r = 0; r < combined->num_rows(); ++r) {
    std::string row;
    for (int c = 0; c < combined->num_columns(); ++c) {
      row += combined->column(c)->GetScalar(r).ValueOrDie()->ToString() + "|";
    }
    rows.push_back(row);
  }
  std::sort(rows.begin(), rows.end());
  return rows;
}

std::vector<std::string> Output(Engine& engine) {
  return Sorted(engine, "SELECT region, n, total, lo, hi FROM by_region");
}

std::shared_ptr<ScheduledSqlTask> View(const std::string& query = kQuery) {
  return std::make_shared<ScheduledSqlTask>("by_region_task", query, "by_region", 0.0,
                                            std::vector<std::string>{}, true, std::nullopt,
                                            IncrementalMode::kOn);
}

TEST(IvmTask, RefusesWhatItCannotMaintainNamingThePart) {
  auto engine = Engine::Make().ValueOrDie();
  TableOptions keyed;
  keyed.primary_key = {"id"};
  ASSERT_TRUE(engine->RegisterTable("orders", OrdersSchema(), keyed).ok());
  struct Case {
    std::string sql, part;
  };
  for (const Case& c : std::vector<Case>{
           {"SELECT region FROM orders ORDER BY region", "ORDER BY"},
           {"SELECT region, count(*) FROM orders GROUP BY region LIMIT 3", "LIMIT"},
           {"SELECT region, median(amount) FROM orders GROUP BY region", "median(amount)"},
           {"SELECT id, now() AS t FROM orders", "non-deterministic"},
           {"SELECT id, sum(amount) OVER () FROM orders", "window function"},
           {"SELECT region FROM orders", "does not select the key column"},
       }) {
    Status st = ScheduledSqlTask::CheckIncremental(engine->sql(), c.sql);
    EXPECT_FALSE(st.ok()) << c.sql;
    EXPECT_NE(st.message().find(c.part), std::string::npos) << c.sql << ": " << st.message();
    EXPECT_NE(st.message().find("not maintainable incrementally"), std::string::npos)
        << st.message();
  }
  EXPECT_TRUE(ScheduledSqlTask::CheckIncremental(engine->sql(), kQuery).ok());
  // auto: the task re-runs the query and says why, once, in its stats.
  ASSERT_TRUE(engine
                  ->AddSqlTask(std::make_shared<ScheduledSqlTask>(
                      "sorted", "SELECT region FROM orders ORDER BY region", "sorted_out", 0.0))
                  .ok());
  ASSERT_TRUE(engine->Step().ok());
  EXPECT_EQ(engine->TaskStatistics()["sorted"].maintenance.rfind("recompute (ORDER BY", 0), 0u)
      << engine->TaskStatistics()["sorted"].maintenance;
}

TEST(IvmTask, RestoresItsStateFromACheckpointWithoutRebuilding) {
  const fs::path dir = fs::temp_directory_path() / ("rill_ivm_ckpt_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  CheckpointOptions options;
  options.dir = dir.string();
  options.sync = false;
  TableOptions keyed;
  keyed.primary_key = {"id"};
  {
    auto engine = Engine::Make().ValueOrDie();
    auto orders = engine->RegisterTable("orders", OrdersSchema(), keyed).ValueOrDie();
    ASSERT_TRUE(engine->AddSqlTask(View()).ok());
    ASSERT_TRUE(orders->Write(Orders("[1,2,3,4]", R"(["n","n","s","s"])", "[5,1,7,9]")).ok());
    ASSERT_TRUE(engine->Step().ok());
    ASSERT_TRUE(orders->Write(Orders("[2,5]", R"(["s","n"])", "[3,2]")).ok());
    ASSERT_TRUE(engine->Step().ok());
    ASSERT_EQ(Output(*engine), Sorted(*engine, kQuery));
    auto checkpointer = Checkpointer::Make(engine.get(), options).ValueOrDie();
    ASSERT_TRUE(checkpointer->Save().ok());
  }
  auto engine = Engine::Make().ValueOrDie();
  ASSERT_TRUE(engine->AddSqlTask(View()).ok());  // as the catalog's replay adds it
  auto checkpointer = Checkpointer::Make(engine.get(), options).ValueOrDie();
  ASSERT_TRUE(checkpointer->Restore().ok());
  auto orders = engine->GetTable("orders").ValueOrDie();
  // Delete the current minimum of "s" (3) and of "n" (2): the multisets came back too.
  ASSERT_TRUE(orders->Delete(Orders("[2,5]", R"(["s","n"])", "[0,0]")).ok());
  ASSERT_TRUE(orders->Write(Orders("[6]", R"(["e"])", "[4]")).ok());
  ASSERT_TRUE(engine->Step().ok());
  EXPECT_EQ(Output(*engine), Sorted(*engine, kQuery));
  EXPECT_EQ(Output(*engine), (std::vector<std::string>{"e|1|4|4|4|", "n|1|5|5|5|", "s|2|16|7|9|"}));
  auto stats = engine->TaskStatistics()["by_region_task"];
  EXPECT_EQ(stats.maintenance, "incremental");
  EXPECT_GT(stats.state_bytes, 0);
  EXPECT_EQ(stats.rebuilds, 0) << "the restore rebuilt the view from the whole query";
  EXPECT_EQ(stats.changes_read, 3);
  fs::remove_all(dir);
}

TEST(IvmTask, ASourceDroppedAndMadeAgainRebuildsTheView) {
  auto engine = Engine::Make().ValueOrDie();
  TableOptions keyed;
  keyed.primary_key = {"id"};
  auto orders = engine->RegisterTable("orders", OrdersSchema(), keyed).ValueOrDie();
  ASSERT_TRUE(engine->AddSqlTask(View()).ok());
  ASSERT_TRUE(orders->Write(Orders("[1,2]", R"(["n","s"])", "[5,1]")).ok());
  ASSERT_TRUE(engine->Step().ok());
  ASSERT_TRUE(engine->DropTable("orders").ok());
  orders = engine->RegisterTable("orders", OrdersSchema(), keyed).ValueOrDie();
  ASSERT_TRUE(orders->Write(Orders("[7]", R"(["w"])", "[2]")).ok());
  ASSERT_TRUE(engine->Step().ok());
  EXPECT_EQ(Output(*engine), (std::vector<std::string>{"w|1|2|2|2|"}));
  EXPECT_EQ(engine->TaskStatistics()["by_region_task"].rebuilds, 2);
}

TEST(IvmTask, ItsStateCountsAgainstTheMemoryBudget) {
  auto engine = Engine::Make().ValueOrDie();
  TableOptions keyed;
  keyed.primary_key = {"id"};
  auto orders = engine->RegisterTable("orders", OrdersSchema(), keyed).ValueOrDie();
  // One group per row, each with min/max multisets and distinct counts: the
  // state is far larger than the table's Arrow buffers.
  ASSERT_TRUE(engine
                  ->AddSqlTask(View("SELECT id AS region, count(*) AS n, sum(amount) AS total, "
                                    "min(amount) AS lo, max(amount) AS hi, "
                                    "count(DISTINCT region) AS d FROM orders GROUP BY id"))
                  .ok());
  std::string ids = "[", regions = "[", amounts = "[";
  for (int i = 0; i < 20000; ++i) {
    ids += (i ? "," : "") + std::to_string(i);
    regions += std::string(i ? "," : "") + "\"r" + std::to_string(i % 7) + "\"";
    amounts += (i ? "," : "") + std::to_string(i % 100);
  }
  ASSERT_TRUE(orders->Write(Orders(ids + "]", regions + "]", amounts + "]")).ok());
  ASSERT_TRUE(engine->Step().ok());
  const int64_t state = engine->TaskStatistics()["by_region_task"].state_bytes;
  EXPECT_GT(state, 20000 * 100);
  EXPECT_GE(engine->AllocatedBytes(), state);
}

}  // namespace
}  // namespace rill
