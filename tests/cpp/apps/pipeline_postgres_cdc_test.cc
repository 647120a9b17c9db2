// Pipeline files: `type: postgres_cdc` connectors take PostgresCDCConnector's
// argument names (target_table, dsn, table, slot_name, publication, snapshot).
#include "pipeline.h"

#include <string>

#include <gtest/gtest.h>

namespace rill::app {
namespace {

constexpr char kTables[] = R"(tables:
  - name: orders
    columns: {id: int64, amount: float64}
    primary_key: id
)";

TEST(PipelinePostgresCdc, ParsesTheConnectorsOptions) {
  const std::string yaml = std::string(kTables) + R"(connectors:
  - name: pg
    type: postgres_cdc
    target_table: orders
    dsn: "host=127.0.0.1 dbname=shop"
    table: public.orders
    slot_name: rill_orders
    snapshot: false
    numeric_as: float64
    lag_alert_bytes: 1000
)";
  auto parsed = ParsePipeline(yaml, "p.yaml");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  ASSERT_EQ(parsed->connectors.size(), 1u);
  const ConnectorSpec& c = parsed->connectors[0];
  EXPECT_EQ(c.type, "postgres_cdc");
  EXPECT_EQ(c.table, "orders");
  EXPECT_EQ(c.source.postgres_cdc.table, "public.orders");
  EXPECT_EQ(c.source.postgres_cdc.dsn, "host=127.0.0.1 dbname=shop");
  EXPECT_EQ(c.source.postgres_cdc.slot_name, "rill_orders");
  EXPECT_EQ(c.source.postgres_cdc.publication, "");
  EXPECT_FALSE(c.source.postgres_cdc.snapshot);
  EXPECT_EQ(c.source.postgres_cdc.numeric_as, "float64");
  EXPECT_EQ(c.source.postgres_cdc.lag_alert_bytes, 1000);
  EXPECT_EQ(c.name, "pg");
  EXPECT_EQ(c.source.name, "pg");
}

TEST(PipelinePostgresCdc, NamesAMissingOrUnknownKey) {
  auto parsed = ParsePipeline(std::string(kTables) + R"(connectors:
  - {type: postgres_cdc, target_table: orders, dsn: "x", table: orders}
)", "p.yaml");
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.status().message().find("slot_name"), std::string::npos)
      << parsed.status().message();
  parsed = ParsePipeline(std::string(kTables) + R"(connectors:
  - {type: postgres_cdc, target_table: nope, dsn: "x", table: orders, slot_name: s}
)", "p.yaml");
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.status().message().find("unknown table 'nope'"), std::string::npos);
  parsed = ParsePipeline(std::string(kTables) + R"(connectors:
  - {type: postgres_cdc, target_table: orders, dsn: "x", table: orders, slot_name: s,
     rows_per_second: 5}
)", "p.yaml");
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.status().message().find("rows_per_second"), std::string::npos);
}

}  // namespace
}  // namespace rill::app
