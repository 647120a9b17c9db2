// Frontend message encoders and a backend message decoder for pgwire tests,
// written from the protocol documentation (not from the server's encoders).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <arrow/api.h>

#include "rill/server/pgwire/pg_executor.h"

namespace rill::pgwire::testing {

inline void Put32(std::string* s, int32_t v) {
  auto u = static_cast<uint32_t>(v);
  for (int shift = 24; shift >= 0; shift -= 8) s->push_back(static_cast<char>((u >> shift) & 0xff));
}
inline void Put16(std::string* s, int16_t v) {
  auto u = static_cast<uint16_t>(v);
  s->push_back(static_cast<char>(u >> 8));
  s->push_back(static_cast<char>(u & 0xff));
}
inline int32_t Get32(const std::string& s, size_t at) {
  return static_cast<int32_t>((static_cast<uint32_t>(static_cast<uint8_t>(s[at])) << 24) |
                              (static_cast<uint32_t>(static_cast<uint8_t>(s[at + 1])) << 16) |
                              (static_cast<uint32_t>(static_cast<uint8_t>(s[at + 2])) << 8) |
                              static_cast<uint32_t>(static_cast<uint8_t>(s[at + 3])));
}
inline int16_t Get16(const std::string& s, size_t at) {
  return static_cast<int16_t>((static_cast<uint8_t>(s[at]) << 8) | static_cast<uint8_t>(s[at + 1]));
}

/// A typed message: type, int32 length (body + 4), body.
inline std::string Msg(char type, const std::string& body) {
  std::string m(1, type);
  Put32(&m, static_cast<int32_t>(body.size() + 4));
  return m + body;
}
inline std::string CStr(const std::string& s) { return s + std::string(1, '\0'); }

inline std::string Startup(const std::vector<std::pair<std::string, std::string>>& params) {
  std::string body;
  Put32(&body, 196608);
  for (auto& [k, v] : params) body += CStr(k) + CStr(v);
  body.push_back('\0');
  std::string m;
  Put32(&m, static_cast<int32_t>(body.size() + 4));
  return m + body;
}
inline std::string SslRequest() {
  std::string m;
  Put32(&m, 8);
  Put32(&m, 80877103);
  return m;
}
inline std::string Query(const std::string& sql) { return Msg('Q', CStr(sql)); }
inline std::string Parse(const std::string& name, const std::string& sql,
                         const std::vector<int32_t>& types = {}) {
  std::string body = CStr(name) + CStr(sql);
  Put16(&body, static_cast<int16_t>(types.size()));
  for (int32_t t : types) Put32(&body, t);
  return Msg('P', body);
}
inline std::string Bind(const std::string& portal, const std::string& statement,
                        const std::vector<int16_t>& formats,
                        const std::vector<std::optional<std::string>>& params,
                        const std::vector<int16_t>& result_formats) {
  std::string body = CStr(portal) + CStr(statement);
  Put16(&body, static_cast<int16_t>(formats.size()));
  for (auto f : formats) Put16(&body, f);
  Put16(&body, static_cast<int16_t>(params.size()));
  for (auto& p : params) {
    if (!p) {
      Put32(&body, -1);
    } else {
      Put32(&body, static_cast<int32_t>(p->size()));
      body += *p;
    }
  }
  Put16(&body, static_cast<int16_t>(result_formats.size()));
  for (auto f : result_formats) Put16(&body, f);
  return Msg('B', body);
}
inline std::string Describe(char kind, const std::string& name) {
  return Msg('D', std::string(1, kind) + CStr(name));
}
inline std::string Execute(const std::string& portal, int32_t max_rows) {
  std::string body = CStr(portal);
  Put32(&body, max_rows);
  return Msg('E', body);
}
inline std::string Close(char kind, const std::string& name) {
  return Msg('C', std::string(1, kind) + CStr(name));
}
inline std::string Sync() { return Msg('S', ""); }
inline std::string Flush() { return Msg('H', ""); }
inline std::string Terminate() { return Msg('X', ""); }

struct BackendMessage {
  char type;
  std::string body;
};

/// Split server output into messages (a lone 'N' answer to SSLRequest is
/// returned as type 'N' with no body when `ssl_answer`).
inline std::vector<BackendMessage> Messages(const std::string& out) {
  std::vector<BackendMessage> msgs;
  size_t i = 0;
  while (i + 5 <= out.size()) {
    int32_t len = Get32(out, i + 1);
    if (len < 4 || i + 1 + static_cast<size_t>(len) > out.size()) break;
    msgs.push_back({out[i], out.substr(i + 5, static_cast<size_t>(len) - 4)});
    i += 1 + static_cast<size_t>(len);
  }
  return msgs;
}

/// The message types in order, e.g. "1 2 T D C Z".
inline std::string Types(const std::vector<BackendMessage>& msgs) {
  std::string s;
  for (auto& m : msgs) {
    if (!s.empty()) s.push_back(' ');
    s.push_back(m.type);
  }
  return s;
}

/// A field of an ErrorResponse/NoticeResponse ('C' = SQLSTATE, 'M', 'S').
inline std::string ErrorField(const BackendMessage& m, char field) {
  size_t i = 0;
  while (i < m.body.size() && m.body[i] != '\0') {
    char f = m.body[i];
    size_t end = m.body.find('\0', i + 1);
    if (f == field) return m.body.substr(i + 1, end - i - 1);
    i = end + 1;
  }
  return "";
}

/// The text values of a DataRow.
inline std::vector<std::optional<std::string>> RowValues(const BackendMessage& m) {
  std::vector<std::optional<std::string>> values;
  int n = Get16(m.body, 0);
  size_t at = 2;
  for (int i = 0; i < n; ++i) {
    int32_t len = Get32(m.body, at);
    at += 4;
    if (len < 0) {
      values.emplace_back(std::nullopt);
    } else {
      values.emplace_back(m.body.substr(at, static_cast<size_t>(len)));
      at += static_cast<size_t>(len);
    }
  }
  return values;
}

/// An executor for tests: answers every statement with one row holding the
/// statement's text, or an error for statements containing "fail".
class EchoExecutor : public PgExecutor {
 public:
  Result<std::shared_ptr<arrow::Table>> Run(const std::string& database, std::string_view sql,
                                            PgQueryControl*) override {
    ++calls;
    if (sql.find("fail") != std::string_view::npos) {
      return Status::Invalid("Parser Error: syntax error at or near \"fail\"");
    }
    arrow::StringBuilder b;
    ARROW_RETURN_NOT_OK(b.Append(std::string(sql)));
    ARROW_ASSIGN_OR_RAISE(auto a, b.Finish());
    (void)database;
    return arrow::Table::Make(arrow::schema({arrow::field("sql", arrow::utf8())}), {a});
  }
  int calls = 0;
};

}  // namespace rill::pgwire::testing
