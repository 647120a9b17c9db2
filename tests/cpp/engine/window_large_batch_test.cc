// Randomized differential test of WindowOperator with large batches over many
// keys (gid blocks of many sizes, CodeMap growth, prefetched probes, and for
// hopping the radix-ordered path: batches of >= 1024 rows with a group key),
// against DuckDB computing the same windows with plain SQL.
//
// Each sequence picks a tumbling or hopping window (hopping with 2, 3 to 6
// and more windows per row, so both the window maps and the one-probe
// RecentGroups path run), a key (one integer with nulls, or an integer and a
// string), a key count of up to 50,000 and an event rate, then consumes
// batches of 1,000 to 12,000 rows (some rows far behind the watermark, some
// without a time) and emits after each. The reference applies the watermark
// rule itself (a row is late when its time is below the watermark of the
// previous Emit; after it, watermark = max(watermark, max on-time time -
// lateness)) and computes every window over the on-time rows; the rows
// emitted so far (then those of Flush) must equal the windows whose end <=
// watermark as a multiset, and each Emit must return its windows in start
// order.
//
// RILL_WINDOW_LARGE_ITERATIONS sets the number of sequences (default 12),
// RILL_WINDOW_LARGE_SEED the first seed.
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

std::shared_ptr<arrow::Schema> Schema() {
  return arrow::schema({arrow::field("t", arrow::float64()), arrow::field("k", arrow::int64()),
                        arrow::field("s", arrow::utf8()), arrow::field("v", arrow::float64()),
                        arrow::field("i", arrow::int64())});
}

// One output row as text: bounds in microseconds, keys, aggregates.
std::multiset<std::string> RowsOf(const arrow::Table& table, std::vector<int64_t>* starts) {
  std::multiset<std::string> out;
  auto batch = table.CombineChunksToBatch().ValueOrDie();
  for (int64_t r = 0; r < batch->num_rows(); ++r) {
    std::ostringstream row;
    for (int c = 0; c < batch->num_columns(); ++c) {
      auto scalar = batch->column(c)->GetScalar(r).ValueOrDie();
      if (c < 2) {
        const double sec = std::static_pointer_cast<arrow::DoubleScalar>(scalar)->value;
        const int64_t us = std::llround(sec * 1e6);
        if (c == 0 && starts) starts->push_back(us);
        row << (c == 1 ? "|" : "") << us;
      } else if (!scalar->is_valid) {
        row << "|NULL";
      } else if (scalar->type->id() == arrow::Type::DOUBLE) {
        // The test's values are integers, so sums and picks are exact.
        row << "|" << std::llround(std::static_pointer_cast<arrow::DoubleScalar>(scalar)->value);
      } else {
        row << "|" << scalar->ToString();
      }
    }
    out.insert(row.str());
  }
  return out;
}

class LargeBatchDifferential {
 public:
  explicit LargeBatchDifferential(uint64_t seed) : rng_(seed), seed_(seed), con_(db_) {}

  void Run() {
    auto pick = [&](int64_t n) { return std::uniform_int_distribution<int64_t>(0, n - 1)(rng_); };
    const bool hopping = pick(2) == 0;
    slide_ms_ = 500 * (1 + pick(4));
    const int per_row = hopping ? std::vector<int>{2, 3, 4, 6, 9}[pick(5)] : 1;
    size_ms_ = slide_ms_ * per_row;
    lateness_ms_ = 250 * pick(5);
    string_key_ = pick(3) == 0;
    keys_ = std::vector<int64_t>{50, 2000, 50000}[pick(3)];
    rate_ = std::vector<int64_t>{500, 5000, 50000}[pick(3)];  // events per second
    std::ostringstream d;
    d << "seed " << seed_ << (hopping ? " hopping" : " tumbling") << " size_ms=" << size_ms_
      << " slide_ms=" << slide_ms_ << " lateness_ms=" << lateness_ms_ << " keys=" << keys_
      << " rate=" << rate_ << " string_key=" << string_key_;
    describe_ = d.str();

    WindowSpec spec;
    spec.kind = hopping ? WindowKind::kHopping : WindowKind::kTumbling;
    spec.time_column = "t";
    spec.size_seconds = size_ms_ / 1000.0;
    spec.slide_seconds = slide_ms_ / 1000.0;
    spec.allowed_lateness_seconds = lateness_ms_ / 1000.0;
    spec.group_by = {"k"};
    if (string_key_) spec.group_by.push_back("s");
    for (const auto& [out, expr] : std::vector<std::pair<std::string, std::string>>{
             {"n", "count(*)"}, {"cv", "count(v)"}, {"sv", "sum(v)"}, {"si", "sum(i)"},
             {"mn", "min(v)"}, {"mx", "max(i)"}, {"fv", "first(v)"}, {"li", "last(i)"},
             {"cd", "count(DISTINCT i)"}}) {
      spec.aggregations.push_back(ParseWindowAggregation(out, expr).ValueOrDie());
    }
    auto op = WindowOperator::Make(spec, Schema(), nullptr);
    ASSERT_TRUE(op.ok()) << op.status().ToString();
    op_ = std::move(*op);
    Exec("CREATE TABLE ev (tu BIGINT, k BIGINT, s VARCHAR, v DOUBLE, i BIGINT, seq BIGINT)");

    const int batches = static_cast<int>(3 + pick(6));
    for (int b = 0; b < batches && !::testing::Test::HasFailure(); ++b) {
      Batch(static_cast<int64_t>(1000 + pick(11001)));
      auto out = op_->Emit(/*now=*/b);
      ASSERT_TRUE(out.ok()) << out.status().ToString();
      std::vector<int64_t> starts;
      for (auto& row : RowsOf(**out, &starts)) actual_.insert(row);
      ASSERT_TRUE(std::is_sorted(starts.begin(), starts.end()))
          << describe_ << ": an Emit's windows are not in start order";
      Compare(watermark_us_, "after batch " + std::to_string(b));
    }
    if (::testing::Test::HasFailure()) return;
    auto flushed = op_->Flush();
    ASSERT_TRUE(flushed.ok()) << flushed.status().ToString();
    for (auto& row : RowsOf(**flushed, nullptr)) actual_.insert(row);
    Compare(INT64_MAX, "after Flush");
    EXPECT_EQ(op_->stats().groups_open, 0);
  }

 private:
  void Batch(int64_t rows) {
    auto pick = [&](int64_t n) { return std::uniform_int_distribution<int64_t>(0, n - 1)(rng_); };
    arrow::DoubleBuilder t, v;
    arrow::Int64Builder k, i;
    arrow::StringBuilder s;
    duckdb::Appender appender(con_, "ev");
    int64_t batch_max = INT64_MIN;
    for (int64_t r = 0; r < rows; ++r) {
      // Event time in milliseconds: advancing at rate_, up to 1.5 s of
      // disorder, one row in 50 far behind.
      const int64_t now_ms = base_ms_ + (next_seq_ * 1000) / rate_;
      const int64_t tms = now_ms - (pick(50) == 0 ? pick(20000) : pick(1500));
      const bool null_t = pick(200) == 0;
      const bool null_k = pick(100) == 0;
      const bool null_v = pick(8) == 0;
      const bool null_i = pick(8) == 0;
      const int64_t kv = pick(keys_);
      const std::string sv = "s" + std::to_string(pick(3));
      const double vv = static_cast<double>(pick(1000) - 300);  // integers: exact sums
      const int64_t iv = pick(20);
      EXPECT_TRUE((null_t ? t.AppendNull() : t.Append(tms / 1000.0)).ok());
      EXPECT_TRUE((null_k ? k.AppendNull() : k.Append(kv)).ok());
      EXPECT_TRUE((s.Append(sv)).ok());
      EXPECT_TRUE((null_v ? v.AppendNull() : v.Append(vv)).ok());
      EXPECT_TRUE((null_i ? i.AppendNull() : i.Append(iv)).ok());
      const int64_t tus = tms * 1000;
      if (!null_t && tus >= watermark_us_) {
        batch_max = std::max(batch_max, tus);
        appender.BeginRow();
        appender.Append<int64_t>(tus);
        if (null_k) {
          appender.Append(duckdb::Value());
        } else {
          appender.Append<int64_t>(kv);
        }
        appender.Append(duckdb::Value(sv));
        if (null_v) {
          appender.Append(duckdb::Value());
        } else {
          appender.Append<double>(vv);
        }
        if (null_i) {
          appender.Append(duckdb::Value());
        } else {
          appender.Append<int64_t>(iv);
        }
        appender.Append<int64_t>(next_seq_);
        appender.EndRow();
      }
      ++next_seq_;
    }
    appender.Close();
    std::vector<std::shared_ptr<arrow::Array>> cols(5);
    EXPECT_TRUE((t.Finish(&cols[0])).ok());
    EXPECT_TRUE((k.Finish(&cols[1])).ok());
    EXPECT_TRUE((s.Finish(&cols[2])).ok());
    EXPECT_TRUE((v.Finish(&cols[3])).ok());
    EXPECT_TRUE((i.Finish(&cols[4])).ok());
    auto status = op_->Consume(arrow::RecordBatch::Make(Schema(), rows, cols), 0, nullptr);
    ASSERT_TRUE(status.ok()) << status.ToString();
    if (batch_max != INT64_MIN) {
      max_t_us_ = std::max(max_t_us_, batch_max);
      watermark_us_ = std::max(watermark_us_, max_t_us_ - lateness_ms_ * 1000);
    }
  }

  void Compare(int64_t watermark_us, const std::string& when) {
    const std::string S = std::to_string(size_ms_ * 1000);
    const std::string L = std::to_string(slide_ms_ * 1000);
    const std::string keys = string_key_ ? "k, s" : "k";
    const std::string sql =
        "WITH w AS (SELECT ev.*, r.ws FROM ev, LATERAL (SELECT unnest(range(ev.tu - ((ev.tu % " +
        L + ") + " + L + ") % " + L + ", ev.tu - " + S + ", -" + L +
        ")) AS ws) AS r) SELECT concat_ws('|', ws, ws + " + S + ", " +
        (string_key_ ? "coalesce(CAST(k AS VARCHAR), 'NULL'), s" : "coalesce(CAST(k AS VARCHAR), 'NULL')") +
        ", count(*), count(v), coalesce(CAST(CAST(sum(v) AS BIGINT) AS VARCHAR), 'NULL'), "
        "coalesce(CAST(sum(i) AS VARCHAR), 'NULL'), coalesce(CAST(CAST(min(v) AS BIGINT) AS VARCHAR), 'NULL'), "
        "coalesce(CAST(max(i) AS VARCHAR), 'NULL'), coalesce(CAST(CAST(arg_min(v, tu * 1000000 + seq) "
        "FILTER (WHERE v IS NOT NULL) AS BIGINT) AS VARCHAR), 'NULL'), coalesce(CAST(arg_max(i, tu * "
        "1000000 + seq) FILTER (WHERE i IS NOT NULL) AS VARCHAR), 'NULL'), count(DISTINCT i)) "
        "FROM w GROUP BY ws, " + keys + " HAVING ws + " + S + " <= " +
        std::to_string(watermark_us);
    auto want = con_.Query(sql);
    ASSERT_FALSE(want->HasError()) << want->GetError() << "\n" << sql;
    std::multiset<std::string> expected;
    for (duckdb::idx_t r = 0; r < want->RowCount(); ++r) {
      expected.insert(want->GetValue(0, r).ToString());
    }
    if (actual_ == expected) return;
    std::ostringstream diff;
    int shown = 0;
    for (const auto& a : actual_) {
      if (!expected.count(a) && shown++ < 10) diff << "  only in rill:   " << a << "\n";
    }
    for (const auto& e : expected) {
      if (!actual_.count(e) && shown++ < 20) diff << "  only in duckdb: " << e << "\n";
    }
    FAIL() << describe_ << " " << when << ": " << actual_.size() << " rows, expected "
           << expected.size() << "\n" << diff.str();
  }

  void Exec(const std::string& sql) {
    auto r = con_.Query(sql);
    ASSERT_FALSE(r->HasError()) << r->GetError() << "\n" << sql;
  }

  std::mt19937_64 rng_;
  uint64_t seed_;
  std::string describe_;
  int64_t size_ms_ = 0, slide_ms_ = 0, lateness_ms_ = 0, keys_ = 0, rate_ = 0;
  bool string_key_ = false;
  duckdb::DuckDB db_{nullptr};
  duckdb::Connection con_;
  std::unique_ptr<WindowOperator> op_;
  std::multiset<std::string> actual_;
  int64_t base_ms_ = 1000000000;
  int64_t next_seq_ = 0;
  int64_t watermark_us_ = INT64_MIN;
  int64_t max_t_us_ = INT64_MIN;
};

TEST(WindowLargeBatchDifferential, MatchesDuckDbWithManyKeysPerWindow) {
  const int64_t iterations = EnvInt("RILL_WINDOW_LARGE_ITERATIONS", 12);
  const int64_t seed = EnvInt("RILL_WINDOW_LARGE_SEED", 1);
  for (int64_t i = 0; i < iterations && !::testing::Test::HasFailure(); ++i) {
    LargeBatchDifferential(static_cast<uint64_t>(seed + i)).Run();
  }
}

}  // namespace
}  // namespace rill
