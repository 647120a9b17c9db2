// SqlEngine's two additions for pgwire: a QueryInterrupt stops a running
// query from another thread (and only that query), and DefineHelpers runs
// CREATE statements only.
#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include <arrow/api.h>

#include "rill/sql/query_interrupt.h"
#include "rill/sql/sql_engine.h"

namespace rill {
namespace {

TEST(QueryInterrupt, StopsARunningQueryAndTheNextRunsNormally) {
  auto engine = SqlEngine::Make().ValueOrDie();
  QueryInterrupt interrupt;
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    interrupt.Interrupt();
  });
  // Counting 10^12 rows takes hours: only the interrupt ends it, with Cancelled.
  auto result = engine->Query("SELECT count(*) FROM range(1000000000000) a", &interrupt);
  canceller.join();
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(result.status().IsCancelled()) << result.status();
  // Still interrupted: a new query with it fails at once; after Reset it runs.
  EXPECT_TRUE(engine->Query("SELECT 1", &interrupt).status().IsCancelled());
  interrupt.Reset();
  auto ok = engine->Query("SELECT 41 + 1 AS x", &interrupt);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ((*ok)->num_rows(), 1);
  // The pooled connection the interrupted query used serves others.
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(engine->Query("SELECT 1").ok());
  }
}

TEST(SqlEngineDefineHelpers, CreatesSharedMacrosAndRefusesOtherStatements) {
  auto engine = SqlEngine::Make().ValueOrDie();
  ASSERT_TRUE(engine->DefineHelpers({"CREATE SCHEMA IF NOT EXISTS helpers",
                                     "CREATE OR REPLACE MACRO helpers.twice(x) AS x * 2"})
                  .ok());
  auto result = engine->Query("SELECT helpers.twice(21) AS v");
  ASSERT_TRUE(result.ok()) << result.status();
  auto v = std::static_pointer_cast<arrow::Int32Array>((*result)->column(0)->chunk(0));
  EXPECT_EQ(v->Value(0), 42);
  auto bad = engine->DefineHelpers({"DROP SCHEMA helpers CASCADE"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("CREATE"), std::string::npos);
  EXPECT_FALSE(engine->DefineHelpers({"SELECT 1; SELECT 2"}).ok());
  EXPECT_TRUE(engine->Query("SELECT helpers.twice(1)").ok());
}

}  // namespace
}  // namespace rill
