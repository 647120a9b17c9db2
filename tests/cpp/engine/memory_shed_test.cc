// memory_budget_policy "shed" (issue 23): over the budget the ticks stop
// draining the connectors, so their buffers fill and their on_overflow policy
// drops (counted) instead of the tables growing without bound; below 90 % of
// the budget input is taken again. Every row offered is in the table, still
// buffered, or counted as dropped. Ticks are run by hand (Step), so nothing
// here depends on timing.
#include <cstdint>
#include <memory>
#include <string>

#include <arrow/api.h>
#include <gtest/gtest.h>

#include "rill/connector/memory_connector.h"
#include "rill/engine/engine.h"

namespace rill {
namespace {

constexpr int64_t kBudget = 8 << 20;
constexpr int64_t kPushRows = 10000;
constexpr int kWidth = 100;

std::shared_ptr<arrow::Schema> Schema() {
  return arrow::schema({arrow::field("id", arrow::int64()), arrow::field("v", arrow::utf8())});
}

/// kPushRows rows with unique ids from `from`, each about kWidth bytes.
std::shared_ptr<arrow::RecordBatch> Rows(int64_t from) {
  arrow::Int64Builder ib;
  arrow::StringBuilder sb;
  const std::string value(kWidth, 'x');
  for (int64_t id = from; id < from + kPushRows; ++id) {
    EXPECT_TRUE(ib.Append(id).ok());
    EXPECT_TRUE(sb.Append(value).ok());
  }
  return arrow::RecordBatch::Make(Schema(), kPushRows,
                                  {ib.Finish().ValueOrDie(), sb.Finish().ValueOrDie()});
}

struct Overload {
  std::unique_ptr<Engine> engine;
  std::shared_ptr<LiveTable> table;
  std::shared_ptr<MemoryConnector> connector;
  int64_t offered = 0;

  explicit Overload(MemoryBudgetPolicy policy) {
    EngineOptions options;
    options.memory_budget_bytes = kBudget;
    options.memory_budget_policy = policy;
    engine = Engine::Make(options).ValueOrDie();
    TableOptions keyed;
    keyed.primary_key = {"id"};
    table = engine->RegisterTable("t", Schema(), keyed).ValueOrDie();
    BufferLimits limits;
    limits.max_records = 2 * kPushRows;
    limits.on_overflow = OverflowPolicy::kDropOldest;
    connector = std::make_shared<MemoryConnector>("t", Schema(), limits, "feed");
    EXPECT_TRUE(engine->AddConnector(connector).ok());
  }
  /// Push one batch of new rows and run one tick.
  void PushAndTick() {
    ASSERT_TRUE(connector->Push(Rows(offered)).ok());
    offered += kPushRows;
    ASSERT_TRUE(engine->Step().ok());
  }
  int64_t Accounted() const {
    const ConnectorStats s = connector->stats();
    return table->num_rows() + s.buffered_records + s.dropped_records;
  }
  int Events(const std::string& message_part) const {
    int n = 0;
    for (const auto& e : engine->RecentEvents()) {
      if (e.component == "memory_budget" && e.message.find(message_part) != std::string::npos) {
        ++n;
      }
    }
    return n;
  }
  int64_t SheddingInRillMetrics() {
    auto result = engine->Query("SELECT shedding FROM rill_metrics");
    EXPECT_TRUE(result.ok()) << result.status().ToString();
    if (!result.ok()) return -1;
    return std::static_pointer_cast<arrow::Int64Array>((*result)->column(0)->chunk(0))->Value(0);
  }
};

TEST(MemoryShed, OverTheBudgetTicksStopDrainingAndTheBufferPolicyDropsCounted) {
  Overload o(MemoryBudgetPolicy::kShed);
  for (int i = 0; i < 200 && !o.engine->shedding(); ++i) o.PushAndTick();
  ASSERT_TRUE(o.engine->shedding()) << "never over the budget: " << o.engine->AllocatedBytes();
  EXPECT_EQ(o.Events("shedding input"), 1);
  EXPECT_TRUE(o.engine->GetMetrics().shedding);

  // Three times as much again: the table does not grow, the buffer drops.
  const int64_t rows_at_shed = o.table->num_rows();
  const int64_t offered_at_shed = o.offered;
  while (o.offered < offered_at_shed + 3 * rows_at_shed) o.PushAndTick();
  EXPECT_EQ(o.table->num_rows(), rows_at_shed);
  EXPECT_TRUE(o.engine->shedding());
  EXPECT_EQ(o.SheddingInRillMetrics(), 1);
  const ConnectorStats s = o.connector->stats();
  EXPECT_GE(s.dropped_records, 3 * rows_at_shed - 2 * kPushRows);
  EXPECT_EQ(o.Accounted(), o.offered);  // nothing uncounted
  // Memory stays within the budget plus what one tick writes and the full
  // buffer holds (both bounded by the buffer's limits).
  const int64_t buffer_bytes = 2 * kPushRows * (kWidth + 16);
  EXPECT_LE(o.engine->AllocatedBytes(), kBudget + 2 * buffer_bytes);
  EXPECT_EQ(o.Events("shedding input"), 1);  // one alert per episode, not per tick

  // Memory freed (below 90 % of the budget): input is taken again.
  auto few = arrow::Table::FromRecordBatches({Rows(-kPushRows)->Slice(0, 10)}).ValueOrDie();
  ASSERT_TRUE(o.table->ReplaceState(few, o.engine->Now()).ok());
  ASSERT_TRUE(o.engine->Step().ok());
  EXPECT_FALSE(o.engine->shedding()) << o.engine->AllocatedBytes();
  EXPECT_EQ(o.Events("taking input again"), 1);
  const int64_t buffered = o.connector->stats().buffered_records;
  ASSERT_TRUE(o.engine->Step().ok());
  EXPECT_EQ(o.table->num_rows(), 10 + buffered);
  EXPECT_EQ(o.connector->stats().buffered_records, 0);
  EXPECT_EQ(o.SheddingInRillMetrics(), 0);
}

TEST(MemoryShed, TheDefaultPolicyWarnsAndKeepsTakingInput) {
  Overload o(MemoryBudgetPolicy::kWarn);
  for (int i = 0; i < 200 && o.engine->AllocatedBytes() <= 2 * kBudget; ++i) o.PushAndTick();
  EXPECT_GT(o.engine->AllocatedBytes(), 2 * kBudget);  // grows past the budget
  EXPECT_FALSE(o.engine->shedding());
  EXPECT_GE(o.engine->GetMetrics().memory_warnings, 1);
  EXPECT_EQ(o.Events("shedding input"), 0);
  EXPECT_EQ(o.table->num_rows(), o.offered);
}

TEST(MemoryShed, ShedWithoutABudgetAndUnknownPoliciesAreRefused) {
  EngineOptions options;
  options.memory_budget_policy = MemoryBudgetPolicy::kShed;
  auto made = Engine::Make(options);
  ASSERT_FALSE(made.ok());
  EXPECT_NE(made.status().message().find("memory_budget_policy"), std::string::npos);
  auto parsed = ParseMemoryBudgetPolicy("drop");
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.status().message().find("memory_budget_policy"), std::string::npos);
  EXPECT_EQ(*ParseMemoryBudgetPolicy("shed"), MemoryBudgetPolicy::kShed);
  EXPECT_EQ(*ParseMemoryBudgetPolicy("warn"), MemoryBudgetPolicy::kWarn);
}

}  // namespace
}  // namespace rill
