// JsonDecoder: NDJSON (or a top-level JSON array of objects) into Arrow record
// batches, by a target schema, with per-record rejects.
//
// simdjson On-Demand parses the records and the values go straight into the
// batch's column buffers, written at the row's index (a rejected record's
// writes are overwritten by the next record); there are no intermediate row
// objects. NDJSON is parsed by document
// streams (iterate_many) over regions of up to 1 MiB of lines; a line a stream
// cannot decode exactly as it would decode on its own (a bad record, an object
// spread over lines, two documents on a line, bytes that fail the region's
// stage 1) is decoded on its own, so it alone is rejected, with the reason it
// has alone, and its neighbours are kept. A record that cannot be
// decoded (bad syntax, invalid UTF-8, a value of the wrong type, a number out of
// range, a duplicate field, a record over the size limit) becomes a
// RejectedRecord; the good records of the same input are kept. A record is
// all-or-nothing: its row counts only once all of its values converted.
//
// Conversions, by target column type:
//   int8..int64, uint8..uint64   JSON integers in range
//   float16/32/64                any JSON number
//   bool                         true / false
//   utf8, large_utf8             strings (unescaped); objects and arrays as their JSON
//                                text (numbers and booleans are refused, except in
//                                inferred columns of mixed types: JSON text)
//   binary, large_binary         strings (their UTF-8 bytes)
//   timestamp(unit[, tz])        ISO-8601 strings (UTC unless an offset is given;
//                                fractions finer than the unit are truncated), or
//                                numbers counted in the column's unit since the epoch
//   date32, date64               "YYYY-MM-DD" (or a full ISO timestamp), or numbers
//                                (date32: days, date64: milliseconds since the epoch)
//   struct, list, large_list,    objects / arrays, recursively by the same rules
//   fixed_size_list, map<utf8,_>
//   other types                  decoded as JSON text into utf8; the engine casts it
// `null` and missing fields are nulls. Fields not in the schema are ignored and
// counted (UnknownFieldPolicy::kIgnore) or reject the record (kReject).
//
// Without a schema, the first Decode infers one from its records: integers ->
// int64, other numbers -> float64 (int64 and float64 mixed -> float64), booleans
// -> bool, strings -> utf8; objects, arrays, fields that only hold nulls and
// fields whose values disagree in type -> utf8 (JSON text). Columns appear in the
// order their fields were first seen. Later Decodes use that schema.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <arrow/type_fwd.h>

#include "rill/common/status.h"
#include "rill/connector/connector.h"

namespace rill {

/// What to do with a field that the schema does not have.
enum class UnknownFieldPolicy {
  kIgnore,  ///< skip it and count it (DecodeResult::unknown_fields)
  kReject,  ///< reject the record, naming the field
};

/// How records are framed (the connectors' `format` option).
enum class JsonFormat {
  kJson,      ///< "json" (or "ndjson"): each record is a row
  kDebezium,  ///< "debezium": each record is a Debezium change event
};

/// Parse "json", "ndjson" or "debezium". Invalid naming the choices otherwise.
Result<JsonFormat> ParseJsonFormat(std::string_view name);
/// "json" or "debezium".
const char* JsonFormatName(JsonFormat format);

/// Options of a JsonDecoder.
struct JsonDecodeOptions {
  /// Decode into these columns; null: infer from the first Decode.
  std::shared_ptr<arrow::Schema> schema;
  UnknownFieldPolicy unknown_fields = UnknownFieldPolicy::kIgnore;
  /// A record (line or array element) longer than this is rejected unparsed.
  int64_t max_record_bytes = 64 << 20;
  /// Raw bytes kept in a RejectedRecord (the rest is cut, raw_size says how much).
  int64_t max_raw_bytes = 4096;
  /// Records inferred from when there is no schema (the rest are decoded by it).
  int64_t infer_records = 10000;
  /// Fill DecodeResult::row_offsets (for connectors that map rows back to
  /// the messages they came from).
  bool row_offsets = false;
  /// How records are framed (see the file comment).
  JsonFormat format = JsonFormat::kJson;
  /// A field of the records holding each row's operation ("" : none).
  std::string op_column;
  /// kDebezium: the column that receives source.ts_ms ("": none).
  std::string ts_ms_column;

  /// True when the batches carry the operation column "_rill_op".
  bool has_row_ops() const { return format == JsonFormat::kDebezium || !op_column.empty(); }
};

/// Where an input sits in its stream, for the positions of rejects.
struct JsonInputPosition {
  std::string prefix;     ///< prepended to positions, e.g. "file a.ndjson, "
  int64_t first_line = 1; ///< number of the input's first line
  int64_t base_offset = 0;///< stream offset of the input's first byte
};

/// What one Decode produced.
struct DecodeResult {
  /// The good records as one batch (null when there were none).
  std::shared_ptr<arrow::RecordBatch> batch;
  /// The bad records, in input order (connector names left empty).
  std::vector<RejectedRecord> rejects;
  int64_t records = 0;         ///< records seen (non-blank lines or array elements)
  int64_t unknown_fields = 0;  ///< ignored fields that the schema does not have
  /// With JsonDecodeOptions::row_offsets: the input offset of each row's record.
  std::vector<int64_t> row_offsets;
};

/// Decodes NDJSON or a JSON array of objects into record batches.
///
/// Not thread-safe: one decoder per producing thread (it reuses its parser and
/// column writers between calls).
class JsonDecoder {
 public:
  /// Make a decoder. Invalid for a bad option.
  static Result<std::unique_ptr<JsonDecoder>> Make(JsonDecodeOptions options);
  ~JsonDecoder();

  /// Decode `data`: NDJSON (one object per line; blank lines skipped; CRLF ok),
  /// or, when the first non-blank byte is '[', one JSON array of objects.
  /// Never fails on bad records (they become rejects); fails only when Arrow
  /// cannot allocate, or when there is no schema and none can be inferred.
  Result<DecodeResult> Decode(std::string_view data, const JsonInputPosition& where = {});

  /// Replace the target schema (for the next Decode); its columns named
  /// "_rill_op" or op_column are left out. Invalid for a ts_ms_column that is
  /// neither a timestamp nor an integer (the decoder keeps its schema then).
  Status SetSchema(std::shared_ptr<arrow::Schema> schema);

  /// The schema of the batches (the decode schema: target types, with types the
  /// decoder cannot fill replaced by utf8; a ts_ms_column added when missing).
  /// Null before inference. Batches with row operations also end with the
  /// column "_rill_op", which this schema does not list.
  std::shared_ptr<arrow::Schema> schema() const;

  class Impl;

 private:
  explicit JsonDecoder(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// Return `raw` cut to `max_bytes` (whole input when it fits).
std::string TruncateRaw(std::string_view raw, int64_t max_bytes);

}  // namespace rill
