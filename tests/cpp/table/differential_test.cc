// Randomized differential test: LiveTable against a DuckDB reference built from
// plain SQL.
//
// Each sequence picks a table shape (key kind, mode, retention, time column
// type, compaction settings) and runs random steps: writes of one to three
// batches, retention passes, compactions and clock moves. After EVERY step the
// live table (snapshot()->ToTable()) must equal the reference as a multiset of
// rows, system timestamps included.
//
// The reference keeps the same columns plus `seq`, the write sequence:
//   upsert   = dedupe the write (last row per key wins, PARTITION BY treats
//              NULLs as equal), take z_insert_ts from the existing row matched
//              with IS NOT DISTINCT FROM, DELETE the matches, INSERT;
//   max_age  = DELETE WHERE time < now - max_age (NULL times stay);
//   max_rows = then DELETE rows whose seq is not among the newest N, i.e. the
//              table keeps the newest N writes among the rows not expired;
//   delete   = DELETE the rows whose key matches (issue 25): LiveTable::Delete,
//              and writes whose operation column (row_ops.h) mixes upserts,
//              deletes and truncations, applied run by run in order, with
//              retention once at the end of the write as the table does.
//
// RILL_DIFF_ITERATIONS sets the number of sequences (default 2000, and 100 for
// the ordered comparison), RILL_DIFF_STEPS the steps per sequence (default:
// each sequence draws 5 to 15), RILL_DIFF_SEED the first seed (sequence i
// uses seed + i), RILL_DIFF_PROFILE=1 prints where the time went. A failure
// prints the seed, the step, the recent steps and the differing rows.
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <set>
#include <cstdlib>
#include <deque>
#include <map>
#include <optional>
#include <random>
#include <sstream>

#include <arrow/api.h>
#include <gtest/gtest.h>

#include "duckdb.hpp"
#include "rill/table/live_table.h"
#include "rill/common/row_ops.h"
#include "table/test_util.h"

namespace rill {
namespace {

using test::FormatDouble;

enum class KeyKind { kNone, kInt, kString, kDictString, kComposite };
enum class EvKind { kFloat64, kInt64, kTsS, kTsMs, kTsUs, kTsNs };

/// Time spent per reference statement, printed when RILL_DIFF_PROFILE is set.
std::map<std::string, std::pair<double, int64_t>>& Profile() {
  static std::map<std::string, std::pair<double, int64_t>> profile;
  return profile;
}

struct Timer {
  explicit Timer(std::string name) : name(std::move(name)), start(std::chrono::steady_clock::now()) {}
  ~Timer() {
    auto& entry = Profile()[name];
    entry.first += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    entry.second++;
  }
  std::string name;
  std::chrono::steady_clock::time_point start;
};

const char* KeyKindName(KeyKind k) {
  switch (k) {
    case KeyKind::kNone: return "none";
    case KeyKind::kInt: return "int64";
    case KeyKind::kString: return "string";
    case KeyKind::kDictString: return "dictionary<string>";
    case KeyKind::kComposite: return "(int64,string)";
  }
  return "?";
}

struct Config {
  KeyKind key = KeyKind::kInt;
  TableMode mode = TableMode::kSnapshot;
  std::optional<int64_t> max_rows;
  std::optional<double> max_age;
  bool age_on_event_time = false;
  EvKind ev = EvKind::kFloat64;
  std::string ev_tz;
  int64_t auto_compact_chunks = 32;
  double compact_dead_fraction = 0.5;
  int64_t target_chunk_rows = 1024;
  int key_domain = 10;

  bool keyed() const { return mode == TableMode::kSnapshot && key != KeyKind::kNone; }
  std::vector<std::string> key_columns() const {
    switch (key) {
      case KeyKind::kNone: return {};
      case KeyKind::kInt: return {"k_int"};
      case KeyKind::kString:
      case KeyKind::kDictString: return {"k_str"};
      case KeyKind::kComposite: return {"k_int", "k_str"};
    }
    return {};
  }
  int64_t per_second() const {
    switch (ev) {
      case EvKind::kFloat64: return 0;
      case EvKind::kInt64:
      case EvKind::kTsS: return 1;
      case EvKind::kTsMs: return 1000;
      case EvKind::kTsUs: return 1000000;
      case EvKind::kTsNs: return 1000000000;
    }
    return 0;
  }
  bool ev_whole_seconds() const { return ev == EvKind::kInt64 || ev == EvKind::kTsS; }
  std::shared_ptr<arrow::DataType> ev_type() const {
    switch (ev) {
      case EvKind::kFloat64: return arrow::float64();
      case EvKind::kInt64: return arrow::int64();
      case EvKind::kTsS: return arrow::timestamp(arrow::TimeUnit::SECOND, ev_tz);
      case EvKind::kTsMs: return arrow::timestamp(arrow::TimeUnit::MILLI, ev_tz);
      case EvKind::kTsUs: return arrow::timestamp(arrow::TimeUnit::MICRO, ev_tz);
      case EvKind::kTsNs: return arrow::timestamp(arrow::TimeUnit::NANO, ev_tz);
    }
    return nullptr;
  }
  std::shared_ptr<arrow::Schema> schema() const {
    auto k_str_type = key == KeyKind::kDictString ? arrow::dictionary(arrow::int32(), arrow::utf8())
                                                  : arrow::utf8();
    return arrow::schema({arrow::field("k_int", arrow::int64()), arrow::field("k_str", k_str_type),
                          arrow::field("v_int", arrow::int64()), arrow::field("v_str", arrow::utf8()),
                          arrow::field("ev", ev_type())});
  }
  std::string Describe() const {
    std::ostringstream out;
    out << "key=" << KeyKindName(key) << " mode=" << TableModeName(mode)
        << " keyed=" << keyed() << " max_rows="
        << (max_rows ? std::to_string(*max_rows) : "-")
        << " max_age=" << (max_age ? FormatDouble(*max_age) : "-")
        << " time_column=" << (age_on_event_time ? "ev" : "z_insert_ts")
        << " ev_type=" << ev_type()->ToString() << " auto_compact_chunks=" << auto_compact_chunks
        << " compact_dead_fraction=" << compact_dead_fraction
        << " target_chunk_rows=" << target_chunk_rows << " key_domain=" << key_domain;
    return out.str();
  }
};

struct Row {
  std::optional<int64_t> k_int;
  std::optional<std::string> k_str;
  std::optional<int64_t> v_int;
  std::optional<std::string> v_str;
  std::optional<double> ev_s;  // event time in unix seconds (whole or .5)
};

const std::vector<std::string> kWords = {"", "a", "b", "c", "dd", "eee", "o'k", "ü", "x y",
                                         "f", "g", "h", "ii", "jj", "kk", "ll"};

/// The reference: a DuckDB table driven with plain SQL. Written rows are
/// inserted into `stage` (rn = position in the write); prepared statements then
/// apply them to `ref`.
class Reference {
 public:
  Reference() : db_(nullptr), con_(db_) {
    Exec("SET threads = 1");
  }

  void Reset(const Config& config) {
    config_ = config;
    next_seq_ = 1;
    cached_.reset();
    statements_.clear();
    // One transaction per sequence, rolled back at the next Reset: per-statement
    // commits would dominate the run time.
    if (in_transaction_) Exec("ROLLBACK");
    const std::string ev_sql = config.per_second() == 0 ? "DOUBLE" : "BIGINT";
    Exec("CREATE OR REPLACE TABLE ref (k_int BIGINT, k_str VARCHAR, v_int BIGINT, v_str VARCHAR, "
         "ev_raw " + ev_sql + ", ev_s DOUBLE, z_insert_ts DOUBLE, z_update_ts DOUBLE, seq BIGINT)");
    Exec("CREATE OR REPLACE TABLE stage (rn BIGINT, k_int BIGINT, k_str VARCHAR, v_int BIGINT, "
         "v_str VARCHAR, ev_raw " + ev_sql + ", ev_s DOUBLE)");
    Exec("BEGIN TRANSACTION");
    in_transaction_ = true;

    Prepare("clear_stage", "DELETE FROM stage");
    if (config_.keyed()) {
      const auto keys = config_.key_columns();
      std::string partition, match;
      for (size_t i = 0; i < keys.size(); ++i) {
        partition += (i ? ", " : "") + keys[i];
        match += std::string(i ? " AND " : "") + "r." + keys[i] + " IS NOT DISTINCT FROM d." + keys[i];
      }
      // $1 = now, $2 = seq of the write's first row.
      // Insert the last row per key, keeping z_insert_ts of the row it replaces...
      Prepare("insert",
              "INSERT INTO ref SELECT d.k_int, d.k_str, d.v_int, d.v_str, d.ev_raw, d.ev_s, "
              "coalesce(r.z_insert_ts, $1), $1, $2 + d.rn "
              "FROM (SELECT * FROM stage QUALIFY row_number() OVER (PARTITION BY " + partition +
              " ORDER BY rn DESC) = 1) d LEFT JOIN ref r ON " + match);
      // ...then delete the replaced rows (the only older rows with a written key).
      Prepare("replace", "DELETE FROM ref r WHERE r.seq < $1 AND EXISTS (SELECT 1 FROM stage d WHERE " +
                             match + ")");
      Prepare("delete", "DELETE FROM ref r WHERE EXISTS (SELECT 1 FROM stage d WHERE " + match + ")");
    } else {
      Prepare("insert", "INSERT INTO ref SELECT k_int, k_str, v_int, v_str, ev_raw, ev_s, $1, $1, "
                        "$2 + rn FROM stage");
    }
    // Age first, then the newest max_rows of what is left. $1 = now - max_age.
    if (config_.max_age || config_.max_rows) {
      std::string aged = "false";
      if (config_.max_age) {
        const std::string column = config_.age_on_event_time ? "ev_s" : "z_insert_ts";
        aged = "coalesce(" + column + " < $1::DOUBLE, false)";
      }
      std::string where = aged;
      if (config_.max_rows) {
        where += " OR seq NOT IN (SELECT seq FROM ref WHERE NOT " + aged +
                 " ORDER BY seq DESC LIMIT " + std::to_string(*config_.max_rows) + ")";
      }
      Prepare("retention", "DELETE FROM ref WHERE " + where);
    }
  }

  void Write(const std::vector<Row>& rows, double now, bool retention = true) {
    Stage(rows);
    Run("insert", {duckdb::Value::DOUBLE(now), duckdb::Value::BIGINT(next_seq_)});
    if (config_.keyed()) Run("replace", {duckdb::Value::BIGINT(next_seq_)});
    next_seq_ += static_cast<int64_t>(rows.size());
    if (retention) ApplyRetention(now);
  }

  /// Delete the rows whose key is the key of one of `rows` (keyed tables).
  void Delete(const std::vector<Row>& rows) {
    Stage(rows);
    Run("delete", {});
  }

  void Truncate() {
    cached_.reset();
    Exec("DELETE FROM ref");
  }

 private:
  void Stage(const std::vector<Row>& rows) {
    cached_.reset();
    Run("clear_stage", {});
    {
      Timer timer("append stage");
      duckdb::Appender appender(con_, "stage");
      for (size_t i = 0; i < rows.size(); ++i) {
        const Row& r = rows[i];
        appender.BeginRow();
        appender.Append<int64_t>(static_cast<int64_t>(i));
        AppendInt(appender, r.k_int);
        AppendString(appender, r.k_str);
        AppendInt(appender, r.v_int);
        AppendString(appender, r.v_str);
        if (!r.ev_s) {
          appender.Append<std::nullptr_t>(nullptr);
          appender.Append<std::nullptr_t>(nullptr);
        } else {
          if (config_.per_second() == 0) {
            appender.Append<double>(*r.ev_s);
          } else {
            appender.Append<int64_t>(static_cast<int64_t>(*r.ev_s * config_.per_second()));
          }
          appender.Append<double>(*r.ev_s);
        }
        appender.EndRow();
      }
      appender.Close();
    }
  }

 public:
  void ApplyRetention(double now) {
    if (!config_.max_age && !config_.max_rows) return;
    cached_.reset();
    if (config_.max_age) {
      Run("retention", {duckdb::Value::DOUBLE(now - *config_.max_age)});
    } else {
      Run("retention", {});
    }
  }

  /// Rows as canonical strings, in write order.
  std::vector<std::string> Rows() {
    if (cached_) return *cached_;
    // A plain query: strings read from prepared-statement results came back garbled.
    Timer timer("rows");
    auto result = con_.Query(
        "SELECT k_int, k_str, v_int, v_str, ev_raw, z_insert_ts, z_update_ts FROM ref ORDER BY seq");
    std::vector<std::string> rows;
    if (result->HasError()) {
      ADD_FAILURE() << "reference SQL failed: " << result->GetError();
      return rows;
    }
    for (duckdb::idx_t r = 0; r < result->RowCount(); ++r) {
      std::string row;
      for (duckdb::idx_t c = 0; c < result->ColumnCount(); ++c) {
        if (c) row += "|";
        duckdb::Value v = result->GetValue(c, r);
        if (v.IsNull()) {
          row += "null";
          continue;
        }
        switch (v.type().id()) {
          case duckdb::LogicalTypeId::BIGINT:
            row += std::to_string(v.GetValue<int64_t>());
            break;
          case duckdb::LogicalTypeId::DOUBLE:
            row += FormatDouble(v.GetValue<double>());
            break;
          default:
            row += duckdb::StringValue::Get(v);
        }
      }
      rows.push_back(std::move(row));
    }
    cached_ = rows;
    return rows;
  }

 private:
  static void AppendInt(duckdb::Appender& appender, const std::optional<int64_t>& v) {
    if (v) {
      appender.Append<int64_t>(*v);
    } else {
      appender.Append<std::nullptr_t>(nullptr);
    }
  }
  static void AppendString(duckdb::Appender& appender, const std::optional<std::string>& s) {
    if (s) {
      appender.Append(s->c_str(), static_cast<uint32_t>(s->size()));
    } else {
      appender.Append<std::nullptr_t>(nullptr);
    }
  }
  void Exec(const std::string& sql) {
    Timer timer(sql.substr(0, 20));
    auto result = con_.Query(sql);
    if (result->HasError()) {
      ADD_FAILURE() << "reference SQL failed: " << result->GetError() << "\n" << sql;
    }
  }
  void Prepare(const std::string& name, const std::string& sql) {
    auto prepared = con_.Prepare(sql);
    if (prepared->HasError()) {
      ADD_FAILURE() << "reference SQL failed to prepare: " << prepared->GetError() << "\n" << sql;
    }
    statements_[name] = std::move(prepared);
  }
  duckdb::unique_ptr<duckdb::MaterializedQueryResult> Run(const std::string& name,
                                                       duckdb::vector<duckdb::Value> params) {
    Timer timer(name);
    auto& statement = statements_.at(name);
    auto result = statement->Execute(params, /*allow_stream_result=*/false);
    if (result->HasError()) {
      ADD_FAILURE() << "reference SQL '" << name << "' failed: " << result->GetError();
      return nullptr;
    }
    return duckdb::unique_ptr_cast<duckdb::QueryResult, duckdb::MaterializedQueryResult>(
        std::move(result));
  }

  duckdb::DuckDB db_;
  duckdb::Connection con_;
  Config config_;
  int64_t next_seq_ = 1;
  bool in_transaction_ = false;
  std::map<std::string, duckdb::unique_ptr<duckdb::PreparedStatement>> statements_;
  std::optional<std::vector<std::string>> cached_;  // rows until the next change
};

/// Build one Arrow batch of `rows` for `config` (a fresh dictionary per batch).
std::shared_ptr<arrow::RecordBatch> MakeBatch(const Config& config, const std::vector<Row>& rows) {
  arrow::Int64Builder k_int, v_int;
  arrow::StringBuilder k_str_plain, v_str;
  arrow::StringDictionary32Builder k_str_dict;
  std::unique_ptr<arrow::ArrayBuilder> ev_builder;
  auto ev_type = config.ev_type();
  if (!arrow::MakeBuilder(arrow::default_memory_pool(), ev_type, &ev_builder).ok()) return nullptr;
  auto ok = [](const arrow::Status& s) {
    if (!s.ok()) ADD_FAILURE() << s.ToString();
  };
  for (const Row& r : rows) {
    ok(r.k_int ? k_int.Append(*r.k_int) : k_int.AppendNull());
    if (config.key == KeyKind::kDictString) {
      ok(r.k_str ? k_str_dict.Append(*r.k_str) : k_str_dict.AppendNull());
    } else {
      ok(r.k_str ? k_str_plain.Append(*r.k_str) : k_str_plain.AppendNull());
    }
    ok(r.v_int ? v_int.Append(*r.v_int) : v_int.AppendNull());
    ok(r.v_str ? v_str.Append(*r.v_str) : v_str.AppendNull());
    if (!r.ev_s) {
      ok(ev_builder->AppendNull());
    } else if (config.per_second() == 0) {
      ok(static_cast<arrow::DoubleBuilder&>(*ev_builder).Append(*r.ev_s));
    } else {
      const int64_t raw = static_cast<int64_t>(*r.ev_s * config.per_second());
      if (config.ev == EvKind::kInt64) {
        ok(static_cast<arrow::Int64Builder&>(*ev_builder).Append(raw));
      } else {
        ok(static_cast<arrow::TimestampBuilder&>(*ev_builder).Append(raw));
      }
    }
  }
  std::vector<std::shared_ptr<arrow::Array>> columns(5);
  ok(k_int.Finish(&columns[0]));
  if (config.key == KeyKind::kDictString) {
    ok(k_str_dict.Finish(&columns[1]));
  } else {
    ok(k_str_plain.Finish(&columns[1]));
  }
  ok(v_int.Finish(&columns[2]));
  ok(v_str.Finish(&columns[3]));
  ok(ev_builder->Finish(&columns[4]));
  return arrow::RecordBatch::Make(config.schema(), static_cast<int64_t>(rows.size()), columns);
}

struct Options {
  int sequences = 2000;
  int steps = 0;  // 0: each sequence draws its length from [5, 15]
  uint64_t seed = 20260101;
  bool check_order = false;
};

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

class Sequence {
 public:
  Sequence(uint64_t seed, Reference* reference) : seed_(seed), rng_(seed), ref_(reference) {}

  /// Run `steps` random steps; return false (after reporting) at the first mismatch.
  bool Run(int steps, bool check_order) {
    if (steps <= 0) steps = Int(5, 15);
    PickConfig();
    ref_->Reset(config_);
    TableOptions options;
    options.primary_key = config_.key_columns();
    options.mode = config_.mode;
    if (config_.max_rows || config_.max_age) {
      RetentionPolicy policy;
      policy.max_rows = config_.max_rows;
      policy.max_age_seconds = config_.max_age;
      if (config_.age_on_event_time) policy.time_column = "ev";
      options.retention = policy;
    }
    options.auto_compact_chunks = config_.auto_compact_chunks;
    options.compact_dead_fraction = config_.compact_dead_fraction;
    options.target_chunk_rows = config_.target_chunk_rows;
    options.clock = clock_.clock();
    auto made = LiveTable::Make("diff", config_.schema(), options);
    if (!made.ok()) {
      ADD_FAILURE() << "seed " << seed_ << ": LiveTable::Make failed: " << made.status().ToString()
                    << "\nconfig: " << config_.Describe();
      return false;
    }
    table_ = *made;
    for (int step = 0; step < steps; ++step) {
      std::string what;
      bool ok;
      {
        Timer timer("live: step");
        ok = Step(&what);
      }
      if (!ok) {
        Report(step, what, "the operation failed");
        return false;
      }
      log_.push_back("step " + std::to_string(step) + ": " + what);
      if (log_.size() > 12) log_.pop_front();
      if (!Compare(step, what, check_order)) return false;
    }
    return true;
  }

 private:
  double Uniform() { return std::uniform_real_distribution<double>(0, 1)(rng_); }
  int Int(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  bool Chance(double p) { return Uniform() < p; }

  void PickConfig() {
    config_.key = static_cast<KeyKind>(Int(0, 4));
    const bool append = Chance(0.3);
    config_.mode = append ? TableMode::kAppend : TableMode::kSnapshot;
    const int retention = Int(0, 3);  // 0 none, 1 rows, 2 age, 3 both
    const bool need = append;
    const int kind = need && retention == 0 ? Int(1, 3) : retention;
    if (kind == 1 || kind == 3) config_.max_rows = Int(0, 40);
    if (kind == 2 || kind == 3) config_.max_age = Int(1, 12);
    config_.age_on_event_time = config_.max_age && Chance(0.5);
    config_.ev = static_cast<EvKind>(Int(0, 5));
    static const std::vector<std::string> kZones = {"", "UTC", "America/New_York", "+05:30"};
    config_.ev_tz = config_.ev >= EvKind::kTsS ? kZones[Int(0, 3)] : "";
    static const std::vector<int64_t> kAuto = {0, 1, 2, 4, 32};
    config_.auto_compact_chunks = kAuto[Int(0, 4)];
    config_.compact_dead_fraction = Int(0, 10) / 10.0;
    config_.target_chunk_rows = Chance(0.5) ? Int(1, 16) : 4096;
    config_.key_domain = Int(1, 24);
  }

  Row RandomRow() {
    Row r;
    const int domain = config_.key_domain;
    if (!Chance(0.08)) r.k_int = Int(0, domain - 1);
    if (!Chance(0.08)) r.k_str = kWords[Int(0, std::min<int>(domain, kWords.size()) - 1)];
    if (!Chance(0.2)) r.v_int = static_cast<int64_t>(rng_() % 2000000) - 1000000;
    if (!Chance(0.2)) r.v_str = kWords[Int(0, kWords.size() - 1)] + std::to_string(Int(0, 9));
    if (!Chance(0.08)) {
      // Whole or half seconds, from well past the age limit to the future;
      // the clock sits on .25/.75 so event times never tie with now - age.
      const double age = config_.max_age.value_or(10);
      double offset = Int(static_cast<int>(-4 * age), static_cast<int>(age)) +
                      (config_.ev_whole_seconds() ? 0.0 : 0.5 * Int(0, 1));
      r.ev_s = std::floor(clock_.now()) + offset;
    }
    return r;
  }

  bool Step(std::string* what) {
    const double p = Uniform();
    if (p < 0.6) {
      return config_.keyed() && Chance(0.35) ? WriteOps(what) : Write(what);
    }
    if (p < 0.67) {
      return DeleteKeys(what);
    }
    if (p < 0.78) {
      const double dt = 0.5 * Int(1, 12);
      clock_.Advance(dt);
      *what = "advance clock by " + FormatDouble(dt);
      return true;
    }
    if (p < 0.91) {
      clock_.Advance(0.5 * Int(0, 4));
      *what = "ApplyRetention at " + FormatDouble(clock_.now());
      auto expired = table_->ApplyRetention();
      if (!expired.ok()) {
        *what += ": " + expired.status().ToString();
        return false;
      }
      ref_->ApplyRetention(clock_.now());
      *what += " (expired " + std::to_string(*expired) + ")";
      return true;
    }
    const bool full = Chance(0.4);
    *what = std::string("Compact(full=") + (full ? "true" : "false") + ")";
    auto st = table_->Compact(full);
    if (!st.ok()) {
      *what += ": " + st.ToString();
      return false;
    }
    return true;
  }

  bool Write(std::string* what) {
    if (Chance(0.5)) clock_.Advance(0.5 * Int(0, 3));
    const int batches = Int(1, 3);
    std::vector<std::shared_ptr<arrow::RecordBatch>> arrow_batches;
    std::vector<Row> all;
    for (int b = 0; b < batches; ++b) {
      const int n = Chance(0.15) ? 0 : Int(1, 12);
      std::vector<Row> rows;
      for (int i = 0; i < n; ++i) rows.push_back(RandomRow());
      arrow_batches.push_back(MakeBatch(config_, rows));
      all.insert(all.end(), rows.begin(), rows.end());
    }
    if (all.empty()) {
      // Writes always carry rows: whether an empty write runs retention is not specified.
      std::vector<Row> rows = {RandomRow()};
      arrow_batches.push_back(MakeBatch(config_, rows));
      all = rows;
    }
    const double now = clock_.now();
    std::ostringstream out;
    out << "Write at " << FormatDouble(now) << " of " << arrow_batches.size() << " batches ("
        << all.size() << " rows):";
    for (const auto& batch : arrow_batches) {
      for (const auto& row : test::RowStrings(*arrow::Table::FromRecordBatches({batch}).ValueOrDie())) {
        out << " [" << row << "]";
      }
      out << " /";
    }
    *what = out.str();
    Result<WriteStats> stats;
    const int api = Int(0, 2);
    if (api == 0 && arrow_batches.size() == 1) {
      stats = table_->Write(arrow_batches[0]);
    } else if (api == 1) {
      auto t = arrow::Table::FromRecordBatches(config_.schema(), arrow_batches);
      if (!t.ok()) return false;
      stats = table_->Write(*t);
    } else {
      stats = table_->Write(arrow_batches);
    }
    if (!stats.ok()) {
      *what += " -> " + stats.status().ToString();
      return false;
    }
    if (stats->rows_in != static_cast<int64_t>(all.size())) {
      *what += " -> rows_in " + std::to_string(stats->rows_in);
      return false;
    }
    ref_->Write(all, now);
    return true;
  }

  /// LiveTable::Delete of random keys (present, absent, repeated); refused by
  /// tables that are not keyed, which must stay as they were.
  bool DeleteKeys(std::string* what) {
    std::vector<Row> keys;
    const int n = Int(1, 8);
    for (int i = 0; i < n; ++i) keys.push_back(RandomRow());
    auto batch = MakeBatch(config_, keys);
    std::ostringstream out;
    out << "Delete of " << n << " keys:";
    for (const auto& row : test::RowStrings(*arrow::Table::FromRecordBatches({batch}).ValueOrDie())) {
      out << " [" << row << "]";
    }
    if (config_.keyed() && Chance(0.5)) {
      // Only the key columns.
      std::vector<int> indices;
      for (const auto& k : config_.key_columns()) indices.push_back(batch->schema()->GetFieldIndex(k));
      batch = *batch->SelectColumns(indices);
      out << " (key columns only)";
    }
    *what = out.str();
    auto stats = table_->Delete(batch);
    if (!config_.keyed()) {
      if (stats.ok()) {
        *what += " -> accepted by a table that is not keyed";
        return false;
      }
      return true;
    }
    if (!stats.ok()) {
      *what += " -> " + stats.status().ToString();
      return false;
    }
    *what += " (deleted " + std::to_string(stats->deleted) + ", misses " +
             std::to_string(stats->delete_misses) + ")";
    ref_->Delete(keys);
    return true;
  }

  /// A write whose batches carry the operation column: upserts, deletes and
  /// (rarely) truncations, as strings or int8 codes, applied in order.
  bool WriteOps(std::string* what) {
    if (Chance(0.5)) clock_.Advance(0.5 * Int(0, 3));
    const int batches = Int(1, 3);
    std::vector<std::shared_ptr<arrow::RecordBatch>> arrow_batches;
    std::vector<std::pair<RowOp, Row>> all;
    const bool as_strings = Chance(0.5);
    for (int b = 0; b < batches; ++b) {
      const int n = Int(1, 12);
      std::vector<Row> rows;
      arrow::StringBuilder names;
      arrow::Int8Builder codes;
      for (int i = 0; i < n; ++i) {
        const double q = Uniform();
        const RowOp op = q < 0.6 ? RowOp::kUpsert : q < 0.97 ? RowOp::kDelete : RowOp::kTruncate;
        Row row = RandomRow();
        rows.push_back(row);
        all.emplace_back(op, row);
        static const std::vector<std::string> kUpserts = {"insert", "upsert", "update", "c", "u", "r"};
        const std::string name = op == RowOp::kUpsert ? kUpserts[Int(0, 5)]
                                 : op == RowOp::kDelete ? (Chance(0.5) ? "delete" : "d")
                                                        : "t";
        if (!names.Append(name).ok() || !codes.Append(static_cast<int8_t>(op)).ok()) return false;
      }
      std::shared_ptr<arrow::Array> ops;
      if (!(as_strings ? names.Finish(&ops) : codes.Finish(&ops)).ok()) return false;
      auto batch = MakeBatch(config_, rows);
      arrow_batches.push_back(*batch->AddColumn(batch->num_columns(), kWriteOpColumn, ops));
    }
    const double now = clock_.now();
    std::ostringstream out;
    out << "Write with ops at " << FormatDouble(now) << ":";
    for (const auto& [op, row] : all) {
      auto one = MakeBatch(config_, {row});
      out << " " << RowOpName(op) << "["
          << test::RowStrings(*arrow::Table::FromRecordBatches({one}).ValueOrDie())[0] << "]";
    }
    *what = out.str();
    auto stats = table_->Write(arrow_batches);
    if (!stats.ok()) {
      *what += " -> " + stats.status().ToString();
      return false;
    }
    if (stats->rows_in != static_cast<int64_t>(all.size())) {
      *what += " -> rows_in " + std::to_string(stats->rows_in);
      return false;
    }
    // The reference, run by run; retention once, at the end.
    size_t i = 0;
    while (i < all.size()) {
      size_t j = i + 1;
      while (j < all.size() && all[j].first == all[i].first) ++j;
      std::vector<Row> run;
      for (size_t k = i; k < j; ++k) run.push_back(all[k].second);
      switch (all[i].first) {
        case RowOp::kUpsert: ref_->Write(run, now, /*retention=*/false); break;
        case RowOp::kDelete: ref_->Delete(run); break;
        default: ref_->Truncate(); break;
      }
      i = j;
    }
    ref_->ApplyRetention(now);
    return true;
  }

  bool Compare(int step, const std::string& what, bool check_order) {
    Timer timer("compare (all)");
    auto version = table_->snapshot();
    auto live_table = version->ToTable();
    if (!live_table.ok()) {
      Report(step, what, "ToTable failed: " + live_table.status().ToString());
      return false;
    }
    auto live = test::RowStrings(**live_table, {"k_int", "k_str", "v_int", "v_str", "ev",
                                                "z_insert_ts", "z_update_ts"});
    auto expected = ref_->Rows();
    if (version->num_rows() != static_cast<int64_t>(live.size())) {
      Report(step, what, "num_rows() " + std::to_string(version->num_rows()) + " but ToTable has " +
                             std::to_string(live.size()) + " rows");
      return false;
    }
    if (check_order) {
      if (live != expected) {
        Report(step, what, "rows differ in order or content", live, expected);
        return false;
      }
      return true;
    }
    auto live_sorted = live, expected_sorted = expected;
    std::sort(live_sorted.begin(), live_sorted.end());
    std::sort(expected_sorted.begin(), expected_sorted.end());
    if (live_sorted != expected_sorted) {
      Report(step, what, "rows differ as multisets", live, expected);
      return false;
    }
    return true;
  }

  void Report(int step, const std::string& what, const std::string& problem,
              const std::vector<std::string>& live = {},
              const std::vector<std::string>& expected = {}) {
    std::ostringstream out;
    out << "MISMATCH seed=" << seed_ << " step=" << step << ": " << problem
        << "\n  reproduce: RILL_DIFF_SEED=" << seed_ << " RILL_DIFF_ITERATIONS=1"
        << "\n  config: " << config_.Describe() << "\n  recent steps:\n";
    for (const auto& line : log_) out << "    " << line << "\n";
    out << "    step " << step << ": " << what << "\n";
    std::multiset<std::string> l(live.begin(), live.end()), e(expected.begin(), expected.end());
    int shown = 0;
    for (const auto& row : l) {
      if (e.count(row) < l.count(row) && shown++ < 20) out << "  only in live table:  " << row << "\n";
    }
    shown = 0;
    for (const auto& row : e) {
      if (l.count(row) < e.count(row) && shown++ < 20) out << "  only in reference:   " << row << "\n";
    }
    out << "  (rows: k_int|k_str|v_int|v_str|ev|z_insert_ts|z_update_ts; live " << live.size()
        << " rows, reference " << expected.size() << ")\n";
    if (l == e && live != expected) {
      out << "  same multiset, different order; live order:\n";
      for (size_t i = 0; i < live.size() && i < 30; ++i) {
        out << "    " << live[i] << (i < expected.size() && expected[i] != live[i] ? "   <> " + expected[i] : "")
            << "\n";
      }
    }
    ADD_FAILURE() << out.str();
  }

  uint64_t seed_;
  std::mt19937_64 rng_;
  Reference* ref_;
  Config config_;
  test::FakeClock clock_{1'700'000'000.25};
  std::shared_ptr<LiveTable> table_;
  std::deque<std::string> log_;
};

void RunDifferential(Options options) {
  options.sequences = EnvInt("RILL_DIFF_ITERATIONS", options.sequences);
  options.steps = EnvInt("RILL_DIFF_STEPS", options.steps);
  if (const char* seed = std::getenv("RILL_DIFF_SEED"); seed && *seed) {
    options.seed = std::strtoull(seed, nullptr, 10);
  }
  Reference reference;
  int failures = 0;
  for (int i = 0; i < options.sequences; ++i) {
    Sequence sequence(options.seed + i, &reference);
    if (!sequence.Run(options.steps, options.check_order)) {
      if (++failures >= 3) {
        ADD_FAILURE() << "stopping after 3 failing sequences";
        break;
      }
    }
  }
  if (std::getenv("RILL_DIFF_PROFILE")) {
    for (const auto& [name, entry] : Profile()) {
      std::printf("%-24s %8.3f s %8lld calls\n", name.c_str(), entry.first,
                  static_cast<long long>(entry.second));
    }
  }
  EXPECT_EQ(failures, 0) << "first seed " << options.seed << ", " << options.sequences
                         << " sequences of " << (options.steps > 0 ? std::to_string(options.steps) : "5 to 15")
                         << " steps";
}

TEST(LiveTableDifferential, MatchesADuckDbReferenceAfterEveryStep) {
  RunDifferential(Options{});
}

TEST(LiveTableDifferential, KeepsRowsInWriteOrder) {
  // ToTable() promises write order (oldest first); compare ordered rows.
  Options options;
  options.sequences = 100;
  options.seed = 777000;
  options.check_order = true;
  RunDifferential(options);
}

}  // namespace
}  // namespace rill
