// Randomized differential test of the window aggregates kept in one record per
// group (NumericRecords: count(*), count, sum, avg, min, max of numeric
// columns), against DuckDB over the same rows.
//
// Each sequence picks a tumbling, hopping or session window and consumes
// batches of rows with an int32 column `i` and a float64 column `v` (both with
// nulls; `v` in quarters, so every sum is exact), a key `k` with nulls and a
// few distinct values (groups take many rows; sessions merge when a late row
// bridges two), in random time order. Aggregates over one column share words
// of its record (the non-null count, the double sum of sum and avg), and an
// integer column has an integer sum beside avg's double sum. Allowed lateness
// is so large that no window closes before Flush; the rows of Flush must equal
// DuckDB's windows over every row.
//
// RILL_WINDOW_RECORDS_ITERATIONS sets the number of sequences (default 30),
// RILL_WINDOW_RECORDS_SEED the first seed.
#include <cstdio>
#include <cstdlib>
#include <random>
#include <set>
#include <sstream>

#include <arrow/api.h>
#include <gtest/gtest.h>

#include "duckdb.hpp"
#include "rill/engine/window_operator.h"

namespace rill {
namespace {

int64_t EnvInt(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v ? std::atoll(v) : fallback;
}

std::string Num(double d) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.6f", d);
  return buf;
}

// Output columns after the bounds and the key, and whether each is a double.
const std::vector<std::pair<std::string, std::string>> kAggs = {
    {"n", "count(*)"}, {"ci", "count(i)"}, {"si", "sum(i)"}, {"ai", "avg(i)"},
    {"mni", "min(i)"}, {"mxi", "max(i)"},  {"cv", "count(v)"}, {"sv", "sum(v)"},
    {"av", "avg(v)"},  {"mnv", "min(v)"}, {"mxv", "max(v)"}};

std::multiset<std::string> RowsOf(const arrow::Table& table) {
  std::multiset<std::string> out;
  auto batch = table.CombineChunksToBatch().ValueOrDie();
  for (int64_t r = 0; r < batch->num_rows(); ++r) {
    std::ostringstream row;
    for (int c = 0; c < batch->num_columns(); ++c) {
      auto scalar = batch->column(c)->GetScalar(r).ValueOrDie();
      if (c > 0) row << "|";
      if (!scalar->is_valid) {
        row << "NULL";
      } else if (c < 2) {  // bounds: seconds -> microseconds
        row << std::llround(std::static_pointer_cast<arrow::DoubleScalar>(scalar)->value * 1e6);
      } else if (scalar->type->id() == arrow::Type::DOUBLE) {
        row << Num(std::static_pointer_cast<arrow::DoubleScalar>(scalar)->value);
      } else {
        auto as64 = scalar->CastTo(arrow::int64()).ValueOrDie();
        row << std::static_pointer_cast<arrow::Int64Scalar>(as64)->value;
      }
    }
    out.insert(row.str());
  }
  return out;
}

class RecordsDifferential {
 public:
  explicit RecordsDifferential(uint64_t seed) : rng_(seed), seed_(seed), con_(db_) {}

  void Run() {
    auto pick = [&](int64_t n) { return std::uniform_int_distribution<int64_t>(0, n - 1)(rng_); };
    const int kind = static_cast<int>(pick(3));
    const int64_t slide_ms = 500 * (1 + pick(4));
    const int64_t size_ms = kind == 1 ? slide_ms * (2 + pick(4)) : slide_ms;
    const int64_t gap_ms = 200 * (1 + pick(10));
    const int64_t keys = 1 + pick(20);
    const int64_t span_ms = 2000 + pick(60000);  // event times fall in [base, base + span)
    std::ostringstream d;
    d << "seed " << seed_ << " kind=" << kind << " size_ms=" << size_ms
      << " slide_ms=" << slide_ms << " gap_ms=" << gap_ms << " keys=" << keys
      << " span_ms=" << span_ms;
    const std::string describe = d.str();

    WindowSpec spec;
    spec.kind = kind == 0 ? WindowKind::kTumbling
                : kind == 1 ? WindowKind::kHopping
                            : WindowKind::kSession;
    spec.time_column = "t";
    spec.size_seconds = size_ms / 1000.0;
    spec.slide_seconds = slide_ms / 1000.0;
    spec.gap_seconds = gap_ms / 1000.0;
    spec.allowed_lateness_seconds = 1e9;  // nothing closes before Flush
    spec.group_by = {"k"};
    for (const auto& [out, expr] : kAggs) {
      spec.aggregations.push_back(ParseWindowAggregation(out, expr).ValueOrDie());
    }
    auto schema = arrow::schema({arrow::field("t", arrow::float64()),
                                 arrow::field("k", arrow::int64()),
                                 arrow::field("i", arrow::int32()),
                                 arrow::field("v", arrow::float64())});
    auto made = WindowOperator::Make(spec, schema, nullptr);
    ASSERT_TRUE(made.ok()) << made.status().ToString();
    auto op = std::move(*made);
    Exec("CREATE TABLE ev (tu BIGINT, k BIGINT, i INTEGER, v DOUBLE)");

    const int64_t base_ms = 1000000000;
    duckdb::Appender appender(con_, "ev");
    const int batches = static_cast<int>(1 + pick(6));
    for (int b = 0; b < batches; ++b) {
      const int64_t n = 1 + pick(b % 2 == 0 ? 3000 : 50);
      arrow::DoubleBuilder t, v;
      arrow::Int64Builder k;
      arrow::Int32Builder i;
      for (int64_t r = 0; r < n; ++r) {
        const int64_t ms = base_ms + pick(span_ms);
        const bool k_null = pick(15) == 0, i_null = pick(5) == 0, v_null = pick(4) == 0;
        const int64_t kv = pick(keys);
        const int32_t iv = static_cast<int32_t>(pick(2001) - 1000);
        const double vv = static_cast<double>(pick(801) - 400) / 4;
        ASSERT_TRUE(t.Append(ms / 1000.0).ok());
        ASSERT_TRUE((k_null ? k.AppendNull() : k.Append(kv)).ok());
        ASSERT_TRUE((i_null ? i.AppendNull() : i.Append(iv)).ok());
        ASSERT_TRUE((v_null ? v.AppendNull() : v.Append(vv)).ok());
        appender.AppendRow(
            duckdb::Value::BIGINT(ms * 1000),
            k_null ? duckdb::Value(duckdb::LogicalType::BIGINT) : duckdb::Value::BIGINT(kv),
            i_null ? duckdb::Value(duckdb::LogicalType::INTEGER) : duckdb::Value::INTEGER(iv),
            v_null ? duckdb::Value(duckdb::LogicalType::DOUBLE) : duckdb::Value::DOUBLE(vv));
      }
      auto batch = arrow::RecordBatch::Make(
          schema, n, {t.Finish().ValueOrDie(), k.Finish().ValueOrDie(), i.Finish().ValueOrDie(),
                      v.Finish().ValueOrDie()});
      ASSERT_TRUE(op->Consume(batch, /*now=*/b, nullptr).ok());
      auto emitted = op->Emit(/*now=*/b);
      ASSERT_TRUE(emitted.ok()) << emitted.status().ToString();
      ASSERT_EQ((*emitted)->num_rows(), 0) << describe << ": a window closed early";
    }
    appender.Close();
    auto flushed = op->Flush();
    ASSERT_TRUE(flushed.ok()) << flushed.status().ToString();
    const auto actual = RowsOf(**flushed);

    const std::string aggs =
        "count(*), count(i), sum(i), avg(i), min(i), max(i), count(v), sum(v), avg(v), "
        "min(v), max(v)";
    std::string sql;
    if (spec.kind == WindowKind::kSession) {
      const std::string gap = std::to_string(gap_ms * 1000);
      sql = "WITH o AS (SELECT *, CASE WHEN tu - lag(tu) OVER (PARTITION BY k ORDER BY tu) < " +
            gap + " THEN 0 ELSE 1 END AS brk FROM ev), s AS (SELECT *, sum(brk) OVER "
            "(PARTITION BY k ORDER BY tu ROWS UNBOUNDED PRECEDING) AS sid FROM o) "
            "SELECT min(tu), max(tu) + " + gap + ", k, " + aggs + " FROM s GROUP BY k, sid";
    } else {
      const std::string S = std::to_string(size_ms * 1000), L = std::to_string(slide_ms * 1000);
      sql = "WITH w AS (SELECT ev.*, unnest(range(tu - ((tu % " + L + ") + " + L + ") % " + L +
            ", tu - " + S + ", -" + L + ")) AS ws FROM ev) SELECT ws, ws + " + S + ", k, " +
            aggs + " FROM w GROUP BY ws, k";
    }
    auto want = con_.Query(sql);
    ASSERT_FALSE(want->HasError()) << want->GetError() << "\n" << sql;
    std::multiset<std::string> expected;
    for (duckdb::idx_t r = 0; r < want->RowCount(); ++r) {
      std::ostringstream row;
      for (duckdb::idx_t c = 0; c < want->ColumnCount(); ++c) {
        const duckdb::Value value = want->GetValue(c, r);
        if (c > 0) row << "|";
        const auto id = value.type().id();
        if (value.IsNull()) {
          row << "NULL";
        } else if (id == duckdb::LogicalTypeId::DOUBLE) {
          row << Num(value.GetValue<double>());
        } else {
          row << value.GetValue<int64_t>();
        }
      }
      expected.insert(row.str());
    }
    if (actual == expected) return;
    std::ostringstream diff;
    int shown = 0;
    for (const auto& a : actual) {
      if (!expected.count(a) && shown++ < 10) diff << "  only in rill:   " << a << "\n";
    }
    for (const auto& e : expected) {
      if (!actual.count(e) && shown++ < 20) diff << "  only in duckdb: " << e << "\n";
    }
    FAIL() << describe << ": " << actual.size() << " rows, expected " << expected.size() << "\n"
           << diff.str();
  }

 private:
  void Exec(const std::string& sql) {
    auto r = con_.Query(sql);
    ASSERT_FALSE(r->HasError()) << r->GetError() << "\n" << sql;
  }

  std::mt19937_64 rng_;
  uint64_t seed_;
  duckdb::DuckDB db_{nullptr};
  duckdb::Connection con_;
};

TEST(WindowNumericRecords, MatchDuckDbForEveryWindowKind) {
  const int64_t iterations = EnvInt("RILL_WINDOW_RECORDS_ITERATIONS", 30);
  const int64_t seed = EnvInt("RILL_WINDOW_RECORDS_SEED", 1);
  for (int64_t i = 0; i < iterations && !::testing::Test::HasFailure(); ++i) {
    RecordsDifferential(static_cast<uint64_t>(seed + i)).Run();
  }
}

}  // namespace
}  // namespace rill
