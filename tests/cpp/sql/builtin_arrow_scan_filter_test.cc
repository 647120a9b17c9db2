// Why Rill registers its own scan function instead of using DESIGN.md's
// `arrow_scan` view as written: DuckDB 1.4.4's built-in arrow_scan pushes
// WHERE filters into the stream factory and drops them from its own plan. A
// factory that ignores them (as DESIGN's does, and as ours must, since a live
// table's reader does not evaluate DuckDB filters) then returns rows the query
// excluded. This test pins that behaviour of DuckDB: if it ever fails, DuckDB
// stopped relying on the factory and the note in DESIGN.md can go. The same
// query through SqlEngine (rill_arrow_scan, filter pushdown off) is right.
#include <arrow/api.h>
#include <arrow/c/bridge.h>
#include <gtest/gtest.h>

#include <duckdb.hpp>
#include <duckdb/common/arrow/arrow_wrapper.hpp>
#include <duckdb/function/table/arrow.hpp>

#include "rill/common/arrow_init.h"
#include "rill/sql/sql_engine.h"
#include "rill/table/live_table.h"

namespace rill {
namespace {

std::shared_ptr<arrow::Table> Numbers(int64_t n) {
  arrow::Int64Builder builder;
  for (int64_t i = 0; i < n; ++i) EXPECT_TRUE(builder.Append(i).ok());
  return arrow::Table::Make(arrow::schema({arrow::field("x", arrow::int64())}),
                            {builder.Finish().ValueOrDie()});
}

// A stream factory in the shape DESIGN.md verified: it hands DuckDB every row
// and ignores the filters in `parameters`.
duckdb::unique_ptr<duckdb::ArrowArrayStreamWrapper> ProduceAll(
    uintptr_t factory, duckdb::ArrowStreamParameters& /*parameters*/) {
  const auto* table = reinterpret_cast<const arrow::Table*>(factory);
  auto reader = std::make_shared<arrow::TableBatchReader>(*table);
  auto wrapper = duckdb::make_uniq<duckdb::ArrowArrayStreamWrapper>();
  wrapper->number_of_rows = -1;
  EXPECT_TRUE(arrow::ExportRecordBatchReader(reader, &wrapper->arrow_array_stream).ok());
  return wrapper;
}

void SchemaOf(ArrowArrayStream* factory, ArrowSchema& schema) {
  const auto* table = reinterpret_cast<const arrow::Table*>(factory);
  EXPECT_TRUE(arrow::ExportSchema(*table->schema(), &schema).ok());
}

int64_t Count(duckdb::Connection& con, const std::string& sql) {
  auto result = con.Query(sql);
  EXPECT_FALSE(result->HasError()) << result->GetError();
  return result->GetValue(0, 0).GetValue<int64_t>();
}

TEST(BuiltinArrowScan, DropsFiltersThatAFilterIgnoringFactoryLeavesUnapplied) {
  ASSERT_TRUE(InitializeArrowCompute().ok());
  auto table = Numbers(10);
  duckdb::DuckDB db(nullptr);
  duckdb::Connection con(db);
  duckdb::vector<duckdb::Value> args{
      duckdb::Value::POINTER(reinterpret_cast<uintptr_t>(table.get())),
      duckdb::Value::POINTER(reinterpret_cast<uintptr_t>(&ProduceAll)),
      duckdb::Value::POINTER(reinterpret_cast<uintptr_t>(&SchemaOf))};
  con.TableFunction("arrow_scan", args)->CreateView("t", /*replace=*/true, /*temporary=*/false);

  EXPECT_EQ(Count(con, "SELECT count(*) FROM t"), 10);
  // Five rows have x >= 5, but the built-in scan trusted the factory with the
  // filter: all ten come back.
  EXPECT_EQ(Count(con, "SELECT count(*) FROM t WHERE x >= 5"), 10);
}

TEST(BuiltinArrowScan, RillScanKeepsTheFilterInDuckDBsPlan) {
  ASSERT_TRUE(InitializeArrowCompute().ok());
  auto live = LiveTable::Make("t", Numbers(0)->schema(), TableOptions{}).ValueOrDie();
  ASSERT_TRUE(live->Write(Numbers(10)).ok());
  auto sql = SqlEngine::Make({}).ValueOrDie();
  ASSERT_TRUE(sql->RegisterTable(live).ok());
  auto result = sql->Query("SELECT count(*)::BIGINT AS n FROM t WHERE x >= 5");
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  auto n = (*result)->column(0)->GetScalar(0).ValueOrDie();
  EXPECT_EQ(std::static_pointer_cast<arrow::Int64Scalar>(n)->value, 5);
}

}  // namespace
}  // namespace rill
