// WindowTask and WindowOperator: each window kind, each aggregate, the
// watermark, late rows, idle sources, processing time, snapshot sources,
// state freeing and configuration errors.
#include <cmath>
#include <set>

#include <arrow/api.h>
#include <gtest/gtest.h>

#include "rill/engine/engine.h"
#include "rill/engine/window_operator.h"
#include "rill/engine/window_task.h"

namespace rill {
namespace {

std::shared_ptr<arrow::Schema> EventSchema() {
  return arrow::schema({arrow::field("t", arrow::float64()), arrow::field("k", arrow::utf8()),
                        arrow::field("v", arrow::int64())});
}

std::shared_ptr<arrow::RecordBatch> Events(const std::vector<double>& t,
                                           const std::vector<std::string>& k,
                                           const std::vector<int64_t>& v) {
  arrow::DoubleBuilder tb;
  arrow::StringBuilder kb;
  arrow::Int64Builder vb;
  EXPECT_TRUE(tb.AppendValues(t).ok());
  EXPECT_TRUE(kb.AppendValues(k).ok());
  EXPECT_TRUE(vb.AppendValues(v).ok());
  return arrow::RecordBatch::Make(EventSchema(), static_cast<int64_t>(t.size()),
                                  {tb.Finish().ValueOrDie(), kb.Finish().ValueOrDie(),
                                   vb.Finish().ValueOrDie()});
}

WindowSpec Spec(WindowKind kind, std::vector<std::pair<std::string, std::string>> aggs,
                std::vector<std::string> group_by = {"k"}) {
  WindowSpec spec;
  spec.kind = kind;
  spec.time_column = "t";
  spec.size_seconds = 10;
  spec.slide_seconds = 5;
  spec.gap_seconds = 3;
  spec.group_by = std::move(group_by);
  for (auto& [out, expr] : aggs) {
    spec.aggregations.push_back(ParseWindowAggregation(out, expr).ValueOrDie());
  }
  return spec;
}

// Rows of `table` as "start,end,k,<aggs...>" strings.
std::multiset<std::string> Rows(const std::shared_ptr<arrow::Table>& table) {
  std::multiset<std::string> out;
  auto combined = table->CombineChunksToBatch().ValueOrDie();
  for (int64_t r = 0; r < combined->num_rows(); ++r) {
    std::string row;
    for (int c = 0; c < combined->num_columns(); ++c) {
      auto scalar = combined->column(c)->GetScalar(r).ValueOrDie();
      row += (c ? "," : "") + scalar->ToString();
    }
    out.insert(row);
  }
  return out;
}

TEST(WindowOperator, TumblingClosesWhenWatermarkPassesEnd) {
  auto op = WindowOperator::Make(Spec(WindowKind::kTumbling, {{"n", "count(*)"}, {"s", "sum(v)"}}),
                                 EventSchema(), nullptr)
                .ValueOrDie();
  ASSERT_TRUE(op->Consume(Events({1, 2, 9.5, 12}, {"a", "a", "b", "a"}, {1, 2, 3, 4}), 0,
                          nullptr).ok());
  // Watermark 12: window [0, 10) closes, [10, 20) stays open.
  EXPECT_EQ(Rows(op->Emit(0).ValueOrDie()),
            (std::multiset<std::string>{"0,10,a,2,3", "0,10,b,1,3"}));
  EXPECT_EQ(op->stats().groups_open, 1);
  EXPECT_EQ(op->stats().windows_open, 1);
  EXPECT_EQ(Rows(op->Flush().ValueOrDie()), (std::multiset<std::string>{"10,20,a,1,4"}));
  EXPECT_EQ(op->stats().groups_open, 0);
}

TEST(WindowOperator, HoppingPutsARowInEveryWindowContainingIt) {
  auto op = WindowOperator::Make(Spec(WindowKind::kHopping, {{"n", "count(*)"}}, {}),
                                 EventSchema(), nullptr)
                .ValueOrDie();
  ASSERT_TRUE(op->Consume(Events({7, 100}, {"a", "a"}, {1, 1}), 0, nullptr).ok());
  // t = 7 is in [0, 10) and [5, 15).
  EXPECT_EQ(Rows(op->Emit(0).ValueOrDie()), (std::multiset<std::string>{"0,10,1", "5,15,1"}));
}

TEST(WindowOperator, SessionsMergeWhenAnEventBridgesThem) {
  WindowSpec spec =
      Spec(WindowKind::kSession, {{"n", "count(*)"}, {"f", "first(v)"}, {"l", "last(v)"}});
  spec.allowed_lateness_seconds = 10;
  auto op = WindowOperator::Make(spec, EventSchema(), nullptr).ValueOrDie();
  ASSERT_TRUE(op->Consume(Events({1, 6}, {"a", "a"}, {10, 20}), 0, nullptr).ok());
  EXPECT_EQ(op->Emit(0).ValueOrDie()->num_rows(), 0);
  EXPECT_EQ(op->stats().windows_open, 2);
  // 3.5 is within 3 s of both 1 and 6: one session [1, 9).
  ASSERT_TRUE(op->Consume(Events({3.5, 30}, {"a", "a"}, {15, 1}), 0, nullptr).ok());
  EXPECT_EQ(Rows(op->Emit(0).ValueOrDie()), (std::multiset<std::string>{"1,9,a,3,10,20"}));
  EXPECT_EQ(op->stats().windows_open, 1);
}

TEST(WindowOperator, RestoredRowsGoOnlyToTheWindowsStillOpen) {
  // Hopping [0,10), [5,15), [10,20): a moved partition's operator restarts at
  // its old watermark 12 ([0,10) was emitted by the old owner) and takes
  // back its rows: t = 7 only into [5,15), t = 11 into [5,15) and [10,20).
  auto op = WindowOperator::Make(Spec(WindowKind::kHopping, {{"n", "count(*)"}}, {}),
                                 EventSchema(), nullptr)
                .ValueOrDie();
  op->AdvanceWatermark(12);
  ASSERT_TRUE(op->ConsumeRestored(Events({7, 11, 3}, {"a", "a", "a"}, {1, 1, 1}), 0).ok());
  // Not input: nothing counted, nothing late.
  EXPECT_EQ(op->stats().rows_in, 0);
  EXPECT_EQ(op->stats().late_rows, 0);
  EXPECT_EQ(Rows(op->Flush().ValueOrDie()), (std::multiset<std::string>{"5,15,2", "10,20,1"}));
}

TEST(WindowOperator, RestoredSessionRowsRebuildTheirSession) {
  WindowSpec spec = Spec(WindowKind::kSession, {{"n", "count(*)"}});
  auto op = WindowOperator::Make(spec, EventSchema(), nullptr).ValueOrDie();
  op->AdvanceWatermark(5);
  // A session [1, 9) open at the old owner (events 1, 3.5 and 6, gap 3):
  // rows behind the watermark are its rows, not late ones.
  ASSERT_TRUE(op->ConsumeRestored(Events({1, 3.5, 6}, {"a", "a", "a"}, {1, 1, 1}), 0).ok());
  EXPECT_EQ(op->StateHorizon(), 1);
  ASSERT_TRUE(op->Consume(Events({20}, {"a"}, {1}), 0, nullptr).ok());
  EXPECT_EQ(Rows(op->Emit(0).ValueOrDie()), (std::multiset<std::string>{"1,9,a,3"}));
  // Open now: the session of 20 alone.
  EXPECT_EQ(op->StateHorizon(), 20);
}

TEST(WindowOperator, StateHorizonIsTheStartOfTheFirstOpenWindow) {
  auto op = WindowOperator::Make(Spec(WindowKind::kHopping, {{"n", "count(*)"}}, {}),
                                 EventSchema(), nullptr)
                .ValueOrDie();
  EXPECT_EQ(op->StateHorizon(), -INFINITY);
  ASSERT_TRUE(op->Consume(Events({12}, {"a"}, {1}), 0, nullptr).ok());
  ASSERT_TRUE(op->Emit(0).ok());
  // Watermark 12: [0,10) closed, [5,15) open: a row before 5 is in no open window.
  EXPECT_EQ(op->StateHorizon(), 5);
  op->AdvanceWatermark(15);
  EXPECT_EQ(op->StateHorizon(), 10);
  auto tumbling = WindowOperator::Make(Spec(WindowKind::kTumbling, {{"n", "count(*)"}}),
                                       EventSchema(), nullptr)
                      .ValueOrDie();
  tumbling->AdvanceWatermark(23);
  EXPECT_EQ(tumbling->StateHorizon(), 20);
}

TEST(WindowOperator, LateRowsAreReportedWithTheirReason) {
  WindowSpec spec = Spec(WindowKind::kTumbling, {{"n", "count(*)"}});
  spec.allowed_lateness_seconds = 2;
  auto op = WindowOperator::Make(spec, EventSchema(), nullptr).ValueOrDie();
  ASSERT_TRUE(op->Consume(Events({20}, {"a"}, {1}), 0, nullptr).ok());
  ASSERT_TRUE(op->Emit(0).ok());
  EXPECT_EQ(op->watermark(), 18);
  LateRows late;
  ASSERT_TRUE(op->Consume(Events({17.9, 18, NAN}, {"a", "a", "a"}, {1, 1, 1}), 0, &late).ok());
  ASSERT_EQ(late.rows, (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(late.reasons[0], LateReason::kBehindWatermark);
  EXPECT_EQ(late.reasons[1], LateReason::kNullTime);
  EXPECT_EQ(late.watermark, 18);
  EXPECT_EQ(op->stats().late_rows, 1);
  EXPECT_EQ(op->stats().null_time_rows, 1);
}

TEST(WindowOperator, LateByWindowAddsRowsToTheirWindowsStillOpen) {
  WindowSpec spec = Spec(WindowKind::kHopping, {{"n", "count(*)"}}, {});
  spec.late_by_window = true;
  auto op = WindowOperator::Make(spec, EventSchema(), nullptr).ValueOrDie();
  ASSERT_TRUE(op->Consume(Events({12}, {"a"}, {1}), 0, nullptr).ok());
  EXPECT_EQ(Rows(op->Emit(0).ValueOrDie()), (std::multiset<std::string>{}));
  EXPECT_EQ(op->watermark(), 12);
  // 7 is behind the watermark: [0, 10) has closed, [5, 15) is still open.
  EXPECT_EQ(op->OpenWindowsOf(7), (std::vector<std::pair<double, double>>{{5, 15}}));
  EXPECT_TRUE(op->OpenWindowsOf(4).empty());
  LateRows late;
  ASSERT_TRUE(op->Consume(Events({7, 4}, {"a", "a"}, {1, 1}), 0, &late).ok());
  EXPECT_EQ(late.rows, (std::vector<int64_t>{1}));  // 4: [0, 10) and [-5, 5) closed
  op->AdvanceWatermark(15);
  EXPECT_EQ(Rows(op->Emit(0).ValueOrDie()), (std::multiset<std::string>{"5,15,2"}));
  EXPECT_EQ(Rows(op->Flush().ValueOrDie()), (std::multiset<std::string>{"10,20,1"}));
}

TEST(WindowOperator, IdleTimeoutAdvancesTheWatermarkWithProcessingTime) {
  WindowSpec spec = Spec(WindowKind::kTumbling, {{"n", "count(*)"}});
  spec.idle_timeout_seconds = 5;
  auto op = WindowOperator::Make(spec, EventSchema(), nullptr).ValueOrDie();
  ASSERT_TRUE(op->Consume(Events({3}, {"a"}, {1}), /*now=*/100, nullptr).ok());
  EXPECT_EQ(op->Emit(100).ValueOrDie()->num_rows(), 0);
  EXPECT_EQ(op->Emit(104).ValueOrDie()->num_rows(), 0);  // not idle long enough
  EXPECT_EQ(op->Emit(107).ValueOrDie()->num_rows(), 1);  // watermark 3 + 7 = 10
}

TEST(WindowOperator, AggregatesEveryIncrementalFunction) {
  auto op = WindowOperator::Make(
                Spec(WindowKind::kTumbling,
                     {{"n", "count(*)"}, {"c", "count(v)"}, {"s", "sum(v)"}, {"a", "avg(v)"},
                      {"lo", "min(v)"}, {"hi", "max(v)"}, {"f", "first(v)"}, {"l", "last(v)"},
                      {"d", "count_distinct(v)"}, {"x", "approx_count_distinct(v)"},
                      {"mk", "max(k)"}},
                     {}),
                EventSchema(), nullptr)
                .ValueOrDie();
  // Out of order: first/last follow event time, not arrival.
  ASSERT_TRUE(op->Consume(Events({5, 1, 9, 3}, {"b", "a", "c", "a"}, {7, 2, 2, 9}), 0,
                          nullptr).ok());
  EXPECT_EQ(Rows(op->Flush().ValueOrDie()),
            (std::multiset<std::string>{"0,10,4,4,20,5,2,9,2,2,3,3,c"}));
}

TEST(WindowOperator, ApproxCountDistinctIsWithinTwoPercent) {
  auto op = WindowOperator::Make(
                Spec(WindowKind::kTumbling, {{"x", "approx_count_distinct(v)"},
                                             {"d", "count(DISTINCT v)"}}, {}),
                EventSchema(), nullptr)
                .ValueOrDie();
  std::vector<double> t(100000, 1);
  std::vector<std::string> k(100000, "a");
  std::vector<int64_t> v(100000);
  for (int64_t i = 0; i < 100000; ++i) v[i] = i * 7919 % 50000;
  ASSERT_TRUE(op->Consume(Events(t, k, v), 0, nullptr).ok());
  auto out = op->Flush().ValueOrDie()->CombineChunksToBatch().ValueOrDie();
  const int64_t approx = std::static_pointer_cast<arrow::Int64Array>(out->column(2))->Value(0);
  const int64_t exact = std::static_pointer_cast<arrow::Int64Array>(out->column(3))->Value(0);
  EXPECT_EQ(exact, 50000);
  EXPECT_NEAR(approx, 50000, 1000);
}

TEST(WindowOperator, RejectsBadConfiguration) {
  WindowSpec spec = Spec(WindowKind::kTumbling, {{"n", "count(*)"}});
  spec.size_seconds = 0;
  EXPECT_TRUE(WindowOperator::Make(spec, EventSchema(), nullptr).status().IsInvalid());
  spec = Spec(WindowKind::kSession, {{"n", "count(*)"}});
  spec.gap_seconds = -1;
  EXPECT_TRUE(WindowOperator::Make(spec, EventSchema(), nullptr).status().IsInvalid());
  spec = Spec(WindowKind::kTumbling, {{"n", "sum(nope)"}});
  EXPECT_TRUE(WindowOperator::Make(spec, EventSchema(), nullptr).status().IsKeyError());
  spec = Spec(WindowKind::kTumbling, {{"n", "sum(k)"}});
  EXPECT_TRUE(WindowOperator::Make(spec, EventSchema(), nullptr).status().IsInvalid());
  spec = Spec(WindowKind::kTumbling, {{"k", "count(*)"}});  // clashes with group_by
  EXPECT_TRUE(WindowOperator::Make(spec, EventSchema(), nullptr).status().IsInvalid());
  spec = Spec(WindowKind::kTumbling, {{"m", "median(v)"}});  // needs DuckDB
  EXPECT_TRUE(WindowOperator::Make(spec, EventSchema(), nullptr).status().IsInvalid());
  spec.time_column = "k";
  EXPECT_FALSE(WindowOperator::Make(spec, EventSchema(), nullptr).ok());
}

TEST(WindowAggregation, ParsesIncrementalFormsAndFallsBackToSql) {
  EXPECT_EQ(ParseWindowAggregation("a", "COUNT(*)")->kind, WindowAggKind::kCountStar);
  EXPECT_EQ(ParseWindowAggregation("a", "count(DISTINCT \"my col\")")->column, "my col");
  EXPECT_EQ(ParseWindowAggregation("a", "mean(x)")->kind, WindowAggKind::kAvg);
  EXPECT_EQ(ParseWindowAggregation("a", "sum(x * 2)")->kind, WindowAggKind::kSql);
  EXPECT_EQ(ParseWindowAggregation("a", "quantile_cont(x, 0.9)")->kind, WindowAggKind::kSql);
  EXPECT_TRUE(ParseWindowAggregation("", "sum(x)").status().IsInvalid());
}

class WindowTaskTest : public ::testing::Test {
 protected:
  void SetUp() override {
    EngineOptions options;
    options.clock = [this] { return now_; };
    engine_ = Engine::Make(options).ValueOrDie();
  }
  std::shared_ptr<WindowTask> Task(WindowSpec spec, const std::string& source = "ev") {
    WindowTaskOptions o;
    o.name = "w";
    o.source_table = source;
    o.output_table = "out";
    o.spec = std::move(spec);
    return WindowTask::Make(o).ValueOrDie();
  }
  void Tick() {
    now_ += 1;
    ASSERT_TRUE(engine_->Step().ok());
    auto stats = engine_->TaskStatistics()["w"];
    ASSERT_EQ(stats.errors, 0) << stats.last_error;
  }
  std::multiset<std::string> Out(const std::string& sql) {
    return Rows(engine_->Query(sql).ValueOrDie());
  }
  double now_ = 1000;
  std::unique_ptr<Engine> engine_;
};

TEST_F(WindowTaskTest, EmitsClosedWindowsAndKeepsLateRows) {
  TableOptions append;
  append.mode = TableMode::kAppend;
  append.retention = RetentionPolicy{int64_t{1000}, std::nullopt, "z_insert_ts"};
  auto ev = engine_->RegisterTable("ev", EventSchema(), append).ValueOrDie();
  auto task = Task(Spec(WindowKind::kTumbling, {{"n", "count(*)"}, {"m", "median(v)"}}));
  ASSERT_TRUE(engine_->AddWindowTask(task).ok());
  EXPECT_TRUE(engine_->AddWindowTask(task).IsInvalid());
  // A second task of the same name is refused and leaves the first's metrics alone.
  EXPECT_TRUE(engine_->AddWindowTask(Task(Spec(WindowKind::kSession, {{"n", "count(*)"}})))
                  .IsInvalid());
  ASSERT_TRUE(ev->Write(Events({1, 2, 3}, {"a", "a", "a"}, {1, 2, 10}), now_ + 1).ok());
  Tick();
  EXPECT_EQ(Out("SELECT * FROM out").size(), 0u);
  ASSERT_TRUE(ev->Write(Events({15, 4}, {"b", "a"}, {1, 1}), now_ + 1).ok());
  Tick();
  // Watermark 15 closed [0, 10); the row at 4 arrived before that close, so it counts.
  EXPECT_EQ(Out("SELECT window_start, window_end, k, n, m FROM out"),
            (std::multiset<std::string>{"0,10,a,4,1.5"}));
  ASSERT_TRUE(ev->Write(Events({5}, {"a"}, {1}), now_ + 1).ok());
  Tick();
  EXPECT_EQ(Out("SELECT k, late_reason, event_time, watermark, task FROM out_late"),
            (std::multiset<std::string>{"a,behind watermark,5,15,w"}));
  auto stats = task->stats_snapshot();
  EXPECT_EQ(stats.window.late_rows, 1);
  EXPECT_EQ(stats.late_rows_kept, 1);
  EXPECT_EQ(stats.window.groups_open, 1);
  EXPECT_GT(stats.window.state_bytes, 0);
  auto metrics = engine_->GetMetrics().business_metrics;
  bool found = false;
  for (const auto& m : metrics) found |= m.name == "window:w:late_rows" && m.value == 1;
  EXPECT_TRUE(found);
  ASSERT_TRUE(engine_->RemoveWindowTask("w").ok());
  EXPECT_TRUE(engine_->RemoveWindowTask("w").IsKeyError());
}

// A partition shard replayed into the source of a running window (it took the
// partition over) holds events behind the watermark: they moved, they did not
// arrive late, so after Engine::SkipNewRowsOf they are neither late rows nor
// counted again; the events written after them are.
TEST_F(WindowTaskTest, SkipsTheRowsThatMovedInsteadOfCallingThemLate) {
  TableOptions append;
  append.mode = TableMode::kAppend;
  append.retention = RetentionPolicy{int64_t{1000}, std::nullopt, "z_insert_ts"};
  auto ev = engine_->RegisterTable("ev", EventSchema(), append).ValueOrDie();
  auto task = Task(Spec(WindowKind::kTumbling, {{"n", "count(*)"}}));
  ASSERT_TRUE(engine_->AddWindowTask(task).ok());
  ASSERT_TRUE(ev->Write(Events({1, 2, 15}, {"a", "a", "a"}, {1, 1, 1}), now_ + 1).ok());
  Tick();
  EXPECT_EQ(Out("SELECT window_start, k, n FROM out"), (std::multiset<std::string>{"0,a,2"}));
  ASSERT_TRUE(ev->Write(Events({3, 4, 5}, {"a", "b", "b"}, {1, 1, 1}), now_ + 1).ok());
  engine_->SkipNewRowsOf("ev");
  Tick();
  ASSERT_TRUE(ev->Write(Events({16, 31}, {"a", "a"}, {1, 1}), now_ + 1).ok());
  Tick();
  EXPECT_EQ(Out("SELECT window_start, k, n FROM out"),
            (std::multiset<std::string>{"0,a,2", "10,a,2"}));
  EXPECT_EQ(task->stats_snapshot().window.late_rows, 0);
}

TEST_F(WindowTaskTest, OnUpdateWritesChangingResultsToASnapshotTable) {
  TableOptions append;
  append.mode = TableMode::kAppend;
  append.retention = RetentionPolicy{int64_t{1000}, std::nullopt, "z_insert_ts"};
  auto ev = engine_->RegisterTable("ev", EventSchema(), append).ValueOrDie();
  WindowSpec spec = Spec(WindowKind::kTumbling, {{"s", "sum(v)"}});
  spec.emit = EmitMode::kOnUpdate;
  ASSERT_TRUE(engine_->AddWindowTask(Task(spec)).ok());
  ASSERT_TRUE(ev->Write(Events({1}, {"a"}, {5}), now_ + 1).ok());
  Tick();
  EXPECT_EQ(Out("SELECT window_start, window_end, k, s, is_final FROM out"),
            (std::multiset<std::string>{"0,10,a,5,false"}));
  ASSERT_TRUE(ev->Write(Events({2, 11}, {"a", "a"}, {6, 1}), now_ + 1).ok());
  Tick();
  EXPECT_EQ(Out("SELECT window_start, window_end, k, s, is_final FROM out"),
            (std::multiset<std::string>{"0,10,a,11,true", "10,20,a,1,false"}));
}

TEST_F(WindowTaskTest, ProcessingTimeWindowsUseTheWriteTime) {
  auto ev = engine_->RegisterTable("ev", EventSchema()).ValueOrDie();
  WindowSpec spec = Spec(WindowKind::kTumbling, {{"n", "count(*)"}}, {});
  spec.time_column = "";
  spec.size_seconds = 2;
  ASSERT_TRUE(engine_->AddWindowTask(Task(spec)).ok());
  ASSERT_TRUE(ev->Write(Events({0, 0}, {"a", "b"}, {1, 1}), 1001).ok());
  Tick();  // now 1001
  ASSERT_TRUE(ev->Write(Events({0}, {"c"}, {1}), 1002).ok());
  Tick();  // now 1002: watermark 1002 closes [1000, 1002)
  EXPECT_EQ(Out("SELECT * EXCLUDE (z_insert_ts, z_update_ts) FROM out"),
            (std::multiset<std::string>{"1000,1002,2"}));
}

TEST_F(WindowTaskTest, SnapshotSourceCountsEachWriteOfAKeyAsAnEvent) {
  TableOptions keyed;
  keyed.primary_key = {"k"};
  auto ev = engine_->RegisterTable("ev", EventSchema(), keyed).ValueOrDie();
  ASSERT_TRUE(engine_->AddWindowTask(
      Task(Spec(WindowKind::kTumbling, {{"n", "count(*)"}, {"l", "last(v)"}}))).ok());
  ASSERT_TRUE(ev->Write(Events({1}, {"a"}, {1}), now_ + 1).ok());
  Tick();
  ASSERT_TRUE(ev->Write(Events({2}, {"a"}, {2}), now_ + 1).ok());  // update of key a
  Tick();
  ASSERT_TRUE(ev->Write(Events({20}, {"b"}, {1}), now_ + 1).ok());
  Tick();
  EXPECT_EQ(ev->num_rows(), 2);
  EXPECT_EQ(Out("SELECT * EXCLUDE (z_insert_ts, z_update_ts) FROM out"),
            (std::multiset<std::string>{"0,10,a,2,2"}));
}

TEST_F(WindowTaskTest, MissingSourceIsAnErrorUntilItExists) {
  ASSERT_TRUE(engine_->AddWindowTask(Task(Spec(WindowKind::kTumbling, {{"n", "count(*)"}}))).ok());
  now_ += 1;
  ASSERT_TRUE(engine_->Step().ok());
  auto stats = engine_->TaskStatistics()["w"];
  EXPECT_EQ(stats.errors, 1);
  EXPECT_NE(stats.last_error.find("ev"), std::string::npos);
}

}  // namespace
}  // namespace rill
