#include "rill/sql/column_stats_internal.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include <arrow/array.h>
#include <arrow/type.h>
#include <arrow/util/bit_util.h>
#include <arrow/util/endian.h>

namespace rill::sql_internal {
namespace {

// Calls f(i) for every non-null slot i of `array`.
template <typename F>
void ForEachValid(const arrow::Array& array, F&& f) {
  const int64_t n = array.length();
  if (array.null_count() == 0) {
    for (int64_t i = 0; i < n; ++i) {
      f(i);
    }
    return;
  }
  const uint8_t* validity = array.null_bitmap_data();
  const int64_t offset = array.offset();
  for (int64_t i = 0; i < n; ++i) {
    if (arrow::bit_util::GetBit(validity, offset + i)) {
      f(i);
    }
  }
}

template <typename T>
void SummarizeIntegers(const T* values, const arrow::Array& array, ColumnSummary* out) {
  T lo = std::numeric_limits<T>::max();
  T hi = std::numeric_limits<T>::lowest();
  ForEachValid(array, [&](int64_t i) {
    lo = std::min(lo, values[i]);
    hi = std::max(hi, values[i]);
  });
  if constexpr (std::is_signed_v<T>) {
    out->kind = ColumnSummary::Kind::kSigned;
    out->min_signed = lo;
    out->max_signed = hi;
  } else {
    out->kind = ColumnSummary::Kind::kUnsigned;
    out->min_unsigned = lo;
    out->max_unsigned = hi;
  }
  out->has_bounds = true;
}

template <typename T>
void SummarizeFloats(const T* values, const arrow::Array& array, ColumnSummary* out) {
  double lo = std::numeric_limits<double>::max();
  double hi = std::numeric_limits<double>::lowest();
  bool finite = true;
  ForEachValid(array, [&](int64_t i) {
    double v = values[i];
    finite = finite && std::isfinite(v);
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  });
  out->kind = ColumnSummary::Kind::kFloat;
  // DuckDB orders NaN above every number; we only express finite bounds.
  out->has_bounds = finite;
  out->min_float = lo;
  out->max_float = hi;
}

uint64_t Prefix(const uint8_t* data, int64_t length) {
  uint64_t word = 0;
  if (length > 0) {
    std::memcpy(&word, data, static_cast<size_t>(std::min<int64_t>(length, 8)));
  }
  return arrow::bit_util::FromBigEndian(word);
}

bool AnyHighBit(const uint8_t* data, int64_t length) {
  uint64_t acc = 0;
  int64_t i = 0;
  for (; i + 8 <= length; i += 8) {
    uint64_t word;
    std::memcpy(&word, data + i, 8);
    acc |= word;
  }
  for (; i < length; ++i) {
    acc |= data[i];
  }
  return (acc & 0x8080808080808080ULL) != 0;
}

template <typename Offset>
void SummarizeStrings(const Offset* offsets, const uint8_t* data, const arrow::Array& array,
                      ColumnSummary* out) {
  uint64_t lo = std::numeric_limits<uint64_t>::max();
  uint64_t hi = 0;
  int64_t longest = 0;
  ForEachValid(array, [&](int64_t i) {
    const int64_t length = offsets[i + 1] - offsets[i];
    const uint64_t prefix = Prefix(data + offsets[i], length);
    lo = std::min(lo, prefix);
    hi = std::max(hi, prefix);
    longest = std::max(longest, length);
  });
  out->kind = ColumnSummary::Kind::kString;
  out->has_bounds = true;
  out->min_prefix = lo;
  out->max_prefix = hi;
  out->max_length = static_cast<uint64_t>(longest);
  // Every byte the array addresses, null slots included: a superset is sound.
  const int64_t n = array.length();
  out->non_ascii = n > 0 && AnyHighBit(data + offsets[0], offsets[n] - offsets[0]);
}

}  // namespace

std::optional<ColumnSummary> SummarizeArray(const arrow::Array& array) {
  ColumnSummary out;
  const auto& data = *array.data();
  switch (array.type_id()) {
    case arrow::Type::INT8:
      SummarizeIntegers(data.GetValues<int8_t>(1), array, &out);
      break;
    case arrow::Type::INT16:
      SummarizeIntegers(data.GetValues<int16_t>(1), array, &out);
      break;
    case arrow::Type::INT32:
    case arrow::Type::DATE32:
      SummarizeIntegers(data.GetValues<int32_t>(1), array, &out);
      break;
    case arrow::Type::INT64:
    case arrow::Type::TIMESTAMP:
      SummarizeIntegers(data.GetValues<int64_t>(1), array, &out);
      break;
    case arrow::Type::UINT8:
      SummarizeIntegers(data.GetValues<uint8_t>(1), array, &out);
      break;
    case arrow::Type::UINT16:
      SummarizeIntegers(data.GetValues<uint16_t>(1), array, &out);
      break;
    case arrow::Type::UINT32:
      SummarizeIntegers(data.GetValues<uint32_t>(1), array, &out);
      break;
    case arrow::Type::UINT64:
      SummarizeIntegers(data.GetValues<uint64_t>(1), array, &out);
      break;
    case arrow::Type::FLOAT:
      SummarizeFloats(data.GetValues<float>(1), array, &out);
      break;
    case arrow::Type::DOUBLE:
      SummarizeFloats(data.GetValues<double>(1), array, &out);
      break;
    case arrow::Type::STRING:
      SummarizeStrings(data.GetValues<int32_t>(1), data.GetValues<uint8_t>(2, 0), array,
                       &out);
      break;
    case arrow::Type::LARGE_STRING:
      SummarizeStrings(data.GetValues<int64_t>(1), data.GetValues<uint8_t>(2, 0), array,
                       &out);
      break;
    default:
      return std::nullopt;
  }
  const int64_t nulls = array.null_count();
  out.has_null = nulls > 0;
  out.has_valid = nulls < array.length();
  if (!out.has_valid) {
    out.has_bounds = false;
  }
  return out;
}

void MergeSummary(ColumnSummary& into, const ColumnSummary& other) {
  if (!other.has_valid) {
    into.has_null = into.has_null || other.has_null;
    return;
  }
  if (!into.has_valid) {
    const bool has_null = into.has_null;
    into = other;
    into.has_null = into.has_null || has_null;
    return;
  }
  into.has_null = into.has_null || other.has_null;
  into.has_bounds = into.has_bounds && other.has_bounds;
  into.min_signed = std::min(into.min_signed, other.min_signed);
  into.max_signed = std::max(into.max_signed, other.max_signed);
  into.min_unsigned = std::min(into.min_unsigned, other.min_unsigned);
  into.max_unsigned = std::max(into.max_unsigned, other.max_unsigned);
  into.min_float = std::min(into.min_float, other.min_float);
  into.max_float = std::max(into.max_float, other.max_float);
  into.min_prefix = std::min(into.min_prefix, other.min_prefix);
  into.max_prefix = std::max(into.max_prefix, other.max_prefix);
  into.max_length = std::max(into.max_length, other.max_length);
  into.non_ascii = into.non_ascii || other.non_ascii;
}

}  // namespace rill::sql_internal
