// Client parameters as SQL literals. Values are always quoted (never pasted
// into the SQL text unquoted), so a parameter cannot change the statement.
#include <charconv>
#include <cstring>

#include "rill/server/pgwire/pg_types.h"
#include "rill/server/pgwire/pg_values_internal.h"

namespace rill::pgwire {
namespace {

using internal::kMicrosPerDay;
using internal::kPgEpochDays;

int64_t LoadBE(const std::string& b, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) {
    v = (v << 8) | static_cast<uint8_t>(b[at + i]);
  }
  // Sign-extend.
  if (bytes < 8 && (v >> (bytes * 8 - 1)) & 1) {
    v |= ~uint64_t{0} << (bytes * 8);
  }
  return static_cast<int64_t>(v);
}

Status ExpectSize(const std::string& b, size_t n, int32_t type_oid) {
  if (b.size() != n) {
    return Status::Invalid("binary parameter of type ", PgTypeName(type_oid), " has ",
                           b.size(), " bytes, expected ", n);
  }
  return Status::OK();
}

std::string Typed(std::string_view text, const char* duck_type) {
  return QuoteLiteral(text) + "::" + duck_type;
}

std::string HexBlobLiteral(std::string_view bytes) {
  static const char* kHex = "0123456789ABCDEF";
  std::string text;
  for (unsigned char c : bytes) {
    text += "\\x";
    text.push_back(kHex[c >> 4]);
    text.push_back(kHex[c & 15]);
  }
  return QuoteLiteral(text) + "::BLOB";
}

bool IsNumberText(std::string_view s) {
  size_t i = (!s.empty() && (s[0] == '-' || s[0] == '+')) ? 1 : 0;
  bool digits = false, point = false;
  for (; i < s.size(); ++i) {
    if (s[i] >= '0' && s[i] <= '9') {
      digits = true;
    } else if (s[i] == '.' && !point) {
      point = true;
    } else {
      return false;
    }
  }
  return digits;
}

Result<std::string> BinaryTimestampText(int64_t pg_micros, bool tz) {
  int64_t micros = pg_micros + int64_t{kPgEpochDays} * kMicrosPerDay;
  int64_t days = micros / kMicrosPerDay;
  if (micros % kMicrosPerDay < 0) --days;
  std::string out;
  internal::AppendDate(days, &out);
  out.push_back(' ');
  internal::AppendTimeOfDay(micros - days * kMicrosPerDay, &out);
  if (tz) out += "+00";
  return out;
}

Result<std::string> BinaryLiteral(const std::string& b, int32_t type_oid);

// The element OID of an array type this file decodes, 0 for others.
int32_t ElementOidOf(int32_t array_oid) {
  for (int32_t element : {oid::kBool, oid::kInt2, oid::kInt4, oid::kInt8, oid::kFloat4,
                          oid::kFloat8, oid::kNumeric, oid::kText, oid::kVarchar, oid::kDate,
                          oid::kTimestamp, oid::kTimestamptz, oid::kUuid, oid::kBytea,
                          oid::kOid}) {
    if (PgArrayOidFor(element) == array_oid) return element;
  }
  return 0;
}

// A one-dimensional binary array (ndim, has-null flag, element OID, then per
// dimension size and lower bound, then each element as length + bytes) as a
// DuckDB list literal. Every count is checked against the bytes present.
Result<std::string> BinaryArrayLiteral(const std::string& b, int32_t element_oid) {
  auto need = [&](size_t at, size_t n) -> Status {
    if (at + n > b.size()) return Status::Invalid("binary array parameter is truncated");
    return Status::OK();
  };
  RILL_RETURN_NOT_OK(need(0, 12));
  const int64_t ndim = LoadBE(b, 0, 4);
  if (ndim < 0 || ndim > 1) {
    return Status::NotImplemented("binary array parameters of ", ndim,
                                  " dimensions are not supported; send one dimension");
  }
  if (LoadBE(b, 8, 4) != element_oid) {
    return Status::Invalid("binary array parameter holds elements of type OID ",
                           LoadBE(b, 8, 4), ", expected ", element_oid);
  }
  size_t at = 12;
  int64_t count = 0;
  if (ndim == 1) {
    RILL_RETURN_NOT_OK(need(at, 8));
    count = LoadBE(b, at, 4);
    at += 8;
    // Each element takes at least its 4-byte length.
    if (count < 0 || static_cast<size_t>(count) > (b.size() - at) / 4) {
      return Status::Invalid("binary array parameter claims ", count, " elements");
    }
  }
  std::string out = "[";
  for (int64_t i = 0; i < count; ++i) {
    RILL_RETURN_NOT_OK(need(at, 4));
    const int64_t len = LoadBE(b, at, 4);
    at += 4;
    if (i > 0) out += ", ";
    if (len < 0) {
      out += "NULL";
      continue;
    }
    RILL_RETURN_NOT_OK(need(at, static_cast<size_t>(len)));
    RILL_ASSIGN_OR_RAISE(auto element,
                         BinaryLiteral(b.substr(at, static_cast<size_t>(len)), element_oid));
    out += element;
    at += static_cast<size_t>(len);
  }
  if (at != b.size()) {
    return Status::Invalid("binary array parameter has ", b.size() - at, " trailing bytes");
  }
  out += "]";
  // Numeric elements keep their own scale; the others give the list its type.
  if (std::string duck = DuckTypeForOid(element_oid); !duck.empty()) {
    out = "CAST(" + out + " AS " + duck + "[])";
  }
  return out;
}

Result<std::string> BinaryLiteral(const std::string& b, int32_t type_oid) {
  if (int32_t element = ElementOidOf(type_oid); element != 0) {
    return BinaryArrayLiteral(b, element);
  }
  switch (type_oid) {
    case oid::kBool:
      RILL_RETURN_NOT_OK(ExpectSize(b, 1, type_oid));
      return std::string(b[0] ? "TRUE" : "FALSE");
    case oid::kInt2:
      RILL_RETURN_NOT_OK(ExpectSize(b, 2, type_oid));
      return std::to_string(LoadBE(b, 0, 2)) + "::SMALLINT";
    case oid::kInt4:
      RILL_RETURN_NOT_OK(ExpectSize(b, 4, type_oid));
      return std::to_string(LoadBE(b, 0, 4)) + "::INTEGER";
    case oid::kInt8:
    case oid::kOid:
      RILL_RETURN_NOT_OK(ExpectSize(b, type_oid == oid::kOid ? 4 : 8, type_oid));
      return std::to_string(LoadBE(b, 0, static_cast<int>(b.size()))) + "::BIGINT";
    case oid::kFloat4: {
      RILL_RETURN_NOT_OK(ExpectSize(b, 4, type_oid));
      auto bits = static_cast<uint32_t>(LoadBE(b, 0, 4));
      float f;
      std::memcpy(&f, &bits, 4);
      char buf[32];
      auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), f);
      return Typed(std::string_view(buf, end - buf), "REAL");
    }
    case oid::kFloat8: {
      RILL_RETURN_NOT_OK(ExpectSize(b, 8, type_oid));
      auto bits = static_cast<uint64_t>(LoadBE(b, 0, 8));
      double d;
      std::memcpy(&d, &bits, 8);
      char buf[32];
      auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), d);
      return Typed(std::string_view(buf, end - buf), "DOUBLE");
    }
    case oid::kNumeric: {
      std::string text;
      if (!internal::NumericBinaryToText(b, &text)) {
        return Status::Invalid("malformed binary numeric parameter");
      }
      return text == "NaN" ? Typed(text, "DOUBLE") : text;
    }
    case oid::kBytea:
      return HexBlobLiteral(b);
    case oid::kDate: {
      RILL_RETURN_NOT_OK(ExpectSize(b, 4, type_oid));
      std::string text;
      internal::AppendDate(LoadBE(b, 0, 4) + kPgEpochDays, &text);
      return Typed(text, "DATE");
    }
    case oid::kTimestamp:
    case oid::kTimestamptz: {
      RILL_RETURN_NOT_OK(ExpectSize(b, 8, type_oid));
      RILL_ASSIGN_OR_RAISE(auto text,
                           BinaryTimestampText(LoadBE(b, 0, 8), type_oid == oid::kTimestamptz));
      return Typed(text, type_oid == oid::kTimestamptz ? "TIMESTAMPTZ" : "TIMESTAMP");
    }
    case oid::kUuid: {
      RILL_RETURN_NOT_OK(ExpectSize(b, 16, type_oid));
      static const char* kHex = "0123456789abcdef";
      std::string text;
      for (int i = 0; i < 16; ++i) {
        if (i == 4 || i == 6 || i == 8 || i == 10) text.push_back('-');
        text.push_back(kHex[static_cast<uint8_t>(b[i]) >> 4]);
        text.push_back(kHex[static_cast<uint8_t>(b[i]) & 15]);
      }
      return Typed(text, "UUID");
    }
    case 0:
    case oid::kText:
    case oid::kVarchar:
    case oid::kBpchar:
    case oid::kName:
    case oid::kJson:
    case oid::kUnknown:
      if (b.find('\0') != std::string::npos) {
        return Status::Invalid("text parameter contains a NUL byte");
      }
      return QuoteLiteral(b);
    case oid::kJsonb:
      if (b.empty() || b[0] != 1) {
        return Status::Invalid("unsupported binary jsonb version");
      }
      return QuoteLiteral(std::string_view(b).substr(1));
    default:
      return Status::NotImplemented("binary format for parameters of type OID ", type_oid,
                                    " is not supported; send it in text format");
  }
}

Result<std::string> PgHexToBlob(const std::string& text) {
  if (text.size() < 2 || text[0] != '\\' || text[1] != 'x' || text.size() % 2 != 0) {
    return QuoteLiteral(text) + "::BLOB";  // escape format: DuckDB reads \\ and \x.. alike
  }
  std::string bytes;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (size_t i = 2; i < text.size(); i += 2) {
    int hi = nibble(text[i]), lo = nibble(text[i + 1]);
    if (hi < 0 || lo < 0) {
      return Status::Invalid("invalid hexadecimal digit in bytea parameter");
    }
    bytes.push_back(static_cast<char>(hi * 16 + lo));
  }
  return HexBlobLiteral(bytes);
}

Result<std::string> TextLiteral(const std::string& t, int32_t type_oid) {
  if (t.find('\0') != std::string::npos) {
    return Status::Invalid("text parameter contains a NUL byte");
  }
  switch (type_oid) {
    case oid::kInt2: case oid::kInt4: case oid::kInt8: case oid::kOid:
    case oid::kNumeric: case oid::kFloat4: case oid::kFloat8:
      // Plain numbers go in as numeric literals (DuckDB keeps their exact
      // precision); anything else ('NaN', 'Infinity', bad input) as a cast.
      if (IsNumberText(t)) {
        return "(" + t + ")";
      }
      return Typed(t, type_oid == oid::kFloat4 ? "REAL" : "DOUBLE");
    case oid::kBool: return Typed(t, "BOOLEAN");
    case oid::kDate: return Typed(t, "DATE");
    case oid::kTime: return Typed(t, "TIME");
    case oid::kTimestamp: return Typed(t, "TIMESTAMP");
    case oid::kTimestamptz: return Typed(t, "TIMESTAMPTZ");
    case oid::kInterval: return Typed(t, "INTERVAL");
    case oid::kUuid: return Typed(t, "UUID");
    case oid::kBytea: return PgHexToBlob(t);
    default:
      // text, varchar, unknown (0), json, arrays...: a string literal, which
      // DuckDB casts implicitly to what the expression needs.
      return QuoteLiteral(t);
  }
}

}  // namespace

Result<std::string> ParameterLiteral(const std::optional<std::string>& value, int32_t type_oid,
                                     int16_t format) {
  if (!value.has_value()) {
    return std::string("NULL");
  }
  if (format == 1) {
    return BinaryLiteral(*value, type_oid);
  }
  return TextLiteral(*value, type_oid);
}

}  // namespace rill::pgwire
