// GroupAggregator (the aggregation pipeline's built-in aggregates) against
// DuckDB's GROUP BY over the same random batches, with null keys and values.
#include <random>

#include <arrow/api.h>
#include <gtest/gtest.h>

#include "rill/engine/engine.h"
#include "rill/toolkit/group_aggregator.h"

namespace rill::toolkit {
namespace {

std::shared_ptr<arrow::Schema> Schema() {
  return arrow::schema({arrow::field("k", arrow::utf8()), arrow::field("r", arrow::int32()),
                        arrow::field("v", arrow::float64()), arrow::field("q", arrow::int64())});
}

std::shared_ptr<arrow::RecordBatch> Batch(std::mt19937& rng, int n) {
  arrow::StringBuilder k;
  arrow::Int32Builder r;
  arrow::DoubleBuilder v;
  arrow::Int64Builder q;
  for (int i = 0; i < n; ++i) {
    if (rng() % 10 == 0) {
      EXPECT_TRUE(k.AppendNull().ok());
    } else {
      EXPECT_TRUE(k.Append(std::string(1, static_cast<char>('a' + rng() % 4))).ok());
    }
    EXPECT_TRUE(r.Append(static_cast<int32_t>(rng() % 3)).ok());
    EXPECT_TRUE(v.Append(static_cast<double>(static_cast<int>(rng() % 200000) - 50000) / 100).ok());
    if (rng() % 4 == 0) {
      EXPECT_TRUE(q.AppendNull().ok());
    } else {
      EXPECT_TRUE(q.Append(rng() % 5).ok());
    }
  }
  return arrow::RecordBatch::Make(Schema(), n, {*k.Finish(), *r.Finish(), *v.Finish(), *q.Finish()});
}

TEST(GroupAggregator, MatchesDuckDbGroupByOnRandomBatches) {
  for (uint32_t seed = 1; seed <= 5; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937 rng(seed);
    auto engine = Engine::Make().ValueOrDie();
    TableOptions append;
    append.mode = TableMode::kAppend;
    append.retention = RetentionPolicy{int64_t{1000000}, std::nullopt, "z_insert_ts"};
    auto src = engine->RegisterTable("src", Schema(), append).ValueOrDie();
    std::vector<GroupAggSpec> aggs = {
        {"n", GroupAggFn::kCountStar, "*"}, {"s", GroupAggFn::kSum, "v"},
        {"a", GroupAggFn::kAvg, "q"},       {"lo", GroupAggFn::kMin, "v"},
        {"hi", GroupAggFn::kMax, "q"},      {"qn", GroupAggFn::kCount, "q"}};
    auto agg = GroupAggregator::Make({"k", "r"}, aggs).ValueOrDie();
    for (int b = 0; b < 4; ++b) {
      auto batch = Batch(rng, 1 + static_cast<int>(rng() % 3000));
      ASSERT_TRUE(agg->Consume(*batch).ok());
      ASSERT_TRUE(src->Write(batch).ok());
    }
    auto result = agg->Finish().ValueOrDie();
    auto out = engine->RegisterTable("out", result->schema(), append).ValueOrDie();
    ASSERT_TRUE(out->Write(result->CombineChunksToBatch().ValueOrDie()).ok());
    auto diff = engine->Query(R"(
        WITH e AS (SELECT k, r, count(*) AS n, sum(v) AS s, avg(q) AS a, min(v) AS lo,
                          max(q) AS hi, count(q) AS qn FROM src GROUP BY k, r)
        SELECT count(*) FROM e FULL JOIN out o
          ON e.k IS NOT DISTINCT FROM o.k AND e.r = o.r
        WHERE o.r IS NULL OR e.r IS NULL OR e.n <> o.n OR abs(e.s - o.s) > 1e-6
           OR (e.a IS DISTINCT FROM o.a AND abs(e.a - o.a) > 1e-9) OR e.lo <> o.lo
           OR e.hi IS DISTINCT FROM o.hi OR e.qn <> o.qn)")
                    .ValueOrDie();
    EXPECT_EQ((*diff->column(0)->GetScalar(0))->ToString(), "0");
    EXPECT_EQ(agg->groups(), result->num_rows());
    engine->Stop();
  }
}

TEST(GroupAggregator, RejectsBadSpecsAndColumns) {
  EXPECT_TRUE(ParseGroupAggFn("median", "x").status().IsInvalid());
  EXPECT_TRUE(ParseGroupAggFn("sum", "*").status().IsInvalid());
  EXPECT_EQ(ParseGroupAggFn("COUNT", "*").ValueOrDie(), GroupAggFn::kCountStar);
  EXPECT_TRUE(GroupAggregator::Make({"k"}, {}).status().IsInvalid());
  EXPECT_TRUE(GroupAggregator::Make({"k"}, {{"x", GroupAggFn::kSum, "v"},
                                            {"x", GroupAggFn::kMax, "v"}})
                  .status()
                  .IsInvalid());
  std::mt19937 rng(1);
  auto batch = Batch(rng, 10);
  auto missing = GroupAggregator::Make({"nope"}, {{"n", GroupAggFn::kCountStar, "*"}}).ValueOrDie();
  EXPECT_TRUE(missing->Consume(*batch).IsKeyError());
  auto text = GroupAggregator::Make({"r"}, {{"s", GroupAggFn::kSum, "k"}}).ValueOrDie();
  EXPECT_TRUE(text->Consume(*batch).IsTypeError());
}

}  // namespace
}  // namespace rill::toolkit
