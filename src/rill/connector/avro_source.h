// AvroSource: where the writer schemas of an Avro input come from (a schema
// registry and the Confluent wire format, or one given schema), and the
// decoding of whole inputs (HTTP bodies): concatenated Confluent-framed
// records, or an Avro object container file.
//
// Options are named as the user writes them (KafkaConnector, HTTP ingest,
// docs/avro.md): `schema_registry_url` (userinfo allowed:
// http://user:password@host:port), `schema_registry_user`,
// `schema_registry_password`, `avro_schema` (the JSON text of the writer
// schema of plain Avro binary values). Exactly one of schema_registry_url and
// avro_schema is needed.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "rill/common/status.h"
#include "rill/connector/avro_decoder.h"
#include "rill/connector/avro_schema.h"
#include "rill/connector/connector.h"
#include "rill/connector/schema_registry.h"

namespace rill {

/// How to find the writer schema of Avro values.
struct AvroSourceOptions {
  std::string schema_registry_url;
  std::string schema_registry_user;
  std::string schema_registry_password;
  /// Plain Avro: the writer schema's JSON text (values are bare Avro binary).
  std::string avro_schema;
  int64_t schema_registry_timeout_ms = 10000;
};

/// One value's writer schema and body.
struct AvroValue {
  std::shared_ptr<const AvroSchema> writer;
  std::string_view body;
  int64_t body_offset = 0;  ///< where the body starts in the value (5 when framed)
};

/// Gives the writer schema of each value. Thread-safe (the registry client is;
/// the fixed schema is immutable).
class AvroSource {
 public:
  /// Make a source. Invalid when neither or both of schema_registry_url and
  /// avro_schema are given, for a bad URL, or for an avro_schema that does not parse.
  static Result<std::shared_ptr<AvroSource>> Make(const AvroSourceOptions& options);

  /// Split `value` into writer schema and body. With a registry: Invalid for a
  /// value not in the Confluent wire format, KeyError / Invalid for a schema id
  /// the registry does not have or a schema that does not parse (reject the
  /// value), IOError when the registry cannot be asked (retry later).
  Result<AvroValue> Resolve(std::string_view value);

  /// Whether values are Confluent-framed (a registry is configured).
  bool framed() const { return registry_ != nullptr; }
  const std::shared_ptr<SchemaRegistryClient>& registry() const { return registry_; }

 private:
  AvroSource() = default;
  std::shared_ptr<SchemaRegistryClient> registry_;
  std::shared_ptr<const AvroSchema> fixed_;
};

/// What decoding a whole input produced.
struct AvroDecodeResult {
  std::shared_ptr<arrow::RecordBatch> batch;  ///< the good records (null: none)
  std::vector<RejectedRecord> rejects;        ///< positions "byte N", raw bytes kept
  int64_t records = 0;                        ///< records seen
};

/// Decode a whole input with `decoder`: an Avro object container file (it
/// starts with "Obj\x01"; codecs null and deflate; its own schema is the
/// writer schema) or, otherwise, records one after another (Confluent-framed
/// when `source` has a registry, else bare with its schema). A bad record in
/// an object container file's block rejects the rest of that block (records
/// have no length: the next one cannot be found), and the file goes on at the
/// next block; in a concatenation a bad record rejects the rest of the input.
/// IOError when the registry cannot be asked; Invalid for a container file
/// whose header is bad.
Result<AvroDecodeResult> DecodeAvroInput(AvroSource* source, AvroDecoder* decoder,
                                         std::string_view data, int64_t max_raw_bytes = 4096);

}  // namespace rill
