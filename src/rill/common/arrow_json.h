// Arrow values and rows as JSON text, written straight into a string (no
// DOM): the one writer behind the server's results and WebSocket frames, the
// Kafka sink's messages and the file sink's NDJSON. The callers differ only
// in what ArrowJsonOptions says, so each keeps the exact text it wrote before.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <arrow/type_fwd.h>

#include "rill/common/status.h"

namespace rill {

/// How a float or double is written; NaN and infinities are null either way.
enum class JsonFloatFormat {
  /// The shortest text that reads back as the same double (std::to_chars):
  /// 0.1, 1, -0, 1e+20. The sinks' format.
  kShortest,
  /// Integral values below 1e15 as integers (-0 as 0), any other value with
  /// 17 significant digits (%.17g): 0.10000000000000001. The server's format.
  kSeventeenDigits,
};

/// What differs between the writers' JSON.
struct ArrowJsonOptions {
  /// Replace each byte >= 0x80 of a string that is not valid UTF-8 by U+FFFD
  /// (a consumer's JSON parser would refuse the whole text); false copies the
  /// bytes as they are.
  bool replace_invalid_utf8 = true;
  JsonFloatFormat float_format = JsonFloatFormat::kShortest;
};

/// Append `text` as a JSON string literal (quotes, escapes; see
/// ArrowJsonOptions::replace_invalid_utf8). Any thread.
void AppendArrowJsonString(std::string_view text, bool replace_invalid_utf8, std::string* out);

/// Append `value` as a JSON number in `format` (null when not finite). Any thread.
void AppendArrowJsonDouble(double value, JsonFloatFormat format, std::string* out);

/// Append `array[i]` as JSON: null as null, numbers and booleans as JSON
/// numbers/booleans, strings as strings, dictionaries as their values, lists
/// and structs as arrays and objects, every other type (timestamps, dates,
/// decimals, binary, maps, ...) as the string Arrow's Scalar::ToString prints.
/// Any thread (the array is only read).
Status AppendArrowJsonValue(const arrow::Array& array, int64_t i, const ArrowJsonOptions& options,
                            std::string* out);

/// Append row `row` of `batch` as a JSON object {"column": value, ...} in
/// column order (values as AppendArrowJsonValue writes them). Any thread.
Status AppendArrowJsonRow(const arrow::RecordBatch& batch, int64_t row,
                          const ArrowJsonOptions& options, std::string* out);

}  // namespace rill
