// Incremental views against DuckDB: random sequences of upserts and deletes
// over random tables, a random query of a maintainable shape, and after every
// step the maintained output must equal DuckDB running the query over the same
// tables. Doubles are compared to 9 significant digits (the view sums them as
// long doubles, with retractions; DuckDB sums them in another order);
// integer and decimal sums are exact (128-bit).
//
// RILL_IVM_SEQUENCES sets the number of sequences (default 2000; 300 in
// sanitized builds, which are about 6x slower).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <arrow/api.h>
#include <gtest/gtest.h>

#include "rill/common/row_ops.h"
#include "rill/engine/task.h"
#include "rill/sql/sql_engine.h"
#include "rill/table/live_table.h"
#include "table/test_util.h"

namespace rill {
namespace {

#define ASSERT_OK_T(expr)                                 \
  do {                                                    \
    auto _st = (expr);                                    \
    ASSERT_TRUE(_st.ok()) << #expr << ": " << _st.ToString(); \
  } while (0)

std::vector<std::string> Rows(const arrow::Table& t) {
  auto combined = t.CombineChunks().ValueOrDie();
  std::vector<std::string> rows;
  for (int64_t r = 0; r < combined->num_rows(); ++r) {
    std::string row;
    for (int c = 0; c < combined->num_columns(); ++c) {
      const auto name = combined->schema()->field(c)->name();
      if (name == "z_insert_ts" || name == "z_update_ts") continue;
      auto scalar = combined->column(c)->GetScalar(r).ValueOrDie();
      if (!scalar->is_valid) {
        row += "NULL|";
      } else if (scalar->type->id() == arrow::Type::DOUBLE) {
        char buf[64];
        double v = std::static_pointer_cast<arrow::DoubleScalar>(scalar)->value;
        if (std::abs(v) < 1e-9) v = 0;
        std::snprintf(buf, sizeof(buf), "%.9g", v);
        row += std::string(buf) + "|";
      } else {
        row += scalar->ToString() + "|";
      }
    }
    rows.push_back(row);
  }
  std::sort(rows.begin(), rows.end());
  return rows;
}

struct Fixture {
  std::unique_ptr<SqlEngine> sql;
  std::shared_ptr<LiveTable> a, b, c;
};

std::string Pick(std::mt19937_64& rng, const std::vector<std::string>& options) {
  return options[rng() % options.size()];
}

// A random query of the supported shapes.
std::string RandomQuery(std::mt19937_64& rng) {
  const std::vector<std::string> where = {"", " WHERE a.x > 3", " WHERE a.y IS NOT NULL",
                                          " WHERE a.g1 <> 'b'"};
  std::vector<std::string> aggs = {"count(*) AS n",     "sum(a.x) AS s",   "avg(a.x) AS av",
                                   "min(a.x) AS mn",    "max(a.x) AS mx",  "count(DISTINCT a.x) AS cd",
                                   "sum(a.y) AS sy",    "min(a.g1) AS mg", "max(a.y) AS my",
                                   "count(a.y) AS cy",  "sum(a.x * 2 + 1) AS s2"};
  std::shuffle(aggs.begin(), aggs.end(), rng);
  const size_t take = 1 + rng() % 4;
  std::string agg_list;
  for (size_t i = 0; i < take; ++i) agg_list += (i ? ", " : "") + aggs[i];
  const std::vector<std::vector<std::string>> group_sets = {
      {"a.g1"}, {"a.g2"}, {"a.g1", "a.g2"}, {}, {"a.g2 % 3"}};
  auto groups = group_sets[rng() % group_sets.size()];
  std::string gsel, gby;
  for (size_t i = 0; i < groups.size(); ++i) {
    gsel += groups[i] + " AS k" + std::to_string(i) + ", ";
    gby += (i ? ", " : "") + groups[i];
  }
  const std::string w = Pick(rng, where);
  switch (rng() % 8) {
    case 0:
    case 1:
      return "SELECT " + gsel + agg_list + " FROM a" + w + (gby.empty() ? "" : " GROUP BY " + gby);
    case 2:
      if (gby.empty()) gby = "a.g1", gsel = "a.g1 AS k0, ";
      return "SELECT " + gsel + agg_list + " FROM a" + w + " GROUP BY " + gby +
             " HAVING count(*) > 1";
    case 3:
      return "SELECT a.id, a.g1, a.x * 2 AS x2, a.y FROM a" + w;
    case 4:
      return "SELECT " + gsel + "b.c AS bc, count(*) AS n, sum(b.w) AS sw, max(a.x) AS mx FROM a "
             "JOIN b ON a.fk = b.k" + w + " GROUP BY " + gby + (gby.empty() ? "" : ", ") + "b.c";
    case 5:
      return "SELECT a.id, b.bid, a.x, b.w FROM a JOIN b ON a.fk = b.k" + w;
    case 6:
      return "SELECT " + gsel + "count(*) AS n, count(b.bid) AS nb, sum(b.w) AS sw FROM a LEFT "
             "JOIN b ON a.fk = b.k" + w + (gby.empty() ? "" : " GROUP BY " + gby);
    default:
      return "SELECT " + gsel + "c.name AS cn, count(*) AS n, sum(a.x) AS s FROM a JOIN b ON "
             "a.fk = b.k JOIN c ON b.cid = c.cid" + w + " GROUP BY " + gby +
             (gby.empty() ? "" : ", ") + "c.name";
  }
}

std::string Json(const std::vector<std::string>& values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) out += (i ? "," : "") + values[i];
  return out + "]";
}

// One random write to table `t` (keyed by its first column): upserts and deletes.
void RandomWrite(std::mt19937_64& rng, LiveTable& t, int key_range, double now) {
  const auto& schema = t.user_schema();
  const int rows = 1 + static_cast<int>(rng() % 6);
  std::vector<std::vector<std::string>> columns(schema->num_fields() + 1);
  for (int r = 0; r < rows; ++r) {
    const bool del = rng() % 4 == 0;
    columns[0].push_back(std::to_string(rng() % key_range));
    for (int c = 1; c < schema->num_fields(); ++c) {
      const auto& f = schema->field(c);
      std::string v;
      if (rng() % 7 == 0) {
        v = "null";
      } else if (f->type()->id() == arrow::Type::STRING) {
        v = "\"" + std::string(1, static_cast<char>('a' + rng() % 4)) + "\"";
      } else if (f->type()->id() == arrow::Type::DOUBLE) {
        v = std::to_string(static_cast<double>(rng() % 1000) / 8.0);
      } else {
        v = std::to_string(static_cast<int64_t>(rng() % 12) - 2);
      }
      columns[c].push_back(v);
    }
    columns.back().push_back(del ? "1" : "0");
  }
  auto fields = schema->fields();
  fields.push_back(arrow::field(kWriteOpColumn, arrow::int8()));
  std::vector<std::string> json;
  for (auto& col : columns) json.push_back(Json(col));
  auto batch = test::BatchOf(arrow::schema(fields), json);
  auto st = t.Write(batch, now);
  ASSERT_TRUE(st.ok()) << st.status().ToString();
}

void RunSequence(uint64_t seed, int* maintained, int* refused) {
  std::mt19937_64 rng(seed);
  Fixture f;
  f.sql = SqlEngine::Make().ValueOrDie();
  auto x_type = (rng() % 2) ? arrow::int64() : arrow::int32();
  auto a_schema = arrow::schema({arrow::field("id", arrow::int64(), false),
                                 arrow::field("g1", arrow::utf8()), arrow::field("g2", arrow::int64()),
                                 arrow::field("x", x_type), arrow::field("y", arrow::float64()),
                                 arrow::field("fk", arrow::int64())});
  auto b_schema = arrow::schema({arrow::field("bid", arrow::int64(), false),
                                 arrow::field("k", arrow::int64()), arrow::field("c", arrow::utf8()),
                                 arrow::field("w", arrow::int64()), arrow::field("cid", arrow::int64())});
  auto c_schema = arrow::schema({arrow::field("cid", arrow::int64(), false),
                                 arrow::field("name", arrow::utf8())});
  TableOptions keyed_a, keyed_b, keyed_c;
  keyed_a.primary_key = {"id"};
  keyed_b.primary_key = {"bid"};
  keyed_c.primary_key = {"cid"};
  f.a = LiveTable::Make("a", a_schema, keyed_a).ValueOrDie();
  f.b = LiveTable::Make("b", b_schema, keyed_b).ValueOrDie();
  f.c = LiveTable::Make("c", c_schema, keyed_c).ValueOrDie();
  for (auto& t : {f.a, f.b, f.c}) ASSERT_OK_T(f.sql->RegisterTable(t));
  const std::string query = RandomQuery(rng);
  auto task = std::make_shared<ScheduledSqlTask>("v", query, "out", 0.0, std::vector<std::string>{},
                                                 false, std::nullopt, IncrementalMode::kOn);
  std::shared_ptr<LiveTable> out;
  double now = 1000;
  const int steps = 3 + static_cast<int>(rng() % 5);
  for (int step = 0; step < steps; ++step) {
    now += 1;
    if (step > 0 || rng() % 2) {
      const int writes = 1 + static_cast<int>(rng() % 3);
      for (int w = 0; w < writes; ++w) {
        const int which = static_cast<int>(rng() % 3);
        if (which == 0) RandomWrite(rng, *f.a, 12, now);
        if (which == 1) RandomWrite(rng, *f.b, 8, now);
        if (which == 2) RandomWrite(rng, *f.c, 5, now);
      }
    }
    auto output = task->Run(*f.sql, now);
    ASSERT_TRUE(output.ok()) << "seed " << seed << " query " << query << ": "
                             << output.status().ToString();
    if (output->table != nullptr) {
      if (out == nullptr) {
        TableOptions options;
        options.primary_key = output->key;
        auto schema = output->table->schema();
        if (int op = schema->GetFieldIndex(kWriteOpColumn); op >= 0) schema = *schema->RemoveField(op);
        out = LiveTable::Make("out", schema, options).ValueOrDie();
        ASSERT_OK_T(f.sql->RegisterTable(out));
      }
      auto st = output->replace ? out->ReplaceState(output->table, now).status()
                                : out->Write(output->table, now).status();
      ASSERT_TRUE(st.ok()) << "seed " << seed << " query " << query << ": " << st.ToString();
    }
    auto expected = f.sql->Query(query);
    ASSERT_TRUE(expected.ok()) << expected.status().ToString();
    std::vector<std::string> got;
    if (out != nullptr) got = Rows(*out->snapshot()->ToTable().ValueOrDie());
    if (std::getenv("RILL_IVM_DEBUG")) {
      for (const auto& t : {f.a, f.b}) {
        std::fprintf(stderr, "step %d table %s:\n", step, t->name().c_str());
        for (const auto& r : Rows(*t->snapshot()->ToTable().ValueOrDie())) std::fprintf(stderr, "  %s\n", r.c_str());
      }
      for (const auto& r : got) std::fprintf(stderr, "  got %s\n", r.c_str());
    }
    ASSERT_EQ(got, Rows(**expected)) << "seed " << seed << " step " << step << "\nquery: " << query;
  }
  ++*maintained;
  (void)refused;
}

TEST(IvmDifferential, MatchesDuckDbAfterEveryStep) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  int sequences = 300;  // sanitized builds (CI): about as long as 2,000 in a release build
#else
  int sequences = 2000;
#endif
  if (const char* env = std::getenv("RILL_IVM_SEQUENCES")) sequences = std::atoi(env);
  int maintained = 0, refused = 0;
  uint64_t first = 0x1f2e3d;
  if (const char* env = std::getenv("RILL_IVM_FIRST_SEED")) first = std::strtoull(env, nullptr, 10);
  for (int s = 0; s < sequences; ++s) {
    RunSequence(first + static_cast<uint64_t>(s), &maintained, &refused);
    if (::testing::Test::HasFatalFailure()) return;
  }
  EXPECT_EQ(maintained, sequences);
}

}  // namespace
}  // namespace rill
