// Randomized differential test of WindowTask's partitioned state (issue 28):
// moving partitions between two engines, the way an application's instances
// hand them over, must not change what the windows emit.
//
// Each sequence picks a tumbling, hopping or session window (count and sum by
// key, a random lateness, emitted on close or on update) and four input partitions (key k lives in partition
// k % 4). Engines A and B hold partitions per partition (the application's
// predicate, Engine::SetPartitionShards); the reference engine R is a single
// node that reads every row. Each tick writes a batch of events with event
// times at or after the previous batch's (so no row is late anywhere) to R
// and to the engine owning each row's partition. At two random ticks some
// partitions move (A -> B, then B -> A): their state-table rows are copied to
// the new owner's state table (what the changelog carries), the new owner
// rebuilds them (Engine::RestoreTaskPartitions) and the old owner drops them
// (Engine::DropTaskPartitions). At the end an event far ahead in every
// partition closes every window before it. The windows A and B emitted,
// together, must equal R's as a multiset (each emitted once, with R's count
// and sum), and the state tables must hold only rows of open windows.
//
// RILL_WINDOW_MOVE_ITERATIONS sets the number of sequences (default 30),
// RILL_WINDOW_MOVE_SEED the first seed.
#include <cstdlib>
#include <random>
#include <set>
#include <sstream>

#include <arrow/api.h>
#include <gtest/gtest.h>

#include "rill/engine/engine.h"
#include "rill/engine/window_task.h"
#include "rill/table/live_table.h"

namespace rill {
namespace {

constexpr int kPartitions = 4;

int64_t EnvInt(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v ? std::atoll(v) : fallback;
}

std::shared_ptr<arrow::Schema> Schema() {
  return arrow::schema({arrow::field("t", arrow::float64()), arrow::field("k", arrow::int64()),
                        arrow::field("v", arrow::int64()), arrow::field("_topic", arrow::utf8()),
                        arrow::field("_partition", arrow::int32()),
                        arrow::field("_offset", arrow::int64())});
}

struct Event {
  double t;
  int64_t k;
  int64_t v;
  int64_t offset;
};

std::shared_ptr<arrow::RecordBatch> Batch(const std::vector<Event>& events) {
  arrow::DoubleBuilder t;
  arrow::Int64Builder k, v, o;
  arrow::StringBuilder topic;
  arrow::Int32Builder p;
  for (const auto& e : events) {
    EXPECT_TRUE(t.Append(e.t).ok());
    EXPECT_TRUE(k.Append(e.k).ok());
    EXPECT_TRUE(v.Append(e.v).ok());
    EXPECT_TRUE(topic.Append("in").ok());
    EXPECT_TRUE(p.Append(static_cast<int32_t>(e.k % kPartitions)).ok());
    EXPECT_TRUE(o.Append(e.offset).ok());
  }
  return arrow::RecordBatch::Make(
      Schema(), static_cast<int64_t>(events.size()),
      {t.Finish().ValueOrDie(), k.Finish().ValueOrDie(), v.Finish().ValueOrDie(),
       topic.Finish().ValueOrDie(), p.Finish().ValueOrDie(), o.Finish().ValueOrDie()});
}

std::multiset<std::string> Rows(const std::shared_ptr<arrow::Table>& table) {
  std::multiset<std::string> out;
  auto batch = table->CombineChunksToBatch().ValueOrDie();
  for (int64_t r = 0; r < batch->num_rows(); ++r) {
    std::string row;
    for (int c = 0; c < batch->num_columns(); ++c) {
      row += (c ? "," : "") + batch->column(c)->GetScalar(r).ValueOrDie()->ToString();
    }
    out.insert(row);
  }
  return out;
}

class Node {
 public:
  Node(const WindowSpec& spec, bool sharded) : on_update_(spec.emit == EmitMode::kOnUpdate) {
    EngineOptions options;
    options.clock = [this] { return now_; };
    engine_ = Engine::Make(options).ValueOrDie();
    if (sharded) {
      engine_->SetPartitionShards([](const std::string& t) { return t == "ev"; }, nullptr);
    }
    TableOptions append;
    append.mode = TableMode::kAppend;
    append.retention = RetentionPolicy{int64_t{1000000}, std::nullopt, "z_insert_ts"};
    ev_ = engine_->RegisterTable("ev", Schema(), append).ValueOrDie();
    WindowTaskOptions o;
    o.name = "w";
    o.source_table = "ev";
    o.output_table = "out";
    o.spec = spec;
    task_ = WindowTask::Make(o).ValueOrDie();
    EXPECT_TRUE(engine_->AddWindowTask(task_).ok());
  }
  void Write(const std::vector<Event>& events) {
    if (events.empty()) return;
    ASSERT_TRUE(ev_->Write(Batch(events), now_ + 0.5).ok());
  }
  void Tick() {
    now_ += 1;
    ASSERT_TRUE(engine_->Step().ok());
    auto stats = engine_->TaskStatistics()["w"];
    ASSERT_EQ(stats.errors, 0) << stats.last_error;
  }
  std::multiset<std::string> Out() {
    auto t = engine_->GetTable("out");
    if (!t.ok()) return {};
    // With emit on_update, the final rows (a moved window's earlier updates
    // stay in its old owner's output, not final).
    return Rows(engine_
                    ->Query(on_update_ ? "SELECT window_start, window_end, k, n, s FROM out "
                                         "WHERE is_final"
                                       : "SELECT window_start, window_end, k, n, s FROM out")
                    .ValueOrDie());
  }
  /// The state table's rows of `partitions`, as the changelog would carry them.
  std::shared_ptr<arrow::Table> StateOf(const std::vector<int32_t>& partitions) {
    std::string in;
    for (int32_t p : partitions) in += (in.empty() ? "" : ",") + std::to_string(p);
    return engine_
        ->Query("SELECT * EXCLUDE (z_insert_ts, z_update_ts) FROM w__state WHERE _partition IN (" +
                in + ")")
        .ValueOrDie();
  }
  void DeleteState(const std::vector<int32_t>& partitions) {
    auto keys = StateOf(partitions)->SelectColumns({3, 4, 5});  // _topic, _partition, _offset
    ASSERT_TRUE(keys.ok());
    auto state = engine_->GetTable("w__state").ValueOrDie();
    if ((*keys)->num_rows() == 0) return;
    ASSERT_TRUE(state->Delete(*keys).ok());
  }
  const bool on_update_;
  double now_ = 1000;
  std::unique_ptr<Engine> engine_;
  std::shared_ptr<LiveTable> ev_;
  std::shared_ptr<WindowTask> task_;
};

/// Move `partitions` from `from` to `to` at a tick boundary of both.
void Move(Node& from, Node& to, const std::vector<int32_t>& partitions) {
  auto rows = from.StateOf(partitions);
  // The state table of the new owner exists once it decided its mode.
  auto made = to.engine_->PartitionedStateTables("ev");
  ASSERT_EQ(made, std::vector<std::string>{"w__state"});
  to.DeleteState(partitions);
  if (rows->num_rows() > 0) {
    auto state = to.engine_->GetTable("w__state").ValueOrDie();
    auto batch = rows->CombineChunksToBatch().ValueOrDie();
    ASSERT_TRUE(state->Write(batch).ok());
  }
  ASSERT_TRUE(to.engine_->RestoreTaskPartitions("ev", partitions).ok());
  from.DeleteState(partitions);
  ASSERT_TRUE(from.engine_->DropTaskPartitions("ev", partitions).ok());
}

void RunSequence(uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto pick = [&](int64_t n) { return std::uniform_int_distribution<int64_t>(0, n - 1)(rng); };
  WindowSpec spec;
  spec.kind = std::vector<WindowKind>{WindowKind::kTumbling, WindowKind::kHopping,
                                      WindowKind::kSession}[pick(3)];
  spec.time_column = "t";
  spec.size_seconds = 10 * (1 + pick(3));
  spec.slide_seconds = spec.kind == WindowKind::kHopping ? 5 * (1 + pick(2)) : spec.size_seconds;
  spec.gap_seconds = 2 + pick(6);
  spec.allowed_lateness_seconds = static_cast<double>(pick(3) * 4);
  spec.group_by = {"k"};
  if (pick(3) == 0) spec.emit = EmitMode::kOnUpdate;
  spec.aggregations.push_back(ParseWindowAggregation("n", "count(*)").ValueOrDie());
  spec.aggregations.push_back(ParseWindowAggregation("s", "sum(v)").ValueOrDie());
  SCOPED_TRACE("seed " + std::to_string(seed) + " kind " + WindowKindName(spec.kind) +
               (spec.emit == EmitMode::kOnUpdate ? " on_update" : ""));

  Node a(spec, true), b(spec, true), r(spec, false);
  std::set<int32_t> on_b;  // partitions B owns; A owns the rest
  const int ticks = 30 + static_cast<int>(pick(30));
  const int first_move = 5 + static_cast<int>(pick(ticks / 2));
  const int second_move = first_move + 1 + static_cast<int>(pick(ticks - first_move));
  const int keys = 3 + static_cast<int>(pick(20));
  double clock = 0;
  int64_t offsets[kPartitions] = {0, 0, 0, 0};
  auto write = [&](const std::vector<Event>& events) {
    std::vector<Event> to_a, to_b;
    for (const auto& e : events) {
      (on_b.count(static_cast<int32_t>(e.k % kPartitions)) ? to_b : to_a).push_back(e);
    }
    a.Write(to_a);
    b.Write(to_b);
    r.Write(events);
    a.Tick();
    b.Tick();
    r.Tick();
  };
  for (int tick = 0; tick < ticks; ++tick) {
    if (tick == first_move || tick == second_move) {
      // Some partitions change owner (A -> B at the first move, B -> A or
      // A -> B at the second).
      std::vector<int32_t> moving;
      const bool to_b = tick == first_move || on_b.empty() || pick(2) == 0;
      for (int32_t p = 0; p < kPartitions; ++p) {
        if (on_b.count(p) != (to_b ? 1u : 0u) && pick(2) == 0) moving.push_back(p);
      }
      if (!moving.empty()) {
        if (to_b) {
          Move(a, b, moving);
          on_b.insert(moving.begin(), moving.end());
        } else {
          Move(b, a, moving);
          for (int32_t p : moving) on_b.erase(p);
        }
      }
    }
    // Events at or after the previous batch's times: none is late.
    const double base = clock;
    std::vector<Event> events;
    const int n = static_cast<int>(pick(12));
    for (int i = 0; i < n; ++i) {
      const int64_t k = pick(keys);
      const double t = base + static_cast<double>(pick(40)) / 4;
      clock = std::max(clock, t);
      events.push_back(Event{t, k, pick(100), offsets[k % kPartitions]++});
    }
    write(events);
  }
  // Close every window before the end: one event far ahead per partition.
  std::vector<Event> last;
  const double end = clock + 1000;
  for (int64_t k = 0; k < kPartitions; ++k) last.push_back(Event{end, k, 0, offsets[k]++});
  write(last);
  write({});

  std::multiset<std::string> got = a.Out();
  for (const auto& row : b.Out()) got.insert(row);
  const auto want = r.Out();
  ASSERT_GT(want.size(), 0u);
  EXPECT_EQ(got, want);
  // The state tables keep only the closing events (one per partition, in
  // the open windows) and a marker per partition owned.
  for (Node* node : {&a, &b}) {
    auto rows = node->engine_
                    ->Query("SELECT count(*) FILTER (WHERE _offset >= 0), "
                            "count(*) FILTER (WHERE _offset = -1) FROM w__state")
                    .ValueOrDie();
    const int64_t owned = node == &b ? static_cast<int64_t>(on_b.size())
                                     : kPartitions - static_cast<int64_t>(on_b.size());
    EXPECT_EQ(Rows(rows), (std::multiset<std::string>{std::to_string(owned) + "," +
                                                       std::to_string(owned)}));
  }
}

TEST(WindowPartitionMove, MovingPartitionsDoesNotChangeWhatTheWindowsEmit) {
  const int64_t iterations = EnvInt("RILL_WINDOW_MOVE_ITERATIONS", 30);
  const auto first = static_cast<uint64_t>(EnvInt("RILL_WINDOW_MOVE_SEED", 1));
  for (int64_t i = 0; i < iterations; ++i) {
    RunSequence(first + static_cast<uint64_t>(i));
    if (::testing::Test::HasFailure()) break;
  }
}

}  // namespace
}  // namespace rill
