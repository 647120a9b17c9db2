// Column statistics of live-table scans. DuckDB's optimizer prunes filters and
// compresses keys with them, so wrong statistics give wrong answers: every
// query here must answer as the same query over the same rows loaded into a
// native DuckDB table of a separate database (which keeps its own statistics).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <arrow/api.h>
#include <arrow/c/bridge.h>
#include <duckdb.hpp>
#include <duckdb/function/table/arrow.hpp>
#include <gtest/gtest.h>

#include "rill/sql/duckdb_result.h"
#include "rill/sql/sql_engine.h"
#include "rill/table/live_table.h"
#include "sql/sql_test_util.h"

namespace rill {
namespace {

using sqltest::BatchOf;
using sqltest::SortedRows;

// Rows of a fixed Arrow table in a native table `t` of its own DuckDB database.
class NativeOracle {
 public:
  NativeOracle() : db_(nullptr), con_(db_) {}

  void Load(std::shared_ptr<arrow::Table> rows) {
    rows_ = std::move(rows);
    con_.TableFunction("arrow_scan_dumb",
                       {duckdb::Value::POINTER(reinterpret_cast<uintptr_t>(this)),
                        duckdb::Value::POINTER(reinterpret_cast<uintptr_t>(&Produce)),
                        duckdb::Value::POINTER(reinterpret_cast<uintptr_t>(&GetSchema))})
        ->CreateView("oracle_rows", /*replace=*/true, /*temporary=*/true);
    Run("CREATE OR REPLACE TABLE t AS SELECT * FROM oracle_rows");
    Run("DROP VIEW oracle_rows");
    rows_ = nullptr;
  }

  Result<std::shared_ptr<arrow::Table>> Query(const std::string& sql) {
    auto result = con_.Query(sql);
    if (result->HasError()) {
      return Status::Invalid(result->GetError());
    }
    return ResultToArrowTable(std::move(result));
  }

  /// Return the SQL literals of `select`'s single result row.
  std::vector<std::string> Literals(const std::string& select) {
    auto result = con_.Query(select);
    EXPECT_FALSE(result->HasError()) << result->GetError();
    std::vector<std::string> out;
    for (duckdb::idx_t row = 0; row < result->RowCount(); ++row) {
      for (duckdb::idx_t col = 0; col < result->ColumnCount(); ++col) {
        auto value = result->GetValue(col, row);
        if (!value.IsNull()) {
          out.push_back(value.ToSQLString());
        }
      }
    }
    return out;
  }

 private:
  void Run(const std::string& sql) {
    auto result = con_.Query(sql);
    ASSERT_FALSE(result->HasError()) << result->GetError();
  }
  static duckdb::unique_ptr<duckdb::ArrowArrayStreamWrapper> Produce(
      uintptr_t factory, duckdb::ArrowStreamParameters& /*parameters*/) {
    auto* self = reinterpret_cast<NativeOracle*>(factory);
    auto wrapper = duckdb::make_uniq<duckdb::ArrowArrayStreamWrapper>();
    auto reader = std::make_shared<arrow::TableBatchReader>(self->rows_);
    EXPECT_TRUE(arrow::ExportRecordBatchReader(reader, &wrapper->arrow_array_stream).ok());
    wrapper->number_of_rows = -1;
    return wrapper;
  }
  static void GetSchema(ArrowArrayStream* factory, ArrowSchema& schema) {
    auto* self = reinterpret_cast<NativeOracle*>(factory);
    EXPECT_TRUE(arrow::ExportSchema(*self->rows_->schema(), &schema).ok());
  }

  duckdb::DuckDB db_;
  duckdb::Connection con_;
  std::shared_ptr<arrow::Table> rows_;
};

// Sorted rows with negative zeros written as zeros: DuckDB groups -0.0 with 0.0
// and shows whichever it met first, which depends on thread timing.
std::vector<std::string> CanonicalRows(const arrow::Table& table) {
  std::vector<std::string> rows;
  for (const auto& row : SortedRows(table)) {
    std::string out;
    size_t start = 0;
    while (true) {
      const size_t end = row.find('|', start);
      const std::string cell = row.substr(start, end - start);
      out += cell == "-0" ? "0" : cell;
      if (end == std::string::npos) {
        break;
      }
      out += '|';
      start = end + 1;
    }
    rows.push_back(std::move(out));
  }
  std::sort(rows.begin(), rows.end());
  return rows;
}

// A keyed live table `t` behind a SqlEngine, and an oracle kept in step.
class LiveAndNative {
 public:
  explicit LiveAndNative(std::shared_ptr<arrow::Schema> schema) {
    TableOptions options;
    options.primary_key = {"k"};
    options.auto_compact_chunks = 6;
    table_ = LiveTable::Make("t", std::move(schema), options).ValueOrDie();
    sql_ = SqlEngine::Make().ValueOrDie();
    EXPECT_TRUE(sql_->RegisterTable(table_).ok());
  }

  void Write(const std::shared_ptr<arrow::RecordBatch>& batch) {
    ASSERT_OK(table_->Write(batch));
    ASSERT_OK_AND_ASSIGN(auto rows, table_->snapshot()->ToTable());
    std::vector<int> user;
    for (const auto& field : table_->user_schema()->fields()) {
      user.push_back(rows->schema()->GetFieldIndex(field->name()));
    }
    ASSERT_OK_AND_ASSIGN(auto user_rows, rows->SelectColumns(user));
    oracle_.Load(user_rows);
  }

  /// Expect `sql` to give the same rows (as a multiset), or to fail on both.
  void ExpectSame(const std::string& sql) {
    auto live = sql_->Query(sql);
    auto native = oracle_.Query(sql);
    ASSERT_EQ(live.ok(), native.ok())
        << sql << "\n live: " << live.status().ToString()
        << "\n native: " << native.status().ToString();
    if (live.ok()) {
      EXPECT_EQ(CanonicalRows(**live), CanonicalRows(**native)) << sql;
    }
    ++queries_;
  }

  /// Compare every comparison of `column` with its current min, max and a few
  /// of its values, null checks, grouping and ordering on it.
  void CompareColumn(const std::string& column, std::mt19937_64& rng) {
    auto literals = oracle_.Literals("SELECT min(" + column + "), max(" + column + ") FROM t");
    auto values = oracle_.Literals("SELECT DISTINCT " + column + " FROM t WHERE " + column +
                                   " IS NOT NULL ORDER BY 1");
    for (int i = 0; i < 3 && !values.empty(); ++i) {
      literals.push_back(values[rng() % values.size()]);
    }
    for (const auto& literal : literals) {
      for (const char* op : {"=", "<", "<=", ">", ">=", "<>"}) {
        ExpectSame("SELECT count(*) FROM t WHERE " + column + " " + op + " " + literal);
      }
      ExpectSame("SELECT k FROM t WHERE " + column + " BETWEEN " + literal + " AND " +
                 literals[1 % literals.size()]);
    }
    ExpectSame("SELECT count(*), count(" + column + ") FROM t WHERE " + column + " IS NULL");
    ExpectSame("SELECT count(*) FROM t WHERE " + column + " IS NOT NULL");
    ExpectSame("SELECT min(" + column + "), max(" + column + "), count(" + column + ") FROM t");
    ExpectSame("SELECT " + column + ", count(*), max(k) FROM t GROUP BY " + column);
    ExpectSame("SELECT k, " + column + " FROM t ORDER BY " + column + ", k");
    ExpectSame("SELECT count(DISTINCT " + column + ") FROM t");
  }

  SqlEngine& sql() { return *sql_; }
  LiveTable& table() { return *table_; }
  int queries() const { return queries_; }

 private:
  std::shared_ptr<LiveTable> table_;
  std::unique_ptr<SqlEngine> sql_;
  NativeOracle oracle_;
  int queries_ = 0;
};

std::shared_ptr<arrow::Schema> AllTypesSchema() {
  return arrow::schema({
      arrow::field("k", arrow::int64(), /*nullable=*/false),
      arrow::field("i8", arrow::int8()),
      arrow::field("i16", arrow::int16()),
      arrow::field("i32", arrow::int32()),
      arrow::field("i64", arrow::int64()),
      arrow::field("u8", arrow::uint8()),
      arrow::field("u16", arrow::uint16()),
      arrow::field("u32", arrow::uint32()),
      arrow::field("u64", arrow::uint64()),
      arrow::field("f32", arrow::float32()),
      arrow::field("f64", arrow::float64()),
      arrow::field("d", arrow::date32()),
      arrow::field("ts_s", arrow::timestamp(arrow::TimeUnit::SECOND)),
      arrow::field("ts_ms", arrow::timestamp(arrow::TimeUnit::MILLI)),
      arrow::field("ts_us", arrow::timestamp(arrow::TimeUnit::MICRO)),
      arrow::field("ts_ns", arrow::timestamp(arrow::TimeUnit::NANO)),
      arrow::field("ts_tz", arrow::timestamp(arrow::TimeUnit::MICRO, "UTC")),
      arrow::field("s", arrow::utf8()),
      arrow::field("ls", arrow::large_utf8()),
      arrow::field("tag", arrow::utf8(), /*nullable=*/false),
      arrow::field("flag", arrow::boolean()),
  });
}

// Random values: mostly a narrow range (so groups repeat), sometimes the
// type's extremes, sometimes null.
class RowMaker {
 public:
  explicit RowMaker(uint64_t seed) : rng_(seed) {}

  std::shared_ptr<arrow::RecordBatch> Batch(const std::vector<int64_t>& keys, int64_t shift) {
    const auto schema = AllTypesSchema();
    std::vector<std::shared_ptr<arrow::Array>> columns;
    for (const auto& field : schema->fields()) {
      std::unique_ptr<arrow::ArrayBuilder> builder;
      EXPECT_TRUE(arrow::MakeBuilder(arrow::default_memory_pool(), field->type(), &builder).ok());
      for (int64_t key : keys) {
        EXPECT_TRUE(Append(field->name(), *field->type(), key, shift, builder.get()).ok());
      }
      columns.push_back(builder->Finish().ValueOrDie());
    }
    return arrow::RecordBatch::Make(schema, static_cast<int64_t>(keys.size()), columns);
  }

  std::mt19937_64& rng() { return rng_; }

 private:
  bool OneIn(int n) { return rng_() % n == 0; }
  int64_t Uniform(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
  }

  template <typename Builder, typename T>
  arrow::Status AppendInt(arrow::ArrayBuilder* b, int64_t shift) {
    using Limits = std::numeric_limits<T>;
    T v;
    if (OneIn(50)) {
      v = OneIn(2) ? Limits::min() : Limits::max();
    } else if constexpr (std::is_signed_v<T>) {
      v = static_cast<T>(Uniform(-40, 40) + shift);
    } else {
      v = static_cast<T>(Uniform(0, 80) + shift);
    }
    return static_cast<Builder*>(b)->Append(v);
  }

  // Up to `max_pieces` pieces: with 2, at most 14 bytes, short enough for
  // DuckDB to compress the strings to integers (which needs their max length).
  std::string RandomString(int max_pieces) {
    static const char* const kPieces[] = {"a", "b", "z", "abcdefg", "\xc3\xa9", "\xf0\x9f\x98\x80",
                                          " ", "abcdefghij"};
    const int64_t last_piece = max_pieces <= 2 ? 6 : 7;
    std::string s;
    const int pieces = static_cast<int>(Uniform(0, max_pieces));
    for (int i = 0; i < pieces; ++i) {
      s += kPieces[Uniform(0, last_piece)];
    }
    return s;
  }

  arrow::Status Append(const std::string& name, const arrow::DataType& type, int64_t key,
                       int64_t shift, arrow::ArrayBuilder* b) {
    if (name == "k") {
      return static_cast<arrow::Int64Builder*>(b)->Append(key);
    }
    if (name == "tag") {
      // Never null and few values (the dictionary path with ids), plus a new
      // value in each round of upserts.
      static const char* const kTags[] = {"north", "south", "east", "west", "north-1",
                                          "",      "x",     "\xc3\xa9t\xc3\xa9"};
      const std::string tag = OneIn(8) ? "new-" + std::to_string(shift) : kTags[Uniform(0, 7)];
      return static_cast<arrow::StringBuilder*>(b)->Append(tag);
    }
    if (OneIn(10)) {
      return b->AppendNull();
    }
    switch (type.id()) {
      case arrow::Type::INT8:
        return AppendInt<arrow::Int8Builder, int8_t>(b, shift);
      case arrow::Type::INT16:
        return AppendInt<arrow::Int16Builder, int16_t>(b, shift);
      case arrow::Type::INT32:
        return AppendInt<arrow::Int32Builder, int32_t>(b, shift);
      case arrow::Type::INT64:
        return AppendInt<arrow::Int64Builder, int64_t>(b, shift);
      case arrow::Type::UINT8:
        return AppendInt<arrow::UInt8Builder, uint8_t>(b, shift);
      case arrow::Type::UINT16:
        return AppendInt<arrow::UInt16Builder, uint16_t>(b, shift);
      case arrow::Type::UINT32:
        return AppendInt<arrow::UInt32Builder, uint32_t>(b, shift);
      case arrow::Type::UINT64:
        return AppendInt<arrow::UInt64Builder, uint64_t>(b, shift);
      case arrow::Type::FLOAT: {
        // NaN and infinities leave the column without bounds; -0.0 equals 0.0.
        float v = static_cast<float>(Uniform(-400, 400) + shift) / 4;
        if (OneIn(60)) {
          v = std::numeric_limits<float>::quiet_NaN();
        } else if (OneIn(60)) {
          v = -std::numeric_limits<float>::infinity();
        } else if (OneIn(30)) {
          v = -0.0f;
        }
        return static_cast<arrow::FloatBuilder*>(b)->Append(v);
      }
      case arrow::Type::DOUBLE: {
        double v = static_cast<double>(Uniform(-1000, 1000) + shift) / 8;
        if (OneIn(30)) {
          v = -0.0;
        }
        return static_cast<arrow::DoubleBuilder*>(b)->Append(v);
      }
      case arrow::Type::DATE32:
        return static_cast<arrow::Date32Builder*>(b)->Append(
            static_cast<int32_t>(Uniform(18000, 18060) + shift));
      case arrow::Type::TIMESTAMP: {
        const auto unit = static_cast<const arrow::TimestampType&>(type).unit();
        const int64_t per_second = unit == arrow::TimeUnit::SECOND  ? 1
                                   : unit == arrow::TimeUnit::MILLI ? 1000
                                   : unit == arrow::TimeUnit::MICRO ? 1000000
                                                                    : 1000000000;
        const int64_t seconds = 1700000000 + Uniform(0, 100) + shift;
        return static_cast<arrow::TimestampBuilder*>(b)->Append(
            seconds * per_second + Uniform(0, per_second - 1));
      }
      case arrow::Type::STRING:
        return static_cast<arrow::StringBuilder*>(b)->Append(RandomString(2));
      case arrow::Type::LARGE_STRING:
        return static_cast<arrow::LargeStringBuilder*>(b)->Append(RandomString(4));
      case arrow::Type::BOOL:
        return static_cast<arrow::BooleanBuilder*>(b)->Append(OneIn(2));
      default:
        return arrow::Status::NotImplemented(type.ToString());
    }
  }

  std::mt19937_64 rng_;
};

// Random rows, then upserts that replace values (in new chunks, leaving dead
// rows in old ones) and shift the value ranges down and up.
TEST(ScanStatistics, AnswersLikeANativeTableOnRandomDataAcrossUpserts) {
  LiveAndNative t(AllTypesSchema());
  RowMaker maker(/*seed=*/20240611);
  std::vector<int64_t> keys;
  for (int64_t k = 0; k < 600; ++k) {
    keys.push_back(k);
  }
  t.Write(maker.Batch(keys, /*shift=*/0));

  const std::vector<std::string> columns = {"i8",    "i16",   "i32",   "i64",   "u8",
                                            "u16",   "u32",   "u64",   "f32",   "f64",
                                            "d",     "ts_s",  "ts_ms", "ts_us", "ts_ns",
                                            "ts_tz", "s",     "ls",    "tag",   "flag"};
  const int64_t shifts[] = {-30, 45, 0};
  for (int round = 0; round <= 3; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    for (const auto& column : columns) {
      SCOPED_TRACE(column);
      t.CompareColumn(column, maker.rng());
      if (HasFatalFailure()) {
        return;
      }
    }
    // Arithmetic whose overflow checks DuckDB drops when statistics allow it.
    t.ExpectSame("SELECT k, i8 + i8, i16 * 2, i32 - 1, u8 + u8 FROM t");
    t.ExpectSame("SELECT sum(i64 + 1), sum(u64 - 1) FROM t");
    t.ExpectSame("SELECT s, ls, count(*) FROM t GROUP BY s, ls");
    t.ExpectSame("SELECT tag, count(*), sum(i64), min(s), max(f64) FROM t GROUP BY tag");
    t.ExpectSame("SELECT tag, s, count(*) FROM t GROUP BY tag, s");
    t.ExpectSame("SELECT upper(tag), length(tag), count(*) FROM t GROUP BY ALL");
    t.ExpectSame("SELECT t1.tag, count(*) FROM t t1 JOIN t t2 ON t1.tag = t2.tag GROUP BY 1");
    t.ExpectSame("SELECT length(s), lower(s), upper(ls) FROM t WHERE s LIKE 'abc%'");
    t.ExpectSame("SELECT k FROM t WHERE s > 'abcdefgh' AND s < 'abcdefghj'");
    if (round == 3) {
      break;
    }
    // Replace a third of the rows (keys drawn from all) and add a few new keys.
    std::vector<int64_t> upsert;
    for (int i = 0; i < 200; ++i) {
      upsert.push_back(static_cast<int64_t>(maker.rng()() % 600));
    }
    for (int i = 0; i < 20; ++i) {
      upsert.push_back(600 + round * 20 + i);
    }
    t.Write(maker.Batch(upsert, shifts[round]));
  }
  EXPECT_GT(t.queries(), 1000);
}

std::shared_ptr<arrow::Schema> SmallSchema() {
  return arrow::schema({arrow::field("k", arrow::int64(), /*nullable=*/false),
                        arrow::field("v", arrow::int64()), arrow::field("s", arrow::utf8())});
}

int64_t Count(SqlEngine& sql, const std::string& where) {
  auto result = sql.Query("SELECT count(*)::BIGINT FROM t WHERE " + where);
  EXPECT_TRUE(result.ok()) << result.status().ToString();
  if (!result.ok()) {
    return -1;
  }
  auto scalar = (*result)->column(0)->GetScalar(0).ValueOrDie();
  return std::static_pointer_cast<arrow::Int64Scalar>(scalar)->value;
}

TEST(ScanStatistics, FollowsUpsertsThatMoveTheBounds) {
  LiveAndNative t(SmallSchema());
  t.Write(BatchOf(SmallSchema(), {"[1, 2, 3]", "[10, 20, 30]", R"(["b", "c", "d"])"}));
  auto& sql = t.sql();
  EXPECT_EQ(Count(sql, "v >= 30"), 1);
  EXPECT_EQ(Count(sql, "v > 30"), 0);
  EXPECT_EQ(Count(sql, "s <= 'b'"), 1);

  // The row holding the max is replaced: its old value is dead, not gone.
  t.Write(BatchOf(SmallSchema(), {"[3]", "[5]", R"(["a"])"}));
  EXPECT_EQ(Count(sql, "v >= 30"), 0);
  EXPECT_EQ(Count(sql, "v <= 5"), 1);
  EXPECT_EQ(Count(sql, "v < 5"), 0);
  EXPECT_EQ(Count(sql, "s = 'a'"), 1);
  EXPECT_EQ(Count(sql, "s < 'b'"), 1);

  // New extremes, a longer string sharing an 8-byte prefix, and nulls.
  t.Write(BatchOf(SmallSchema(), {"[4, 5]", "[100, null]",
                                  R"(["zzzzzzzzzz", "zzzzzzzz"])"}));
  EXPECT_EQ(Count(sql, "v = 100"), 1);
  EXPECT_EQ(Count(sql, "v > 99"), 1);
  EXPECT_EQ(Count(sql, "v IS NULL"), 1);
  EXPECT_EQ(Count(sql, "s > 'zzzzzzzz'"), 1);
  EXPECT_EQ(Count(sql, "s >= 'zzzzzzzz'"), 2);
  EXPECT_EQ(Count(sql, "length(s) = 10"), 1);
  for (const char* where : {"v >= 30", "v > 99", "v IS NULL", "s > 'zzzzzzzz'", "v < 5"}) {
    t.ExpectSame(std::string("SELECT k FROM t WHERE ") + where);
  }
  t.ExpectSame("SELECT s, count(*) FROM t GROUP BY s");
}

std::string Explain(SqlEngine& sql, const std::string& query) {
  auto result = sql.Query("EXPLAIN " + query);
  EXPECT_TRUE(result.ok()) << result.status().ToString();
  if (!result.ok()) {
    return "";
  }
  std::string text;
  for (const auto& row : sqltest::RowStrings(**result)) {
    text += row + "\n";
  }
  return text;
}

// The statistics reach DuckDB's optimizer: a filter outside a column's bounds
// (but inside its type's range) becomes an empty result without a scan, for
// every type we describe.
TEST(ScanStatistics, LetDuckDBPruneFiltersOutsideTheBounds) {
  LiveAndNative t(AllTypesSchema());
  t.Write(BatchOf(AllTypesSchema(),
                  {"[1, 2, 3]", "[1, -2, null]", "[100, 200, 300]", "[5, 6, 7]", "[5, 6, 7]",
                   "[1, 2, 3]", "[1, 2, 3]", "[1, 2, 3]", "[1, 2, 3]", "[1.5, 2.5, null]",
                   "[1.5, -2.5, 3]", "[19000, 19001, 19002]",
                   "[1700000000, 1700000001, 1700000002]",
                   "[1700000000000, 1700000001000, 1700000002000]",
                   "[1700000000000000, 1700000001000000, 1700000002000000]",
                   "[1700000000000000000, 1700000001000000000, 1700000002000000000]",
                   "[1700000000000000, 1700000001000000, 1700000002000000]",
                   R"(["a", "bb", null])", R"(["x", "yy", "zzz"])", R"(["n", "s", "n"])",
                   "[true, false, null]"}));
  const std::vector<std::string> impossible = {
      "i8 > 50",
      "i16 > 1000",
      "i32 > 1000",
      "i64 > 1000",
      "u8 > 50",
      "u16 > 1000",
      "u32 > 1000",
      "u64 > 1000",
      "f32 > 100",
      "f64 < -100",
      "d > DATE '2030-01-01'",
      "ts_s > TIMESTAMP_S '2030-01-01 00:00:00'",
      "ts_ms > TIMESTAMP_MS '2030-01-01 00:00:00'",
      "ts_us > TIMESTAMP '2030-01-01 00:00:00'",
      "ts_ns > TIMESTAMP_NS '2030-01-01 00:00:00'",
      "ts_tz > TIMESTAMPTZ '2030-01-01 00:00:00+00'",
  };
  for (const auto& where : impossible) {
    const std::string query = "SELECT k FROM t WHERE " + where;
    const std::string plan = Explain(t.sql(), query);
    EXPECT_NE(plan.find("EMPTY_RESULT"), std::string::npos) << query << ":\n" << plan;
    t.ExpectSame(query);
  }
  // DuckDB prunes no string comparisons with statistics, but it compresses
  // short strings to integers once their maximum length is known.
  for (const char* column : {"s", "ls"}) {
    const std::string query =
        std::string("SELECT ") + column + ", count(*) FROM t GROUP BY " + column;
    const std::string plan = Explain(t.sql(), query);
    EXPECT_NE(plan.find("__internal_compress_string"), std::string::npos) << query << ":\n"
                                                                          << plan;
    t.ExpectSame(query);
  }
  // The same filters at the bounds keep their rows.
  for (const auto& where : {"i8 >= 1", "u64 >= 3", "f64 <= -2.5", "s >= 'bb'", "ls >= 'zzz'",
                            "ts_ns >= TIMESTAMP_NS '2023-11-14 22:13:22'"}) {
    const std::string query = std::string("SELECT k FROM t WHERE ") + where;
    EXPECT_EQ(Explain(t.sql(), query).find("EMPTY_RESULT"), std::string::npos) << query;
    t.ExpectSame(query);
  }
}

TEST(ScanStatistics, LeaveQueryWithTablesAnsweringAsBefore) {
  auto sql = SqlEngine::Make().ValueOrDie();
  auto batch = BatchOf(SmallSchema(), {"[1]", "[10]", R"(["x"])"});
  auto table = arrow::Table::FromRecordBatches({batch}).ValueOrDie();
  ASSERT_OK_AND_ASSIGN(auto result,
                       sql->QueryWith("SELECT count(*) FROM b WHERE v > 5", {{"b", table}}));
  EXPECT_EQ(sqltest::RowStrings(*result), std::vector<std::string>{"1"});
}

}  // namespace
}  // namespace rill
