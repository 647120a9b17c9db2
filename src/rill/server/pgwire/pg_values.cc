// Text and binary encodings of Arrow values, following PostgreSQL's output
// functions (boolout, float8out with shortest round-trip digits, timestamp_out
// in ISO style, interval_out in "postgres" style, array_out quoting).
#include <charconv>
#include <cmath>
#include <cstring>

#include <arrow/array.h>
#include <arrow/scalar.h>
#include <arrow/extension_type.h>
#include <arrow/type.h>
#include <arrow/util/decimal.h>

#include "rill/server/pgwire/pg_types.h"
#include "rill/server/pgwire/pg_values_internal.h"

namespace rill::pgwire {
namespace internal {

using arrow::Type;

void PutBE16(int16_t v, std::string* out) {
  auto u = static_cast<uint16_t>(v);
  out->push_back(static_cast<char>(u >> 8));
  out->push_back(static_cast<char>(u & 0xff));
}

void PutBE32(int32_t v, std::string* out) {
  auto u = static_cast<uint32_t>(v);
  for (int shift = 24; shift >= 0; shift -= 8) {
    out->push_back(static_cast<char>((u >> shift) & 0xff));
  }
}

void PutBE64(int64_t v, std::string* out) {
  auto u = static_cast<uint64_t>(v);
  for (int shift = 56; shift >= 0; shift -= 8) {
    out->push_back(static_cast<char>((u >> shift) & 0xff));
  }
}

int64_t FloorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

// Howard Hinnant's civil-from-days and days-from-civil.
void CivilFromDays(int64_t z, int64_t* year, int* month, int* day) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const int64_t doe = z - era * 146097;
  const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const int64_t mp = (5 * doy + 2) / 153;
  *day = static_cast<int>(doy - (153 * mp + 2) / 5 + 1);
  *month = static_cast<int>(mp < 10 ? mp + 3 : mp - 9);
  *year = yoe + era * 400 + (*month <= 2 ? 1 : 0);
}

int64_t DaysFromCivil(int64_t y, int m, int d) {
  y -= m <= 2 ? 1 : 0;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

namespace {

void AppendPadded(int64_t v, int width, std::string* out) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  for (int n = static_cast<int>(end - buf); n < width; ++n) {
    out->push_back('0');
  }
  out->append(buf, end);
}

template <typename T>
void AppendNumber(T v, std::string* out) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  out->append(buf, end);
}

void AppendFloat(double v, bool single, std::string* out) {
  if (std::isnan(v)) {
    out->append("NaN");
  } else if (std::isinf(v)) {
    out->append(v > 0 ? "Infinity" : "-Infinity");
  } else if (single) {
    AppendNumber(static_cast<float>(v), out);
  } else {
    AppendNumber(v, out);
  }
}

bool BcYear(int64_t* year) {
  if (*year <= 0) {
    *year = 1 - *year;
    return true;
  }
  return false;
}

}  // namespace

void AppendDate(int64_t days, std::string* out) {
  int64_t year;
  int month, day;
  CivilFromDays(days, &year, &month, &day);
  bool bc = BcYear(&year);
  AppendPadded(year, 4, out);
  out->push_back('-');
  AppendPadded(month, 2, out);
  out->push_back('-');
  AppendPadded(day, 2, out);
  if (bc) {
    out->append(" BC");
  }
}

void AppendTimeOfDay(int64_t micros, std::string* out) {
  int64_t secs = micros / 1000000;
  int64_t frac = micros % 1000000;
  AppendPadded(secs / 3600, 2, out);
  out->push_back(':');
  AppendPadded((secs / 60) % 60, 2, out);
  out->push_back(':');
  AppendPadded(secs % 60, 2, out);
  if (frac != 0) {
    char buf[8];
    std::snprintf(buf, sizeof(buf), "%06lld", static_cast<long long>(frac));
    int len = 6;
    while (len > 0 && buf[len - 1] == '0') {
      --len;
    }
    out->push_back('.');
    out->append(buf, static_cast<size_t>(len));
  }
}

namespace {

// Write `v` (0..99) as two digits at `p`.
void Put2(int v, char* p) {
  p[0] = static_cast<char>('0' + v / 10);
  p[1] = static_cast<char>('0' + v % 10);
}

void AppendTimestamp(int64_t micros, bool with_tz, std::string* out) {
  int64_t days = FloorDiv(micros, kMicrosPerDay);
  int64_t tod = micros - days * kMicrosPerDay;
  int64_t year;
  int month, day;
  CivilFromDays(days, &year, &month, &day);
  bool bc = BcYear(&year);
  if (!bc && year <= 9999) {
    // The common case in one append: "YYYY-MM-DD HH:MM:SS[.ffffff]" (trailing
    // zeros of the fraction trimmed), as the general path below writes it.
    char buf[32];
    const int y = static_cast<int>(year);
    Put2(y / 100, buf);
    Put2(y % 100, buf + 2);
    buf[4] = '-';
    Put2(month, buf + 5);
    buf[7] = '-';
    Put2(day, buf + 8);
    buf[10] = ' ';
    const int64_t secs = tod / 1000000;
    int64_t frac = tod % 1000000;
    Put2(static_cast<int>(secs / 3600), buf + 11);
    buf[13] = ':';
    Put2(static_cast<int>((secs / 60) % 60), buf + 14);
    buf[16] = ':';
    Put2(static_cast<int>(secs % 60), buf + 17);
    size_t len = 19;
    if (frac != 0) {
      int digits = 6;
      while (frac % 10 == 0) {
        frac /= 10;
        --digits;
      }
      buf[len] = '.';
      for (int i = digits; i > 0; --i) {
        buf[len + static_cast<size_t>(i)] = static_cast<char>('0' + frac % 10);
        frac /= 10;
      }
      len += 1 + static_cast<size_t>(digits);
    }
    if (with_tz) {
      buf[len++] = '+';  // sessions run in UTC (TimeZone is reported as UTC)
      buf[len++] = '0';
      buf[len++] = '0';
    }
    out->append(buf, len);
    return;
  }
  AppendPadded(year, 4, out);
  out->push_back('-');
  AppendPadded(month, 2, out);
  out->push_back('-');
  AppendPadded(day, 2, out);
  out->push_back(' ');
  AppendTimeOfDay(tod, out);
  if (with_tz) {
    out->append("+00");  // sessions run in UTC (TimeZone is reported as UTC)
  }
  if (bc) {
    out->append(" BC");
  }
}

void AppendUnit(int64_t n, const char* unit, bool* any, bool* neg, std::string* out) {
  if (n == 0) {
    return;
  }
  if (*any) {
    out->push_back(' ');
  }
  if (*neg && n > 0) {
    out->push_back('+');
  }
  AppendNumber(n, out);
  out->push_back(' ');
  out->append(unit);
  if (n != 1) {
    out->push_back('s');
  }
  *any = true;
  *neg = *neg || n < 0;
}

}  // namespace

void AppendInterval(int64_t months, int64_t days, int64_t micros, std::string* out) {
  bool any = false, neg = false;
  AppendUnit(months / 12, "year", &any, &neg, out);
  AppendUnit(months % 12, "mon", &any, &neg, out);
  AppendUnit(days, "day", &any, &neg, out);
  if (micros != 0 || !any) {
    if (any) {
      out->push_back(' ');
    }
    if (micros < 0) {
      out->push_back('-');
      micros = -micros;
    } else if (neg) {
      out->push_back('+');
    }
    AppendTimeOfDay(micros, out);
  }
}

namespace {

int64_t ToMicros(int64_t v, arrow::TimeUnit::type unit) {
  switch (unit) {
    case arrow::TimeUnit::SECOND: return v * 1000000;
    case arrow::TimeUnit::MILLI: return v * 1000;
    case arrow::TimeUnit::MICRO: return v;
    case arrow::TimeUnit::NANO: return FloorDiv(v, 1000);
  }
  return v;
}

void AppendHex(std::string_view bytes, std::string* out) {
  static const char* kHex = "0123456789abcdef";
  out->append("\\x");
  for (unsigned char c : bytes) {
    out->push_back(kHex[c >> 4]);
    out->push_back(kHex[c & 15]);
  }
}

std::string DecimalText(const arrow::Array& array, int64_t row) {
  const auto& a = static_cast<const arrow::FixedSizeBinaryArray&>(array);
  const auto& type = static_cast<const arrow::DecimalType&>(*array.type());
  const uint8_t* bytes = a.GetValue(row);
  switch (array.type_id()) {
    case Type::DECIMAL32: {
      int32_t v;
      std::memcpy(&v, bytes, 4);
      return arrow::Decimal128(v).ToString(type.scale());
    }
    case Type::DECIMAL64: {
      int64_t v;
      std::memcpy(&v, bytes, 8);
      return arrow::Decimal128(v).ToString(type.scale());
    }
    case Type::DECIMAL128:
      return arrow::Decimal128(bytes).ToString(type.scale());
    default:
      return arrow::Decimal256(bytes).ToString(type.scale());
  }
}

// Array elements are quoted when empty, "NULL", or containing a delimiter,
// quote, backslash or space (array_out).
void AppendArrayElement(const arrow::Array& values, int64_t i, std::string* out) {
  if (values.IsNull(i)) {
    out->append("NULL");
    return;
  }
  const bool nested = arrow::is_list_like(values.type_id());
  std::string text;
  AppendText(values, i, &text);
  bool quote = !nested && (text.empty() || (text.size() == 4 && (text == "NULL" ||
                                                                   text == "null" ||
                                                                   text == "Null")));
  if (!nested) {
    for (char c : text) {
      if (c == '{' || c == '}' || c == ',' || c == '"' || c == '\\' || c == ' ' ||
          c == '\t' || c == '\n' || c == '\r') {
        quote = true;
        break;
      }
    }
  }
  if (!quote) {
    out->append(text);
    return;
  }
  out->push_back('"');
  for (char c : text) {
    if (c == '"' || c == '\\') {
      out->push_back('\\');
    }
    out->push_back(c);
  }
  out->push_back('"');
}

void AppendList(const arrow::Array& values, int64_t offset, int64_t length, std::string* out) {
  out->push_back('{');
  for (int64_t i = 0; i < length; ++i) {
    if (i > 0) {
      out->push_back(',');
    }
    AppendArrayElement(values, offset + i, out);
  }
  out->push_back('}');
}

// Structs and maps have no PostgreSQL type here: DuckDB's own text form.
void AppendDuckValue(const arrow::Array& array, int64_t row, std::string* out) {
  if (array.IsNull(row)) {
    out->append("NULL");
    return;
  }
  const bool quoted = array.type_id() == Type::STRING ||
                      array.type_id() == Type::LARGE_STRING ||
                      array.type_id() == Type::STRING_VIEW;
  if (quoted) {
    out->push_back('\'');
  }
  AppendText(array, row, out);
  if (quoted) {
    out->push_back('\'');
  }
}

void AppendStruct(const arrow::StructArray& a, int64_t row, std::string* out) {
  const auto& type = static_cast<const arrow::StructType&>(*a.type());
  out->push_back('{');
  for (int f = 0; f < type.num_fields(); ++f) {
    if (f > 0) {
      out->append(", ");
    }
    out->push_back('\'');
    out->append(type.field(f)->name());
    out->append("': ");
    AppendDuckValue(*a.field(f), row, out);
  }
  out->push_back('}');
}

void AppendMap(const arrow::MapArray& a, int64_t row, std::string* out) {
  out->push_back('{');
  int64_t begin = a.value_offset(row), end = a.value_offset(row + 1);
  for (int64_t i = begin; i < end; ++i) {
    if (i > begin) {
      out->append(", ");
    }
    AppendDuckValue(*a.keys(), i, out);
    out->push_back('=');
    AppendDuckValue(*a.items(), i, out);
  }
  out->push_back('}');
}

}  // namespace
}  // namespace internal

using arrow::Type;
using internal::AppendDate;
using internal::AppendInterval;
using internal::AppendTimeOfDay;

namespace internal {

// Dictionaries, lists, maps, structs, extension types and anything else.
void AppendNestedText(const arrow::Array& array, int64_t row, std::string* out) {
  switch (array.type_id()) {
    case Type::DICTIONARY: {
      const auto& d = static_cast<const arrow::DictionaryArray&>(array);
      AppendText(*d.dictionary(), d.GetValueIndex(row), out);
      return;
    }
    case Type::LIST: {
      const auto& l = static_cast<const arrow::ListArray&>(array);
      AppendList(*l.values(), l.value_offset(row), l.value_length(row), out);
      return;
    }
    case Type::LARGE_LIST: {
      const auto& l = static_cast<const arrow::LargeListArray&>(array);
      AppendList(*l.values(), l.value_offset(row), l.value_length(row), out);
      return;
    }
    case Type::FIXED_SIZE_LIST: {
      const auto& l = static_cast<const arrow::FixedSizeListArray&>(array);
      AppendList(*l.values(), l.value_offset(row), l.value_length(row), out);
      return;
    }
    case Type::MAP:
      AppendMap(static_cast<const arrow::MapArray&>(array), row, out);
      return;
    case Type::STRUCT:
      AppendStruct(static_cast<const arrow::StructArray&>(array), row, out);
      return;
    case Type::EXTENSION:
      AppendText(*static_cast<const arrow::ExtensionArray&>(array).storage(), row, out);
      return;
    default: {
      auto scalar = array.GetScalar(row);
      out->append(scalar.ok() ? (*scalar)->ToString() : std::string("?"));
      return;
    }
  }
}

}  // namespace internal

void AppendText(const arrow::Array& array, int64_t row, std::string* out) {
  using internal::AppendNumber;
  using internal::ToMicros;
  switch (array.type_id()) {
    case Type::BOOL:
      out->push_back(static_cast<const arrow::BooleanArray&>(array).Value(row) ? 't' : 'f');
      return;
#define RILL_PG_INT(TYPE, ARRAY)                                                  \
  case Type::TYPE:                                                                \
    AppendNumber(static_cast<const arrow::ARRAY&>(array).Value(row), out);        \
    return;
      RILL_PG_INT(INT8, Int8Array)
      RILL_PG_INT(INT16, Int16Array)
      RILL_PG_INT(INT32, Int32Array)
      RILL_PG_INT(INT64, Int64Array)
      RILL_PG_INT(UINT8, UInt8Array)
      RILL_PG_INT(UINT16, UInt16Array)
      RILL_PG_INT(UINT32, UInt32Array)
      RILL_PG_INT(UINT64, UInt64Array)
#undef RILL_PG_INT
    case Type::FLOAT:
      internal::AppendFloat(static_cast<const arrow::FloatArray&>(array).Value(row), true, out);
      return;
    case Type::DOUBLE:
      internal::AppendFloat(static_cast<const arrow::DoubleArray&>(array).Value(row), false,
                            out);
      return;
    case Type::DECIMAL32:
    case Type::DECIMAL64:
    case Type::DECIMAL128:
    case Type::DECIMAL256:
      out->append(internal::DecimalText(array, row));
      return;
    case Type::STRING:
    case Type::LARGE_STRING:
    case Type::STRING_VIEW:
      out->append(internal::BinaryView(array, row));
      return;
    case Type::BINARY:
    case Type::LARGE_BINARY:
    case Type::BINARY_VIEW:
    case Type::FIXED_SIZE_BINARY:
      internal::AppendHex(internal::BinaryView(array, row), out);
      return;
    case Type::DATE32:
      AppendDate(static_cast<const arrow::Date32Array&>(array).Value(row), out);
      return;
    case Type::DATE64:
      AppendDate(internal::FloorDiv(static_cast<const arrow::Date64Array&>(array).Value(row),
                                    86400000),
                 out);
      return;
    case Type::TIME32: {
      const auto& t = static_cast<const arrow::Time32Type&>(*array.type());
      AppendTimeOfDay(ToMicros(static_cast<const arrow::Time32Array&>(array).Value(row),
                               t.unit()),
                      out);
      return;
    }
    case Type::TIME64: {
      const auto& t = static_cast<const arrow::Time64Type&>(*array.type());
      AppendTimeOfDay(ToMicros(static_cast<const arrow::Time64Array&>(array).Value(row),
                               t.unit()),
                      out);
      return;
    }
    case Type::TIMESTAMP: {
      const auto& t = static_cast<const arrow::TimestampType&>(*array.type());
      internal::AppendTimestamp(
          ToMicros(static_cast<const arrow::TimestampArray&>(array).Value(row), t.unit()),
          !t.timezone().empty(), out);
      return;
    }
    case Type::DURATION: {
      const auto& t = static_cast<const arrow::DurationType&>(*array.type());
      AppendInterval(0, 0,
                     ToMicros(static_cast<const arrow::DurationArray&>(array).Value(row),
                              t.unit()),
                     out);
      return;
    }
    case Type::INTERVAL_MONTHS:
      AppendInterval(static_cast<const arrow::MonthIntervalArray&>(array).Value(row), 0, 0,
                     out);
      return;
    case Type::INTERVAL_DAY_TIME: {
      auto v = static_cast<const arrow::DayTimeIntervalArray&>(array).Value(row);
      AppendInterval(0, v.days, int64_t{v.milliseconds} * 1000, out);
      return;
    }
    case Type::INTERVAL_MONTH_DAY_NANO: {
      auto v = static_cast<const arrow::MonthDayNanoIntervalArray&>(array).Value(row);
      AppendInterval(v.months, v.days, v.nanoseconds / 1000, out);
      return;
    }
    default:
      internal::AppendNestedText(array, row, out);
      return;
  }
}

}  // namespace rill::pgwire
