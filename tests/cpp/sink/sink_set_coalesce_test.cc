// CoalesceByKey and the other change-batch transformations (sink/coalesce.h).
#include <gtest/gtest.h>

#include <arrow/api.h>

#include "rill/sink/coalesce.h"
#include "sink/sink_test_util.h"

namespace rill {
namespace {

using test::Row;

std::shared_ptr<arrow::RecordBatch> Changes(const std::vector<Row>& rows) {
  arrow::Int64Builder id, v;
  arrow::StringBuilder op;
  arrow::UInt64Builder version;
  for (const auto& r : rows) {
    EXPECT_TRUE(id.Append(r.id).ok());
    EXPECT_TRUE(v.Append(r.v).ok());
    EXPECT_TRUE(op.Append(r.op).ok());
    EXPECT_TRUE(version.Append(r.version).ok());
  }
  auto schema = ChangeSchema(test::KeyedSchema());
  return arrow::RecordBatch::Make(schema, static_cast<int64_t>(rows.size()),
                                  {id.Finish().ValueOrDie(), v.Finish().ValueOrDie(),
                                   op.Finish().ValueOrDie(), version.Finish().ValueOrDie()});
}

std::vector<Row> RowsOf(const std::vector<std::shared_ptr<arrow::RecordBatch>>& batches) {
  ChangeSet c;
  c.batches = batches;
  return test::RowsOf(c);
}

TEST(CoalesceByKey, KeepsTheLastChangePerKeyInTheOrderOfThoseChanges) {
  auto out = CoalesceByKey({Changes({{"insert", 1, 10, 1}, {"insert", 2, 20, 1}}),
                            Changes({{"update_before", 1, 10, 2}, {"update", 1, 11, 2},
                                     {"insert", 3, 30, 2}}),
                            Changes({{"delete", 2, 20, 3}, {"insert", 4, 40, 3}})},
                           {"id"})
                 .ValueOrDie();
  std::vector<Row> expected = {
      {"update", 1, 11, 2}, {"insert", 3, 30, 2}, {"delete", 2, 20, 3}, {"insert", 4, 40, 3}};
  EXPECT_EQ(RowsOf(out), expected);
}

TEST(CoalesceByKey, ADeleteThenAnInsertOfAKeyIsAnInsert) {
  auto out = CoalesceByKey({Changes({{"delete", 1, 10, 1}, {"insert", 1, 12, 2}})}, {"id"})
                 .ValueOrDie();
  EXPECT_EQ(RowsOf(out), (std::vector<Row>{{"insert", 1, 12, 2}}));
}

TEST(CoalesceByKey, StringAndCompositeKeysCompareByValue) {
  auto schema = arrow::schema({arrow::field("k", arrow::utf8()), arrow::field("n", arrow::int32()),
                               arrow::field(kChangeOpColumn, arrow::utf8()),
                               arrow::field(kChangeVersionColumn, arrow::uint64())});
  arrow::StringBuilder k, op;
  arrow::Int32Builder n;
  arrow::UInt64Builder ver;
  // ("a",1) twice, ("a",2) and ("ab",1) once: the bytes "a"+"b" must not collide.
  for (auto [key, num] : std::vector<std::pair<std::string, int>>{{"a", 1}, {"a", 2}, {"ab", 1}, {"a", 1}}) {
    EXPECT_TRUE(k.Append(key).ok());
    EXPECT_TRUE(n.Append(num).ok());
    EXPECT_TRUE(op.Append("insert").ok());
    EXPECT_TRUE(ver.Append(1).ok());
  }
  auto batch = arrow::RecordBatch::Make(schema, 4,
                                        {k.Finish().ValueOrDie(), n.Finish().ValueOrDie(),
                                         op.Finish().ValueOrDie(), ver.Finish().ValueOrDie()});
  auto out = CoalesceByKey({batch}, {"k", "n"}).ValueOrDie();
  EXPECT_EQ(CountRows(out), 3);
  EXPECT_TRUE(CoalesceByKey({batch}, {"missing"}).status().IsKeyError());
}

TEST(ChangeBatches, KeepOpsVersionsAndShiftAndSplit) {
  auto batch = Changes({{"insert", 1, 10, 1}, {"update", 1, 11, 2}, {"delete", 1, 11, 3},
                        {"insert", 2, 20, 4}});
  EXPECT_EQ(RowsOf(KeepOps({batch}, {ChangeOp::kInsert}).ValueOrDie()),
            (std::vector<Row>{{"insert", 1, 10, 1}, {"insert", 2, 20, 4}}));
  EXPECT_EQ(RowsOf(KeepVersions({batch}, 1, 3).ValueOrDie()),
            (std::vector<Row>{{"update", 1, 11, 2}, {"delete", 1, 11, 3}}));
  EXPECT_EQ(RowsOf(ShiftVersions({batch}, 10).ValueOrDie())[0].version, 11u);
  auto groups = SplitRows({batch, batch}, 3);
  ASSERT_EQ(groups.size(), 3u);
  EXPECT_EQ(CountRows(groups[0]), 3);
  EXPECT_EQ(CountRows(groups[1]), 3);
  EXPECT_EQ(CountRows(groups[2]), 2);
  EXPECT_EQ(SplitRows({batch}, 0).size(), 1u);
}

// The moves of an application's partition shards (versions (after, through])
// are left out; an open range (through = max) drops everything after it.
TEST(ChangeBatches, DropVersionsLeavesOutTheRanges) {
  auto batch = Changes({{"insert", 1, 10, 1}, {"insert", 2, 20, 2}, {"insert", 3, 30, 3},
                        {"update", 1, 11, 4}, {"delete", 2, 20, 5}});
  EXPECT_EQ(RowsOf(DropVersions({batch}, {}).ValueOrDie()).size(), 5u);
  EXPECT_EQ(RowsOf(DropVersions({batch}, {{1, 3}}).ValueOrDie()),
            (std::vector<Row>{{"insert", 1, 10, 1}, {"update", 1, 11, 4}, {"delete", 2, 20, 5}}));
  EXPECT_EQ(RowsOf(DropVersions({batch, batch}, {{0, 1}, {3, 4}}).ValueOrDie()),
            (std::vector<Row>{{"insert", 2, 20, 2}, {"insert", 3, 30, 3}, {"delete", 2, 20, 5},
                              {"insert", 2, 20, 2}, {"insert", 3, 30, 3}, {"delete", 2, 20, 5}}));
  EXPECT_EQ(RowsOf(DropVersions({batch}, {{2, UINT64_MAX}}).ValueOrDie()),
            (std::vector<Row>{{"insert", 1, 10, 1}, {"insert", 2, 20, 2}}));
}

}  // namespace
}  // namespace rill
