// GatherLiveRows (the copy behind compaction) against Arrow's own Filter +
// ConcatenateRecordBatches on random batches of every column kind: fixed-width,
// booleans, 32/64-bit-offset strings and binaries, and the fallback types
// (dictionaries, lists), with nulls, sliced inputs, empty parts and every alive
// density.
#include <random>

#include <arrow/api.h>
#include <arrow/compute/api.h>
#include <gtest/gtest.h>

#include "rill/common/arrow_init.h"
#include "rill/table/gather_internal.h"
#include "table/test_util.h"

namespace rill::table_internal {
namespace {

std::shared_ptr<arrow::Schema> AllKindsSchema() {
  return arrow::schema({
      arrow::field("i8", arrow::int8()),
      arrow::field("i16", arrow::int16()),
      arrow::field("i32", arrow::int32()),
      arrow::field("i64", arrow::int64()),
      arrow::field("u64", arrow::uint64()),
      arrow::field("f32", arrow::float32()),
      arrow::field("f64", arrow::float64()),
      arrow::field("ts", arrow::timestamp(arrow::TimeUnit::MICRO, "UTC")),
      arrow::field("d32", arrow::date32()),
      arrow::field("dec", arrow::decimal128(24, 2)),
      arrow::field("b", arrow::boolean()),
      arrow::field("s", arrow::utf8()),
      arrow::field("ls", arrow::large_utf8()),
      arrow::field("bin", arrow::binary()),
      arrow::field("lbin", arrow::large_binary()),
      arrow::field("dict", arrow::dictionary(arrow::int32(), arrow::utf8())),
      arrow::field("list", arrow::list(arrow::int32())),
  });
}

class RandomBatches {
 public:
  explicit RandomBatches(uint64_t seed) : rng_(seed) {}

  /// A batch of AllKindsSchema with `n` rows; each column null with
  /// probability `null_p` per row (0 gives arrays without a validity bitmap).
  std::shared_ptr<arrow::RecordBatch> Make(int64_t n, double null_p) {
    auto schema = AllKindsSchema();
    arrow::Int64Builder ints;
    arrow::DoubleBuilder doubles;
    arrow::BooleanBuilder bools;
    arrow::StringBuilder strings;
    arrow::ListBuilder lists(arrow::default_memory_pool(),
                             std::make_shared<arrow::Int32Builder>());
    auto* list_values = static_cast<arrow::Int32Builder*>(lists.value_builder());
    std::bernoulli_distribution null(null_p);
    std::uniform_int_distribution<int> small(-100, 100);
    std::uniform_int_distribution<int> len(0, 20);
    for (int64_t i = 0; i < n; ++i) {
      if (null(rng_)) {
        EXPECT_TRUE(ints.AppendNull().ok());
        EXPECT_TRUE(doubles.AppendNull().ok());
        EXPECT_TRUE(bools.AppendNull().ok());
        EXPECT_TRUE(strings.AppendNull().ok());
        EXPECT_TRUE(lists.AppendNull().ok());
        continue;
      }
      EXPECT_TRUE(ints.Append(small(rng_)).ok());
      EXPECT_TRUE(doubles.Append(small(rng_) / 7.0).ok());
      EXPECT_TRUE(bools.Append(small(rng_) > 0).ok());
      std::string s(static_cast<size_t>(len(rng_)), 'a');
      for (char& c : s) c = static_cast<char>('a' + rng_() % 26);
      EXPECT_TRUE(strings.Append(s).ok());
      EXPECT_TRUE(lists.Append().ok());
      for (int k = len(rng_) % 4; k > 0; --k) EXPECT_TRUE(list_values->Append(k).ok());
    }
    auto int_array = ints.Finish().ValueOrDie();
    auto string_array = strings.Finish().ValueOrDie();
    arrow::ArrayVector columns{
        cast(int_array, arrow::int8()),
        cast(int_array, arrow::int16()),
        cast(int_array, arrow::int32()),
        int_array,
        cast(int_array, arrow::uint64()),
        cast(doubles.Finish().ValueOrDie(), arrow::float32()),
        nullptr,
        cast(int_array, arrow::timestamp(arrow::TimeUnit::MICRO, "UTC")),
        cast(cast(int_array, arrow::int32()), arrow::date32()),
        cast(int_array, arrow::decimal128(24, 2)),
        bools.Finish().ValueOrDie(),
        string_array,
        cast(string_array, arrow::large_utf8()),
        cast(string_array, arrow::binary()),
        cast(string_array, arrow::large_binary()),
        arrow::compute::DictionaryEncode(string_array).ValueOrDie().make_array(),
        lists.Finish().ValueOrDie(),
    };
    columns[6] = cast(columns[5], arrow::float64());
    return arrow::RecordBatch::Make(schema, n, columns);
  }

  std::mt19937_64& rng() { return rng_; }

 private:
  // Unsafe: wrap-around is fine for random data (int64 -> uint64, int8, ...).
  static std::shared_ptr<arrow::Array> cast(const std::shared_ptr<arrow::Array>& a,
                                            const std::shared_ptr<arrow::DataType>& to) {
    arrow::compute::CastOptions options = arrow::compute::CastOptions::Unsafe(to);
    return arrow::compute::Cast(*a, options).ValueOrDie().make_array();
  }
  std::mt19937_64 rng_;
};

/// Arrow's answer: filter each part by its bitmap, then concatenate.
std::shared_ptr<arrow::RecordBatch> Oracle(const std::shared_ptr<arrow::Schema>& schema,
                                           const std::vector<GatherPart>& parts) {
  arrow::RecordBatchVector filtered;
  for (const auto& p : parts) {
    if (!p.alive) {
      filtered.push_back(p.batch);
      continue;
    }
    auto mask = std::make_shared<arrow::BooleanArray>(p.batch->num_rows(), p.alive);
    filtered.push_back(arrow::compute::Filter(p.batch, mask).ValueOrDie().record_batch());
  }
  if (filtered.empty()) return arrow::RecordBatch::MakeEmpty(schema).ValueOrDie();
  return arrow::ConcatenateRecordBatches(filtered).ValueOrDie();
}

TEST(GatherLiveRows, MatchesFilterThenConcatenateOnRandomBatches) {
  RILL_ASSERT_OK(InitializeArrowCompute());
  const auto schema = AllKindsSchema();
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    RandomBatches gen(seed);
    auto& rng = gen.rng();
    std::vector<GatherPart> parts;
    const int num_parts = std::uniform_int_distribution<int>(1, 5)(rng);
    for (int p = 0; p < num_parts; ++p) {
      const int64_t n = std::uniform_int_distribution<int64_t>(0, 300)(rng);
      const double null_p = std::vector<double>{0.0, 0.1, 0.9}[rng() % 3];
      auto batch = gen.Make(n + 8, null_p);
      // Slice at an odd offset to exercise offsets and bit offsets.
      const int64_t offset = static_cast<int64_t>(rng() % 8);
      batch = batch->Slice(offset, n);
      GatherPart part{batch, nullptr, n};
      const double density = std::vector<double>{0.0, 0.03, 0.5, 0.97, 1.0}[rng() % 5];
      if (rng() % 4 != 0) {
        auto alive = arrow::AllocateEmptyBitmap(n).ValueOrDie();
        std::bernoulli_distribution keep(density);
        int64_t live = 0;
        for (int64_t i = 0; i < n; ++i) {
          if (keep(rng)) {
            arrow::bit_util::SetBit(alive->mutable_data(), i);
            ++live;
          }
        }
        part.alive = std::move(alive);
        part.live_rows = live;
      }
      parts.push_back(std::move(part));
    }
    auto expected = Oracle(schema, parts);
    auto actual = GatherLiveRows(schema, parts, arrow::default_memory_pool());
    ASSERT_TRUE(actual.ok()) << "seed " << seed << ": " << actual.status().ToString();
    ASSERT_TRUE((*actual)->ValidateFull().ok()) << "seed " << seed;
    ASSERT_EQ((*actual)->num_rows(), expected->num_rows()) << "seed " << seed;
    for (int c = 0; c < schema->num_fields(); ++c) {
      EXPECT_TRUE((*actual)->column(c)->Equals(*expected->column(c)))
          << "seed " << seed << ", column " << schema->field(c)->name() << "\nexpected "
          << expected->column(c)->ToString() << "\nactual " << (*actual)->column(c)->ToString();
      EXPECT_EQ((*actual)->column(c)->null_count(), expected->column(c)->null_count())
          << "seed " << seed << ", column " << schema->field(c)->name();
    }
  }
}

TEST(GatherLiveRows, DictionaryColumnsSharingOneDictionaryKeepIt) {
  auto type = arrow::dictionary(arrow::int16(), arrow::utf8());
  auto schema = arrow::schema({arrow::field("d", type)});
  auto dict = test::ArrayOf(arrow::utf8(), R"(["x", "y", "z"])");
  auto indices = test::ArrayOf(arrow::int16(), "[0, 1, 2, null, 1, 0]");
  auto column = std::make_shared<arrow::DictionaryArray>(type, indices, dict);
  auto batch = arrow::RecordBatch::Make(schema, 6, {column});
  auto alive = arrow::AllocateEmptyBitmap(6).ValueOrDie();
  alive->mutable_data()[0] = 0b011010;  // rows 1, 3, 4
  // Two parts over the same dictionary object: indices gathered, dictionary kept.
  auto out = GatherLiveRows(schema, {{batch, alive, 3}, {batch->Slice(4), nullptr, 2}},
                            arrow::default_memory_pool());
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const auto& gathered = static_cast<const arrow::DictionaryArray&>(*(*out)->column(0));
  EXPECT_EQ(gathered.dictionary()->data(), column->dictionary()->data());
  EXPECT_TRUE(gathered.indices()->Equals(*test::ArrayOf(arrow::int16(),
                                                               "[1, null, 1, 1, 0]")))
      << gathered.indices()->ToString();
  // A part with another dictionary: Arrow's Concatenate unifies them.
  auto other = std::make_shared<arrow::DictionaryArray>(
      type, test::ArrayOf(arrow::int16(), "[0]"),
      test::ArrayOf(arrow::utf8(), R"(["w"])"));
  auto mixed = GatherLiveRows(
      schema, {{batch, alive, 3}, {arrow::RecordBatch::Make(schema, 1, {other}), nullptr, 1}},
      arrow::default_memory_pool());
  ASSERT_TRUE(mixed.ok()) << mixed.status().ToString();
  ASSERT_TRUE((*mixed)->ValidateFull().ok());
  auto decoded = arrow::compute::Cast(*(*mixed)->column(0), arrow::utf8()).ValueOrDie();
  EXPECT_TRUE(decoded->Equals(*test::ArrayOf(arrow::utf8(), R"(["y", null, "y", "w"])")))
      << decoded->ToString();
}

TEST(GatherLiveRows, AliveBitsThatDisagreeWithLiveRowsAreAnError) {
  RandomBatches gen(3);
  auto batch = gen.Make(10, 0.0);
  auto alive = arrow::AllocateEmptyBitmap(10).ValueOrDie();
  alive->mutable_data()[0] = 0b111;
  EXPECT_FALSE(GatherLiveRows(AllKindsSchema(), {{batch, alive, 2}},
                              arrow::default_memory_pool())
                   .ok());
}

TEST(GatherLiveRows, AllDeadGivesAnEmptyBatchOfTheSchema) {
  const auto schema = AllKindsSchema();
  RandomBatches gen(7);
  auto batch = gen.Make(10, 0.2);
  auto none = arrow::AllocateEmptyBitmap(10).ValueOrDie();
  auto out = GatherLiveRows(schema, {{batch, none, 0}}, arrow::default_memory_pool());
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ((*out)->num_rows(), 0);
  EXPECT_TRUE((*out)->schema()->Equals(*schema));
}

}  // namespace
}  // namespace rill::table_internal
