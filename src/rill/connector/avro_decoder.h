// AvroDecoder: Avro binary records straight into Arrow arrays of a target
// schema, by Avro's schema-resolution rules, with per-record errors.
//
// The writer schema is the one the bytes were written with (an AvroSchema:
// given, or fetched from a schema registry by id); the reader schema is the
// target table's Arrow schema. For each writer schema the decoder compiles
// once a plan (writer node -> target column, conversion) and then walks the
// bytes appending to its own column buffers (Arrow buffer builders); Flush
// turns them into a RecordBatch without copying.
//
// Resolution (docs/avro.md has the full table):
//   - record fields are matched by name, at every level; reader columns the
//     writer lacks are null; writer fields the reader lacks are skipped;
//   - promotions int -> long -> float -> double; int/long into any integer
//     column when the value fits (else the record is rejected), string <-> bytes
//     (bytes into a string column must be UTF-8), enum -> string (its symbol);
//   - unions: a writer union is resolved branch by branch (null -> null);
//   - record -> struct, array -> list, map -> map<utf8, V>; any Avro value into
//     a utf8 column that is not a string in Avro becomes its JSON text (so a
//     nested record, array or map can be kept as a JSON string, as JsonDecoder
//     does for objects);
//   - logical types: decimal -> decimal128 (same or larger scale), float64 or
//     utf8 (its text); date -> date32; timestamp-millis/micros and local-… ->
//     timestamp of any unit (converted); time-millis/micros -> time32/time64;
//     uuid -> utf8;
//   - other target types (large_utf8, uint*, …) are decoded as utf8 (JSON text)
//     and the engine casts them, as JsonDecoder does.
// A writer type that cannot be read as its column (string into int64, …)
// rejects each record that holds a value of it, naming the field.
//
// Errors name the field (its path, "a.b") and the byte offset of the bad
// value: "field 'a.b': enum index 7 out of range (3 symbols) at byte 12". A
// record is all-or-nothing: on an error, what it appended is rolled back.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <arrow/type_fwd.h>

#include "rill/common/status.h"
#include "rill/connector/avro_schema.h"

namespace rill {

/// Options of an AvroDecoder.
struct AvroDecodeOptions {
  /// The reader schema (the target table's columns); null: the first writer
  /// schema's fields (AvroSchema::ToArrowSchema).
  std::shared_ptr<arrow::Schema> schema;
  /// Pool of the column buffers; null: Arrow's default pool.
  arrow::MemoryPool* pool = nullptr;
  /// Deepest nesting of values (recursive schemas) before a record is refused.
  int32_t max_depth = 64;
  /// A single string, bytes, array block or map block longer than this is refused
  /// (guards against lengths that would allocate without bound).
  int64_t max_value_bytes = 64 << 20;
};

/// Decodes Avro binary records into record batches.
///
/// Not thread-safe: one decoder per producing thread. Writer schemas passed
/// to Append must outlive the decoder or the next SetSchema (plans point into
/// them; hold them in shared_ptr, as a registry client does).
class AvroDecoder {
 public:
  /// Make a decoder. Invalid for a bad option.
  static Result<std::unique_ptr<AvroDecoder>> Make(AvroDecodeOptions options);
  ~AvroDecoder();

  /// Decode one record written with `writer` from the front of `data` and
  /// append it as a row. `base_offset` is added to the byte offsets of errors
  /// (the position of `data` in its message). With `consumed` null, bytes
  /// left after the record are an error; otherwise `*consumed` is set to the
  /// record's size (for concatenated records). Invalid (nothing appended) for
  /// a bad record; fails only then, or when Arrow cannot allocate, or when
  /// there is no schema yet and `writer` has no Arrow mapping.
  Status Append(const std::shared_ptr<const AvroSchema>& writer, std::string_view data,
                int64_t base_offset = 0, int64_t* consumed = nullptr);

  /// The rows appended since the last Flush.
  int64_t num_rows() const;
  /// Return the appended rows as one batch (null when there are none) and
  /// start a new one.
  Result<std::shared_ptr<arrow::RecordBatch>> Flush();

  /// Replace the reader schema (rows appended and not flushed are dropped).
  Status SetSchema(std::shared_ptr<arrow::Schema> schema);
  /// The schema of the batches (the reader schema with the types the decoder
  /// cannot fill replaced by utf8); null before the first Append without one.
  std::shared_ptr<arrow::Schema> schema() const;

  class Impl;

 private:
  explicit AvroDecoder(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// The Confluent wire format: magic byte 0, a 4-byte big-endian schema id,
/// then the Avro binary body.
struct ConfluentFrame {
  int32_t schema_id = 0;
  std::string_view body;
};

/// Split a Confluent-framed value. Invalid for a value shorter than 5 bytes or
/// whose first byte is not 0.
Result<ConfluentFrame> ParseConfluentFrame(std::string_view value);

/// Append the 5-byte Confluent header for `schema_id` to `out`.
void AppendConfluentHeader(int32_t schema_id, std::string* out);

}  // namespace rill
