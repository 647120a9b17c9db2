// StreamSqlTask: SQL over the rows a table received since the previous run.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

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

// Rows that moved between an application's instances (a restored partition
// shard) are no new input: after Engine::SkipNewRowsOf the task goes on with
// the rows written later only. Other tables' tasks are not moved.
TEST(StreamSqlTask, SkipsTheRowsItsSourceHeldWhenToldTheyMoved) {
  Fixture f;
  auto task = StreamSqlTask::Make("s", "SELECT k, v FROM src", f.engine.get(), "src", "out",
                                  Rows(1000));
  ASSERT_TRUE(task.ok()) << task.status().ToString();
  ASSERT_TRUE(f.engine->AddSqlTask(*task).ok());
  ASSERT_TRUE(f.in->Push(Batch({1, 2}, {1, 2})).ok());
  f.Tick();
  EXPECT_EQ(f.Count("SELECT count(*) FROM out"), 2);
  // A restore writes rows straight into the table, then says they moved.
  f.now += 1;
  ASSERT_TRUE(f.engine->GetTable("src").ValueOrDie()->Write(Batch({7, 8, 9}, {7, 8, 9}), f.now).ok());
  f.engine->SkipNewRowsOf("dim");  // another table: nothing changes for this task
  f.engine->SkipNewRowsOf("src");
  f.engine->SkipNewRowsOf("no_such_table");
  f.Tick();
  EXPECT_EQ(f.Count("SELECT count(*) FROM out"), 2);
  ASSERT_TRUE(f.in->Push(Batch({3}, {3})).ok());
  f.Tick();
  EXPECT_EQ(f.Count("SELECT count(*) FROM out"), 3);
  EXPECT_EQ(f.Count("SELECT sum(k)::BIGINT FROM out"), 1 + 2 + 3);
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

// Rows of `t`'s columns k, v as "k|v" ("null" for nulls), sorted.
std::vector<std::string> SortedKv(const arrow::Table& t) {
  std::vector<std::string> out;
  auto cell = [](const arrow::ChunkedArray& c, int64_t i) {
    auto s = c.GetScalar(i).ValueOrDie();
    return s->is_valid ? s->ToString() : std::string("null");
  };
  const auto& k = *t.GetColumnByName("k");
  const auto& v = *t.GetColumnByName("v");
  for (int64_t i = 0; i < t.num_rows(); ++i) out.push_back(cell(k, i) + "|" + cell(v, i));
  std::sort(out.begin(), out.end());
  return out;
}

TEST(StreamSqlTask, OutputsStayRightWhileTheSourceExpiresAndItsMemoryIsReused) {
  // The outputs of projections share the source's buffers: they must keep
  // their values after retention drops the source rows, whose memory later
  // pushes reuse. Random batches with nulls over many ticks; the expected
  // outputs are computed here from what was pushed.
  Fixture f;  // src keeps at most 1000 rows
  struct Query {
    const char* name;
    const char* sql;
  };
  const Query queries[] = {
      {"project", "SELECT k, v FROM src"},
      {"compute", "SELECT k, v * 2 + 1 AS v FROM src"},
      {"filter", "SELECT k, v FROM src WHERE k % 3 = 0"},
  };
  for (const auto& q : queries) {
    auto task = StreamSqlTask::Make(q.name, q.sql, f.engine.get(), "src",
                                    std::string("out_") + q.name, Rows(1'000'000));
    ASSERT_TRUE(task.ok()) << task.status().ToString();
    ASSERT_TRUE(f.engine->AddSqlTask(*task).ok());
  }
  std::mt19937 rng(11);
  std::vector<std::string> project, compute, filter;
  for (int tick = 0; tick < 60; ++tick) {
    const int n = static_cast<int>(rng() % 1000);  // at most what src keeps
    arrow::Int64Builder k, v;
    for (int i = 0; i < n; ++i) {
      const int64_t key = static_cast<int64_t>(rng() % 100000);
      const bool null = rng() % 5 == 0;
      const int64_t value = static_cast<int64_t>(rng() % 1000) - 500;
      ASSERT_TRUE(k.Append(key).ok());
      ASSERT_TRUE((null ? v.AppendNull() : v.Append(value)).ok());
      const std::string kk = std::to_string(key);
      project.push_back(kk + "|" + (null ? "null" : std::to_string(value)));
      compute.push_back(kk + "|" + (null ? "null" : std::to_string(value * 2 + 1)));
      if (key % 3 == 0) filter.push_back(project.back());
    }
    ASSERT_TRUE(f.in->Push(arrow::RecordBatch::Make(Schema(), n, {*k.Finish(), *v.Finish()})).ok());
    f.Tick();
  }
  EXPECT_LE(f.engine->GetTable("src").ValueOrDie()->num_rows(), 1000);
  std::sort(project.begin(), project.end());
  std::sort(compute.begin(), compute.end());
  std::sort(filter.begin(), filter.end());
  for (const auto& [name, expected] :
       {std::pair{"project", &project}, {"compute", &compute}, {"filter", &filter}}) {
    auto out = f.engine->Query(std::string("SELECT k, v FROM out_") + name);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    EXPECT_EQ(SortedKv(**out), *expected) << name;
    EXPECT_EQ(f.engine->TaskStatistics()[name].errors, 0) << name;
  }
}

}  // namespace
}  // namespace rill
