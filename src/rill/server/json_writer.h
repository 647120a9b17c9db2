// Arrow values to JSON text, written straight into a string (no DOM), for
// query results (json / ndjson) and WebSocket frames: common/arrow_json.h
// with the server's options (valid UTF-8, floats with 17 digits).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <arrow/type_fwd.h>

#include "rill/common/status.h"

namespace rill::server {

/// Append `text` as a JSON string literal (quotes, escapes, invalid UTF-8
/// bytes replaced by U+FFFD).
void AppendJsonString(std::string_view text, std::string* out);
/// Append a double as JSON: null for NaN and infinities, integers without ".0".
void AppendJsonNumber(double value, std::string* out);

/// Append row `row` of `batch` as a JSON object {"column": value, ...}.
/// Numbers and booleans map to JSON numbers/booleans, nulls to null, strings
/// to strings, dictionaries to their values, nested lists/structs to arrays /
/// objects, every other type (timestamps, dates, decimals, binary) to the
/// string Arrow prints for it.
Status AppendJsonRow(const arrow::RecordBatch& batch, int64_t row, std::string* out);

/// Append [{"name": ..., "type": ...}, ...] for the fields of `schema`
/// (type as Arrow prints it, e.g. "int64", "timestamp[us]").
void AppendJsonColumns(const arrow::Schema& schema, std::string* out);

/// Return the whole table as {"columns": [...], "rows": [{...}], "row_count": n}.
/// CapacityError when the text would exceed `max_bytes` (0 = no cap).
Result<std::string> TableToJson(const arrow::Table& table, int64_t max_bytes);

}  // namespace rill::server
