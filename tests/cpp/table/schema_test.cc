// Schema metadata (primary key, mode), system columns and row-size estimates.
#include "rill/table/schema.h"

#include <arrow/api.h>
#include <arrow/util/key_value_metadata.h>
#include <gtest/gtest.h>

#include "rill/table/live_table.h"
#include "table/test_util.h"

namespace rill {
namespace {

using test::SchemaOf;

std::shared_ptr<arrow::Schema> WithMetadata(std::shared_ptr<arrow::Schema> schema,
                                            std::vector<std::string> keys,
                                            std::vector<std::string> values) {
  return schema->WithMetadata(arrow::key_value_metadata(std::move(keys), std::move(values)));
}

std::shared_ptr<arrow::Schema> OrdersSchema() {
  return SchemaOf({arrow::field("a", arrow::int64()), arrow::field("b", arrow::utf8()),
                   arrow::field("amount", arrow::float64())});
}

TEST(TableModeParsing, AcceptsSnapshotUpsertAndAppendInAnyCase) {
  EXPECT_EQ(ParseTableMode("snapshot").ValueOrDie(), TableMode::kSnapshot);
  EXPECT_EQ(ParseTableMode("upsert").ValueOrDie(), TableMode::kSnapshot);
  EXPECT_EQ(ParseTableMode("append").ValueOrDie(), TableMode::kAppend);
  EXPECT_EQ(ParseTableMode("APPEND").ValueOrDie(), TableMode::kAppend);
  EXPECT_EQ(ParseTableMode("Snapshot").ValueOrDie(), TableMode::kSnapshot);
}

TEST(TableModeParsing, RejectsUnknownModesAsInvalid) {
  auto result = ParseTableMode("merge");
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(result.status().IsInvalid()) << result.status().ToString();
  EXPECT_NE(result.status().message().find("merge"), std::string::npos);
}

TEST(TableModeParsing, NamesModes) {
  EXPECT_STREQ(TableModeName(TableMode::kSnapshot), "snapshot");
  EXPECT_STREQ(TableModeName(TableMode::kAppend), "append");
}

TEST(SplitKey, SplitsOnCommasTrimsSpacesAndDropsEmptyParts) {
  EXPECT_EQ(SplitKey("a,b"), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(SplitKey(" a , b ,, c "), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(SplitKey("order_id"), (std::vector<std::string>{"order_id"}));
  EXPECT_TRUE(SplitKey("").empty());
  EXPECT_TRUE(SplitKey(" , ").empty());
}

TEST(ExtractPrimaryKey, ReadsASingleColumn) {
  auto schema = WithMetadata(OrdersSchema(), {"primary_key"}, {"a"});
  EXPECT_EQ(ExtractPrimaryKey(*schema), (std::vector<std::string>{"a"}));
}

TEST(ExtractPrimaryKey, ReadsACompositeKeyWrittenWithCommas) {
  auto schema = WithMetadata(OrdersSchema(), {"primary_key"}, {"a,b"});
  EXPECT_EQ(ExtractPrimaryKey(*schema), (std::vector<std::string>{"a", "b"}));
}

TEST(ExtractPrimaryKey, ReturnsEmptyWithoutMetadata) {
  EXPECT_TRUE(ExtractPrimaryKey(*OrdersSchema()).empty());
  auto other = WithMetadata(OrdersSchema(), {"owner"}, {"me"});
  EXPECT_TRUE(ExtractPrimaryKey(*other).empty());
}

TEST(ExtractMode, ReadsAppendAndSnapshotAndUpsert) {
  EXPECT_EQ(ExtractMode(*WithMetadata(OrdersSchema(), {"mode"}, {"append"})).ValueOrDie(),
            TableMode::kAppend);
  EXPECT_EQ(ExtractMode(*WithMetadata(OrdersSchema(), {"mode"}, {"snapshot"})).ValueOrDie(),
            TableMode::kSnapshot);
  EXPECT_EQ(ExtractMode(*WithMetadata(OrdersSchema(), {"mode"}, {"upsert"})).ValueOrDie(),
            TableMode::kSnapshot);
}

TEST(ExtractMode, ReturnsTheFallbackWithoutMetadata) {
  EXPECT_EQ(ExtractMode(*OrdersSchema()).ValueOrDie(), TableMode::kSnapshot);
  EXPECT_EQ(ExtractMode(*OrdersSchema(), TableMode::kAppend).ValueOrDie(), TableMode::kAppend);
}

TEST(ExtractMode, RejectsAnUnknownRecordedMode) {
  auto result = ExtractMode(*WithMetadata(OrdersSchema(), {"mode"}, {"sideways"}));
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(result.status().IsInvalid()) << result.status().ToString();
}

TEST(WithTableMetadata, WritesKeyAndModeAndKeepsOtherMetadata) {
  auto base = WithMetadata(OrdersSchema(), {"owner"}, {"team-a"});
  RILL_ASSERT_OK_AND_ASSIGN(auto schema,
                            WithTableMetadata(base, {"a", "b"}, TableMode::kAppend));
  ASSERT_NE(schema->metadata(), nullptr);
  EXPECT_EQ(schema->metadata()->Get("primary_key").ValueOrDie(), "a,b");
  EXPECT_EQ(schema->metadata()->Get("mode").ValueOrDie(), "append");
  EXPECT_EQ(schema->metadata()->Get("owner").ValueOrDie(), "team-a");
  EXPECT_TRUE(schema->Equals(*base, /*check_metadata=*/false));
}

TEST(WithTableMetadata, RoundTripsThroughExtractPrimaryKeyAndExtractMode) {
  RILL_ASSERT_OK_AND_ASSIGN(auto schema,
                            WithTableMetadata(OrdersSchema(), {"a", "b"}, TableMode::kSnapshot));
  EXPECT_EQ(ExtractPrimaryKey(*schema), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(ExtractMode(*schema, TableMode::kAppend).ValueOrDie(), TableMode::kSnapshot);
}

TEST(WithTableMetadata, LeavesModeUnsetWhenNotGiven) {
  RILL_ASSERT_OK_AND_ASSIGN(auto schema, WithTableMetadata(OrdersSchema(), {"a"}, std::nullopt));
  EXPECT_EQ(ExtractPrimaryKey(*schema), (std::vector<std::string>{"a"}));
  EXPECT_EQ(ExtractMode(*schema, TableMode::kAppend).ValueOrDie(), TableMode::kAppend);
}

TEST(WithTableMetadata, RejectsAKeyColumnThatIsNotInTheSchema) {
  auto result = WithTableMetadata(OrdersSchema(), {"a", "missing"}, TableMode::kSnapshot);
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(result.status().IsInvalid()) << result.status().ToString();
  EXPECT_NE(result.status().message().find("missing"), std::string::npos);
}

TEST(SystemColumns, AreRecognizedByName) {
  EXPECT_TRUE(IsSystemColumn("z_insert_ts"));
  EXPECT_TRUE(IsSystemColumn("z_update_ts"));
  EXPECT_FALSE(IsSystemColumn("ts"));
  EXPECT_FALSE(IsSystemColumn("z_insert"));
}

TEST(SystemColumns, AreAppendedLastAsNonNullFloat64) {
  auto full = WithSystemColumns(OrdersSchema());
  ASSERT_EQ(full->num_fields(), 5);
  EXPECT_EQ(full->field(0)->name(), "a");
  EXPECT_EQ(full->field(3)->name(), "z_insert_ts");
  EXPECT_EQ(full->field(4)->name(), "z_update_ts");
  for (int i : {3, 4}) {
    EXPECT_TRUE(full->field(i)->type()->Equals(arrow::float64()));
    EXPECT_FALSE(full->field(i)->nullable());
  }
}

TEST(SystemColumns, AreMovedToTheEndAndNotDuplicated) {
  auto schema = SchemaOf({arrow::field("z_update_ts", arrow::int64()),
                          arrow::field("a", arrow::int64()),
                          arrow::field("z_insert_ts", arrow::utf8())});
  auto full = WithSystemColumns(schema);
  ASSERT_EQ(full->num_fields(), 3);
  EXPECT_EQ(full->field(0)->name(), "a");
  EXPECT_EQ(full->field(1)->name(), "z_insert_ts");
  EXPECT_TRUE(full->field(1)->type()->Equals(arrow::float64()));
  EXPECT_EQ(full->field(2)->name(), "z_update_ts");
  EXPECT_TRUE(WithSystemColumns(full)->Equals(*full));
  EXPECT_TRUE(WithoutSystemColumns(full)->Equals(*SchemaOf({arrow::field("a", arrow::int64())})));
}

TEST(SystemColumns, KeepTheTableMetadata) {
  auto schema = WithMetadata(OrdersSchema(), {"primary_key", "mode"}, {"a,b", "append"});
  auto full = WithSystemColumns(schema);
  EXPECT_EQ(ExtractPrimaryKey(*full), (std::vector<std::string>{"a", "b"}));
}

TEST(LiveTableSchema, TakesKeyAndModeFromSchemaMetadata) {
  auto schema = WithMetadata(OrdersSchema(), {"primary_key", "mode"}, {"a,b", "snapshot"});
  RILL_ASSERT_OK_AND_ASSIGN(auto table, LiveTable::Make("orders", schema));
  EXPECT_EQ(table->primary_key(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(table->mode(), TableMode::kSnapshot);
  EXPECT_TRUE(table->keyed());
}

TEST(LiveTableSchema, TakesAppendModeFromSchemaMetadata) {
  auto schema = WithMetadata(OrdersSchema(), {"primary_key", "mode"}, {"a", "append"});
  TableOptions options;
  options.retention = test::Retention(10);
  RILL_ASSERT_OK_AND_ASSIGN(auto table, LiveTable::Make("events", schema, options));
  EXPECT_EQ(table->mode(), TableMode::kAppend);
  EXPECT_FALSE(table->keyed());
}

TEST(LiveTableSchema, OptionsOverrideSchemaMetadata) {
  auto schema = WithMetadata(OrdersSchema(), {"primary_key", "mode"}, {"a", "append"});
  TableOptions options;
  options.primary_key = {"b"};
  options.mode = TableMode::kSnapshot;
  RILL_ASSERT_OK_AND_ASSIGN(auto table, LiveTable::Make("orders", schema, options));
  EXPECT_EQ(table->primary_key(), (std::vector<std::string>{"b"}));
  EXPECT_EQ(table->mode(), TableMode::kSnapshot);
}

TEST(LiveTableSchema, AppendsSystemColumnsToTheUserSchema) {
  RILL_ASSERT_OK_AND_ASSIGN(auto table, LiveTable::Make("orders", OrdersSchema()));
  EXPECT_EQ(table->user_schema()->num_fields(), 3);
  ASSERT_EQ(table->schema()->num_fields(), 5);
  EXPECT_EQ(table->schema()->field(3)->name(), "z_insert_ts");
  EXPECT_EQ(table->schema()->field(4)->name(), "z_update_ts");
  EXPECT_TRUE(table->snapshot()->schema()->Equals(*table->schema(), /*check_metadata=*/false));
  EXPECT_EQ(table->snapshot()->num_rows(), 0);
  EXPECT_EQ(table->snapshot()->version(), 0u);
}

TEST(LiveTableSchema, DropsSystemColumnsGivenInTheUserSchema) {
  auto schema = SchemaOf({arrow::field("a", arrow::int64()),
                          arrow::field("z_insert_ts", arrow::float64())});
  RILL_ASSERT_OK_AND_ASSIGN(auto table, LiveTable::Make("t", schema));
  EXPECT_EQ(table->user_schema()->num_fields(), 1);
  EXPECT_EQ(table->schema()->num_fields(), 3);
}

TEST(LiveTableSchema, RejectsAnUnknownKeyColumn) {
  TableOptions options;
  options.primary_key = {"nope"};
  auto result = LiveTable::Make("orders", OrdersSchema(), options);
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(result.status().IsInvalid() || result.status().IsKeyError())
      << result.status().ToString();
  EXPECT_NE(result.status().message().find("nope"), std::string::npos);
}

TEST(EstimateRowSize, CountsFixedWidthsAndStringPayloads) {
  auto fixed = SchemaOf({arrow::field("a", arrow::int64()), arrow::field("b", arrow::float64())});
  const int64_t fixed_size = EstimateRowSize(*fixed);
  EXPECT_GE(fixed_size, 16);
  EXPECT_LE(fixed_size, 32);

  auto with_string = SchemaOf({arrow::field("a", arrow::int64()), arrow::field("s", arrow::utf8())});
  EXPECT_GE(EstimateRowSize(*with_string, /*avg_string_bytes=*/32), 8 + 32);
  EXPECT_GT(EstimateRowSize(*with_string, /*avg_string_bytes=*/100),
            EstimateRowSize(*with_string, /*avg_string_bytes=*/10));
  EXPECT_EQ(EstimateRowSize(*fixed, /*avg_string_bytes=*/10),
            EstimateRowSize(*fixed, /*avg_string_bytes=*/100));
}

TEST(EstimateRowSize, GrowsWithEveryColumn) {
  auto one = SchemaOf({arrow::field("a", arrow::int64())});
  auto two = SchemaOf({arrow::field("a", arrow::int64()), arrow::field("b", arrow::int32())});
  EXPECT_GT(EstimateRowSize(*one), 0);
  EXPECT_GT(EstimateRowSize(*two), EstimateRowSize(*one));
}

TEST(EstimateRecordsCapacity, DividesMemoryByTheRowSize) {
  auto schema = OrdersSchema();
  const int64_t row = EstimateRowSize(*schema);
  ASSERT_GT(row, 0);
  const int64_t mb = 1 << 20;
  const int64_t capacity = EstimateRecordsCapacity(*schema, mb);
  EXPECT_GT(capacity, 0);
  EXPECT_LE(capacity * row, mb);
  EXPECT_GT((capacity + 1) * row, mb - row);
  EXPECT_EQ(EstimateRecordsCapacity(*schema, 0), 0);
  EXPECT_EQ(EstimateRecordsCapacity(*schema, -5), 0);
  EXPECT_GE(EstimateRecordsCapacity(*schema, 2 * mb), 2 * capacity - 1);
}

TEST(LiveTableEstimates, RefineTheRowSizeFromLongStrings) {
  auto schema = SchemaOf({arrow::field("id", arrow::int64()), arrow::field("s", arrow::utf8())});
  test::FakeClock clock;
  TableOptions options;
  options.clock = clock.clock();
  RILL_ASSERT_OK_AND_ASSIGN(auto table, LiveTable::Make("t", schema, options));
  const int64_t empty_estimate = table->EstimateRowSize();
  EXPECT_GT(empty_estimate, 0);
  const std::string big(4000, 'x');
  std::string ids = "[", strings = "[";
  for (int i = 0; i < 50; ++i) {
    ids += (i ? "," : "") + std::to_string(i);
    strings += std::string(i ? "," : "") + "\"" + big + "\"";
  }
  RILL_ASSERT_OK(table->Write(test::BatchOf(schema, {ids + "]", strings + "]"})));
  const int64_t estimate = table->EstimateRowSize();
  EXPECT_GT(estimate, 1000) << "rows hold 4000-byte strings; empty estimate was "
                            << empty_estimate;
  EXPECT_LT(estimate, 100000);
  const int64_t capacity = table->EstimateRecordsCapacity(int64_t{1} << 20);
  EXPECT_GT(capacity, 0);
  EXPECT_LT(capacity, 1100);
  EXPECT_EQ(table->EstimateRecordsCapacity(0), 0);
}

}  // namespace
}  // namespace rill
