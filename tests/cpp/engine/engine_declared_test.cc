// Engine: tables declared without a schema (created from their first batch),
// the one append-retention rule, subscriptions that wait for a declared table,
// and the task list.
#include <memory>
#include <string>
#include <vector>

#include <arrow/api.h>
#include <gtest/gtest.h>

#include "rill/connector/memory_connector.h"
#include "rill/engine/engine.h"
#include "table/test_util.h"

namespace rill {
namespace {

using test::BatchOf;
using test::FakeClock;
using test::RowStrings;
using test::SchemaOf;
using test::SortedRows;

constexpr double kT0 = 1'700'000'000.0;

std::shared_ptr<arrow::Schema> OrdersSchema() {
  return SchemaOf({arrow::field("order_id", arrow::int64()), arrow::field("tier", arrow::utf8()),
                   arrow::field("amount", arrow::float64())});
}

std::shared_ptr<arrow::RecordBatch> Orders(const std::string& ids, const std::string& tiers,
                                           const std::string& amounts) {
  return BatchOf(OrdersSchema(), {ids, tiers, amounts});
}

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

TableOptions Keyed(const std::string& key) {
  TableOptions options;
  options.primary_key = {key};
  return options;
}

class EngineDeclaredTest : public ::testing::Test {
 protected:
  void SetUp() override {
    EngineOptions options;
    options.clock = clock_.clock();
    options.trigger_interval_ms = 10;
    auto made = Engine::Make(std::move(options));
    ASSERT_TRUE(made.ok()) << made.status().ToString();
    engine_ = std::move(*made);
  }
  std::shared_ptr<MemoryConnector> AddConnector(const std::string& table) {
    auto connector = std::make_shared<MemoryConnector>(table, nullptr, BufferLimits{}, table);
    auto st = engine_->AddConnector(connector);
    EXPECT_TRUE(st.ok()) << st.ToString();
    return connector;
  }
  std::vector<std::string> QueryRows(const std::string& sql) {
    auto result = engine_->Query(sql);
    EXPECT_TRUE(result.ok()) << sql << ": " << result.status().ToString();
    return result.ok() ? RowStrings(**result) : std::vector<std::string>{};
  }

  FakeClock clock_{kT0};
  std::unique_ptr<Engine> engine_;
};

TEST_F(EngineDeclaredTest, ADeclaredTableTakesTheSchemaAndKeyOfItsFirstConnectorBatch) {
  RILL_ASSERT_OK(engine_->DeclareTable("orders", Keyed("order_id")));
  EXPECT_TRUE(engine_->TableNames().empty());
  EXPECT_EQ(engine_->DeclaredTableNames(), (std::vector<std::string>{"orders"}));
  EXPECT_TRUE(engine_->GetTable("orders").status().IsKeyError());
  auto declared = engine_->TableDeclaration("orders");
  ASSERT_TRUE(declared.has_value());
  EXPECT_EQ(declared->primary_key, (std::vector<std::string>{"order_id"}));

  // SQL does not see it yet, and says why.
  auto early = engine_->Query("SELECT count(*) FROM orders");
  ASSERT_FALSE(early.ok());
  EXPECT_TRUE(Contains(early.status().message(), "'orders' is registered without a schema"))
      << early.status().ToString();

  auto connector = AddConnector("orders");
  RILL_ASSERT_OK(connector->Push(Orders("[1, 2]", R"(["Gold", "Silver"])", "[1.0, 2.0]")));
  RILL_ASSERT_OK(engine_->Step());
  RILL_ASSERT_OK(connector->Push(Orders("[2, 3]", R"(["Gold", "Gold"])", "[20.0, 3.0]")));
  RILL_ASSERT_OK(engine_->Step());

  RILL_ASSERT_OK_AND_ASSIGN(auto table, engine_->GetTable("orders"));
  EXPECT_EQ(table->primary_key(), (std::vector<std::string>{"order_id"}));
  EXPECT_TRUE(table->user_schema()->Equals(*OrdersSchema(), /*check_metadata=*/false))
      << table->user_schema()->ToString();
  EXPECT_EQ(engine_->TableNames(), (std::vector<std::string>{"orders"}));
  EXPECT_TRUE(engine_->DeclaredTableNames().empty());
  EXPECT_FALSE(engine_->TableDeclaration("orders").has_value());
  // Upserted by the declared key: order 2 was replaced, not appended.
  EXPECT_EQ(QueryRows("SELECT order_id, tier, amount FROM orders ORDER BY order_id"),
            (std::vector<std::string>{"1|Gold|1", "2|Gold|20", "3|Gold|3"}));
}

TEST_F(EngineDeclaredTest, DeclaringChecksNameModeAndRetentionOnce) {
  TableOptions append;
  append.mode = TableMode::kAppend;
  auto no_ttl = engine_->DeclareTable("events", append);
  EXPECT_TRUE(no_ttl.IsInvalid()) << no_ttl.ToString();
  EXPECT_TRUE(Contains(no_ttl.message(), "Retention policy (TTL) with max_rows or "
                                         "max_age_seconds is mandatory for append-only tables: "
                                         "table 'events' is in append mode without one"))
      << no_ttl.ToString();
  // The same rule and message as a table registered with a schema.
  auto registered = engine_->RegisterTable("events", OrdersSchema(), append);
  EXPECT_EQ(registered.status().message(), no_ttl.message());

  append.retention = test::Retention(100, std::nullopt);
  RILL_ASSERT_OK(engine_->DeclareTable("events", append));
  EXPECT_TRUE(engine_->DeclareTable("events").IsInvalid());
  EXPECT_TRUE(engine_->RegisterTable("events", OrdersSchema()).status().IsInvalid());
  EXPECT_TRUE(engine_->DeclareTable("rill_events").IsInvalid());
  RILL_ASSERT_OK(engine_->RegisterTable("orders", OrdersSchema()));
  EXPECT_TRUE(engine_->DeclareTable("orders").IsInvalid());
  TableOptions negative;
  negative.retention = test::Retention(-1, std::nullopt);
  EXPECT_TRUE(engine_->DeclareTable("bad", negative).IsInvalid());
}

TEST_F(EngineDeclaredTest, SubscribersOfADeclaredTableSeeItsFirstVersion) {
  RILL_ASSERT_OK(engine_->DeclareTable("orders", Keyed("order_id")));
  std::vector<int64_t> seen_rows;
  std::vector<int64_t> removed_seen;
  RILL_ASSERT_OK_AND_ASSIGN(auto kept, engine_->Subscribe("orders", [&](const auto& version) {
    seen_rows.push_back(version->num_rows());
  }));
  RILL_ASSERT_OK_AND_ASSIGN(auto removed, engine_->Subscribe("orders", [&](const auto& version) {
    removed_seen.push_back(version->num_rows());
  }));
  RILL_ASSERT_OK(engine_->Unsubscribe("orders", removed));  // while still declared

  RILL_ASSERT_OK_AND_ASSIGN(auto table, engine_->TableForWrite("orders", OrdersSchema()));
  RILL_ASSERT_OK(table->Write(Orders("[1, 2]", R"(["a", "b"])", "[1.0, 2.0]")));
  EXPECT_EQ(seen_rows, (std::vector<int64_t>{2}));
  // The id handed out while declared still unsubscribes once the table exists.
  RILL_ASSERT_OK(engine_->Unsubscribe("orders", kept));
  RILL_ASSERT_OK(table->Write(Orders("[3]", R"(["c"])", "[3.0]")));
  EXPECT_EQ(seen_rows, (std::vector<int64_t>{2}));
  EXPECT_TRUE(removed_seen.empty());
  EXPECT_TRUE(engine_->Unsubscribe("orders", kept).IsKeyError());
}

TEST_F(EngineDeclaredTest, TableForWriteCreatesOnlyDeclaredTables) {
  EXPECT_TRUE(engine_->TableForWrite("nowhere", OrdersSchema()).status().IsKeyError());
  EXPECT_TRUE(engine_->TableNames().empty());
  RILL_ASSERT_OK(engine_->DeclareTable("orders", Keyed("order_id")));
  RILL_ASSERT_OK_AND_ASSIGN(auto first, engine_->TableForWrite("orders", OrdersSchema()));
  RILL_ASSERT_OK_AND_ASSIGN(auto again, engine_->TableForWrite("orders", nullptr));
  EXPECT_EQ(first.get(), again.get());
  // GetOrCreateTable on a declared name uses the declared options, not its own.
  RILL_ASSERT_OK(engine_->DeclareTable("by_tier", Keyed("tier")));
  RILL_ASSERT_OK_AND_ASSIGN(auto by_tier,
                            engine_->GetOrCreateTable("by_tier", OrdersSchema(), Keyed("amount")));
  EXPECT_EQ(by_tier->primary_key(), (std::vector<std::string>{"tier"}));
}

TEST_F(EngineDeclaredTest, AFirstBatchThatDoesNotFitIsRejectedAndTheDeclarationStays) {
  RILL_ASSERT_OK(engine_->DeclareTable("orders", Keyed("customer_id")));
  auto connector = AddConnector("orders");
  RILL_ASSERT_OK(connector->Push(Orders("[1]", R"(["a"])", "[1.0]")));
  RILL_ASSERT_OK(engine_->Step());
  EXPECT_EQ(engine_->DeclaredTableNames(), (std::vector<std::string>{"orders"}));
  auto rejects = QueryRows("SELECT table_name, \"rows\" FROM rill_rejects");
  EXPECT_EQ(rejects, (std::vector<std::string>{"orders|1"}));
  auto reason = QueryRows("SELECT reason FROM rill_rejects");
  ASSERT_EQ(reason.size(), 1u);
  EXPECT_TRUE(Contains(reason[0], "customer_id")) << reason[0];
}

TEST_F(EngineDeclaredTest, ATaskWritesIntoADeclaredOutputWithTheDeclaredKey) {
  RILL_ASSERT_OK(engine_->RegisterTable("orders", OrdersSchema(), Keyed("order_id")));
  RILL_ASSERT_OK(engine_->DeclareTable("by_tier", Keyed("tier")));
  RILL_ASSERT_OK(engine_->AddSqlTask(std::make_shared<ScheduledSqlTask>(
      "by_tier", "SELECT tier, sum(amount) AS total FROM orders GROUP BY tier", "by_tier", 0.0)));
  auto connector = AddConnector("orders");
  RILL_ASSERT_OK(connector->Push(Orders("[1, 2, 3]", R"(["a", "b", "a"])", "[1.0, 2.0, 4.0]")));
  RILL_ASSERT_OK(engine_->Step());
  RILL_ASSERT_OK_AND_ASSIGN(auto out, engine_->GetTable("by_tier"));
  EXPECT_EQ(out->primary_key(), (std::vector<std::string>{"tier"}));
  EXPECT_EQ(SortedRows(*out->snapshot()->ToTable().ValueOrDie(), {"tier", "total"}),
            (std::vector<std::string>{"a|5", "b|2"}));
}

TEST_F(EngineDeclaredTest, DropsADeclaredTableAndListsTasksByName) {
  RILL_ASSERT_OK(engine_->DeclareTable("orders"));
  RILL_ASSERT_OK(engine_->DropTable("orders"));
  EXPECT_TRUE(engine_->DeclaredTableNames().empty());
  EXPECT_TRUE(engine_->DropTable("orders").IsKeyError());

  RILL_ASSERT_OK(engine_->AddSqlTask(
      std::make_shared<ScheduledSqlTask>("zeta", "SELECT 1 AS x", "out_z", 1.0)));
  JoinTaskOptions join;
  join.name = "alpha";
  join.left_table = "l";
  join.right_table = "r";
  join.keys = {"id"};
  join.output_table = "out_a";
  RILL_ASSERT_OK_AND_ASSIGN(auto join_task, TableJoinTask::Make(join));
  RILL_ASSERT_OK(engine_->AddJoinTask(join_task));
  std::vector<std::string> names;
  for (const auto& task : engine_->Tasks()) names.push_back(task->name());
  EXPECT_EQ(names, (std::vector<std::string>{"alpha", "zeta"}));
  EXPECT_NE(std::dynamic_pointer_cast<TableJoinTask>(engine_->Tasks()[0]), nullptr);
  RILL_ASSERT_OK(engine_->RemoveSqlTask("zeta"));
  EXPECT_EQ(engine_->Tasks().size(), 1u);
}

}  // namespace
}  // namespace rill
