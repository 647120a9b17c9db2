// libFuzzer target over JsonDecoder's row operations: format kDebezium (by a
// schema with a ts_ms_column, and by inference) and an op_column. Invariants
// checked on every input: decoding never fails on bad bytes, every record is a
// row or a reject, the batch is valid, holds the decoder's columns then
// "_rill_op", and every operation is a RowOp code (0..3).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include <arrow/api.h>

#include "rill/connector/json_decoder.h"

namespace {

std::shared_ptr<arrow::Schema> FuzzSchema() {
  return arrow::schema({
      arrow::field("id", arrow::int64(), /*nullable=*/false),
      arrow::field("s", arrow::utf8()),
      arrow::field("f", arrow::float64()),
      arrow::field("ts", arrow::timestamp(arrow::TimeUnit::NANO)),
      arrow::field("l", arrow::list(arrow::int32())),
      arrow::field("changed_at", arrow::timestamp(arrow::TimeUnit::MICRO, "UTC")),
  });
}

void Check(rill::JsonDecoder* decoder, std::string_view input) {
  auto result = decoder->Decode(input);
  if (!result.ok()) std::abort();  // bad bytes must never fail a decode
  const int64_t rows = result->batch ? result->batch->num_rows() : 0;
  if (rows + static_cast<int64_t>(result->rejects.size()) != result->records) std::abort();
  if (result->batch) {
    const auto& batch = *result->batch;
    if (!batch.ValidateFull().ok()) std::abort();
    const auto& schema = *decoder->schema();
    if (batch.num_columns() != schema.num_fields() + 1) std::abort();
    for (int i = 0; i < schema.num_fields(); ++i) {
      if (!batch.schema()->field(i)->Equals(schema.field(i))) std::abort();
    }
    auto ops = batch.GetColumnByName("_rill_op");
    if (!ops || ops->type_id() != arrow::Type::INT8 || ops->null_count() != 0) std::abort();
    const auto& codes = static_cast<const arrow::Int8Array&>(*ops);
    for (int64_t r = 0; r < codes.length(); ++r) {
      if (codes.Value(r) < 0 || codes.Value(r) > 3) std::abort();
    }
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
  options.format = rill::JsonFormat::kDebezium;
  options.schema = FuzzSchema();
  options.ts_ms_column = "changed_at";
  static auto typed = rill::JsonDecoder::Make(options).ValueOrDie();
  Check(typed.get(), input);
  options.schema = nullptr;
  options.ts_ms_column.clear();
  auto inferring = rill::JsonDecoder::Make(options).ValueOrDie();
  Check(inferring.get(), input);
  Check(inferring.get(), input);  // again, by the schema inferred the first time
  options.format = rill::JsonFormat::kJson;
  options.schema = FuzzSchema();
  options.op_column = "_op";
  static auto ops = rill::JsonDecoder::Make(options).ValueOrDie();
  Check(ops.get(), input);
  return 0;
}
