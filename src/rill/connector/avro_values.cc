// Walkers of Avro values that need no plan: skipping a value, writing it as
// JSON text, reading a decimal's bytes.
#include <cinttypes>
#include <cmath>
#include <cstdio>

#include "rill/connector/avro_decoder_internal.h"

namespace rill::avro_internal {

Status BadAt(const Cursor& c, std::string_view what) {
  return Status::Invalid(what, " at byte ", c.offset());
}

namespace {

Status TooDeep(const Cursor& c) { return BadAt(c, "values nested deeper than max_depth"); }

Status ReadUnionBranch(Cursor* c, const AvroNode& w, const AvroNode** branch) {
  const Cursor at = *c;
  int64_t i = 0;
  RILL_RETURN_NOT_OK(ReadLong(c, &i));
  if (i < 0 || i >= static_cast<int64_t>(w.branches.size())) {
    return BadAt(at, "union branch " + std::to_string(i) + " out of range (" +
                         std::to_string(w.branches.size()) + " branches)");
  }
  *branch = w.branches[static_cast<size_t>(i)];
  return Status::OK();
}

Status Need(const Cursor& c, int64_t n) {
  return c.left() < n ? BadAt(c, "record ends inside a value") : Status::OK();
}

void JsonBytes(const uint8_t* p, int64_t n, std::string* out) {
  // Avro's JSON encoding of bytes: a string of code points 0-255.
  out->push_back('"');
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t b = p[i];
    if (b == '"' || b == '\\') {
      out->push_back('\\');
      out->push_back(static_cast<char>(b));
    } else if (b >= 0x20 && b < 0x7f) {
      out->push_back(static_cast<char>(b));
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", b);
      out->append(buf);
    }
  }
  out->push_back('"');
}

void JsonDouble(double v, std::string* out) {
  if (!std::isfinite(v)) {
    out->append("null");
    return;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  out->append(buf);
}

}  // namespace

bool ZeroSize(const AvroNode& w, int depth) {
  if (depth > 16) return false;
  switch (w.type) {
    case AvroType::kNull: return true;
    case AvroType::kFixed: return w.size == 0;
    case AvroType::kRecord:
      for (const auto& f : w.fields) {
        if (!ZeroSize(*f.type, depth + 1)) return false;
      }
      return true;
    default: return false;
  }
}

Status ReadDecimal(Cursor* c, const AvroNode& w, const Limits& limits, arrow::Decimal128* out) {
  const Cursor at = *c;
  int64_t n = w.size;
  if (w.type == AvroType::kBytes) RILL_RETURN_NOT_OK(ReadLength(c, limits, &n));
  RILL_RETURN_NOT_OK(Need(*c, n));
  const uint8_t* p = c->p;
  c->p += n;
  // Strip sign-extension bytes beyond 16 (a value that needs them does not fit).
  while (n > 16) {
    const uint8_t next_sign = (p[1] & 0x80) ? 0xff : 0x00;
    if (p[0] != next_sign) return BadAt(at, "decimal wider than 128 bits");
    ++p;
    --n;
  }
  if (n == 0) {
    *out = arrow::Decimal128(0);
    return Status::OK();
  }
  auto d = arrow::Decimal128::FromBigEndian(p, static_cast<int32_t>(n));
  if (!d.ok()) return BadAt(at, "bad decimal bytes");
  *out = *d;
  return Status::OK();
}

Status SkipValue(Cursor* c, const AvroNode& w, const Limits& limits, int depth) {
  if (depth > limits.max_depth) return TooDeep(*c);
  int64_t n = 0;
  switch (w.type) {
    case AvroType::kNull: return Status::OK();
    case AvroType::kBoolean:
      RILL_RETURN_NOT_OK(Need(*c, 1));
      ++c->p;
      return Status::OK();
    case AvroType::kInt:
    case AvroType::kEnum: return ReadInt(c, &n);
    case AvroType::kLong: return ReadLong(c, &n);
    case AvroType::kFloat:
      RILL_RETURN_NOT_OK(Need(*c, 4));
      c->p += 4;
      return Status::OK();
    case AvroType::kDouble:
      RILL_RETURN_NOT_OK(Need(*c, 8));
      c->p += 8;
      return Status::OK();
    case AvroType::kBytes:
    case AvroType::kString:
      RILL_RETURN_NOT_OK(ReadLength(c, limits, &n));
      c->p += n;
      return Status::OK();
    case AvroType::kFixed:
      RILL_RETURN_NOT_OK(Need(*c, w.size));
      c->p += w.size;
      return Status::OK();
    case AvroType::kRecord:
      for (const auto& f : w.fields) RILL_RETURN_NOT_OK(SkipValue(c, *f.type, limits, depth + 1));
      return Status::OK();
    case AvroType::kUnion: {
      const AvroNode* b;
      RILL_RETURN_NOT_OK(ReadUnionBranch(c, w, &b));
      return SkipValue(c, *b, limits, depth + 1);
    }
    case AvroType::kArray:
    case AvroType::kMap: {
      const bool zero = w.type == AvroType::kArray && ZeroSize(*w.items);
      while (true) {
        int64_t count = 0;
        RILL_RETURN_NOT_OK(ReadBlockCount(c, zero, &count));
        if (count == 0) return Status::OK();
        for (int64_t i = 0; i < count; ++i) {
          if (w.type == AvroType::kMap) {
            RILL_RETURN_NOT_OK(ReadLength(c, limits, &n));
            c->p += n;
          }
          RILL_RETURN_NOT_OK(SkipValue(c, *w.items, limits, depth + 1));
        }
      }
    }
  }
  return Status::OK();
}

Status AppendJson(Cursor* c, const AvroNode& w, const Limits& limits, int depth,
                  std::string* out) {
  if (depth > limits.max_depth) return TooDeep(*c);
  if (out->size() > static_cast<size_t>(limits.max_value_bytes)) {
    return BadAt(*c, "JSON text of a value over max_value_bytes");
  }
  int64_t n = 0;
  if (w.logical == AvroLogical::kDecimal) {
    arrow::Decimal128 d;
    RILL_RETURN_NOT_OK(ReadDecimal(c, w, limits, &d));
    out->append(d.ToString(w.scale));
    return Status::OK();
  }
  switch (w.type) {
    case AvroType::kNull:
      out->append("null");
      return Status::OK();
    case AvroType::kBoolean:
      RILL_RETURN_NOT_OK(Need(*c, 1));
      if (*c->p > 1) return BadAt(*c, "boolean byte not 0 or 1");
      out->append(*c->p++ ? "true" : "false");
      return Status::OK();
    case AvroType::kInt:
      RILL_RETURN_NOT_OK(ReadInt(c, &n));
      out->append(std::to_string(n));
      return Status::OK();
    case AvroType::kLong:
      RILL_RETURN_NOT_OK(ReadLong(c, &n));
      out->append(std::to_string(n));
      return Status::OK();
    case AvroType::kFloat: {
      RILL_RETURN_NOT_OK(Need(*c, 4));
      float f;
      std::memcpy(&f, c->p, 4);
      c->p += 4;
      JsonDouble(f, out);
      return Status::OK();
    }
    case AvroType::kDouble: {
      RILL_RETURN_NOT_OK(Need(*c, 8));
      double d;
      std::memcpy(&d, c->p, 8);
      c->p += 8;
      JsonDouble(d, out);
      return Status::OK();
    }
    case AvroType::kString: {
      RILL_RETURN_NOT_OK(ReadLength(c, limits, &n));
      std::string_view s(reinterpret_cast<const char*>(c->p), static_cast<size_t>(n));
      c->p += n;
      out->append(AvroJsonQuote(s));  // UTF-8 is checked on the whole text by the caller
      return Status::OK();
    }
    case AvroType::kBytes:
      RILL_RETURN_NOT_OK(ReadLength(c, limits, &n));
      JsonBytes(c->p, n, out);
      c->p += n;
      return Status::OK();
    case AvroType::kFixed:
      RILL_RETURN_NOT_OK(Need(*c, w.size));
      JsonBytes(c->p, w.size, out);
      c->p += w.size;
      return Status::OK();
    case AvroType::kEnum: {
      const Cursor at = *c;
      RILL_RETURN_NOT_OK(ReadInt(c, &n));
      if (n < 0 || n >= static_cast<int64_t>(w.symbols.size())) {
        return BadAt(at, "enum index " + std::to_string(n) + " out of range");
      }
      out->append(AvroJsonQuote(w.symbols[static_cast<size_t>(n)]));
      return Status::OK();
    }
    case AvroType::kRecord: {
      out->push_back('{');
      bool first = true;
      for (const auto& f : w.fields) {
        if (!first) out->push_back(',');
        first = false;
        out->append(AvroJsonQuote(f.name));
        out->push_back(':');
        RILL_RETURN_NOT_OK(AppendJson(c, *f.type, limits, depth + 1, out));
      }
      out->push_back('}');
      return Status::OK();
    }
    case AvroType::kUnion: {
      const AvroNode* b;
      RILL_RETURN_NOT_OK(ReadUnionBranch(c, w, &b));
      return AppendJson(c, *b, limits, depth + 1, out);
    }
    case AvroType::kArray:
    case AvroType::kMap: {
      const bool map = w.type == AvroType::kMap;
      out->push_back(map ? '{' : '[');
      bool first = true;
      const bool zero = !map && ZeroSize(*w.items);
      while (true) {
        int64_t count = 0;
        RILL_RETURN_NOT_OK(ReadBlockCount(c, zero, &count));
        if (count == 0) break;
        for (int64_t i = 0; i < count; ++i) {
          if (!first) out->push_back(',');
          first = false;
          if (map) {
            RILL_RETURN_NOT_OK(ReadLength(c, limits, &n));
            out->append(AvroJsonQuote(
                std::string_view(reinterpret_cast<const char*>(c->p), static_cast<size_t>(n))));
            c->p += n;
            out->push_back(':');
          }
          RILL_RETURN_NOT_OK(AppendJson(c, *w.items, limits, depth + 1, out));
        }
      }
      out->push_back(map ? '}' : ']');
      return Status::OK();
    }
  }
  return Status::OK();
}

}  // namespace rill::avro_internal
