// Writing JSON text by hand: the small documents of checkpoints (manifests,
// connector positions) need only strings and numbers.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

namespace rill {

/// Append `text` to `out` as a JSON string literal (quotes, escapes; bytes
/// above 0x7f are copied as they are, so UTF-8 stays UTF-8).
inline void AppendJsonString(std::string* out, std::string_view text) {
  out->push_back('"');
  for (char c : text) {
    switch (c) {
      case '"': *out += "\\\""; break;
      case '\\': *out += "\\\\"; break;
      case '\n': *out += "\\n"; break;
      case '\r': *out += "\\r"; break;
      case '\t': *out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
          *out += buf;
        } else {
          out->push_back(c);
        }
    }
  }
  out->push_back('"');
}

/// Return `text` as a JSON string literal.
inline std::string JsonString(std::string_view text) {
  std::string out;
  AppendJsonString(&out, text);
  return out;
}

/// Append a double so that it reads back exactly (17 significant digits);
/// non-finite values become null.
inline void AppendJsonNumber(std::string* out, double value) {
  if (value != value || value == 1.0 / 0.0 || value == -1.0 / 0.0) {
    *out += "null";
    return;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.17g", value);
  *out += buf;
}

}  // namespace rill
