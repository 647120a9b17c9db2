// libFuzzer target over JsonDecoder (NDJSON and JSON arrays, by a schema with
// every kind of column, and by inference). Invariants checked on every input:
// decoding never fails on bad bytes, every record is either a row or a reject,
// and the batch is a valid Arrow batch of the decoder's schema. And NDJSON
// decodes line by line: the input repeated into a large one (which the decoder
// parses with document streams over many lines, and reads in place when large)
// gives each copy's lines the rows and reject reasons the input gets alone.
#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <cstdlib>
#include <string>
#include <string_view>

#include <arrow/api.h>

#include "rill/connector/json_decoder.h"

namespace {

std::shared_ptr<arrow::Schema> FuzzSchema() {
  return arrow::schema({
      arrow::field("i", arrow::int64()),
      arrow::field("u8", arrow::uint8()),
      arrow::field("f", arrow::float32()),
      arrow::field("b", arrow::boolean()),
      arrow::field("s", arrow::utf8()),
      arrow::field("bin", arrow::binary()),
      arrow::field("ts", arrow::timestamp(arrow::TimeUnit::MICRO)),
      arrow::field("d", arrow::date32()),
      arrow::field("l", arrow::list(arrow::int32())),
      arrow::field("st", arrow::struct_({arrow::field("a", arrow::utf8()),
                                         arrow::field("n", arrow::list(arrow::float64()))})),
      arrow::field("m", arrow::map(arrow::utf8(), arrow::int16())),
      arrow::field("req", arrow::int32(), /*nullable=*/false),
  });
}

void Check(rill::JsonDecoder* decoder, std::string_view input) {
  auto result = decoder->Decode(input);
  if (!result.ok()) std::abort();  // bad bytes must never fail a decode
  const int64_t rows = result->batch ? result->batch->num_rows() : 0;
  if (rows + static_cast<int64_t>(result->rejects.size()) != result->records) std::abort();
  if (result->batch) {
    if (!result->batch->ValidateFull().ok()) std::abort();
    if (!result->batch->schema()->Equals(*decoder->schema())) std::abort();
  }
  for (const auto& r : result->rejects) {
    if (r.error.empty() || r.position.empty() || r.raw.size() > 64) std::abort();
  }
}

/// Decode `input` (with a final newline) alone, then repeated past a few KiB:
/// every copy must decode exactly as the input did alone.
void CheckRepeated(rill::JsonDecoder* decoder, std::string_view input) {
  const size_t first = input.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos || input[first] == '[') return;  // arrays: one record
  std::string line(input);
  if (line.back() != '\n') line += '\n';
  auto alone = decoder->Decode(line);
  if (!alone.ok()) std::abort();
  // Past 8 KiB (streams over many lines); one input in 8 past 64 KiB (read
  // in place but for the last lines).
  const size_t target = input.size() % 8 == 0 ? size_t{72} << 10 : size_t{8} << 10;
  const size_t copies = std::max<size_t>(2, target / line.size() + 1);
  std::string many;
  for (size_t i = 0; i < copies; ++i) many += line;
  auto all = decoder->Decode(many);
  if (!all.ok()) std::abort();
  const auto n = static_cast<int64_t>(copies);
  if (all->records != n * alone->records) std::abort();
  if (all->rejects.size() != copies * alone->rejects.size()) std::abort();
  for (size_t i = 0; i < all->rejects.size(); ++i) {
    if (all->rejects[i].error != alone->rejects[i % alone->rejects.size()].error) std::abort();
  }
  const int64_t rows = alone->batch ? alone->batch->num_rows() : 0;
  if ((all->batch ? all->batch->num_rows() : 0) != n * rows) std::abort();
  for (int64_t i = 0; i < n && rows > 0; ++i) {
    if (!all->batch->Slice(i * rows, rows)->Equals(*alone->batch)) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  rill::JsonDecodeOptions options;
  options.max_raw_bytes = 64;
  options.max_record_bytes = 1 << 16;
  options.schema = FuzzSchema();
  static auto typed = rill::JsonDecoder::Make(options).ValueOrDie();
  Check(typed.get(), input);
  CheckRepeated(typed.get(), input);
  options.schema = nullptr;
  auto inferring = rill::JsonDecoder::Make(options).ValueOrDie();
  Check(inferring.get(), input);
  Check(inferring.get(), input);  // again, by the schema inferred the first time
  return 0;
}
