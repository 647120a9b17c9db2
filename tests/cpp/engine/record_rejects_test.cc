// Per-record rejects of decoding connectors reach rill_rejects.
#include <arrow/api.h>
#include <gtest/gtest.h>

#include "rill/connector/json_stream_connector.h"
#include "rill/engine/engine.h"
#include "table/test_util.h"

namespace rill {
namespace {

TEST(EngineRecordRejects, WritesEachBadRecordWithPositionAndRawBytes) {
  RILL_ASSERT_OK_AND_ASSIGN(auto engine, Engine::Make());
  auto schema = arrow::schema({arrow::field("id", arrow::int64()), arrow::field("v", arrow::utf8())});
  RILL_ASSERT_OK(engine->RegisterTable("t", schema).status());
  RILL_ASSERT_OK_AND_ASSIGN(auto c, JsonStreamConnector::Make("t", {}));
  RILL_ASSERT_OK(engine->AddConnector(c));
  EXPECT_TRUE(c->decode_schema()->Equals(*schema));  // the table's schema
  RILL_ASSERT_OK(c->PushBytes("{\"id\":1,\"v\":\"a\"}\n{\"id\":\"x\"}\n{\"id\":2}\n{bad\n"));
  RILL_ASSERT_OK(engine->Step().status());
  RILL_ASSERT_OK_AND_ASSIGN(auto rows, engine->Query("SELECT count(*) AS n FROM t"));
  EXPECT_EQ(rows->column(0)->GetScalar(0).ValueOrDie()->ToString(), "2");
  RILL_ASSERT_OK_AND_ASSIGN(
      auto rejects,
      engine->Query("SELECT table_name, source, position, reason, raw, "
                    "rows FROM rill_rejects ORDER BY position"));
  ASSERT_EQ(rejects->num_rows(), 2);
  auto cell = [&](int col, int row) {
    return rejects->column(col)->GetScalar(row).ValueOrDie()->ToString();
  };
  EXPECT_EQ(cell(0, 0), "t");
  EXPECT_EQ(cell(1, 0), "t");
  EXPECT_EQ(cell(2, 0), "line 2, byte 17");
  EXPECT_NE(cell(3, 0).find("field 'id'"), std::string::npos);
  auto raw = std::static_pointer_cast<arrow::BinaryArray>(rejects->column(4)->chunk(0));
  EXPECT_EQ(raw->GetView(0), "{\"id\":\"x\"}");
  EXPECT_EQ(cell(5, 0), "1");
  EXPECT_EQ(cell(2, 1), "line 4, byte 37");
  bool warned = false;
  for (const auto& e : engine->RecentEvents()) {
    warned |= e.message.find("Rejected 2 records from connector 't'") != std::string::npos;
  }
  EXPECT_TRUE(warned);
}

TEST(EngineRecordRejects, ACreatedTableFixesTheDecodeSchema) {
  RILL_ASSERT_OK_AND_ASSIGN(auto engine, Engine::Make());
  RILL_ASSERT_OK_AND_ASSIGN(auto c, JsonStreamConnector::Make("fresh", {}));
  RILL_ASSERT_OK(engine->AddConnector(c));
  RILL_ASSERT_OK(c->PushBytes("{\"a\":1,\"b\":\"x\"}\n"));
  RILL_ASSERT_OK(engine->Step().status());
  RILL_ASSERT_OK(c->PushBytes("{\"a\":\"not an int\"}\n{\"a\":2}\n"));
  RILL_ASSERT_OK(engine->Step().status());
  RILL_ASSERT_OK_AND_ASSIGN(auto rows, engine->Query("SELECT sum(a) FROM fresh"));
  EXPECT_EQ(rows->column(0)->GetScalar(0).ValueOrDie()->ToString(), "3");
  RILL_ASSERT_OK_AND_ASSIGN(auto rejects, engine->Query("SELECT count(*) FROM rill_rejects"));
  EXPECT_EQ(rejects->column(0)->GetScalar(0).ValueOrDie()->ToString(), "1");
}

}  // namespace
}  // namespace rill
