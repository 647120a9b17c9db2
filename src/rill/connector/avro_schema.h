// AvroSchema: an Avro schema (its JSON text) parsed into a tree of nodes, and
// the mapping between Avro and Arrow types (docs/avro.md).
//
// The parser accepts the schema language of the Avro 1.11 specification:
// primitive names, records, enums, arrays, maps, unions, fixed, named-type
// references (full names and names relative to the enclosing namespace,
// recursive types included) and the logical types decimal (bytes and fixed),
// date, time-millis/micros, timestamp-millis/micros, local-timestamp-millis/
// micros, uuid (string and fixed) and duration. A logical type on the wrong
// base type, or with bad attributes, is ignored as the specification says.
//
// Avro -> Arrow (ToArrowSchema, used when the target table has no schema yet):
//   null -> utf8 (always null)       boolean -> bool        int -> int32
//   long -> int64                    float -> float32       double -> float64
//   bytes, fixed -> binary           string, enum, uuid -> utf8
//   record -> struct                 array -> list          map -> map<utf8, V>
//   union [null, T] / [T, null] -> T (nullable); other unions -> utf8 (JSON text)
//   decimal(p, s) -> decimal128(p, s) (p <= 38; else utf8)
//   date -> date32   time-millis -> time32[ms]   time-micros -> time64[us]
//   timestamp-millis/micros -> timestamp[ms/us, UTC]
//   local-timestamp-millis/micros -> timestamp[ms/us]
// A recursive record is not mappable (Invalid); it can still be read into a
// target schema (the recursive part as JSON text or skipped).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <arrow/type_fwd.h>

#include "rill/common/status.h"

namespace rill {

/// The Avro types.
enum class AvroType : uint8_t {
  kNull, kBoolean, kInt, kLong, kFloat, kDouble, kBytes, kString,
  kRecord, kEnum, kArray, kMap, kUnion, kFixed,
};

/// The logical types the decoder knows (kNone: none, or one it ignores).
enum class AvroLogical : uint8_t {
  kNone, kDecimal, kDate, kTimeMillis, kTimeMicros, kTimestampMillis,
  kTimestampMicros, kLocalTimestampMillis, kLocalTimestampMicros, kUuid, kDuration,
};

struct AvroNode;

/// A field of a record.
struct AvroField {
  std::string name;
  const AvroNode* type = nullptr;
  /// The field's "default" as JSON text ("" when it has none).
  std::string default_json;
};

/// One node of a parsed schema. Nodes are owned by their AvroSchema; named
/// types referenced twice (or recursively) are one node.
struct AvroNode {
  AvroType type = AvroType::kNull;
  AvroLogical logical = AvroLogical::kNone;
  int32_t precision = 0;  ///< decimal
  int32_t scale = 0;      ///< decimal
  int32_t size = 0;       ///< fixed
  std::string name;       ///< full name of a record, enum or fixed
  std::vector<AvroField> fields;           ///< record
  std::vector<std::string> symbols;        ///< enum
  std::vector<const AvroNode*> branches;   ///< union
  const AvroNode* items = nullptr;         ///< array items, map values
  /// Union: the index of the null branch (-1: none).
  int32_t null_branch = -1;
};

/// A parsed Avro schema. Immutable once made; share it with shared_ptr<const>.
/// Any thread.
class AvroSchema {
 public:
  /// Parse the JSON text of a schema. Invalid, naming what is wrong, for text
  /// that is not JSON or not a valid schema (unknown type name, duplicate
  /// field or symbol, bad name, union directly inside a union, …).
  static Result<std::shared_ptr<const AvroSchema>> Parse(std::string_view json);

  /// The top-level node.
  const AvroNode& root() const { return *root_; }
  /// The text the schema was parsed from.
  const std::string& json() const { return json_; }

  /// Return the Arrow schema of the records (the mapping in the file comment).
  /// Invalid when the root is not a record, or holds a recursive type.
  Result<std::shared_ptr<arrow::Schema>> ToArrowSchema() const;

  struct Builder;

 private:
  AvroSchema() = default;
  std::string json_;
  std::vector<std::unique_ptr<AvroNode>> nodes_;
  const AvroNode* root_ = nullptr;
};

/// Return the Arrow type an Avro node maps to (the file comment); Invalid for
/// a recursive type. `depth` guards the recursion.
Result<std::shared_ptr<arrow::DataType>> AvroToArrowType(const AvroNode& node, int depth = 0);

/// Return the JSON text of an Avro record schema for Arrow `schema`, for
/// writers (the Kafka sink): bool -> boolean, int8/16/32, uint8/16 -> int,
/// int64, uint32/64 -> long (uint64 over 2^63-1 fails at encoding), float32 ->
/// float, float64 -> double, utf8 / large_utf8 -> string, binary / large_binary /
/// fixed_size_binary -> bytes, date32 / date64 -> int (date), timestamp[s, ms]
/// -> long (timestamp-millis or local-timestamp-millis without a time zone),
/// timestamp[us, ns] -> long (timestamp-micros / local-…), decimal128 -> bytes
/// (decimal), struct -> record, list / large_list -> array, map<string, V> ->
/// map, dictionary -> its value type; every field a union [null, T]
/// with default null. NotImplemented for other types, naming the field.
Result<std::string> ArrowToAvroSchemaJson(const arrow::Schema& schema,
                                          const std::string& record_name);

/// Return `text` as a JSON string literal (quotes included).
std::string AvroJsonQuote(std::string_view text);

}  // namespace rill
