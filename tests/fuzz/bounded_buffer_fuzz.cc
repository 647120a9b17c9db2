// libFuzzer target: BoundedBuffer under a sequence of pushes and drains.
//
// The input picks the limits (rows, bytes, overflow policy), then a sequence
// of operations: a push of 0-3 batches (some sliced, some with a string
// column) or a drain. Every row carries a sequence number. After each step the
// target checks the buffer's invariants and aborts on a violation:
//   - limits hold after every push (drop policies) and a refused push changes
//     nothing but refused_records (error policy);
//   - no row is lost or invented: offered = pushed + refused (+ dropped for
//     drop_newest), pushed = drained + buffered (+ dropped for drop_oldest);
//   - a drain returns exactly buffered_records rows (a capped drain: at most
//     its cap), in push order (sequence numbers increase across all drains),
//     and leaves the rest buffered (an empty buffer holds no bytes).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <arrow/api.h>
#include <fuzzer/FuzzedDataProvider.h>

#include "rill/connector/bounded_buffer.h"

namespace {

using rill::BoundedBuffer;
using rill::BufferLimits;
using rill::OverflowPolicy;

#define FUZZ_CHECK(cond)                                                 \
  do {                                                                   \
    if (!(cond)) {                                                       \
      std::fprintf(stderr, "invariant failed: %s (%s:%d)\n", #cond,      \
                   __FILE__, __LINE__);                                  \
      std::abort();                                                      \
    }                                                                    \
  } while (0)

std::shared_ptr<arrow::RecordBatch> MakeBatch(FuzzedDataProvider& in, int64_t* next_seq) {
  const int rows = in.ConsumeIntegralInRange<int>(0, 40);
  const bool with_text = in.ConsumeBool();
  arrow::Int64Builder seq;
  arrow::StringBuilder text;
  for (int i = 0; i < rows; ++i) {
    if (!seq.Append((*next_seq)++).ok()) std::abort();
    if (with_text) {
      const std::string s = in.ConsumeRandomLengthString(24);
      if (!text.Append(s).ok()) std::abort();
    }
  }
  std::vector<std::shared_ptr<arrow::Array>> columns{seq.Finish().ValueOrDie()};
  arrow::FieldVector fields{arrow::field("seq", arrow::int64())};
  if (with_text) {
    columns.push_back(text.Finish().ValueOrDie());
    fields.push_back(arrow::field("text", arrow::utf8()));
  }
  auto batch = arrow::RecordBatch::Make(arrow::schema(fields), rows, columns);
  if (rows > 1 && in.ConsumeBool()) {
    // A slice: the buffer must pro-rate its bytes and keep its rows exact.
    const int64_t offset = in.ConsumeIntegralInRange<int64_t>(0, rows - 1);
    const int64_t length = in.ConsumeIntegralInRange<int64_t>(0, rows - offset);
    // Rows outside the slice were numbered but are never offered: renumbering
    // is unnecessary, sequence numbers only need to increase.
    batch = batch->Slice(offset, length);
  }
  return batch;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  BufferLimits limits;
  limits.max_records = in.ConsumeIntegralInRange<int64_t>(0, 64);
  limits.max_bytes = in.ConsumeBool() ? 0 : in.ConsumeIntegralInRange<int64_t>(1, 4096);
  limits.on_overflow = in.PickValueInArray(
      {OverflowPolicy::kDropOldest, OverflowPolicy::kDropNewest, OverflowPolicy::kError});
  BoundedBuffer buffer(limits);

  int64_t next_seq = 0;
  int64_t offered = 0;
  int64_t last_drained = -1;
  int steps = 0;
  while (in.remaining_bytes() > 0 && steps++ < 64) {
    const auto before = buffer.stats();
    if (in.ConsumeIntegralInRange<int>(0, 3) > 0) {
      std::vector<std::shared_ptr<arrow::RecordBatch>> batches;
      const int n = in.ConsumeIntegralInRange<int>(0, 3);
      int64_t rows = 0;
      for (int i = 0; i < n; ++i) {
        batches.push_back(MakeBatch(in, &next_seq));
        rows += batches.back()->num_rows();
      }
      offered += rows;
      const rill::Status st = buffer.Push(batches);
      const auto after = buffer.stats();
      if (!st.ok()) {
        FUZZ_CHECK(st.IsCapacityError());
        FUZZ_CHECK(limits.on_overflow == OverflowPolicy::kError);
        FUZZ_CHECK(after.refused_records == before.refused_records + rows);
        FUZZ_CHECK(after.buffered_records == before.buffered_records);
        FUZZ_CHECK(after.buffered_bytes == before.buffered_bytes);
        FUZZ_CHECK(after.pushed_records == before.pushed_records);
      }
      if (limits.max_records > 0) FUZZ_CHECK(after.buffered_records <= limits.max_records);
      if (limits.max_bytes > 0) FUZZ_CHECK(after.buffered_bytes <= limits.max_bytes);
    } else {
      // A drain of everything, or of at most `cap` rows (a capped tick).
      const int64_t cap = in.ConsumeBool() ? 0 : in.ConsumeIntegralInRange<int64_t>(1, 48);
      const auto batches = buffer.Drain(cap);
      int64_t rows = 0;
      for (const auto& b : batches) {
        FUZZ_CHECK(b->num_rows() > 0);
        const auto& seq = static_cast<const arrow::Int64Array&>(*b->column(0));
        for (int64_t i = 0; i < seq.length(); ++i) {
          FUZZ_CHECK(seq.Value(i) > last_drained);
          last_drained = seq.Value(i);
        }
        rows += b->num_rows();
      }
      const int64_t expected =
          cap == 0 ? before.buffered_records : std::min(cap, before.buffered_records);
      FUZZ_CHECK(rows == expected);
      const auto after = buffer.stats();
      FUZZ_CHECK(after.buffered_records == before.buffered_records - rows);
      FUZZ_CHECK(after.buffered_bytes <= before.buffered_bytes);
      if (after.buffered_records == 0) FUZZ_CHECK(after.buffered_bytes == 0);
      FUZZ_CHECK(after.drained_records == before.drained_records + rows);
    }
    const auto s = buffer.stats();
    FUZZ_CHECK(s.buffered_records >= 0 && s.buffered_bytes >= 0);
    switch (limits.on_overflow) {
      case OverflowPolicy::kError:
        FUZZ_CHECK(offered == s.pushed_records + s.refused_records);
        FUZZ_CHECK(s.pushed_records == s.drained_records + s.buffered_records);
        FUZZ_CHECK(s.dropped_records == 0);
        break;
      case OverflowPolicy::kDropNewest:
        FUZZ_CHECK(offered == s.pushed_records + s.dropped_records);
        FUZZ_CHECK(s.pushed_records == s.drained_records + s.buffered_records);
        FUZZ_CHECK(s.refused_records == 0);
        break;
      case OverflowPolicy::kDropOldest:
        FUZZ_CHECK(offered == s.pushed_records);
        FUZZ_CHECK(s.pushed_records == s.drained_records + s.buffered_records + s.dropped_records);
        FUZZ_CHECK(s.refused_records == 0);
        break;
    }
  }
  return 0;
}
