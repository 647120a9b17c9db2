// Records a connector's buffer drops (drop_oldest / drop_newest) and rejects
// beyond its cap of pending rejects are counted in rill_metrics and raise a
// rate-limited warning event naming the connector and the count.
#include <string>
#include <vector>

#include <arrow/api.h>
#include <gtest/gtest.h>

#include "rill/connector/json_stream_connector.h"
#include "rill/connector/memory_connector.h"
#include "rill/engine/engine.h"
#include "table/test_util.h"

namespace rill {
namespace {

using test::FakeClock;
using test::IdBatch;
using test::IdSchema;

std::unique_ptr<Engine> MakeEngine(const FakeClock& clock) {
  EngineOptions options;
  options.clock = clock.clock();
  auto engine = Engine::Make(std::move(options));
  EXPECT_TRUE(engine.ok()) << engine.status();
  return std::move(*engine);
}

/// The messages of the engine's warning events about `component`, oldest first.
std::vector<std::string> Warnings(const Engine& engine, const std::string& component) {
  std::vector<std::string> out;
  for (const auto& e : engine.RecentEvents()) {
    if (e.severity == Severity::kWarning && e.component == component) out.push_back(e.message);
  }
  return out;
}

std::string MetricsCell(Engine& engine, const std::string& column) {
  auto table = engine.Query("SELECT " + column + " FROM rill_metrics");
  EXPECT_TRUE(table.ok()) << table.status();
  return (*table)->column(0)->GetScalar(0).ValueOrDie()->ToString();
}

void ExpectDropAlertsFor(OverflowPolicy policy, const std::vector<int64_t>& kept_ids) {
  FakeClock clock;
  auto engine = MakeEngine(clock);
  RILL_ASSERT_OK(engine->RegisterTable("t", IdSchema()).status());
  auto c = std::make_shared<MemoryConnector>("t", IdSchema(),
                                             BufferLimits{/*max_records=*/10, 0, policy}, "m");
  RILL_ASSERT_OK(engine->AddConnector(c));
  RILL_ASSERT_OK(c->Push(IdBatch(0, 25)));  // 15 over the buffer
  RILL_ASSERT_OK(engine->Step().status());
  RILL_ASSERT_OK_AND_ASSIGN(auto ids, engine->Query("SELECT id FROM t ORDER BY id"));
  std::vector<std::string> expected;
  for (int64_t id : kept_ids) expected.push_back(std::to_string(id));
  EXPECT_EQ(test::ColumnStrings(*ids, "id"), expected);
  EXPECT_EQ(Warnings(*engine, "m"),
            (std::vector<std::string>{
                "Connector 'm' (table 't') dropped 15 records by its buffer's overflow "
                "policy (on_overflow)"}));
  EXPECT_EQ(MetricsCell(*engine, "dropped_records"), "15");
  EXPECT_EQ(engine->GetMetrics().dropped_records, 15);

  // More drops within the window: counted at once, alerted once the window ends.
  clock.Advance(1);
  RILL_ASSERT_OK(c->Push(IdBatch(100, 112)));
  RILL_ASSERT_OK(engine->Step().status());
  EXPECT_EQ(Warnings(*engine, "m").size(), 1u);
  EXPECT_EQ(MetricsCell(*engine, "dropped_records"), "17");
  clock.Advance(10);
  RILL_ASSERT_OK(engine->Step().status());  // nothing new dropped: the pending 2 are reported
  auto warnings = Warnings(*engine, "m");
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_EQ(warnings[1],
            "Connector 'm' (table 't') dropped 2 records by its buffer's overflow policy "
            "(on_overflow) since the last alert");
  clock.Advance(10);
  RILL_ASSERT_OK(engine->Step().status());
  EXPECT_EQ(Warnings(*engine, "m").size(), 2u);  // no drops, no alert
}

TEST(EngineDrops, DropOldestIsCountedInRillMetricsAndAlertedWithTheCount) {
  ExpectDropAlertsFor(OverflowPolicy::kDropOldest, test::IdRange(15, 25));
}

TEST(EngineDrops, DropNewestIsCountedInRillMetricsAndAlertedWithTheCount) {
  ExpectDropAlertsFor(OverflowPolicy::kDropNewest, test::IdRange(0, 10));
}

TEST(EngineDrops, RejectsBeyondThePendingCapAreCountedAndAlerted) {
  FakeClock clock;
  auto engine = MakeEngine(clock);
  RILL_ASSERT_OK(engine->RegisterTable("t", IdSchema()).status());
  JsonStreamOptions options;
  options.name = "j";
  RILL_ASSERT_OK_AND_ASSIGN(auto c, JsonStreamConnector::Make("t", options));
  RILL_ASSERT_OK(engine->AddConnector(c));
  // 10,005 bad records between two ticks: the connector keeps 10,000 of them.
  std::string bad;
  for (int i = 0; i < 10005; ++i) bad += "{\"id\":\"x\"}\n";
  RILL_ASSERT_OK(c->PushBytes(bad + "{\"id\":1}\n"));
  RILL_ASSERT_OK(engine->Step().status());
  RILL_ASSERT_OK_AND_ASSIGN(auto kept, engine->Query("SELECT count(*) FROM rill_rejects"));
  EXPECT_EQ(kept->column(0)->GetScalar(0).ValueOrDie()->ToString(), "10000");
  EXPECT_EQ(MetricsCell(*engine, "rejects_overflowed"), "5");
  EXPECT_EQ(MetricsCell(*engine, "dropped_records"), "0");
  EXPECT_EQ(c->stats().rejects_overflowed, 5);
  EXPECT_EQ(c->stats().dropped_records, 0);  // rejects are not buffer drops
  bool alerted = false;
  for (const auto& w : Warnings(*engine, "j")) {
    alerted |= w == "Connector 'j' (table 't') could not keep 5 records of its rejects (over "
                    "the cap of pending rejects; not in rill_rejects)";
  }
  EXPECT_TRUE(alerted);
}

}  // namespace
}  // namespace rill
