#include "rill/server/pgwire/pg_sql.h"

#include <cctype>
#include <cstdint>

namespace rill::pgwire {
namespace {

bool IsIdentChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' ||
         static_cast<unsigned char>(c) >= 0x80;
}

// If a string, quoted identifier or comment starts at `i`, return the index
// just after it (the end of `sql` if unterminated); otherwise return `i`.
size_t SkipQuoted(std::string_view sql, size_t i) {
  const size_t n = sql.size();
  char c = sql[i];
  if (c == '-' && i + 1 < n && sql[i + 1] == '-') {
    size_t end = sql.find('\n', i);
    return end == std::string_view::npos ? n : end + 1;
  }
  if (c == '/' && i + 1 < n && sql[i + 1] == '*') {
    // Comments nest in PostgreSQL.
    int depth = 0;
    size_t j = i;
    while (j + 1 < n) {
      if (sql[j] == '/' && sql[j + 1] == '*') {
        ++depth;
        j += 2;
      } else if (sql[j] == '*' && sql[j + 1] == '/') {
        j += 2;
        if (--depth == 0) {
          return j;
        }
      } else {
        ++j;
      }
    }
    return n;
  }
  if (c == '\'' || c == '"') {
    bool backslash = c == '\'' && i > 0 && (sql[i - 1] == 'E' || sql[i - 1] == 'e') &&
                     (i < 2 || !IsIdentChar(sql[i - 2]));
    size_t j = i + 1;
    while (j < n) {
      if (backslash && sql[j] == '\\') {
        j += 2;
        continue;
      }
      if (sql[j] == c) {
        if (j + 1 < n && sql[j + 1] == c) {
          j += 2;
          continue;
        }
        return j + 1;
      }
      ++j;
    }
    return n;
  }
  if (c == '$' && (i == 0 || !IsIdentChar(sql[i - 1]))) {
    // $tag$ ... $tag$ (tag empty or an identifier not starting with a digit).
    size_t j = i + 1;
    while (j < n && IsIdentChar(sql[j]) && !std::isdigit(static_cast<unsigned char>(sql[i + 1]))) {
      ++j;
    }
    if (j < n && sql[j] == '$') {
      std::string_view tag = sql.substr(i, j - i + 1);
      size_t end = sql.find(tag, j + 1);
      return end == std::string_view::npos ? n : end + tag.size();
    }
  }
  return i;
}

// Call `code(i)` for each character outside strings and comments; it returns
// how many characters it consumed (at least 1).
template <typename F>
void ForEachCode(std::string_view sql, F&& code) {
  size_t i = 0;
  while (i < sql.size()) {
    size_t skipped = SkipQuoted(sql, i);
    if (skipped != i) {
      i = skipped;
      continue;
    }
    i += code(i);
  }
}

// Parse `$n` at i; return the digits' length (0 if not a parameter).
size_t ParamAt(std::string_view sql, size_t i, long* number) {
  if (sql[i] != '$' || (i > 0 && IsIdentChar(sql[i - 1]))) {
    return 0;
  }
  size_t j = i + 1;
  long v = 0;
  while (j < sql.size() && std::isdigit(static_cast<unsigned char>(sql[j])) && j - i < 12) {
    v = v * 10 + (sql[j] - '0');
    ++j;
  }
  if (j == i + 1) {
    return 0;
  }
  *number = v;
  return j - i;
}

}  // namespace

std::string TrimStatement(std::string_view sql) {
  std::string out;
  size_t i = 0;
  while (i < sql.size()) {
    size_t skipped = SkipQuoted(sql, i);
    if (skipped != i) {
      bool comment = sql[i] == '-' || sql[i] == '/';
      if (comment) {
        out.push_back(' ');
      } else {
        out.append(sql.substr(i, skipped - i));
      }
      i = skipped;
      continue;
    }
    out.push_back(sql[i++]);
  }
  size_t b = 0, e = out.size();
  while (b < e && (std::isspace(static_cast<unsigned char>(out[b])) || out[b] == ';')) ++b;
  while (e > b && (std::isspace(static_cast<unsigned char>(out[e - 1])) || out[e - 1] == ';')) --e;
  return out.substr(b, e - b);
}

std::vector<std::string> SplitStatements(std::string_view sql) {
  std::vector<std::string> out;
  size_t start = 0;
  auto flush = [&](size_t end) {
    std::string_view part = sql.substr(start, end - start);
    if (!TrimStatement(part).empty()) {
      out.emplace_back(part);
    }
  };
  ForEachCode(sql, [&](size_t i) -> size_t {
    if (sql[i] == ';') {
      flush(i);
      start = i + 1;
    }
    return 1;
  });
  flush(sql.size());
  return out;
}

Result<int> CountParameters(std::string_view sql) {
  long max = 0;
  bool too_big = false;
  ForEachCode(sql, [&](size_t i) -> size_t {
    long number = 0;
    size_t len = ParamAt(sql, i, &number);
    if (len == 0) {
      return 1;
    }
    if (number > 65535) {
      too_big = true;
    }
    max = std::max(max, number);
    return len;
  });
  if (too_big) {
    return Status::Invalid("parameter number above 65535");
  }
  return static_cast<int>(max);
}

Result<std::string> SubstituteParameters(std::string_view sql,
                                         const std::vector<std::string>& literals) {
  std::string out;
  out.reserve(sql.size());
  Status status;
  size_t copied = 0;
  ForEachCode(sql, [&](size_t i) -> size_t {
    long number = 0;
    size_t len = ParamAt(sql, i, &number);
    if (len == 0) {
      return 1;
    }
    if (number < 1 || static_cast<size_t>(number) > literals.size()) {
      if (status.ok()) {
        status = Status::Invalid("there is no parameter $", number, " (", literals.size(),
                                 " bound)");
      }
      return len;
    }
    out.append(sql.substr(copied, i - copied));
    out.append(literals[static_cast<size_t>(number) - 1]);
    copied = i + len;
    return len;
  });
  RILL_RETURN_NOT_OK(status);
  out.append(sql.substr(copied));
  return out;
}

bool IsValidUtf8(std::string_view s) {
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    auto c = static_cast<uint8_t>(s[i]);
    if (c == 0) return false;
    if (c < 0x80) {
      ++i;
      continue;
    }
    int len;
    uint32_t cp;
    if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + len > n) return false;
    for (int k = 1; k < len; ++k) {
      auto cc = static_cast<uint8_t>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
        cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      return false;
    }
    i += len;
  }
  return true;
}

std::vector<std::string> LeadingWords(std::string_view sql, int count) {
  std::string trimmed = TrimStatement(sql);
  std::vector<std::string> words;
  size_t i = 0;
  while (i < trimmed.size() && static_cast<int>(words.size()) < count) {
    char c = trimmed[i];
    if (std::isspace(static_cast<unsigned char>(c)) || c == '(') {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < trimmed.size() && IsIdentChar(trimmed[j])) ++j;
    if (j == i) {
      break;
    }
    std::string w(trimmed.substr(i, j - i));
    for (auto& ch : w) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    words.push_back(std::move(w));
    i = j;
  }
  return words;
}

}  // namespace rill::pgwire
