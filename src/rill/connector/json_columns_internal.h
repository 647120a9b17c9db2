// Private to connector/: the column buffers JsonDecoder writes values into.
//
// A ColumnWriter holds the Arrow buffers of one column (or nested child) while
// a Decode fills them. Values are written at an index (the row, or for the
// children of lists and maps the element), never appended: writing index i
// again overwrites it. Variable-length data of index i starts at offsets[i],
// which the indexes before it fixed, so a record that fails midway is dropped
// by not counting its row: the next record overwrites whatever it wrote. There
// is no staging and no per-value builder bookkeeping; the decoder picks the
// write by the column's Arrow type id once per value (one switch).
//
// Buffers are handed to the batch by FinishColumn (the writer then starts
// empty and grows again for the next Decode, sized by what the last one held).
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include <arrow/buffer.h>
#include <arrow/type_fwd.h>

#include "rill/connector/json_convert_internal.h"

namespace rill::json_internal {

/// The buffers of one column or nested child being decoded.
struct ColumnWriter {
  const ColumnSpec* spec = nullptr;  ///< outlives the writer
  int type_id = 0;                   ///< spec->type_id
  int width = 0;        ///< bytes of a fixed-width value (0: bool, or not fixed-width)
  bool offsets = false; ///< values are offsets (string, binary, list, map)
  bool large = false;   ///< 64-bit offsets
  int64_t capacity = 0;       ///< indexes the buffers hold
  int64_t data_capacity = 0;  ///< bytes of `data`
  std::shared_ptr<arrow::ResizableBuffer> validity_buf, values_buf, data_buf;
  uint8_t* validity = nullptr;  ///< a bit per index
  uint8_t* values = nullptr;    ///< fixed-width values, bits (bool), or offsets (capacity + 1)
  uint8_t* data = nullptr;      ///< string and binary bytes
  /// Struct fields; list value; map key and item.
  std::vector<ColumnWriter> children;
  /// Indexes and data bytes the last finished column held per input byte.
  double values_per_byte = 0;
  double data_per_byte = 0;
};

/// Make the (empty) writer of `spec`, recursively.
ColumnWriter MakeColumnWriter(const ColumnSpec& spec);

/// Grow `w` to hold at least `indexes` indexes (amortized: at least doubles).
Status GrowColumn(ColumnWriter* w, int64_t indexes);
/// Grow the data of `w` to at least `bytes`.
Status GrowData(ColumnWriter* w, int64_t bytes);

/// Make `w` hold index `i`.
inline Status EnsureIndex(ColumnWriter& w, int64_t i) {
  return i < w.capacity ? Status::OK() : GrowColumn(&w, i + 1);
}

/// Size `w` and its children for `bytes` of input of about `rows` records,
/// going by what the last finished column held per input byte.
Status ReserveColumn(ColumnWriter* w, double bytes, int64_t rows);

inline void SetBit(uint8_t* bits, int64_t i, bool v) {
  const uint8_t mask = static_cast<uint8_t>(1u << (i & 7));
  bits[i >> 3] = static_cast<uint8_t>((bits[i >> 3] & ~mask) | (-static_cast<int>(v) & mask));
}

inline bool IsValid(const ColumnWriter& w, int64_t i) {
  return (w.validity[i >> 3] >> (i & 7)) & 1;
}

inline int64_t OffsetAt(const ColumnWriter& w, int64_t i) {
  if (w.large) {
    int64_t v;
    std::memcpy(&v, w.values + i * 8, 8);
    return v;
  }
  int32_t v;
  std::memcpy(&v, w.values + i * 4, 4);
  return v;
}

inline void SetOffset(ColumnWriter& w, int64_t i, int64_t v) {
  if (w.large) {
    std::memcpy(w.values + i * 8, &v, 8);
  } else {
    const int32_t v32 = static_cast<int32_t>(v);
    std::memcpy(w.values + i * 4, &v32, 4);
  }
}

/// Write the valid fixed-width value `v` at `i` (< capacity).
template <typename T>
inline void PutValue(ColumnWriter& w, int64_t i, T v) {
  std::memcpy(w.values + i * static_cast<int64_t>(sizeof(T)), &v, sizeof(T));
  SetBit(w.validity, i, true);
}

/// Write the valid string/binary `s` at `i` (< capacity).
[[gnu::always_inline]] inline Status PutString(ColumnWriter& w, int64_t i, std::string_view s) {
  const int64_t start = OffsetAt(w, i);
  const int64_t end = start + static_cast<int64_t>(s.size());
  if (end > w.data_capacity) RILL_RETURN_NOT_OK(GrowData(&w, end));
  if (!s.empty()) std::memcpy(w.data + start, s.data(), s.size());
  SetOffset(w, i + 1, end);
  SetBit(w.validity, i, true);
  return Status::OK();
}

/// Strings up to this long are copied by one fixed-size copy (WriteTyped).
inline constexpr int64_t kShortString = 32;
static_assert(kShortString <= simdjson::SIMDJSON_PADDING);

/// Write null at `i` (< capacity). Struct children get empty values and a
/// fixed_size_list's items nulls, as Arrow's builders append them.
Status WriteNull(ColumnWriter& w, int64_t i);

/// Write `cell` (converted for the scalar kind of `w`, or null) at `i`.
Status WriteCell(ColumnWriter& w, int64_t i, const Cell& cell);

/// Write the ISO-8601 string `text` of a timestamp/date column at `i` (<
/// capacity) when it has a common form ("YYYY-MM-DD", "YYYY-MM-DDTHH:MM:SS"
/// with an optional fraction and 'Z', years 1900-2199), as Convert would from
/// Arrow's parser; false for anything else (Convert decides). Out of line: the
/// field loop, which inlines WriteTyped, ran ~30 % slower with it inlined.
[[gnu::visibility("hidden"), gnu::noinline]] bool WriteIsoFast(ColumnWriter& w, int64_t i,
                                                               std::string_view text);

/// Read `value` by the typed getter of `w`'s type and write it at `i` (<
/// capacity): `*written` when it was (not null, in range). Otherwise the
/// value is left unconsumed for ReadScalar and Convert (nulls, other types,
/// errors, nested kinds), or, for temporal kinds, consumed into `*text` when
/// it was a string. Fails only when memory cannot be had. Always inlined:
/// called out of line (through the PLT of librill) it cost ~10 % of a decode.
[[gnu::always_inline]] inline Status WriteTyped(simdjson::ondemand::value& value, ColumnWriter& w, int64_t i,
                         JsonScalar* text, bool* written) {
  const ColumnSpec& spec = *w.spec;
  *written = false;
  switch (w.type_id) {
#define RILL_SIGNED_CASE(ID, CT)                                                        \
  case arrow::Type::ID: {                                                               \
    int64_t v;                                                                          \
    if (value.get_int64().get(v) || v < spec.min || v > static_cast<int64_t>(spec.max)) \
      return Status::OK();                                                              \
    PutValue<CT>(w, i, static_cast<CT>(v));                                             \
    break;                                                                              \
  }
    RILL_SIGNED_CASE(INT8, int8_t)
    RILL_SIGNED_CASE(INT16, int16_t)
    RILL_SIGNED_CASE(INT32, int32_t)
    RILL_SIGNED_CASE(INT64, int64_t)
#undef RILL_SIGNED_CASE
#define RILL_UNSIGNED_CASE(ID, CT)                                     \
  case arrow::Type::ID: {                                              \
    uint64_t v;                                                        \
    if (value.get_uint64().get(v) || v > spec.max) return Status::OK(); \
    PutValue<CT>(w, i, static_cast<CT>(v));                            \
    break;                                                             \
  }
    RILL_UNSIGNED_CASE(UINT8, uint8_t)
    RILL_UNSIGNED_CASE(UINT16, uint16_t)
    RILL_UNSIGNED_CASE(UINT32, uint32_t)
    RILL_UNSIGNED_CASE(UINT64, uint64_t)
#undef RILL_UNSIGNED_CASE
    case arrow::Type::DOUBLE: {
      double d;
      if (value.get_double().get(d)) return Status::OK();
      PutValue<double>(w, i, d);
      break;
    }
    case arrow::Type::FLOAT: {
      double d;
      if (value.get_double().get(d)) return Status::OK();
      PutValue<float>(w, i, static_cast<float>(d));
      break;
    }
    case arrow::Type::BOOL: {
      bool b;
      if (value.get_bool().get(b)) return Status::OK();
      SetBit(w.values, i, b);
      SetBit(w.validity, i, true);
      break;
    }
    case arrow::Type::STRING:
    case arrow::Type::LARGE_STRING:
    case arrow::Type::BINARY:
    case arrow::Type::LARGE_BINARY: {
      std::string_view s;
      if (value.get_string().get(s)) return Status::OK();
      const int64_t start = OffsetAt(w, i);
      if (s.size() <= kShortString && start + kShortString <= w.data_capacity) {
        // One fixed-size copy: get_string's unescaped strings lie in the
        // parser's string buffer, which has SIMDJSON_PADDING bytes after the
        // longest a document can unescape to.
        std::memcpy(w.data + start, s.data(), kShortString);
        SetOffset(w, i + 1, start + static_cast<int64_t>(s.size()));
        SetBit(w.validity, i, true);
        break;
      }
      RILL_RETURN_NOT_OK(PutString(w, i, s));
      break;
    }
    case arrow::Type::TIMESTAMP:
    case arrow::Type::DATE32:
    case arrow::Type::DATE64: {
      if (value.get_string().get(text->text)) return Status::OK();
      text->type = JsonScalar::kString;
      if (!WriteIsoFast(w, i, text->text)) return Status::OK();  // Convert decides
      break;
    }
    default:
      return Status::OK();
  }
  *written = true;
  return Status::OK();
}

/// Read the non-null object/array `value` of the nested column of `w` and
/// write it at `i` (< capacity), checking that it converts (every value below
/// it, including those of fields the struct does not have). Errors name the
/// path below the column (".a[2]: expected …").
Status WriteNested(simdjson::ondemand::value& value, ColumnWriter& w, int64_t i);

/// Hand the first `length` indexes of `w` over as an array (children
/// recursively); `w` starts empty again, remembering how much it held per
/// byte of the `bytes` of input.
Result<std::shared_ptr<arrow::ArrayData>> FinishColumn(ColumnWriter* w, int64_t length,
                                                       double bytes);

}  // namespace rill::json_internal
