// Keyed tables with string and composite keys under random upserts and
// frequent compaction (which re-points moved keys by their old location),
// checked after every write against a std::map of the last value per key.
#include <map>
#include <optional>
#include <random>
#include <string>

#include <arrow/api.h>
#include <gtest/gtest.h>

#include "rill/table/live_table.h"

namespace rill {
namespace {

// Keys around the 16-byte inline limit and beyond it, plus the empty string.
std::string KeyText(int k) {
  switch (k % 5) {
    case 0: return std::to_string(k);                                  // short
    case 1: return "ord-" + std::string(12 - std::to_string(k).size(), '0') + std::to_string(k);
    case 2: return "ord-" + std::string(13 - std::to_string(k).size(), '0') + std::to_string(k);
    case 3: return "a-much-longer-key-of-an-event-" + std::to_string(k);  // arena
    default: return k % 10 == 4 ? std::string() : "k" + std::to_string(k);
  }
}

using Reference = std::map<std::pair<std::optional<std::string>, int64_t>, int64_t>;

/// Live rows of `table` as (key, part, value); part is 0 for single-column keys.
Reference TableState(const LiveTable& table, bool composite) {
  Reference out;
  auto t = table.snapshot()->ToTable().ValueOrDie()->CombineChunks().ValueOrDie();
  auto key = std::static_pointer_cast<arrow::StringArray>(t->GetColumnByName("key")->chunk(0));
  auto v = std::static_pointer_cast<arrow::Int64Array>(t->GetColumnByName("v")->chunk(0));
  std::shared_ptr<arrow::Int64Array> part;
  if (composite) {
    part = std::static_pointer_cast<arrow::Int64Array>(t->GetColumnByName("part")->chunk(0));
  }
  for (int64_t i = 0; i < t->num_rows(); ++i) {
    std::optional<std::string> k;
    if (key->IsValid(i)) k = key->GetString(i);
    auto [it, fresh] = out.emplace(std::pair{k, part ? part->Value(i) : 0}, v->Value(i));
    EXPECT_TRUE(fresh) << "key held twice: " << (k ? *k : "null");
  }
  return out;
}

void RunRandomUpserts(bool composite, uint64_t seed) {
  SCOPED_TRACE("composite " + std::to_string(composite) + " seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  arrow::FieldVector fields = {arrow::field("key", arrow::utf8()),
                               arrow::field("v", arrow::int64())};
  if (composite) fields.push_back(arrow::field("part", arrow::int64()));
  TableOptions options;
  options.primary_key = composite ? std::vector<std::string>{"key", "part"}
                                  : std::vector<std::string>{"key"};
  options.mode = TableMode::kSnapshot;
  options.target_chunk_rows = 512;  // many chunks, so compaction runs often
  options.auto_compact_chunks = 4;
  options.compact_dead_fraction = 0.3;
  auto table = LiveTable::Make("t", arrow::schema(fields), options).ValueOrDie();
  Reference ref;
  const int domain = seed % 2 ? 300 : 3000;
  int64_t value = 0;
  for (int step = 0; step < 120; ++step) {
    const int64_t n = 1 + static_cast<int64_t>(rng() % 400);
    arrow::StringBuilder keys;
    arrow::Int64Builder values, parts;
    for (int64_t i = 0; i < n; ++i) {
      const int k = static_cast<int>(rng() % domain);
      std::optional<std::string> key;
      if (k % 97 != 13) key = KeyText(k);  // a few null keys
      const int64_t part = composite ? static_cast<int64_t>(rng() % 2) : 0;
      ASSERT_TRUE((key ? keys.Append(*key) : keys.AppendNull()).ok());
      ASSERT_TRUE(values.Append(++value).ok());
      ASSERT_TRUE(parts.Append(part).ok());
      ref[{key, part}] = value;
    }
    arrow::ArrayVector columns = {keys.Finish().ValueOrDie(), values.Finish().ValueOrDie()};
    if (composite) columns.push_back(parts.Finish().ValueOrDie());
    ASSERT_TRUE(table->Write(arrow::RecordBatch::Make(arrow::schema(fields), n, columns)).ok());
    if (step % 37 == 36) {
      ASSERT_TRUE(table->Compact(/*full=*/true).ok());
    }
    ASSERT_EQ(TableState(*table, composite), ref) << "step " << step;
  }
}

TEST(StringKeyUpsert, MatchesAReferenceMapUnderRandomUpsertsAndCompaction) {
  for (uint64_t seed = 1; seed <= 4; ++seed) RunRandomUpserts(/*composite=*/false, seed);
}

TEST(StringKeyUpsert, CompositeKeysWithAStringPartMatchAReferenceMap) {
  for (uint64_t seed = 1; seed <= 4; ++seed) RunRandomUpserts(/*composite=*/true, seed);
}

}  // namespace
}  // namespace rill
