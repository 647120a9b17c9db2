// libFuzzer target over JsonDecoder (NDJSON and JSON arrays, by a schema with
// every kind of column, and by inference). Invariants checked on every input:
// decoding never fails on bad bytes, every record is either a row or a reject,
// and the batch is a valid Arrow batch of the decoder's schema.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
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

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  rill::JsonDecodeOptions options;
  options.max_raw_bytes = 64;
  options.max_record_bytes = 1 << 16;
  options.schema = FuzzSchema();
  static auto typed = rill::JsonDecoder::Make(options).ValueOrDie();
  Check(typed.get(), input);
  options.schema = nullptr;
  auto inferring = rill::JsonDecoder::Make(options).ValueOrDie();
  Check(inferring.get(), input);
  Check(inferring.get(), input);  // again, by the schema inferred the first time
  return 0;
}
