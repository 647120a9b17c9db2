// Reconciling incoming batches with a table's schema.
#include <arrow/api.h>
#include <gtest/gtest.h>

#include "rill/table/live_table.h"
#include "table/test_util.h"

namespace rill {
namespace {

using test::BatchOf;
using test::FakeClock;
using test::SchemaOf;
using test::SortedRows;

std::shared_ptr<arrow::Schema> TableSchema() {
  return SchemaOf({arrow::field("id", arrow::int64(), /*nullable=*/false),
                   arrow::field("name", arrow::utf8()),
                   arrow::field("amount", arrow::float64())});
}

class Reconcile : public ::testing::Test {
 protected:
  void SetUp() override {
    TableOptions options;
    options.primary_key = {"id"};
    options.clock = clock_.clock();
    auto result = LiveTable::Make("orders", TableSchema(), options);
    ASSERT_TRUE(result.ok()) << result.status().ToString();
    table_ = *result;
  }
  std::vector<std::string> Rows() {
    return SortedRows(*table_->snapshot()->ToTable().ValueOrDie(), {"id", "name", "amount"});
  }
  FakeClock clock_;
  std::shared_ptr<LiveTable> table_;
};

TEST_F(Reconcile, MatchesColumnsGivenInAnotherOrder) {
  auto schema = SchemaOf({arrow::field("amount", arrow::float64()),
                          arrow::field("id", arrow::int64()), arrow::field("name", arrow::utf8())});
  auto batch = BatchOf(schema, {"[1.5, 2.5]", "[1, 2]", R"(["a", "b"])"});
  RILL_ASSERT_OK_AND_ASSIGN(auto reconciled, table_->Reconcile(batch));
  EXPECT_TRUE(reconciled->schema()->Equals(*table_->user_schema(), /*check_metadata=*/false))
      << reconciled->schema()->ToString();
  RILL_ASSERT_OK(table_->Write(batch));
  EXPECT_EQ(Rows(), (std::vector<std::string>{"1|a|1.5", "2|b|2.5"}));
}

TEST_F(Reconcile, RejectsAMissingNonNullableColumn) {
  auto schema = SchemaOf({arrow::field("name", arrow::utf8())});
  auto result = table_->Reconcile(BatchOf(schema, {R"(["a"])"}));
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(result.status().IsInvalid()) << result.status().ToString();
  EXPECT_NE(result.status().message().find("id"), std::string::npos);
}

TEST_F(Reconcile, RejectsNullsInANonNullableColumn) {
  auto schema = SchemaOf({arrow::field("id", arrow::int64()), arrow::field("name", arrow::utf8())});
  auto result = table_->Write(BatchOf(schema, {"[1, null]", R"(["a", "b"])"}));
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(result.status().IsInvalid()) << result.status().ToString();
  EXPECT_EQ(table_->num_rows(), 0);
}

TEST_F(Reconcile, CastsCastableTypes) {
  auto schema = SchemaOf({arrow::field("id", arrow::int32()), arrow::field("name", arrow::large_utf8()),
                          arrow::field("amount", arrow::int64())});
  RILL_ASSERT_OK(table_->Write(BatchOf(schema, {"[1, 2]", R"(["a", "b"])", "[10, 20]"})));
  EXPECT_EQ(Rows(), (std::vector<std::string>{"1|a|10", "2|b|20"}));
  auto full = table_->snapshot()->ToTable().ValueOrDie();
  EXPECT_TRUE(full->schema()->GetFieldByName("amount")->type()->Equals(arrow::float64()));
  EXPECT_TRUE(full->schema()->GetFieldByName("id")->type()->Equals(arrow::int64()));
}

TEST_F(Reconcile, RejectsAnUnknownColumnByName) {
  auto schema = SchemaOf({arrow::field("id", arrow::int64()), arrow::field("colour", arrow::utf8())});
  auto result = table_->Write(BatchOf(schema, {"[1]", R"(["red"])"}));
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(result.status().IsInvalid()) << result.status().ToString();
  EXPECT_NE(result.status().message().find("colour"), std::string::npos)
      << result.status().ToString();
}

TEST_F(Reconcile, RejectsAnUncastableColumnNamingTheColumnAndBothTypes) {
  auto schema = SchemaOf({arrow::field("id", arrow::int64()),
                          arrow::field("amount", arrow::list(arrow::int64()))});
  auto result = table_->Reconcile(BatchOf(schema, {"[1]", "[[1, 2]]"}));
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(result.status().IsInvalid()) << result.status().ToString();
  const std::string message = result.status().message();
  EXPECT_NE(message.find("amount"), std::string::npos) << message;
  EXPECT_NE(message.find("double"), std::string::npos) << message;
  EXPECT_NE(message.find("list"), std::string::npos) << message;
}

TEST_F(Reconcile, RejectsAValueThatDoesNotCastSafely) {
  auto schema = SchemaOf({arrow::field("id", arrow::utf8())});
  auto result = table_->Reconcile(BatchOf(schema, {R"(["12", "twelve"])"}));
  ASSERT_FALSE(result.ok()) << "'twelve' is no int64";
  EXPECT_TRUE(result.status().IsInvalid()) << result.status().ToString();
  EXPECT_NE(result.status().message().find("id"), std::string::npos);

  TableOptions options;
  auto narrow_schema = SchemaOf({arrow::field("n", arrow::int8())});
  RILL_ASSERT_OK_AND_ASSIGN(auto narrow, LiveTable::Make("narrow", narrow_schema, options));
  auto wide = SchemaOf({arrow::field("n", arrow::int64())});
  auto overflow = narrow->Write(BatchOf(wide, {"[1, 1000]"}));
  ASSERT_FALSE(overflow.ok()) << "1000 does not fit in int8";
  EXPECT_TRUE(overflow.status().IsInvalid()) << overflow.status().ToString();
  EXPECT_EQ(narrow->num_rows(), 0);
}

TEST_F(Reconcile, RejectsTheWholeWriteAndLeavesTheTableUnchanged) {
  RILL_ASSERT_OK(table_->Write(BatchOf(TableSchema(), {"[1]", R"(["kept"])", "[1.0]"})));
  const auto before = table_->snapshot();
  const auto rows_before = Rows();
  int notifications = 0;
  table_->Subscribe([&](const std::shared_ptr<const TableVersion>&) { ++notifications; });

  auto good = BatchOf(TableSchema(), {"[1, 2]", R"(["changed", "new"])", "[2.0, 3.0]"});
  auto bad_schema = SchemaOf({arrow::field("id", arrow::int64()),
                              arrow::field("amount", arrow::struct_({arrow::field("x", arrow::int64())}))});
  auto bad = BatchOf(bad_schema, {"[3]", R"([{"x": 1}])"});
  auto result = table_->Write(std::vector<std::shared_ptr<arrow::RecordBatch>>{good, bad, good});
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(result.status().IsInvalid()) << result.status().ToString();
  EXPECT_NE(result.status().message().find("amount"), std::string::npos)
      << result.status().ToString();

  EXPECT_EQ(table_->snapshot().get(), before.get()) << "no new version was published";
  EXPECT_EQ(Rows(), rows_before);
  EXPECT_EQ(notifications, 0);

  // The table still takes good writes, and its key index was not disturbed.
  RILL_ASSERT_OK(table_->Write(good));
  EXPECT_EQ(Rows(), (std::vector<std::string>{"1|changed|2", "2|new|3"}));
}

}  // namespace
}  // namespace rill
