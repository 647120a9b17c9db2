// BoundedBuffer: overflow strategies slice exactly across batch boundaries.
#include "rill/connector/bounded_buffer.h"

#include <deque>
#include <random>

#include <arrow/api.h>
#include <arrow/util/byte_size.h>
#include <gtest/gtest.h>

#include "table/test_util.h"

namespace rill {
namespace {

using test::IdBatch;
using test::IdRange;
using test::IdSchema;
using test::IdValues;

BufferLimits Records(int64_t max_records, OverflowPolicy policy) {
  BufferLimits limits;
  limits.max_records = max_records;
  limits.max_bytes = 0;
  limits.on_overflow = policy;
  return limits;
}

void ExpectConserved(const ConnectorStats& s, int64_t offered) {
  EXPECT_EQ(offered, s.drained_records + s.buffered_records + s.dropped_records + s.refused_records)
      << "drained " << s.drained_records << " buffered " << s.buffered_records << " dropped "
      << s.dropped_records << " refused " << s.refused_records;
}

TEST(OverflowPolicyParsing, AcceptsTheThreeStrategies) {
  EXPECT_EQ(ParseOverflowPolicy("drop_oldest").ValueOrDie(), OverflowPolicy::kDropOldest);
  EXPECT_EQ(ParseOverflowPolicy("drop_newest").ValueOrDie(), OverflowPolicy::kDropNewest);
  EXPECT_EQ(ParseOverflowPolicy("error").ValueOrDie(), OverflowPolicy::kError);
  EXPECT_TRUE(ParseOverflowPolicy("block").status().IsInvalid());
  EXPECT_STREQ(OverflowPolicyName(OverflowPolicy::kDropNewest), "drop_newest");
  EXPECT_STREQ(OverflowPolicyName(OverflowPolicy::kDropOldest), "drop_oldest");
  EXPECT_STREQ(OverflowPolicyName(OverflowPolicy::kError), "error");
}

TEST(BoundedBuffer, DrainsEverythingOldestFirst) {
  BoundedBuffer buffer(Records(100, OverflowPolicy::kDropOldest));
  RILL_ASSERT_OK(buffer.Push({IdBatch(0, 3)}));
  RILL_ASSERT_OK(buffer.Push({IdBatch(3, 5), IdBatch(5, 6)}));
  EXPECT_EQ(buffer.stats().buffered_records, 6);
  EXPECT_EQ(buffer.stats().pushed_records, 6);
  EXPECT_GT(buffer.stats().buffered_bytes, 0);
  EXPECT_EQ(IdValues(buffer.Drain()), IdRange(0, 6));
  EXPECT_TRUE(buffer.Drain().empty());
  auto stats = buffer.stats();
  EXPECT_EQ(stats.buffered_records, 0);
  EXPECT_EQ(stats.buffered_bytes, 0);
  EXPECT_EQ(stats.drained_records, 6);
  EXPECT_EQ(stats.dropped_records, 0);
}

TEST(BoundedBuffer, IgnoresEmptyBatches) {
  BoundedBuffer buffer(Records(2, OverflowPolicy::kError));
  RILL_ASSERT_OK(buffer.Push({IdBatch(0, 0)}));
  RILL_ASSERT_OK(buffer.Push({IdBatch(0, 2), IdBatch(0, 0)}));
  auto drained = buffer.Drain();
  EXPECT_EQ(IdValues(drained), IdRange(0, 2));
  for (const auto& batch : drained) {
    EXPECT_GT(batch->num_rows(), 0);
  }
}

TEST(DropOldest, SlicesTheOldestBatchExactly) {
  BoundedBuffer buffer(Records(5, OverflowPolicy::kDropOldest));
  RILL_ASSERT_OK(buffer.Push({IdBatch(0, 3)}));
  RILL_ASSERT_OK(buffer.Push({IdBatch(3, 7)}));
  auto stats = buffer.stats();
  EXPECT_EQ(stats.buffered_records, 5);
  EXPECT_EQ(stats.dropped_records, 2);
  EXPECT_EQ(IdValues(buffer.Drain()), IdRange(2, 7));
  ExpectConserved(buffer.stats(), 7);
}

TEST(DropOldest, DropsWholeBatchesThenSlicesAcrossTheirBoundary) {
  BoundedBuffer buffer(Records(5, OverflowPolicy::kDropOldest));
  RILL_ASSERT_OK(buffer.Push({IdBatch(0, 2)}));
  RILL_ASSERT_OK(buffer.Push({IdBatch(2, 4)}));
  RILL_ASSERT_OK(buffer.Push({IdBatch(4, 7)}));  // 7 rows: 0 and 1 go, exactly one whole batch
  EXPECT_EQ(buffer.stats().dropped_records, 2);
  RILL_ASSERT_OK(buffer.Push({IdBatch(7, 10)}));  // 8 rows: 2, 3 and 4 go, through two batches
  EXPECT_EQ(buffer.stats().dropped_records, 5);
  EXPECT_EQ(buffer.stats().buffered_records, 5);
  EXPECT_EQ(IdValues(buffer.Drain()), IdRange(5, 10));
  ExpectConserved(buffer.stats(), 10);
}

TEST(DropOldest, KeepsOnlyTheNewestRowsOfAPushLargerThanTheBuffer) {
  BoundedBuffer buffer(Records(5, OverflowPolicy::kDropOldest));
  RILL_ASSERT_OK(buffer.Push({IdBatch(0, 3)}));
  RILL_ASSERT_OK(buffer.Push({IdBatch(3, 6), IdBatch(6, 12)}));
  auto stats = buffer.stats();
  EXPECT_EQ(stats.buffered_records, 5);
  EXPECT_EQ(stats.dropped_records, 7);
  EXPECT_EQ(IdValues(buffer.Drain()), IdRange(7, 12));
  ExpectConserved(buffer.stats(), 12);
}

TEST(DropNewest, TakesOnlyThePartOfAPushThatFits) {
  BoundedBuffer buffer(Records(5, OverflowPolicy::kDropNewest));
  RILL_ASSERT_OK(buffer.Push({IdBatch(0, 3)}));
  RILL_ASSERT_OK(buffer.Push({IdBatch(3, 7)}));
  EXPECT_EQ(buffer.stats().dropped_records, 2);
  RILL_ASSERT_OK(buffer.Push({IdBatch(7, 8)}));
  auto stats = buffer.stats();
  EXPECT_EQ(stats.dropped_records, 3);
  EXPECT_EQ(stats.buffered_records, 5);
  EXPECT_EQ(stats.pushed_records, 5);
  EXPECT_EQ(IdValues(buffer.Drain()), IdRange(0, 5));
  ExpectConserved(buffer.stats(), 8);
}

TEST(DropNewest, SlicesAMultiBatchPushAtTheExactRow) {
  BoundedBuffer buffer(Records(6, OverflowPolicy::kDropNewest));
  RILL_ASSERT_OK(buffer.Push({IdBatch(0, 2), IdBatch(2, 4), IdBatch(4, 9)}));
  EXPECT_EQ(buffer.stats().dropped_records, 3);
  EXPECT_EQ(IdValues(buffer.Drain()), IdRange(0, 6));
  RILL_ASSERT_OK(buffer.Push({IdBatch(9, 20)}));
  EXPECT_EQ(IdValues(buffer.Drain()), IdRange(9, 15));
  EXPECT_EQ(buffer.stats().dropped_records, 8);
  ExpectConserved(buffer.stats(), 20);
}

TEST(ErrorOverflow, RefusesThePushWithCapacityErrorAndKeepsWhatWasBuffered) {
  BoundedBuffer buffer(Records(5, OverflowPolicy::kError));
  RILL_ASSERT_OK(buffer.Push({IdBatch(0, 3)}));
  Status status = buffer.Push({IdBatch(3, 6)});
  ASSERT_FALSE(status.ok());
  EXPECT_TRUE(status.IsCapacityError()) << status.ToString();
  EXPECT_NE(status.message().find('3'), std::string::npos) << "rows offered: " << status.message();
  EXPECT_NE(status.message().find('2'), std::string::npos) << "rows that fit: " << status.message();
  auto stats = buffer.stats();
  EXPECT_EQ(stats.buffered_records, 3);
  EXPECT_EQ(stats.refused_records, 3);
  EXPECT_EQ(stats.dropped_records, 0);
  RILL_ASSERT_OK(buffer.Push({IdBatch(3, 5)}));  // exactly fills the buffer
  EXPECT_EQ(IdValues(buffer.Drain()), IdRange(0, 5));
  ExpectConserved(buffer.stats(), 8);
}

TEST(ErrorOverflow, RefusesAMultiBatchPushAsAWhole) {
  BoundedBuffer buffer(Records(5, OverflowPolicy::kError));
  Status status = buffer.Push({IdBatch(0, 2), IdBatch(2, 6)});
  EXPECT_TRUE(status.IsCapacityError()) << status.ToString();
  EXPECT_EQ(buffer.stats().buffered_records, 0);
  EXPECT_EQ(buffer.stats().refused_records, 6);
  EXPECT_TRUE(buffer.Drain().empty());
  RILL_ASSERT_OK(buffer.Push({IdBatch(0, 2), IdBatch(2, 5)}));
  EXPECT_EQ(IdValues(buffer.Drain()), IdRange(0, 5));
}

TEST(ErrorOverflow, OversizeWhenEmptyTakesAPushLargerThanTheLimitOnlyIntoAnEmptyBuffer) {
  BoundedBuffer buffer(Records(5, OverflowPolicy::kError));
  RILL_ASSERT_OK(buffer.Push({IdBatch(0, 8)}, /*oversize_when_empty=*/true));
  EXPECT_EQ(buffer.stats().buffered_records, 8);
  // Not empty: refused as usual, with or without the flag.
  EXPECT_TRUE(buffer.Push({IdBatch(8, 9)}, /*oversize_when_empty=*/true).IsCapacityError());
  EXPECT_EQ(IdValues(buffer.Drain()), IdRange(0, 8));
  EXPECT_TRUE(buffer.Push({IdBatch(8, 16)}).IsCapacityError());  // no flag: the limit holds
  RILL_ASSERT_OK(buffer.Push({IdBatch(8, 16)}, /*oversize_when_empty=*/true));
  EXPECT_EQ(IdValues(buffer.Drain()), IdRange(8, 16));
}

TEST(BoundedBuffer, HasRoomAgainAfterADrain) {
  for (auto policy : {OverflowPolicy::kDropOldest, OverflowPolicy::kDropNewest, OverflowPolicy::kError}) {
    SCOPED_TRACE(OverflowPolicyName(policy));
    BoundedBuffer buffer(Records(4, policy));
    RILL_ASSERT_OK(buffer.Push({IdBatch(0, 4)}));
    EXPECT_EQ(IdValues(buffer.Drain()), IdRange(0, 4));
    RILL_ASSERT_OK(buffer.Push({IdBatch(4, 8)}));
    EXPECT_EQ(IdValues(buffer.Drain()), IdRange(4, 8));
    EXPECT_EQ(buffer.stats().dropped_records, 0);
    EXPECT_EQ(buffer.stats().drained_records, 8);
  }
}

TEST(BoundedBuffer, ADrainOfAtMostNRowsSlicesTheLastBatchAndKeepsTheRestInOrder) {
  BoundedBuffer buffer(Records(100, OverflowPolicy::kDropOldest));
  RILL_ASSERT_OK(buffer.Push({IdBatch(0, 3), IdBatch(3, 5)}));
  RILL_ASSERT_OK(buffer.Push({IdBatch(5, 10)}));
  const int64_t bytes = buffer.stats().buffered_bytes;
  auto first = buffer.Drain(4);
  ASSERT_EQ(first.size(), 2u);  // [0, 3) whole, then [3, 4) sliced off [3, 5)
  EXPECT_EQ(IdValues(first), IdRange(0, 4));
  auto stats = buffer.stats();
  EXPECT_EQ(stats.buffered_records, 6);
  EXPECT_EQ(stats.drained_records, 4);
  EXPECT_GT(stats.buffered_bytes, 0);
  EXPECT_LT(stats.buffered_bytes, bytes);
  EXPECT_EQ(IdValues(buffer.Drain(1)), IdRange(4, 5));
  EXPECT_EQ(IdValues(buffer.Drain(0)), IdRange(5, 10));  // 0: no limit
  stats = buffer.stats();
  EXPECT_EQ(stats.buffered_records, 0);
  EXPECT_EQ(stats.buffered_bytes, 0);
  EXPECT_EQ(stats.drained_records, 10);
  EXPECT_TRUE(buffer.Drain(3).empty());
}

// Random pushes (drop_oldest overflow) and capped drains against a deque of
// the ids that should be buffered: every drain returns the oldest min(cap,
// buffered) ids, and the counters add up.
TEST(BoundedBuffer, CappedDrainsMatchAReferenceQueue) {
  std::mt19937 rng(15);
  BoundedBuffer buffer(Records(50, OverflowPolicy::kDropOldest));
  std::deque<int64_t> reference;
  int64_t next = 0;
  for (int step = 0; step < 2000; ++step) {
    if (rng() % 3 != 0) {
      std::vector<std::shared_ptr<arrow::RecordBatch>> push;
      for (int b = static_cast<int>(rng() % 3); b >= 0; --b) {
        const int64_t n = rng() % 12;
        push.push_back(IdBatch(next, next + n));
        for (int64_t i = next; i < next + n; ++i) reference.push_back(i);
        next += n;
      }
      RILL_ASSERT_OK(buffer.Push(push));
      while (reference.size() > 50) reference.pop_front();
    } else {
      const int64_t cap = rng() % 4 == 0 ? 0 : 1 + rng() % 30;
      const size_t take = cap == 0 ? reference.size() : std::min<size_t>(cap, reference.size());
      std::vector<int64_t> expected(reference.begin(), reference.begin() + take);
      reference.erase(reference.begin(), reference.begin() + take);
      ASSERT_EQ(IdValues(buffer.Drain(cap)), expected) << "step " << step;
    }
    const auto s = buffer.stats();
    ASSERT_EQ(s.buffered_records, static_cast<int64_t>(reference.size()));
    ASSERT_EQ(s.buffered_bytes == 0, reference.empty());
    ExpectConserved(s, next);
  }
}

TEST(BoundedBuffer, IsUnlimitedWhenBothLimitsAreZero) {
  BoundedBuffer buffer(Records(0, OverflowPolicy::kError));
  RILL_ASSERT_OK(buffer.Push({IdBatch(0, 100000)}));
  EXPECT_EQ(buffer.stats().buffered_records, 100000);
}

TEST(ByteLimit, DropsOldestRowsUntilTheBytesFit) {
  const int64_t batch_bytes = EstimateBatchBytes(*IdBatch(0, 100));
  ASSERT_GE(batch_bytes, 800) << "100 int64 values";
  BufferLimits limits;
  limits.max_records = 0;
  limits.max_bytes = batch_bytes / 2;
  limits.on_overflow = OverflowPolicy::kDropOldest;
  BoundedBuffer buffer(limits);
  RILL_ASSERT_OK(buffer.Push({IdBatch(0, 100)}));
  auto stats = buffer.stats();
  EXPECT_LE(stats.buffered_bytes, limits.max_bytes);
  EXPECT_GE(stats.buffered_records, 40);
  EXPECT_LE(stats.buffered_records, 50);
  ExpectConserved(stats, 100);
  auto values = IdValues(buffer.Drain());
  ASSERT_FALSE(values.empty());
  EXPECT_EQ(values.back(), 99) << "the newest rows are kept";
  EXPECT_EQ(static_cast<int64_t>(values.size()), stats.buffered_records);
}

TEST(ByteLimit, RefusesWithErrorWhenTheBytesDoNotFit) {
  BufferLimits limits;
  limits.max_records = 0;
  limits.max_bytes = EstimateBatchBytes(*IdBatch(0, 10));
  limits.on_overflow = OverflowPolicy::kError;
  BoundedBuffer buffer(limits);
  RILL_ASSERT_OK(buffer.Push({IdBatch(0, 10)}));
  EXPECT_TRUE(buffer.Push({IdBatch(10, 11)}).IsCapacityError());
  EXPECT_EQ(buffer.stats().buffered_records, 10);
}

TEST(EstimateBatchBytes, ProRatesSlices) {
  auto batch = IdBatch(0, 1000);
  const int64_t whole = EstimateBatchBytes(*batch);
  const int64_t half = EstimateBatchBytes(*batch->Slice(0, 500));
  EXPECT_GE(whole, 8000);
  EXPECT_NEAR(static_cast<double>(half), whole / 2.0, whole * 0.02);
  EXPECT_EQ(EstimateBatchBytes(*batch->Slice(0, 0)), 0);
}

// The direct count of flat columns must agree with Arrow's own
// ReferencedBufferSize, on whole batches and on slices at any offset.
TEST(EstimateBatchBytes, MatchesArrowsReferencedSizeForFlatColumns) {
  std::mt19937_64 rng(16);
  for (int trial = 0; trial < 40; ++trial) {
    const int64_t n = 1 + static_cast<int64_t>(rng() % 3000);
    arrow::Int64Builder ints;
    arrow::DoubleBuilder doubles;
    arrow::BooleanBuilder bools;
    arrow::StringBuilder strings;
    arrow::LargeBinaryBuilder blobs;
    arrow::Int16Builder shorts;
    for (int64_t i = 0; i < n; ++i) {
      const bool null = rng() % 7 == 0;
      if (null) {
        ASSERT_TRUE(ints.AppendNull().ok());
        ASSERT_TRUE(strings.AppendNull().ok());
      } else {
        ASSERT_TRUE(ints.Append(static_cast<int64_t>(rng())).ok());
        ASSERT_TRUE(strings.Append(std::string(rng() % 20, 'x')).ok());
      }
      ASSERT_TRUE(doubles.Append(static_cast<double>(i)).ok());
      ASSERT_TRUE(bools.Append(rng() % 2 == 0).ok());
      ASSERT_TRUE(blobs.Append(std::string(rng() % 9, 'y')).ok());
      ASSERT_TRUE(shorts.Append(static_cast<int16_t>(i)).ok());
    }
    std::vector<std::shared_ptr<arrow::Array>> cols(6);
    ASSERT_TRUE(ints.Finish(&cols[0]).ok());
    ASSERT_TRUE(doubles.Finish(&cols[1]).ok());
    ASSERT_TRUE(bools.Finish(&cols[2]).ok());
    ASSERT_TRUE(strings.Finish(&cols[3]).ok());
    ASSERT_TRUE(blobs.Finish(&cols[4]).ok());
    ASSERT_TRUE(shorts.Finish(&cols[5]).ok());
    auto schema = arrow::schema({arrow::field("i", arrow::int64()), arrow::field("d", arrow::float64()),
                                 arrow::field("b", arrow::boolean()), arrow::field("s", arrow::utf8()),
                                 arrow::field("l", arrow::large_binary()),
                                 arrow::field("h", arrow::int16())});
    auto batch = arrow::RecordBatch::Make(schema, n, cols);
    const int64_t offset = static_cast<int64_t>(rng() % n);
    const int64_t length = static_cast<int64_t>(rng() % (n - offset + 1));
    for (const auto& b : {batch, batch->Slice(offset, length)}) {
      auto expected = arrow::util::ReferencedBufferSize(*b);
      ASSERT_TRUE(expected.ok());
      EXPECT_EQ(EstimateBatchBytes(*b), *expected)
          << "rows " << b->num_rows() << " of " << n << " at offset " << offset;
    }
  }
}

}  // namespace
}  // namespace rill
