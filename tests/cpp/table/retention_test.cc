// RetentionPolicy: max_rows and max_age_seconds on every kind of time column.
#include "rill/table/retention.h"

#include <arrow/api.h>
#include <gtest/gtest.h>

#include "rill/table/live_table.h"
#include "table/test_util.h"

namespace rill {
namespace {

using test::BatchOf;
using test::ColumnStrings;
using test::FakeClock;
using test::SchemaOf;

constexpr double kT0 = 1'700'000'000.0;

std::shared_ptr<arrow::Table> Contents(const LiveTable& table) {
  return table.snapshot()->ToTable().ValueOrDie();
}

std::vector<std::string> Ids(const LiveTable& table) {
  auto ids = ColumnStrings(*Contents(table), "id");
  std::sort(ids.begin(), ids.end(), [](const std::string& a, const std::string& b) {
    return std::stoll(a) < std::stoll(b);
  });
  return ids;
}

std::string IdList(int from, int to) {
  std::string out = "[";
  for (int i = from; i < to; ++i) {
    out += (i > from ? "," : "") + std::to_string(i);
  }
  return out + "]";
}

TEST(RetentionPolicyValidation, RejectsNegativeLimitsAndAnEmptyTimeColumn) {
  RILL_EXPECT_OK((test::Retention(0).Validate()));
  EXPECT_TRUE((test::Retention(-1).Validate().IsInvalid()));
  EXPECT_TRUE((test::Retention(std::nullopt, -0.5).Validate().IsInvalid()));
  EXPECT_TRUE((test::Retention(std::nullopt, 1, "").Validate().IsInvalid()));
  EXPECT_FALSE(RetentionPolicy{}.enabled());
  EXPECT_TRUE((test::Retention(3).enabled()));
  EXPECT_TRUE((test::Retention(std::nullopt, 3).enabled()));
}

TEST(TimeReader, ReadsEveryTimestampUnitWithAndWithoutTimeZone) {
  struct Case {
    std::shared_ptr<arrow::DataType> type;
    std::string json;
  };
  const std::vector<Case> cases = {
      {arrow::timestamp(arrow::TimeUnit::SECOND), "[1700000000, null]"},
      {arrow::timestamp(arrow::TimeUnit::MILLI), "[1700000000000, null]"},
      {arrow::timestamp(arrow::TimeUnit::MICRO), "[1700000000000000, null]"},
      {arrow::timestamp(arrow::TimeUnit::NANO), "[1700000000000000000, null]"},
      {arrow::timestamp(arrow::TimeUnit::SECOND, "UTC"), "[1700000000, null]"},
      {arrow::timestamp(arrow::TimeUnit::MILLI, "Europe/Paris"), "[1700000000000, null]"},
      {arrow::timestamp(arrow::TimeUnit::MICRO, "America/New_York"), "[1700000000000000, null]"},
      {arrow::timestamp(arrow::TimeUnit::NANO, "+05:30"), "[1700000000000000000, null]"},
      {arrow::float64(), "[1700000000.0, null]"},
      {arrow::float32(), "[1700000000.0, null]"},
      {arrow::int64(), "[1700000000, null]"},
      {arrow::int32(), "[1700000000, null]"},
      {arrow::uint32(), "[1700000000, null]"},
      {arrow::date32(), "[19676, null]"},
      {arrow::date64(), "[1700000000000, null]"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.type->ToString());
    EXPECT_TRUE(IsTimeLike(*c.type));
    auto array = test::ArrayOf(c.type, c.json);
    RILL_ASSERT_OK_AND_ASSIGN(auto reader, MakeTimeReader(array));
    bool valid = false;
    const double expected = c.type->id() == arrow::Type::DATE32 ? 19676.0 * 86400 : kT0;
    const double tolerance = c.type->id() == arrow::Type::FLOAT ? 128.0 : 1e-6;
    EXPECT_NEAR(reader(0, &valid), expected, tolerance);
    EXPECT_TRUE(valid);
    reader(1, &valid);
    EXPECT_FALSE(valid);
  }
}

TEST(TimeReader, KeepsSubSecondPrecision) {
  auto ms = test::ArrayOf(arrow::timestamp(arrow::TimeUnit::MILLI, "UTC"), "[1700000000250]");
  RILL_ASSERT_OK_AND_ASSIGN(auto reader, MakeTimeReader(ms));
  bool valid = false;
  EXPECT_DOUBLE_EQ(reader(0, &valid), kT0 + 0.25);
  auto ns = test::ArrayOf(arrow::timestamp(arrow::TimeUnit::NANO), "[1700000000500000000]");
  RILL_ASSERT_OK_AND_ASSIGN(auto reader_ns, MakeTimeReader(ns));
  EXPECT_DOUBLE_EQ(reader_ns(0, &valid), kT0 + 0.5);
}

TEST(TimeReader, RejectsColumnsThatAreNoTime) {
  EXPECT_FALSE(IsTimeLike(*arrow::utf8()));
  EXPECT_FALSE(IsTimeLike(*arrow::boolean()));
  auto result = MakeTimeReader(test::ArrayOf(arrow::utf8(), R"(["x"])"));
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(result.status().IsTypeError()) << result.status().ToString();
}

class MaxRows : public ::testing::Test {
 protected:
  std::shared_ptr<LiveTable> Make(TableMode mode, std::vector<std::string> key, int64_t max_rows) {
    TableOptions options;
    options.mode = mode;
    options.primary_key = std::move(key);
    options.retention = test::Retention(max_rows);
    options.clock = clock_.clock();
    auto result = LiveTable::Make("t", schema_, options);
    EXPECT_TRUE(result.ok()) << result.status().ToString();
    return result.ok() ? *result : nullptr;
  }
  std::shared_ptr<arrow::RecordBatch> Batch(int from, int to) {
    std::string values = "[";
    for (int i = from; i < to; ++i) {
      values += std::string(i > from ? "," : "") + "\"v" + std::to_string(i) + "\"";
    }
    return BatchOf(schema_, {IdList(from, to), values + "]"});
  }
  FakeClock clock_{kT0};
  std::shared_ptr<arrow::Schema> schema_ =
      SchemaOf({arrow::field("id", arrow::int64()), arrow::field("v", arrow::utf8())});
};

TEST_F(MaxRows, KeepsTheNewestRowsOfOneLargeBatch) {
  auto table = Make(TableMode::kAppend, {}, 3);
  RILL_ASSERT_OK_AND_ASSIGN(auto stats, table->Write(Batch(0, 5)));
  EXPECT_EQ(stats.expired, 2);
  EXPECT_EQ(Ids(*table), (std::vector<std::string>{"2", "3", "4"}));
}

TEST_F(MaxRows, KeepsTheNewestWritesAcrossBatches) {
  auto table = Make(TableMode::kAppend, {}, 3);
  RILL_ASSERT_OK(table->Write(Batch(0, 2)));
  RILL_ASSERT_OK(table->Write(Batch(2, 4)));
  EXPECT_EQ(Ids(*table), (std::vector<std::string>{"1", "2", "3"}));
  RILL_ASSERT_OK(table->Write(std::vector<std::shared_ptr<arrow::RecordBatch>>{Batch(4, 5), Batch(5, 7)}));
  EXPECT_EQ(Ids(*table), (std::vector<std::string>{"4", "5", "6"}));
  EXPECT_EQ(table->num_rows(), 3);
}

TEST_F(MaxRows, CountsAnUpdateAsANewWrite) {
  auto table = Make(TableMode::kSnapshot, {"id"}, 2);
  RILL_ASSERT_OK(table->Write(Batch(1, 3)));  // 1, 2
  RILL_ASSERT_OK(table->Write(Batch(1, 2)));  // update 1: now 2 is the oldest write
  RILL_ASSERT_OK(table->Write(Batch(3, 4)));  // 3 pushes out 2
  EXPECT_EQ(Ids(*table), (std::vector<std::string>{"1", "3"}));
}

TEST_F(MaxRows, OfZeroEmptiesTheTable) {
  auto table = Make(TableMode::kAppend, {}, 0);
  RILL_ASSERT_OK(table->Write(Batch(0, 4)));
  EXPECT_EQ(table->num_rows(), 0);
}

TEST_F(MaxRows, ForgetsExpiredKeysSoTheyCanComeBack) {
  auto table = Make(TableMode::kSnapshot, {"id"}, 2);
  RILL_ASSERT_OK(table->Write(Batch(0, 3)));  // 0 expires
  EXPECT_EQ(Ids(*table), (std::vector<std::string>{"1", "2"}));
  clock_.Advance(5);
  RILL_ASSERT_OK_AND_ASSIGN(auto stats, table->Write(Batch(0, 1)));
  EXPECT_EQ(stats.inserted, 1) << "key 0 expired; writing it again is an insert";
  EXPECT_EQ(stats.updated, 0);
  EXPECT_EQ(Ids(*table), (std::vector<std::string>{"0", "2"}));
  EXPECT_EQ(test::SortedRows(*Contents(*table), {"id", "z_insert_ts"}),
            (std::vector<std::string>{"0|" + test::FormatDouble(kT0 + 5),
                                      "2|" + test::FormatDouble(kT0)}));
}

class MaxAge : public ::testing::Test {
 protected:
  FakeClock clock_{kT0};
};

TEST_F(MaxAge, ExpiresRowsByInsertTimeOnApplyRetention) {
  auto schema = SchemaOf({arrow::field("id", arrow::int64())});
  TableOptions options;
  options.mode = TableMode::kAppend;
  options.retention = test::Retention(std::nullopt, 10);
  options.clock = clock_.clock();
  RILL_ASSERT_OK_AND_ASSIGN(auto table, LiveTable::Make("t", schema, options));
  RILL_ASSERT_OK(table->Write(BatchOf(schema, {"[1, 2]"})));
  clock_.Advance(5);
  RILL_ASSERT_OK(table->Write(BatchOf(schema, {"[3]"})));
  clock_.Advance(5);  // rows 1 and 2 are exactly 10 s old: kept
  RILL_ASSERT_OK_AND_ASSIGN(auto expired, table->ApplyRetention());
  EXPECT_EQ(expired, 0);
  EXPECT_EQ(table->num_rows(), 3);
  clock_.Advance(0.5);
  const auto version = table->snapshot()->version();
  RILL_ASSERT_OK_AND_ASSIGN(expired, table->ApplyRetention());
  EXPECT_EQ(expired, 2);
  EXPECT_EQ(Ids(*table), (std::vector<std::string>{"3"}));
  EXPECT_GT(table->snapshot()->version(), version);
  RILL_ASSERT_OK_AND_ASSIGN(expired, table->ApplyRetention(kT0 + 100));
  EXPECT_EQ(expired, 1);
  EXPECT_EQ(table->num_rows(), 0);
}

TEST_F(MaxAge, DoesNotPublishWhenNothingExpired) {
  auto schema = SchemaOf({arrow::field("id", arrow::int64())});
  TableOptions options;
  options.mode = TableMode::kAppend;
  options.retention = test::Retention(std::nullopt, 10);
  options.clock = clock_.clock();
  RILL_ASSERT_OK_AND_ASSIGN(auto table, LiveTable::Make("t", schema, options));
  RILL_ASSERT_OK(table->Write(BatchOf(schema, {"[1]"})));
  const auto version = table->snapshot()->version();
  int calls = 0;
  table->Subscribe([&](const std::shared_ptr<const TableVersion>&) { ++calls; });
  RILL_ASSERT_OK(table->ApplyRetention());
  EXPECT_EQ(table->snapshot()->version(), version);
  EXPECT_EQ(calls, 0);
}

TEST_F(MaxAge, MeasuresUpdatedRowsFromTheirFirstInsert) {
  auto schema = SchemaOf({arrow::field("id", arrow::int64()), arrow::field("v", arrow::int64())});
  TableOptions options;
  options.primary_key = {"id"};
  options.retention = test::Retention(std::nullopt, 10);
  options.clock = clock_.clock();
  RILL_ASSERT_OK_AND_ASSIGN(auto table, LiveTable::Make("t", schema, options));
  RILL_ASSERT_OK(table->Write(BatchOf(schema, {"[1, 2]", "[0, 0]"})));
  clock_.Advance(8);
  RILL_ASSERT_OK(table->Write(BatchOf(schema, {"[1]", "[1]"})));  // z_insert_ts stays kT0
  clock_.Advance(4);
  RILL_ASSERT_OK(table->ApplyRetention());
  EXPECT_EQ(table->num_rows(), 0);
}

TEST_F(MaxAge, ExpiresOnWriteWithoutATick) {
  auto schema = SchemaOf({arrow::field("id", arrow::int64())});
  TableOptions options;
  options.mode = TableMode::kAppend;
  options.retention = test::Retention(std::nullopt, 10);
  options.clock = clock_.clock();
  RILL_ASSERT_OK_AND_ASSIGN(auto table, LiveTable::Make("t", schema, options));
  RILL_ASSERT_OK(table->Write(BatchOf(schema, {"[1]"})));
  clock_.Advance(20);
  RILL_ASSERT_OK_AND_ASSIGN(auto stats, table->Write(BatchOf(schema, {"[2]"})));
  EXPECT_EQ(stats.expired, 1);
  EXPECT_EQ(Ids(*table), (std::vector<std::string>{"2"}));
}

TEST_F(MaxAge, RejectsAMissingOrNonTimeColumn) {
  auto schema = SchemaOf({arrow::field("id", arrow::int64()), arrow::field("s", arrow::utf8())});
  TableOptions options;
  options.mode = TableMode::kAppend;
  options.retention = test::Retention(std::nullopt, 10, "missing");
  auto missing = LiveTable::Make("t", schema, options);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("missing"), std::string::npos)
      << missing.status().ToString();
  options.retention->time_column = "s";
  auto not_time = LiveTable::Make("t", schema, options);
  ASSERT_FALSE(not_time.ok());
}

// One event-time column type, with values written as unix seconds `s`.
struct TimeColumnCase {
  std::string name;
  std::shared_ptr<arrow::DataType> type;
  int64_t per_second;  // raw units per second (0: float seconds)
};

class MaxAgeOnEventTime : public ::testing::TestWithParam<TimeColumnCase> {};

std::string TimeJson(const TimeColumnCase& c, const std::vector<std::optional<double>>& secs) {
  std::string out = "[";
  for (size_t i = 0; i < secs.size(); ++i) {
    if (i) out += ",";
    if (!secs[i]) {
      out += "null";
    } else if (c.per_second == 0) {
      out += test::FormatDouble(*secs[i]);
    } else {
      out += std::to_string(static_cast<int64_t>(*secs[i]) * c.per_second);
    }
  }
  return out + "]";
}

TEST_P(MaxAgeOnEventTime, ExpiresRowsOlderThanTheAgeAndKeepsNullTimes) {
  const auto& c = GetParam();
  auto schema = SchemaOf({arrow::field("id", arrow::int64()), arrow::field("ts", c.type)});
  FakeClock clock(kT0);
  TableOptions options;
  options.mode = TableMode::kAppend;
  options.retention = test::Retention(std::nullopt, 60, "ts");
  options.clock = clock.clock();
  RILL_ASSERT_OK_AND_ASSIGN(auto table, LiveTable::Make("t", schema, options));
  // Event times: 2 h old, 61 s old, exactly 60 s old, 1 s old, in the future, null.
  RILL_ASSERT_OK_AND_ASSIGN(
      auto stats,
      table->Write(BatchOf(schema, {"[1, 2, 3, 4, 5, 6]",
                                    TimeJson(c, {kT0 - 7200, kT0 - 61, kT0 - 60, kT0 - 1,
                                                 kT0 + 100, std::nullopt})})));
  EXPECT_EQ(stats.expired, 2);
  EXPECT_EQ(Ids(*table), (std::vector<std::string>{"3", "4", "5", "6"}));
  clock.Advance(30);
  RILL_ASSERT_OK_AND_ASSIGN(auto expired, table->ApplyRetention());
  EXPECT_EQ(expired, 1);
  EXPECT_EQ(Ids(*table), (std::vector<std::string>{"4", "5", "6"}));
  clock.Advance(1000);
  RILL_ASSERT_OK(table->ApplyRetention());
  EXPECT_EQ(Ids(*table), (std::vector<std::string>{"6"})) << "a null time never expires";
}

INSTANTIATE_TEST_SUITE_P(
    EveryTimeType, MaxAgeOnEventTime,
    ::testing::Values(
        TimeColumnCase{"float64_seconds", arrow::float64(), 0},
        TimeColumnCase{"int64_seconds", arrow::int64(), 1},
        TimeColumnCase{"timestamp_s", arrow::timestamp(arrow::TimeUnit::SECOND), 1},
        TimeColumnCase{"timestamp_ms", arrow::timestamp(arrow::TimeUnit::MILLI), 1000},
        TimeColumnCase{"timestamp_us", arrow::timestamp(arrow::TimeUnit::MICRO), 1000000},
        TimeColumnCase{"timestamp_ns", arrow::timestamp(arrow::TimeUnit::NANO), 1000000000},
        TimeColumnCase{"timestamp_s_utc", arrow::timestamp(arrow::TimeUnit::SECOND, "UTC"), 1},
        TimeColumnCase{"timestamp_ms_utc", arrow::timestamp(arrow::TimeUnit::MILLI, "UTC"), 1000},
        TimeColumnCase{"timestamp_us_new_york",
                       arrow::timestamp(arrow::TimeUnit::MICRO, "America/New_York"), 1000000},
        TimeColumnCase{"timestamp_ns_tokyo",
                       arrow::timestamp(arrow::TimeUnit::NANO, "Asia/Tokyo"), 1000000000}),
    [](const ::testing::TestParamInfo<TimeColumnCase>& info) { return info.param.name; });

TEST(MaxRowsAndMaxAge, ApplyTogether) {
  auto schema = SchemaOf({arrow::field("id", arrow::int64())});
  FakeClock clock(kT0);
  TableOptions options;
  options.mode = TableMode::kAppend;
  options.retention = test::Retention(3, 10);
  options.clock = clock.clock();
  RILL_ASSERT_OK_AND_ASSIGN(auto table, LiveTable::Make("t", schema, options));
  RILL_ASSERT_OK(table->Write(BatchOf(schema, {"[1, 2]"})));
  clock.Advance(6);
  RILL_ASSERT_OK(table->Write(BatchOf(schema, {"[3, 4]"})));
  EXPECT_EQ(Ids(*table), (std::vector<std::string>{"2", "3", "4"}));
  clock.Advance(6);
  RILL_ASSERT_OK(table->ApplyRetention());
  EXPECT_EQ(Ids(*table), (std::vector<std::string>{"3", "4"}));
}

TEST(SnapshotRetention, AppliesToKeyedTablesToo) {
  auto schema = SchemaOf({arrow::field("id", arrow::int64()), arrow::field("ts", arrow::float64())});
  FakeClock clock(kT0);
  TableOptions options;
  options.primary_key = {"id"};
  options.retention = test::Retention(std::nullopt, 5, "ts");
  options.clock = clock.clock();
  RILL_ASSERT_OK_AND_ASSIGN(auto table, LiveTable::Make("t", schema, options));
  RILL_ASSERT_OK(table->Write(BatchOf(schema, {"[1, 2]", "[1700000000, 1699999990]"})));
  EXPECT_EQ(Ids(*table), (std::vector<std::string>{"1"}));
  // An update moving the event time back expires the row.
  RILL_ASSERT_OK(table->Write(BatchOf(schema, {"[1]", "[1699999000]"})));
  EXPECT_EQ(table->num_rows(), 0);
  // And the key can be written again as a new row.
  RILL_ASSERT_OK_AND_ASSIGN(auto stats, table->Write(BatchOf(schema, {"[1]", "[1700000000]"})));
  EXPECT_EQ(stats.inserted, 1);
  EXPECT_EQ(table->num_rows(), 1);
}

}  // namespace
}  // namespace rill
