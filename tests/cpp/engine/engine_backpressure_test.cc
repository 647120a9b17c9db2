// Engine::SetTableBackpressure: a held table's connectors are not polled (their
// buffers fill as under a slow tick) until every holder releases it.
#include <arrow/api.h>
#include <gtest/gtest.h>

#include "rill/connector/memory_connector.h"
#include "rill/engine/engine.h"

namespace rill {
namespace {

std::shared_ptr<arrow::RecordBatch> Rows(int64_t n) {
  arrow::Int64Builder b;
  for (int64_t i = 0; i < n; ++i) EXPECT_TRUE(b.Append(i).ok());
  return arrow::RecordBatch::Make(arrow::schema({arrow::field("id", arrow::int64())}), n,
                                  {b.Finish().ValueOrDie()});
}

TEST(EngineBackpressure, AHeldTableIsNotPolledUntilEveryHolderReleasesIt) {
  auto engine = Engine::Make().ValueOrDie();
  auto held = std::make_shared<MemoryConnector>("held", nullptr, BufferLimits{}, "a");
  auto free = std::make_shared<MemoryConnector>("free", nullptr, BufferLimits{}, "b");
  ASSERT_TRUE(engine->AddConnector(held).ok());
  ASSERT_TRUE(engine->AddConnector(free).ok());
  engine->SetTableBackpressure("held", "sink1", true);
  engine->SetTableBackpressure("held", "sink2", true);
  ASSERT_TRUE(held->Push(Rows(3)).ok());
  ASSERT_TRUE(free->Push(Rows(2)).ok());
  ASSERT_TRUE(engine->Step().ok());
  EXPECT_FALSE(engine->GetTable("held").ok());  // never polled, so never created
  EXPECT_EQ(held->stats().buffered_records, 3);
  EXPECT_EQ(engine->GetTable("free").ValueOrDie()->num_rows(), 2);
  engine->SetTableBackpressure("held", "sink1", false);
  EXPECT_TRUE(engine->TableBackpressured("held"));
  ASSERT_TRUE(engine->Step().ok());
  EXPECT_EQ(held->stats().buffered_records, 3);
  engine->SetTableBackpressure("held", "sink2", false);
  EXPECT_FALSE(engine->TableBackpressured("held"));
  ASSERT_TRUE(engine->Step().ok());
  EXPECT_EQ(engine->GetTable("held").ValueOrDie()->num_rows(), 3);
}

}  // namespace
}  // namespace rill
