// Writing JSON text by hand: the small documents of checkpoints (manifests,
// connector positions) need only strings and numbers. The one JSON string
// escaper of the tree (common/arrow_json.h writes Arrow values with it).
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>
#include <string_view>

namespace rill {

/// Append `text` to `out` as a JSON string literal (quotes, escapes; bytes
/// above 0x7f are copied as they are, so UTF-8 stays UTF-8).
inline void AppendJsonString(std::string* out, std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  out->push_back('"');
  size_t run = 0;  // start of the pending run of bytes that need no escape
  for (size_t k = 0; k < text.size(); ++k) {
    const unsigned char c = static_cast<unsigned char>(text[k]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out->append(text.data() + run, k - run);
    run = k + 1;
    switch (c) {
      case '"': *out += "\\\""; break;
      case '\\': *out += "\\\\"; break;
      case '\n': *out += "\\n"; break;
      case '\r': *out += "\\r"; break;
      case '\t': *out += "\\t"; break;
      default:
        *out += "\\u00";
        out->push_back(kHex[c >> 4]);
        out->push_back(kHex[c & 15]);
    }
  }
  out->append(text.data() + run, text.size() - run);
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
