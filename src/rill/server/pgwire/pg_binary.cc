// Binary encodings (PostgreSQL's *send functions) of the common scalar types
// and one-dimensional arrays of them.
#include <cstring>

#include <arrow/array.h>
#include <arrow/type.h>
#include <arrow/util/decimal.h>

#include "rill/server/pgwire/pg_types.h"
#include "rill/server/pgwire/pg_values_internal.h"

namespace rill::pgwire::internal {

using arrow::Type;

std::string_view BinaryView(const arrow::Array& array, int64_t row) {
  switch (array.type_id()) {
    case Type::STRING:
    case Type::BINARY:
      return static_cast<const arrow::BinaryArray&>(array).GetView(row);
    case Type::LARGE_STRING:
    case Type::LARGE_BINARY:
      return static_cast<const arrow::LargeBinaryArray&>(array).GetView(row);
    case Type::STRING_VIEW:
    case Type::BINARY_VIEW:
      return static_cast<const arrow::BinaryViewArray&>(array).GetView(row);
    case Type::FIXED_SIZE_BINARY:
      return static_cast<const arrow::FixedSizeBinaryArray&>(array).GetView(row);
    default:
      return {};
  }
}

namespace {

int64_t FloorDiv64(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

int64_t Micros(int64_t v, arrow::TimeUnit::type unit) {
  switch (unit) {
    case arrow::TimeUnit::SECOND: return v * 1000000;
    case arrow::TimeUnit::MILLI: return v * 1000;
    case arrow::TimeUnit::MICRO: return v;
    case arrow::TimeUnit::NANO: return FloorDiv64(v, 1000);
  }
  return v;
}

bool IsScalarWithBinary(Type::type id) {
  switch (id) {
    case Type::BOOL: case Type::INT8: case Type::INT16: case Type::INT32: case Type::INT64:
    case Type::UINT8: case Type::UINT16: case Type::UINT32: case Type::UINT64:
    case Type::FLOAT: case Type::DOUBLE:
    case Type::DECIMAL32: case Type::DECIMAL64: case Type::DECIMAL128: case Type::DECIMAL256:
    case Type::STRING: case Type::LARGE_STRING: case Type::STRING_VIEW:
    case Type::BINARY: case Type::LARGE_BINARY: case Type::BINARY_VIEW:
    case Type::FIXED_SIZE_BINARY:
    case Type::DATE32: case Type::DATE64: case Type::TIME32: case Type::TIME64:
    case Type::TIMESTAMP: case Type::DURATION: case Type::INTERVAL_MONTH_DAY_NANO:
    case Type::INTERVAL_DAY_TIME: case Type::INTERVAL_MONTHS:
      return true;
    default:
      return false;
  }
}

void AppendArrayBinary(const arrow::Array& values, int64_t offset, int64_t length,
                       std::string* out) {
  bool has_null = false;
  for (int64_t i = 0; i < length; ++i) {
    has_null = has_null || values.IsNull(offset + i);
  }
  PutBE32(length == 0 ? 0 : 1, out);  // dimensions
  PutBE32(has_null ? 1 : 0, out);
  PutBE32(PgTypeFor(*values.type()).oid, out);
  if (length == 0) {
    return;
  }
  PutBE32(static_cast<int32_t>(length), out);
  PutBE32(1, out);  // lower bound
  for (int64_t i = 0; i < length; ++i) {
    if (values.IsNull(offset + i)) {
      PutBE32(-1, out);
      continue;
    }
    size_t start = out->size();
    out->append(4, '\0');
    AppendBinaryValue(values, offset + i, out);
    std::string len;
    PutBE32(static_cast<int32_t>(out->size() - start - 4), &len);
    std::memcpy(out->data() + start, len.data(), 4);
  }
}

void AppendIntervalBinary(int64_t months, int64_t days, int64_t micros, std::string* out) {
  PutBE64(micros, out);
  PutBE32(static_cast<int32_t>(days), out);
  PutBE32(static_cast<int32_t>(months), out);
}

template <typename T>
void PutFloatBits(T v, std::string* out) {
  if constexpr (sizeof(T) == 4) {
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    PutBE32(static_cast<int32_t>(bits), out);
  } else {
    uint64_t bits;
    std::memcpy(&bits, &v, 8);
    PutBE64(static_cast<int64_t>(bits), out);
  }
}

}  // namespace

bool HasBinary(const arrow::DataType& type) {
  if (IsScalarWithBinary(type.id())) {
    return true;
  }
  if (type.id() == Type::DICTIONARY) {
    return HasBinary(*static_cast<const arrow::DictionaryType&>(type).value_type());
  }
  if (type.id() == Type::LIST || type.id() == Type::LARGE_LIST ||
      type.id() == Type::FIXED_SIZE_LIST) {
    const auto& value_type = *type.field(0)->type();
    return IsScalarWithBinary(value_type.id()) &&
           PgArrayOidFor(PgTypeFor(value_type).oid) != 0;
  }
  return false;
}

void AppendBinaryValue(const arrow::Array& array, int64_t row, std::string* out) {
  switch (array.type_id()) {
    case Type::BOOL:
      out->push_back(static_cast<const arrow::BooleanArray&>(array).Value(row) ? 1 : 0);
      return;
    case Type::INT8:
      PutBE16(static_cast<const arrow::Int8Array&>(array).Value(row), out);
      return;
    case Type::UINT8:
      PutBE16(static_cast<const arrow::UInt8Array&>(array).Value(row), out);
      return;
    case Type::INT16:
      PutBE16(static_cast<const arrow::Int16Array&>(array).Value(row), out);
      return;
    case Type::UINT16:
      PutBE32(static_cast<const arrow::UInt16Array&>(array).Value(row), out);
      return;
    case Type::INT32:
      PutBE32(static_cast<const arrow::Int32Array&>(array).Value(row), out);
      return;
    case Type::UINT32:
      PutBE64(static_cast<const arrow::UInt32Array&>(array).Value(row), out);
      return;
    case Type::INT64:
      PutBE64(static_cast<const arrow::Int64Array&>(array).Value(row), out);
      return;
    case Type::UINT64:
    case Type::DECIMAL32:
    case Type::DECIMAL64:
    case Type::DECIMAL128:
    case Type::DECIMAL256: {
      std::string text;
      AppendText(array, row, &text);
      int scale = array.type_id() == Type::UINT64
                      ? 0
                      : static_cast<const arrow::DecimalType&>(*array.type()).scale();
      AppendNumericBinary(text, scale, out);
      return;
    }
    case Type::FLOAT:
      PutFloatBits(static_cast<const arrow::FloatArray&>(array).Value(row), out);
      return;
    case Type::DOUBLE:
      PutFloatBits(static_cast<const arrow::DoubleArray&>(array).Value(row), out);
      return;
    case Type::STRING: case Type::LARGE_STRING: case Type::STRING_VIEW:
    case Type::BINARY: case Type::LARGE_BINARY: case Type::BINARY_VIEW:
    case Type::FIXED_SIZE_BINARY:
      out->append(BinaryView(array, row));
      return;
    case Type::DATE32:
      PutBE32(static_cast<const arrow::Date32Array&>(array).Value(row) - kPgEpochDays, out);
      return;
    case Type::DATE64:
      PutBE32(static_cast<int32_t>(
                  FloorDiv64(static_cast<const arrow::Date64Array&>(array).Value(row),
                             86400000) -
                  kPgEpochDays),
              out);
      return;
    case Type::TIME32:
      PutBE64(Micros(static_cast<const arrow::Time32Array&>(array).Value(row),
                     static_cast<const arrow::Time32Type&>(*array.type()).unit()),
              out);
      return;
    case Type::TIME64:
      PutBE64(Micros(static_cast<const arrow::Time64Array&>(array).Value(row),
                     static_cast<const arrow::Time64Type&>(*array.type()).unit()),
              out);
      return;
    case Type::TIMESTAMP:
      PutBE64(Micros(static_cast<const arrow::TimestampArray&>(array).Value(row),
                     static_cast<const arrow::TimestampType&>(*array.type()).unit()) -
                  int64_t{kPgEpochDays} * kMicrosPerDay,
              out);
      return;
    case Type::DURATION:
      AppendIntervalBinary(
          0, 0,
          Micros(static_cast<const arrow::DurationArray&>(array).Value(row),
                 static_cast<const arrow::DurationType&>(*array.type()).unit()),
          out);
      return;
    case Type::INTERVAL_MONTHS:
      AppendIntervalBinary(static_cast<const arrow::MonthIntervalArray&>(array).Value(row), 0,
                           0, out);
      return;
    case Type::INTERVAL_DAY_TIME: {
      auto v = static_cast<const arrow::DayTimeIntervalArray&>(array).Value(row);
      AppendIntervalBinary(0, v.days, int64_t{v.milliseconds} * 1000, out);
      return;
    }
    case Type::INTERVAL_MONTH_DAY_NANO: {
      auto v = static_cast<const arrow::MonthDayNanoIntervalArray&>(array).Value(row);
      AppendIntervalBinary(v.months, v.days, v.nanoseconds / 1000, out);
      return;
    }
    case Type::DICTIONARY: {
      const auto& d = static_cast<const arrow::DictionaryArray&>(array);
      AppendBinaryValue(*d.dictionary(), d.GetValueIndex(row), out);
      return;
    }
    case Type::LIST: {
      const auto& l = static_cast<const arrow::ListArray&>(array);
      AppendArrayBinary(*l.values(), l.value_offset(row), l.value_length(row), out);
      return;
    }
    case Type::LARGE_LIST: {
      const auto& l = static_cast<const arrow::LargeListArray&>(array);
      AppendArrayBinary(*l.values(), l.value_offset(row), l.value_length(row), out);
      return;
    }
    case Type::FIXED_SIZE_LIST: {
      const auto& l = static_cast<const arrow::FixedSizeListArray&>(array);
      AppendArrayBinary(*l.values(), l.value_offset(row), l.value_length(row), out);
      return;
    }
    default:
      AppendText(array, row, out);  // unreachable: HasBinary was checked
      return;
  }
}

// numeric_send: int16 ndigits, int16 weight (base-10000 digits before the
// point, minus one), int16 sign, int16 dscale, then the base-10000 digits.
void AppendNumericBinary(const std::string& text, int dscale, std::string* out) {
  std::string_view s = text;
  bool negative = !s.empty() && s[0] == '-';
  if (negative) {
    s.remove_prefix(1);
  }
  size_t point = s.find('.');
  std::string int_part(s.substr(0, point));
  std::string frac_part(point == std::string_view::npos ? "" : s.substr(point + 1));
  // Left-pad the integer part and right-pad the fraction to multiples of 4.
  while (int_part.size() % 4 != 0) int_part.insert(int_part.begin(), '0');
  while (frac_part.size() % 4 != 0) frac_part.push_back('0');
  std::vector<int16_t> digits;
  for (size_t i = 0; i < int_part.size(); i += 4) {
    digits.push_back(static_cast<int16_t>(std::stoi(int_part.substr(i, 4))));
  }
  int weight = static_cast<int>(digits.size()) - 1;
  for (size_t i = 0; i < frac_part.size(); i += 4) {
    digits.push_back(static_cast<int16_t>(std::stoi(frac_part.substr(i, 4))));
  }
  size_t first = 0;
  while (first < digits.size() && digits[first] == 0) {
    ++first;
    --weight;
  }
  size_t last = digits.size();
  while (last > first && digits[last - 1] == 0) {
    --last;
  }
  if (first == last) {
    weight = 0;
  }
  PutBE16(static_cast<int16_t>(last - first), out);
  PutBE16(static_cast<int16_t>(weight), out);
  PutBE16(static_cast<int16_t>(negative && first != last ? 0x4000 : 0), out);
  PutBE16(static_cast<int16_t>(dscale), out);
  for (size_t i = first; i < last; ++i) {
    PutBE16(digits[i], out);
  }
}

bool NumericBinaryToText(const std::string& bytes, std::string* out) {
  auto get16 = [&](size_t at) {
    return static_cast<int16_t>((static_cast<uint8_t>(bytes[at]) << 8) |
                                static_cast<uint8_t>(bytes[at + 1]));
  };
  if (bytes.size() < 8) {
    return false;
  }
  int ndigits = get16(0), weight = get16(2), sign = static_cast<uint16_t>(get16(4)),
      dscale = get16(6);
  if (ndigits < 0 || bytes.size() != 8 + 2 * static_cast<size_t>(ndigits) || dscale < 0 ||
      dscale > 1000 || weight < -1000 || weight > 1000) {
    return false;
  }
  if (sign == 0xC000) {
    out->append("NaN");
    return true;
  }
  if (sign != 0 && sign != 0x4000) {
    return false;
  }
  std::string int_digits, frac_digits;
  for (int i = 0; i < ndigits; ++i) {
    int d = get16(8 + 2 * i);
    if (d < 0 || d > 9999) {
      return false;
    }
    char buf[5];
    std::snprintf(buf, sizeof(buf), "%04d", d);
    if (weight - i >= 0) {
      int_digits += buf;
    } else {
      frac_digits += buf;
    }
  }
  // Digits between the last given one and the point (weight beyond ndigits).
  for (int i = ndigits; i <= weight; ++i) int_digits += "0000";
  // Leading zero groups of the fraction (negative weight).
  for (int i = -1; i > weight && ndigits > 0; --i) frac_digits.insert(0, "0000");
  size_t nz = int_digits.find_first_not_of('0');
  int_digits = nz == std::string::npos ? "0" : int_digits.substr(nz);
  frac_digits.resize(static_cast<size_t>(dscale), '0');
  if (sign == 0x4000) out->push_back('-');
  out->append(int_digits);
  if (dscale > 0) {
    out->push_back('.');
    out->append(frac_digits);
  }
  return true;
}

}  // namespace rill::pgwire::internal
