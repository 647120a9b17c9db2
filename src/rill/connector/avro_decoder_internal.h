// What the Avro decoder's files share: the column buffers (avro_columns.cc),
// the reading cursor and the value walkers that need no plan (avro_values.cc:
// skip, JSON text), used by the decoder (avro_decoder.cc).
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <arrow/buffer_builder.h>
#include <arrow/type.h>
#include <arrow/util/decimal.h>

#include "rill/common/status.h"
#include "rill/connector/avro_schema.h"

namespace rill::avro_internal {

/// What a column buffer holds.
enum class ColKind : uint8_t {
  kBool, kInt8, kInt16, kInt32, kInt64, kFloat32, kFloat64, kDate32, kTime32, kTime64,
  kTimestamp, kDecimal, kString, kBinary, kStruct, kList, kMap,
};

/// One output column (or a child of one) being built. Entries are appended
/// whole; Rollback(n) cuts the column back to its first n entries, children
/// included, so a bad record leaves no trace.
struct Col {
  ColKind kind = ColKind::kString;
  std::shared_ptr<arrow::Field> field;  ///< the decode field (type as built)
  int32_t width = 0;                    ///< bytes per value of fixed-width kinds
  arrow::TimeUnit::type unit = arrow::TimeUnit::MILLI;  ///< time kinds
  int32_t precision = 0, scale = 0;     ///< kDecimal
  int64_t length = 0;
  int64_t nulls = 0;
  /// One byte per entry once the batch has a null (empty while it has none:
  /// the common case pays nothing for validity).
  std::vector<uint8_t> valid;
  /// Fixed-width values, or the int32 offsets (length + 1) of string, binary,
  /// list and map columns.
  arrow::BufferBuilder values;
  arrow::BufferBuilder data;            ///< bytes of string / binary columns
  /// struct: the fields; list: [items]; map: [keys, values].
  std::vector<std::unique_ptr<Col>> children;

  arrow::MemoryPool* pool;

  explicit Col(arrow::MemoryPool* p) : values(p), data(p), pool(p) {}

  void MarkValid() {
    if (!valid.empty()) valid.push_back(1);
    ++length;
  }
  template <typename T>
  Status AppendValue(T v) {
    RILL_RETURN_NOT_OK(values.Reserve(sizeof(T)));
    values.UnsafeAppend(&v, sizeof(T));
    MarkValid();
    return Status::OK();
  }
  /// Append a fixed-width value of `n` bytes.
  Status AppendRaw(const void* p, int64_t n) {
    RILL_RETURN_NOT_OK(values.Append(p, n));
    MarkValid();
    return Status::OK();
  }
  /// Append a string / binary value (checked by the caller).
  Status AppendBytes(const uint8_t* p, int64_t n) {
    RILL_RETURN_NOT_OK(data.Append(p, n));
    if (data.length() > INT32_MAX) {
      return Status::CapacityError("Avro: over 2 GiB of strings in one batch");
    }
    return AppendValue(static_cast<int32_t>(data.length()));
  }
  /// Close a list / map entry whose items were appended to the children.
  Status CloseEntry(int64_t child_length) {
    if (child_length > INT32_MAX) return Status::CapacityError("Avro: list too long for a batch");
    return AppendValue(static_cast<int32_t>(child_length));
  }
  /// Close a struct entry whose fields were appended to the children.
  void CloseStruct() { MarkValid(); }
  Status AppendNull();

  int32_t LastOffset() const {
    return reinterpret_cast<const int32_t*>(values.data())[length];
  }
};

/// Make the column for a target field (unsupported types become utf8).
std::unique_ptr<Col> MakeCol(const std::shared_ptr<arrow::Field>& field, arrow::MemoryPool* pool);
/// Cut `col` back to its first `n` entries.
void Rollback(Col* col, int64_t n);
/// Return the built entries as an array and empty the column.
Result<std::shared_ptr<arrow::ArrayData>> FinishCol(Col* col);

/// Reads Avro binary from a byte range; offsets are reported from `base`.
struct Cursor {
  const uint8_t* p;
  const uint8_t* end;
  const uint8_t* begin;
  int64_t base;
  /// Items of zero-size types read so far (bounded by kMaxZeroSizeItems per
  /// record: they take no bytes, so the input's length does not bound them).
  int64_t zero_items = 0;

  int64_t offset() const { return base + (p - begin); }
  int64_t left() const { return end - p; }
};

/// Limits of the walkers.
struct Limits {
  int32_t max_depth = 64;
  int64_t max_value_bytes = 64 << 20;
};

/// Return an Invalid status "<what> at byte <offset>".
Status BadAt(const Cursor& c, std::string_view what);

/// Read a zig-zag varint (Avro int / long).
inline Status ReadLong(Cursor* c, int64_t* out) {
  *out = 0;
  uint64_t v = 0;
  int shift = 0;
  const uint8_t* p = c->p;
  while (true) {
    if (p == c->end) return BadAt(*c, "truncated varint");
    const uint8_t b = *p++;
    v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if (!(b & 0x80)) break;
    shift += 7;
    if (shift > 63) return BadAt(*c, "varint longer than 10 bytes");
  }
  c->p = p;
  *out = static_cast<int64_t>((v >> 1) ^ (~(v & 1) + 1));
  return Status::OK();
}

/// Read an Avro int (a varint that must fit 32 bits).
inline Status ReadInt(Cursor* c, int64_t* out) {
  const Cursor at = *c;
  RILL_RETURN_NOT_OK(ReadLong(c, out));
  if (*out < INT32_MIN || *out > INT32_MAX) return BadAt(at, "int out of 32-bit range");
  return Status::OK();
}

/// Read the length of a bytes / string value and check it is there.
inline Status ReadLength(Cursor* c, const Limits& limits, int64_t* n) {
  const Cursor at = *c;
  RILL_RETURN_NOT_OK(ReadLong(c, n));
  if (*n < 0) return BadAt(at, "negative length");
  if (*n > limits.max_value_bytes) return BadAt(at, "value longer than max_value_bytes");
  if (*n > c->left()) return BadAt(at, "length past the end of the record");
  return Status::OK();
}

/// Whether values of `w` take no bytes (null, fixed(0), records of such).
bool ZeroSize(const AvroNode& w, int depth = 0);

/// Most items of zero-size types in one record (Cursor::zero_items).
constexpr int64_t kMaxZeroSizeItems = 1 << 16;

/// Read the item count of an array / map block (a negative count is followed
/// by the block's size in bytes, read and dropped); 0 ends the value. Items
/// take at least a byte each unless `zero_size` (then Cursor::zero_items is
/// bounded by kMaxZeroSizeItems).
inline Status ReadBlockCount(Cursor* c, bool zero_size, int64_t* count) {
  const Cursor at = *c;
  RILL_RETURN_NOT_OK(ReadLong(c, count));
  if (*count < 0) {
    if (*count == INT64_MIN) return BadAt(at, "bad block count");
    *count = -*count;
    int64_t size = 0;
    RILL_RETURN_NOT_OK(ReadLong(c, &size));
    if (size < 0) return BadAt(at, "negative block size");
  }
  if (zero_size) {
    c->zero_items += *count;
    if (c->zero_items > kMaxZeroSizeItems) return BadAt(at, "too many items of a zero-size type");
  } else if (*count > c->left()) {
    return BadAt(at, "block count past the end of the record");
  }
  return Status::OK();
}

/// Skip one value of type `w`.
Status SkipValue(Cursor* c, const AvroNode& w, const Limits& limits, int depth);
/// Append the JSON text of one value of type `w` to `out` (unions as their
/// branch's value, bytes and fixed as strings of code points 0-255 as Avro's
/// JSON encoding does, decimals as numbers, enums as their symbol).
Status AppendJson(Cursor* c, const AvroNode& w, const Limits& limits, int depth, std::string* out);
/// Read the bytes of a decimal (bytes: length-prefixed; fixed: `w.size`) as a
/// Decimal128 (its unscaled value).
Status ReadDecimal(Cursor* c, const AvroNode& w, const Limits& limits, arrow::Decimal128* out);

}  // namespace rill::avro_internal
