// Private to connector/: the row operations of decoded records (issue 25).
//
// The decoders of change formats (the Debezium envelope, an `op_column` of the
// records, Kafka tombstones) add the operation column of common/row_ops.h to
// their batches: kWriteOpColumn, int8 RowOp codes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <simdjson.h>

#include "rill/common/row_ops.h"
#include "rill/common/status.h"

namespace rill::json_internal {

inline constexpr const char* kOpColumn = kWriteOpColumn;
using OpCode = RowOp;

/// One Debezium change event, as ParseDebeziumEnvelope read it.
struct ChangeEnvelope {
  OpCode op = OpCode::kUpsert;
  /// The JSON text of the row the operation carries: `after` (c, u, r) or
  /// `before` (d); empty for t. A view into the parsed record.
  std::string_view row;
  bool has_ts = false;  ///< the event has source.ts_ms
  int64_t ts_ms = 0;    ///< source.ts_ms
};

/// Read the Debezium envelope `record` (a view into a buffer with simdjson's
/// padding, `capacity` bytes from record.data()): {"before", "after", "op",
/// "source": {..., "ts_ms"}, ...}, or the same inside {"schema", "payload"}.
/// Invalid naming what is wrong: not an object, a missing or unknown op, c/u/r
/// without an `after` object, d without a `before` object, a non-integer
/// source.ts_ms, a duplicate field, bad JSON. Uses `parser` (the views it
/// returns point into `record`, not into the parser).
Status ParseDebeziumEnvelope(simdjson::ondemand::parser* parser, std::string_view record,
                             size_t capacity, ChangeEnvelope* out);

}  // namespace rill::json_internal
