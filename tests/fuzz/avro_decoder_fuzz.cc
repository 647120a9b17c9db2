// libFuzzer target over the Avro decoder: the schema parser (AvroSchema::Parse),
// AvroDecoder (Avro binary by writer schemas of every kind of type, into a
// reader schema that matches, differs and promotes, and by inference), and
// DecodeAvroInput (concatenated records and object container files, the reader
// of HTTP ingest). The first input byte picks the case:
//   bit 0 clear: the rest is a body decoded with each fixed writer schema;
//   bit 0 set:   the rest is "<schema JSON>\n<body>" (parser + decoder).
// Invariants on every input: nothing crashes or fails other than Invalid /
// NotImplemented / CapacityError with a message; rows + rejects == records;
// every batch passes ValidateFull and has the decoder's schema; a refused
// record leaves the decoder's row count unchanged.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include <arrow/api.h>

#include "rill/connector/avro_decoder.h"
#include "rill/connector/avro_source.h"

namespace {

const char* kWriters[] = {
    R"({"type":"record","name":"A","fields":[{"name":"i","type":"int"},{"name":"l","type":"long"},
       {"name":"s","type":"string"},{"name":"b","type":"bytes"},{"name":"f","type":"float"},
       {"name":"d","type":"double"},{"name":"t","type":"boolean"},{"name":"n","type":["null","string"]}]})",
    R"({"type":"record","name":"B","fields":[
       {"name":"e","type":{"type":"enum","name":"E","symbols":["X","Y","Z"]}},
       {"name":"a","type":{"type":"array","items":["null","long"]}},
       {"name":"m","type":{"type":"map","values":{"type":"array","items":"string"}}},
       {"name":"r","type":{"type":"record","name":"R","fields":[{"name":"x","type":"double"},
          {"name":"fx","type":{"type":"fixed","name":"F","size":3}}]}},
       {"name":"u","type":["int","string","R","null"]}]})",
    R"({"type":"record","name":"C","fields":[
       {"name":"dec","type":{"type":"bytes","logicalType":"decimal","precision":20,"scale":4}},
       {"name":"fdec","type":{"type":"fixed","name":"FD","size":20,"logicalType":"decimal","precision":38,"scale":2}},
       {"name":"day","type":{"type":"int","logicalType":"date"}},
       {"name":"ms","type":{"type":"long","logicalType":"timestamp-millis"}},
       {"name":"us","type":{"type":"long","logicalType":"timestamp-micros"}},
       {"name":"id","type":{"type":"fixed","name":"U","size":16,"logicalType":"uuid"}},
       {"name":"z","type":{"type":"array","items":"null"}}]})",
    R"({"type":"record","name":"L","fields":[{"name":"v","type":"int"},{"name":"next","type":["null","L"]}]})",
};

std::shared_ptr<arrow::Schema> Reader() {
  // Names of every writer above, with other types: promotions, JSON text,
  // decimals of another scale, timestamps in other units, a missing column.
  return arrow::schema({
      arrow::field("i", arrow::int8()), arrow::field("l", arrow::float64()),
      arrow::field("s", arrow::binary()), arrow::field("b", arrow::utf8()),
      arrow::field("t", arrow::boolean()), arrow::field("n", arrow::utf8()),
      arrow::field("e", arrow::utf8()), arrow::field("a", arrow::list(arrow::int16())),
      arrow::field("m", arrow::map(arrow::utf8(), arrow::list(arrow::utf8()))),
      arrow::field("r", arrow::struct_({arrow::field("x", arrow::float32()),
                                        arrow::field("fx", arrow::binary()),
                                        arrow::field("gone", arrow::int64())})),
      arrow::field("u", arrow::utf8()), arrow::field("dec", arrow::decimal128(24, 6)),
      arrow::field("fdec", arrow::float64()), arrow::field("day", arrow::date32()),
      arrow::field("ms", arrow::timestamp(arrow::TimeUnit::NANO)),
      arrow::field("us", arrow::timestamp(arrow::TimeUnit::SECOND)),
      arrow::field("id", arrow::utf8()), arrow::field("z", arrow::utf8()),
      arrow::field("v", arrow::int32()), arrow::field("next", arrow::utf8()),
      arrow::field("missing", arrow::large_utf8()),
  });
}

bool Expected(const arrow::Status& st) {
  return (st.IsInvalid() || st.IsNotImplemented() || st.IsCapacityError()) &&
         !st.message().empty();
}

void CheckBatch(const std::shared_ptr<arrow::RecordBatch>& batch, rill::AvroDecoder* decoder) {
  if (!batch) return;
  if (!batch->ValidateFull().ok()) std::abort();
  if (!batch->schema()->Equals(*decoder->schema())) std::abort();
}

/// Append records from `body` one after another until it ends or one fails.
void Records(const std::shared_ptr<const rill::AvroSchema>& writer, std::string_view body,
             rill::AvroDecoder* decoder) {
  int64_t at = 0;
  for (int i = 0; i < 64 && at < static_cast<int64_t>(body.size()); ++i) {
    const int64_t before = decoder->num_rows();
    int64_t used = 0;
    auto st = decoder->Append(writer, body.substr(static_cast<size_t>(at)), at, &used);
    if (!st.ok()) {
      if (!Expected(st) || decoder->num_rows() != before) std::abort();
      break;
    }
    if (decoder->num_rows() != before + 1 || used < 0) std::abort();
    if (used == 0) break;  // a record of no bytes: the rest would repeat it
    at += used;
  }
  // The same body as exactly one record (trailing bytes refused).
  auto st = decoder->Append(writer, body);
  if (!st.ok() && !Expected(st)) std::abort();
  auto batch = decoder->Flush();
  if (!batch.ok()) std::abort();
  CheckBatch(*batch, decoder);
}

void Input(rill::AvroSource* source, std::string_view body, rill::AvroDecoder* decoder) {
  auto result = rill::DecodeAvroInput(source, decoder, body, /*max_raw_bytes=*/64);
  if (!result.ok()) {
    if (!Expected(result.status())) std::abort();
    return;
  }
  const int64_t rows = result->batch ? result->batch->num_rows() : 0;
  if (rows + static_cast<int64_t>(result->rejects.size()) > result->records) std::abort();
  for (const auto& r : result->rejects) {
    if (r.error.empty() || r.position.empty() || r.raw.size() > 64) std::abort();
  }
  CheckBatch(result->batch, decoder);
}

rill::AvroDecodeOptions Options(std::shared_ptr<arrow::Schema> schema) {
  rill::AvroDecodeOptions o;
  o.schema = std::move(schema);
  o.max_value_bytes = 1 << 16;
  o.max_depth = 16;
  return o;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  static auto reader = Reader();
  if ((data[0] & 1) == 0) {
    static std::vector<std::shared_ptr<const rill::AvroSchema>> writers = [] {
      std::vector<std::shared_ptr<const rill::AvroSchema>> out;
      for (const char* w : kWriters) out.push_back(rill::AvroSchema::Parse(w).ValueOrDie());
      return out;
    }();
    const auto& writer = writers[(data[0] >> 1) % writers.size()];
    auto typed = rill::AvroDecoder::Make(Options(reader)).ValueOrDie();
    Records(writer, input, typed.get());
    if (writer->ToArrowSchema().ok()) {
      auto inferring = rill::AvroDecoder::Make(Options(nullptr)).ValueOrDie();
      Records(writer, input, inferring.get());
    }
    rill::AvroSourceOptions source_options;
    source_options.avro_schema = writer->json();
    auto source = rill::AvroSource::Make(source_options).ValueOrDie();
    auto decoder = rill::AvroDecoder::Make(Options(reader)).ValueOrDie();
    Input(source.get(), input, decoder.get());
    return 0;
  }
  const size_t newline = input.find('\n');
  if (newline == std::string_view::npos) {
    auto parsed = rill::AvroSchema::Parse(input);
    if (!parsed.ok() && !Expected(parsed.status())) std::abort();
    return 0;
  }
  auto parsed = rill::AvroSchema::Parse(input.substr(0, newline));
  if (!parsed.ok()) {
    if (!Expected(parsed.status())) std::abort();
    return 0;
  }
  auto typed = rill::AvroDecoder::Make(Options(reader)).ValueOrDie();
  Records(*parsed, input.substr(newline + 1), typed.get());
  auto inferred = (*parsed)->ToArrowSchema();
  if (inferred.ok()) {
    auto decoder = rill::AvroDecoder::Make(Options(nullptr)).ValueOrDie();
    Records(*parsed, input.substr(newline + 1), decoder.get());
  }
  return 0;
}
