// LiveTable::PrepareKeys: a key index built ahead of ReplaceState (checkpoint
// restore, issue 29) gives the state and the index the unprepared
// ReplaceState builds: random chunked states with duplicate and null keys,
// compared row for row and through the writes that follow.
#include <random>

#include <arrow/api.h>
#include <gtest/gtest.h>

#include "rill/table/live_table.h"
#include "rill/table/live_table_internal.h"
#include "table/test_util.h"

namespace rill {
namespace {

using test::SortedRows;

constexpr double kT0 = 1'700'000'000.0;

enum class KeyKind { kInt, kString, kComposite };

std::shared_ptr<arrow::Schema> UserSchema() {
  return arrow::schema({arrow::field("id", arrow::int64()), arrow::field("name", arrow::utf8()),
                        arrow::field("v", arrow::float64())});
}

std::vector<std::string> KeyOf(KeyKind kind) {
  switch (kind) {
    case KeyKind::kInt: return {"id"};
    case KeyKind::kString: return {"name"};
    default: return {"id", "name"};
  }
}

// `rows` random rows over few keys (so duplicates within and across chunks),
// some keys null; with the system columns when `system`.
std::shared_ptr<arrow::RecordBatch> RandomBatch(std::mt19937_64* rng, int64_t rows, bool system) {
  arrow::Int64Builder ids;
  arrow::StringBuilder names;
  arrow::DoubleBuilder values, ins, upd;
  for (int64_t i = 0; i < rows; ++i) {
    const uint64_t r = (*rng)();
    if (r % 13 == 0) {
      (void)ids.AppendNull();
    } else {
      (void)ids.Append(static_cast<int64_t>(r % 23));
    }
    if ((r >> 8) % 17 == 0) {
      (void)names.AppendNull();
    } else {
      (void)names.Append("k" + std::to_string((r >> 16) % 7));
    }
    (void)values.Append(static_cast<double>((r >> 24) % 1000));
    (void)ins.Append(kT0 - static_cast<double>((r >> 32) % 100));
    (void)upd.Append(kT0 - static_cast<double>((r >> 40) % 50));
  }
  std::vector<std::shared_ptr<arrow::Array>> columns(system ? 5 : 3);
  (void)ids.Finish(&columns[0]);
  (void)names.Finish(&columns[1]);
  (void)values.Finish(&columns[2]);
  auto schema = UserSchema();
  if (system) {
    (void)ins.Finish(&columns[3]);
    (void)upd.Finish(&columns[4]);
    schema = arrow::schema({schema->field(0), schema->field(1), schema->field(2),
                            arrow::field("z_insert_ts", arrow::float64()),
                            arrow::field("z_update_ts", arrow::float64())});
  }
  return arrow::RecordBatch::Make(schema, rows, columns);
}

std::shared_ptr<LiveTable> MakeTable(KeyKind kind) {
  TableOptions options;
  options.primary_key = KeyOf(kind);
  options.mode = TableMode::kSnapshot;
  return LiveTable::Make("t", UserSchema(), options).ValueOrDie();
}

std::vector<std::string> Rows(const LiveTable& table) {
  return SortedRows(*table.snapshot()->ToTable().ValueOrDie());
}

void ExpectSameStats(const WriteStats& a, const WriteStats& b) {
  EXPECT_EQ(a.inserted, b.inserted);
  EXPECT_EQ(a.updated, b.updated);
  EXPECT_EQ(a.deleted, b.deleted);
  EXPECT_EQ(a.expired, b.expired);
}

TEST(PreparedKeys, GiveTheStateAndIndexOfAnUnpreparedReplaceState) {
  int adopted = 0;
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    const auto kind = static_cast<KeyKind>(seed % 3);
    const bool system = seed % 2 == 0;
    std::vector<std::shared_ptr<arrow::RecordBatch>> chunks;
    const int nchunks = 1 + static_cast<int>(rng() % 5);
    for (int c = 0; c < nchunks; ++c) {
      chunks.push_back(RandomBatch(&rng, static_cast<int64_t>(rng() % 40), system));
    }
    auto state = arrow::Table::FromRecordBatches(chunks[0]->schema(), chunks).ValueOrDie();
    auto plain = MakeTable(kind);
    auto fast = MakeTable(kind);
    RILL_ASSERT_OK_AND_ASSIGN(auto prepared,
                              LiveTable::PrepareKeys(*UserSchema(), KeyOf(kind), *state));
    ASSERT_NE(prepared, nullptr);
    RILL_ASSERT_OK_AND_ASSIGN(auto a, plain->ReplaceState(state, kT0));
    RILL_ASSERT_OK_AND_ASSIGN(auto b, fast->ReplaceState(state, kT0, prepared));
    adopted += prepared->index == nullptr;
    ExpectSameStats(a, b);
    ASSERT_EQ(Rows(*plain), Rows(*fast));
    // The index: later upserts and deletes meet the same keys.
    for (int step = 0; step < 3; ++step) {
      auto batch = RandomBatch(&rng, 1 + static_cast<int64_t>(rng() % 30), false);
      RILL_ASSERT_OK_AND_ASSIGN(auto wa, plain->Write(batch, kT0 + 1 + step));
      RILL_ASSERT_OK_AND_ASSIGN(auto wb, fast->Write(batch, kT0 + 1 + step));
      ExpectSameStats(wa, wb);
      auto keys = RandomBatch(&rng, 5, false);
      RILL_ASSERT_OK_AND_ASSIGN(auto da, plain->Delete(keys, kT0 + 2 + step));
      RILL_ASSERT_OK_AND_ASSIGN(auto db, fast->Delete(keys, kT0 + 2 + step));
      ExpectSameStats(da, db);
      ASSERT_EQ(Rows(*plain), Rows(*fast));
    }
  }
  EXPECT_EQ(adopted, 60);  // every prepared index was taken
}

TEST(PreparedKeys, AreIgnoredByATableThatHeldRowsOrByOtherChunks) {
  std::mt19937_64 rng(7);
  auto first = arrow::Table::FromRecordBatches({RandomBatch(&rng, 30, false)}).ValueOrDie();
  auto second = arrow::Table::FromRecordBatches(
                    {RandomBatch(&rng, 20, false), RandomBatch(&rng, 25, false)})
                    .ValueOrDie();
  auto plain = MakeTable(KeyKind::kInt);
  auto fast = MakeTable(KeyKind::kInt);
  RILL_ASSERT_OK(plain->ReplaceState(first, kT0));
  RILL_ASSERT_OK(fast->ReplaceState(first, kT0));
  RILL_ASSERT_OK_AND_ASSIGN(auto prepared,
                            LiveTable::PrepareKeys(*UserSchema(), {"id"}, *second));
  RILL_ASSERT_OK_AND_ASSIGN(auto a, plain->ReplaceState(second, kT0 + 1));
  RILL_ASSERT_OK_AND_ASSIGN(auto b, fast->ReplaceState(second, kT0 + 1, prepared));
  EXPECT_NE(prepared->index, nullptr);  // the table held rows: not taken
  ExpectSameStats(a, b);
  EXPECT_EQ(Rows(*plain), Rows(*fast));

  // Prepared over one chunk, given two: not taken either.
  auto combined = second->CombineChunks().ValueOrDie();
  RILL_ASSERT_OK_AND_ASSIGN(auto one_chunk,
                            LiveTable::PrepareKeys(*UserSchema(), {"id"}, *combined));
  auto fresh = MakeTable(KeyKind::kInt);
  auto fresh_plain = MakeTable(KeyKind::kInt);
  RILL_ASSERT_OK(fresh->ReplaceState(second, kT0 + 1, one_chunk));
  RILL_ASSERT_OK(fresh_plain->ReplaceState(second, kT0 + 1));
  EXPECT_NE(one_chunk->index, nullptr);
  EXPECT_EQ(Rows(*fresh), Rows(*fresh_plain));
}

TEST(PreparedKeys, AreNotBuiltForAMissingKeyColumnOrAnotherType) {
  std::mt19937_64 rng(3);
  auto state = arrow::Table::FromRecordBatches({RandomBatch(&rng, 10, false)}).ValueOrDie();
  RILL_ASSERT_OK_AND_ASSIGN(auto missing,
                            LiveTable::PrepareKeys(*UserSchema(), {"nope"}, *state));
  EXPECT_EQ(missing, nullptr);
  auto narrow = arrow::schema({arrow::field("id", arrow::int32())});
  RILL_ASSERT_OK_AND_ASSIGN(auto other_type, LiveTable::PrepareKeys(*narrow, {"id"}, *state));
  EXPECT_EQ(other_type, nullptr);
}

}  // namespace
}  // namespace rill
