// StreamSqlTask: SQL over the rows a table received since the previous run.
#include <gtest/gtest.h>

#include <arrow/api.h>

#include "rill/connector/memory_connector.h"
#include "rill/engine/engine.h"
#include "rill/engine/stream_sql_task.h"

namespace rill {
namespace {

std::shared_ptr<arrow::Schema> Schema() {
  return arrow::schema({arrow::field("k", arrow::int64()), arrow::field("v", arrow::int64())});
}

std::shared_ptr<arrow::RecordBatch> Batch(std::vector<int64_t> ks, std::vector<int64_t> vs) {
  arrow::Int64Builder k, v;
  EXPECT_TRUE(k.AppendValues(ks).ok());
  EXPECT_TRUE(v.AppendValues(vs).ok());
  return arrow::RecordBatch::Make(Schema(), static_cast<int64_t>(ks.size()),
                                  {*k.Finish(), *v.Finish()});
}

struct Fixture {
  double now = 100;
  std::unique_ptr<Engine> engine;
  std::shared_ptr<MemoryConnector> in;
  Fixture() {
    EngineOptions o;
    o.clock = [this] { return now; };
    engine = *Engine::Make(std::move(o));
    TableOptions t;
    t.mode = TableMode::kAppend;
    t.retention = RetentionPolicy{};
    t.retention->max_rows = 1000;
    EXPECT_TRUE(engine->RegisterTable("src", Schema(), t).ok());
    EXPECT_TRUE(engine->RegisterTable("dim", Schema(), TableOptions{{"k"}}).ok());
    in = std::make_shared<MemoryConnector>("src", Schema());
    EXPECT_TRUE(engine->AddConnector(in).ok());
  }
  void Tick() {
    now += 1;
    ASSERT_TRUE(engine->Step().ok());
  }
  int64_t Count(const std::string& sql) {
    auto t = engine->Query(sql);
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    return std::static_pointer_cast<arrow::Int64Array>(t.ValueOrDie()->column(0)->chunk(0))
        ->Value(0);
  }
};

RetentionPolicy Rows(int64_t n) {
  RetentionPolicy r;
  r.max_rows = n;
  return r;
}

TEST(StreamSqlTask, SeesEachNewRowOnceAndJoinsTheFullOtherTables) {
  Fixture f;
  ASSERT_TRUE(f.engine->GetTable("dim").ValueOrDie()->Write(Batch({1, 2}, {10, 20}), f.now).ok());
  auto task = StreamSqlTask::Make(
      "s", "SELECT s.k, s.v + d.v AS w FROM src s JOIN dim d ON s.k = d.k WHERE s.v > 0",
      f.engine.get(), "src", "out", Rows(1000));
  ASSERT_TRUE(task.ok()) << task.status().ToString();
  ASSERT_TRUE(f.engine->AddSqlTask(*task).ok());
  ASSERT_TRUE(f.in->Push(Batch({1, 2, 3}, {1, -1, 1})).ok());
  f.Tick();
  EXPECT_EQ(f.Count("SELECT count(*) FROM out"), 1);
  f.Tick();  // nothing new: nothing appended
  EXPECT_EQ(f.Count("SELECT count(*) FROM out"), 1);
  ASSERT_TRUE(f.in->Push(Batch({2, 1}, {5, 7})).ok());
  f.Tick();
  EXPECT_EQ(f.Count("SELECT count(*) FROM out"), 3);
  EXPECT_EQ(f.Count("SELECT sum(w)::BIGINT FROM out"), 11 + 25 + 17);
}

TEST(StreamSqlTask, WaitsForAMissingSourceAndRetriesAfterAFailure) {
  Fixture f;
  auto later = StreamSqlTask::Make("a", "SELECT k FROM later", f.engine.get(), "later", "out_a",
                                   Rows(10));
  ASSERT_TRUE(later.ok());
  ASSERT_TRUE(f.engine->AddSqlTask(*later).ok());
  f.Tick();  // the source does not exist yet: no error
  EXPECT_EQ(f.engine->TaskStatistics()["a"].errors, 0);
  auto bad = StreamSqlTask::Make("b", "SELECT no_such_column FROM src", f.engine.get(), "src",
                                 "out_b", Rows(10));
  ASSERT_TRUE(bad.ok());
  ASSERT_TRUE(f.engine->AddSqlTask(*bad).ok());
  ASSERT_TRUE(f.in->Push(Batch({1}, {1})).ok());
  f.Tick();
  EXPECT_EQ(f.engine->TaskStatistics()["b"].errors, 1);
  EXPECT_FALSE(StreamSqlTask::Make("c", "SELECT 1", f.engine.get(), "src", "o", RetentionPolicy{})
                   .ok());  // an append output needs a retention limit
  EXPECT_FALSE(StreamSqlTask::Make("c", "SELECT 1", nullptr, "src", "o", Rows(1)).ok());
}

}  // namespace
}  // namespace rill
