// Shared helpers of the whole-workload benchmarks driven by bench/run.
//
// Each *_bench.cc program runs Rill and its competitor (DuckDB, used natively
// through its C++ API) on the same data in the same process, interleaving their
// repetitions so that noise on a shared machine hits both alike, and prints one
// JSON object per measurement on its own line (see Measurement).
//
// Threads: everything here is single-threaded; a benchmark owns all its objects.
#pragma once

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <arrow/api.h>
#include <arrow/c/bridge.h>

#include <duckdb.hpp>
#include <duckdb/function/table/arrow.hpp>

namespace rill::bench {

// ---------------------------------------------------------------------------
// Command line: --name value pairs and bare --flags.

/// Parsed `--key value` / `--flag` arguments.
class Args {
 public:
  Args(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i];
      if (a.rfind("--", 0) != 0) {
        continue;
      }
      a = a.substr(2);
      auto eq = a.find('=');
      if (eq != std::string::npos) {
        values_[a.substr(0, eq)] = a.substr(eq + 1);
      } else if (i + 1 < argc && std::strncmp(argv[i + 1], "--", 2) != 0) {
        values_[a] = argv[++i];
      } else {
        values_[a] = "1";
      }
    }
  }
  /// Return the integer value of `--name` (suffixes k and m allowed), or `fallback`.
  int64_t Int(const std::string& name, int64_t fallback) const {
    auto it = values_.find(name);
    if (it == values_.end()) {
      return fallback;
    }
    return ParseCount(it->second);
  }
  std::string Str(const std::string& name, const std::string& fallback) const {
    auto it = values_.find(name);
    return it == values_.end() ? fallback : it->second;
  }
  bool Flag(const std::string& name) const { return values_.count(name) > 0; }

  /// Parse "1000", "10k", "1m".
  static int64_t ParseCount(const std::string& text) {
    char* end = nullptr;
    double v = std::strtod(text.c_str(), &end);
    if (end && (*end == 'k' || *end == 'K')) {
      v *= 1e3;
    } else if (end && (*end == 'm' || *end == 'M')) {
      v *= 1e6;
    }
    return static_cast<int64_t>(v);
  }

 private:
  std::map<std::string, std::string> values_;
};

/// Return "1k", "10k", "1m", "10m" for a key count (used in measurement names).
inline std::string CountLabel(int64_t n) {
  if (n >= 1000000 && n % 1000000 == 0) {
    return std::to_string(n / 1000000) + "m";
  }
  if (n >= 1000 && n % 1000 == 0) {
    return std::to_string(n / 1000) + "k";
  }
  return std::to_string(n);
}

// ---------------------------------------------------------------------------
// Timing and statistics.

/// Return monotonic seconds.
inline double NowSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// Return the median of `v` (mean of the middle two for even sizes); NaN if empty.
inline double Median(std::vector<double> v) {
  if (v.empty()) {
    return std::nan("");
  }
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/// Abort the benchmark with a message (benchmarks have no caller to report to).
[[noreturn]] inline void Die(const std::string& what) {
  std::fprintf(stderr, "bench: %s\n", what.c_str());
  std::exit(1);
}

/// Return the value of `result` or die with its status.
template <typename T>
T Check(arrow::Result<T> result, const char* what) {
  if (!result.ok()) {
    Die(std::string(what) + ": " + result.status().ToString());
  }
  return std::move(result).ValueUnsafe();
}
inline void Check(const arrow::Status& status, const char* what) {
  if (!status.ok()) {
    Die(std::string(what) + ": " + status.ToString());
  }
}

/// Log progress to stderr (stdout carries only JSON lines).
template <typename... A>
void Log(const char* format, A... args) {
  std::fprintf(stderr, "[bench] ");
  std::fprintf(stderr, format, args...);
  std::fprintf(stderr, "\n");
}

// ---------------------------------------------------------------------------
// Output.

/// One measurement, printed as one JSON line. "ratio" is oriented so that bigger
/// is better for Rill (value/baseline for throughputs, baseline/value for times).
struct Measurement {
  std::string name;
  double value = 0;
  std::string unit;
  std::string baseline;  ///< empty: no competitor
  std::optional<double> baseline_value;
  std::optional<double> ratio;
  /// What "ratio" is relative to when there is no baseline (e.g. "target").
  std::string ratio_vs;
  /// Goals from the issue: `of` ("value" or "ratio") `op` (">=" or "<=") `value`.
  struct Target {
    std::string of;
    std::string op;
    double value;
  };
  std::vector<Target> targets;
  int reps = 0;
  std::vector<std::pair<std::string, std::string>> extra;  ///< string fields
  std::vector<std::pair<std::string, double>> extra_numbers;
  std::vector<std::pair<std::string, bool>> extra_bools;  ///< e.g. "correct"
};

inline std::string JsonString(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        out += c;
    }
  }
  return out + "\"";
}

inline std::string JsonNumber(double v) {
  if (!std::isfinite(v)) {
    return "null";
  }
  char buf[64];
  if (std::fabs(v) >= 1000) {
    std::snprintf(buf, sizeof(buf), "%.0f", v);
  } else {
    std::snprintf(buf, sizeof(buf), "%.4g", v);
  }
  return buf;
}

/// Print `m` as one JSON object on one line of stdout.
inline void Emit(const Measurement& m) {
  std::ostringstream o;
  o << "{\"name\": " << JsonString(m.name) << ", \"value\": " << JsonNumber(m.value)
    << ", \"unit\": " << JsonString(m.unit);
  if (!m.baseline.empty()) {
    o << ", \"baseline\": " << JsonString(m.baseline);
  }
  if (m.baseline_value) {
    o << ", \"baseline_value\": " << JsonNumber(*m.baseline_value);
  }
  if (m.ratio) {
    o << ", \"ratio\": " << JsonNumber(*m.ratio);
  }
  if (!m.ratio_vs.empty()) {
    o << ", \"ratio_vs\": " << JsonString(m.ratio_vs);
  }
  if (!m.targets.empty()) {
    o << ", \"targets\": [";
    for (size_t i = 0; i < m.targets.size(); ++i) {
      const auto& t = m.targets[i];
      double subject = t.of == "ratio" && m.ratio ? *m.ratio : m.value;
      bool met = t.op == "<=" ? subject <= t.value : subject >= t.value;
      o << (i ? ", " : "") << "{\"of\": " << JsonString(t.of) << ", \"op\": "
        << JsonString(t.op) << ", \"value\": " << JsonNumber(t.value)
        << ", \"met\": " << (met ? "true" : "false") << "}";
    }
    o << "]";
  }
  if (m.reps > 0) {
    o << ", \"reps\": " << m.reps;
  }
  for (const auto& [k, v] : m.extra_numbers) {
    o << ", " << JsonString(k) << ": " << JsonNumber(v);
  }
  for (const auto& [k, v] : m.extra) {
    o << ", " << JsonString(k) << ": " << JsonString(v);
  }
  for (const auto& [k, v] : m.extra_bools) {
    o << ", " << JsonString(k) << ": " << (v ? "true" : "false");
  }
  o << "}";
  std::printf("%s\n", o.str().c_str());
  std::fflush(stdout);
}

// ---------------------------------------------------------------------------
// Data: the benchmark schema is (key, price float64, region string, qty int64).

inline constexpr int kRegions = 16;

/// Return the benchmark schema; `string_keys` makes `key` a string.
inline std::shared_ptr<arrow::Schema> BenchSchema(bool string_keys) {
  return arrow::schema({arrow::field("key", string_keys ? arrow::utf8() : arrow::int64(),
                                     /*nullable=*/false),
                        arrow::field("price", arrow::float64()),
                        arrow::field("region", arrow::utf8()),
                        arrow::field("qty", arrow::int64())});
}

/// Return the string form of integer key `k` (fixed width, like an order id).
inline std::string StringKey(int64_t k) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "ord-%012" PRId64, k);
  return buf;
}

/// Return a batch whose keys are `keys` and whose values are random.
inline std::shared_ptr<arrow::RecordBatch> MakeBatch(const std::vector<int64_t>& keys,
                                                     bool string_keys, std::mt19937_64& rng) {
  static const std::vector<std::string> kRegionNames = [] {
    std::vector<std::string> names;
    const char* bases[] = {"north", "south", "east", "west"};
    for (int i = 0; i < kRegions; ++i) {
      names.push_back(std::string(bases[i % 4]) + "-" + std::to_string(i));
    }
    return names;
  }();
  const int64_t n = static_cast<int64_t>(keys.size());
  std::shared_ptr<arrow::Array> key_array;
  if (string_keys) {
    arrow::StringBuilder b;
    Check(b.Reserve(n), "reserve");
    Check(b.ReserveData(n * 16), "reserve");
    for (int64_t k : keys) {
      b.UnsafeAppend(StringKey(k));
    }
    key_array = Check(b.Finish(), "finish keys");
  } else {
    arrow::Int64Builder b;
    Check(b.AppendValues(keys), "append keys");
    key_array = Check(b.Finish(), "finish keys");
  }
  arrow::DoubleBuilder price;
  arrow::StringBuilder region;
  arrow::Int64Builder qty;
  Check(price.Reserve(n), "reserve");
  Check(region.Reserve(n), "reserve");
  Check(region.ReserveData(n * 8), "reserve");
  Check(qty.Reserve(n), "reserve");
  std::uniform_real_distribution<double> price_dist(1.0, 500.0);
  for (int64_t i = 0; i < n; ++i) {
    price.UnsafeAppend(std::round(price_dist(rng) * 100) / 100);
    region.UnsafeAppend(kRegionNames[rng() % kRegions]);
    qty.UnsafeAppend(static_cast<int64_t>(1 + rng() % 20));
  }
  return arrow::RecordBatch::Make(BenchSchema(string_keys), n,
                                  {key_array, Check(price.Finish(), "price"),
                                   Check(region.Finish(), "region"),
                                   Check(qty.Finish(), "qty")});
}

/// Return batches holding keys [0, n) in order, `batch_rows` rows each.
inline std::vector<std::shared_ptr<arrow::RecordBatch>> SequentialBatches(
    int64_t n, int64_t batch_rows, bool string_keys, std::mt19937_64& rng,
    int64_t first_key = 0) {
  std::vector<std::shared_ptr<arrow::RecordBatch>> out;
  std::vector<int64_t> keys;
  for (int64_t start = 0; start < n; start += batch_rows) {
    keys.clear();
    for (int64_t k = start; k < std::min(n, start + batch_rows); ++k) {
      keys.push_back(first_key + k);
    }
    out.push_back(MakeBatch(keys, string_keys, rng));
  }
  return out;
}

/// Return a batch of `rows` keys drawn uniformly (with repetition) from [0, n).
inline std::shared_ptr<arrow::RecordBatch> RandomKeyBatch(int64_t n, int64_t rows,
                                                          bool string_keys,
                                                          std::mt19937_64& rng) {
  std::vector<int64_t> keys(rows);
  std::uniform_int_distribution<int64_t> dist(0, n - 1);
  for (auto& k : keys) {
    k = dist(rng);
  }
  return MakeBatch(keys, string_keys, rng);
}

/// Return `batch` with an extra int64 column `seq` = first_seq + row index
/// (zero copy for the other columns). DuckDB uses it to keep the last row per key.
inline std::shared_ptr<arrow::RecordBatch> WithSeq(const std::shared_ptr<arrow::RecordBatch>& batch,
                                                   int64_t first_seq) {
  arrow::Int64Builder b;
  Check(b.Reserve(batch->num_rows()), "reserve");
  for (int64_t i = 0; i < batch->num_rows(); ++i) {
    b.UnsafeAppend(first_seq + i);
  }
  return Check(batch->AddColumn(batch->num_columns(), arrow::field("seq", arrow::int64()),
                                Check(b.Finish(), "seq")),
               "add seq");
}

/// Run `rill` and `other` (each returning a figure) in the order that
/// alternates with `rep` (Rill first on even repetitions), so that neither
/// always runs on a warmer or cooler machine; return {rill's, other's}.
template <typename A, typename B>
std::pair<double, double> RunAlternating(int rep, A&& rill, B&& other) {
  if (rep % 2 == 0) {
    const double r = rill();
    return {r, other()};
  }
  const double o = other();
  return {rill(), o};
}

// ---------------------------------------------------------------------------
// DuckDB side.

/// An Arrow stream factory for DuckDB's `arrow_scan_dumb` table function: every
/// scan streams the batches currently set (zero copy). Set batches between
/// queries to feed a prepared statement new data without re-binding.
class DuckArrowSource {
 public:
  explicit DuckArrowSource(std::shared_ptr<arrow::Schema> schema) : schema_(std::move(schema)) {}

  void Set(std::vector<std::shared_ptr<arrow::RecordBatch>> batches) {
    batches_ = std::move(batches);
  }
  void Set(std::shared_ptr<arrow::RecordBatch> batch) { batches_ = {std::move(batch)}; }

  /// Create (or replace) a temporary view `name` over this source on `con`.
  void CreateView(duckdb::Connection& con, const std::string& name) {
    con.TableFunction("arrow_scan_dumb",
                      {duckdb::Value::POINTER(reinterpret_cast<uintptr_t>(this)),
                       duckdb::Value::POINTER(reinterpret_cast<uintptr_t>(&Produce)),
                       duckdb::Value::POINTER(reinterpret_cast<uintptr_t>(&GetSchema))})
        ->CreateView(name, /*replace=*/true, /*temporary=*/true);
  }

 private:
  static duckdb::unique_ptr<duckdb::ArrowArrayStreamWrapper> Produce(
      uintptr_t factory, duckdb::ArrowStreamParameters& /*parameters*/) {
    auto* self = reinterpret_cast<DuckArrowSource*>(factory);
    auto reader = Check(arrow::RecordBatchReader::Make(self->batches_, self->schema_),
                        "make reader");
    auto wrapper = duckdb::make_uniq<duckdb::ArrowArrayStreamWrapper>();
    Check(arrow::ExportRecordBatchReader(reader, &wrapper->arrow_array_stream), "export");
    wrapper->number_of_rows = -1;
    return wrapper;
  }
  static void GetSchema(ArrowArrayStream* factory, ArrowSchema& schema) {
    auto* self = reinterpret_cast<DuckArrowSource*>(factory);
    Check(arrow::ExportSchema(*self->schema_, &schema), "export schema");
  }

  std::shared_ptr<arrow::Schema> schema_;
  std::vector<std::shared_ptr<arrow::RecordBatch>> batches_;
};

/// Run `sql` on `con` or die with DuckDB's message.
inline void DuckRun(duckdb::Connection& con, const std::string& sql) {
  auto result = con.Query(sql);
  if (result->HasError()) {
    Die("duckdb: " + result->GetError() + " in: " + sql);
  }
}

/// Prepare `sql` on `con` or die with DuckDB's message.
inline duckdb::unique_ptr<duckdb::PreparedStatement> DuckPrepare(duckdb::Connection& con,
                                                                 const std::string& sql) {
  auto stmt = con.Prepare(sql);
  if (stmt->HasError()) {
    Die("duckdb prepare: " + stmt->GetError() + " in: " + sql);
  }
  return stmt;
}

/// Execute a prepared statement (with `params`) and die on error.
inline void DuckExecute(duckdb::PreparedStatement& stmt,
                        duckdb::vector<duckdb::Value> params = {}) {
  auto result = stmt.Execute(params, /*allow_stream_result=*/false);
  if (result->HasError()) {
    Die("duckdb execute: " + result->GetError());
  }
}

/// Return a single BIGINT result of `sql`.
inline int64_t DuckScalar(duckdb::Connection& con, const std::string& sql) {
  auto result = con.Query(sql);
  if (result->HasError()) {
    Die("duckdb: " + result->GetError() + " in: " + sql);
  }
  return result->GetValue(0, 0).GetValue<int64_t>();
}

}  // namespace rill::bench
