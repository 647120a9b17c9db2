#include "query.h"

#include <algorithm>
#include <memory>

#include <curl/curl.h>
#include <simdjson.h>

#include "rill/server/webhook.h"  // JsonQuote

namespace rill::app {
namespace {

constexpr size_t kMaxResponseBytes = size_t{1} << 30;

size_t Collect(char* data, size_t size, size_t count, void* user) {
  auto* body = static_cast<std::string*>(user);
  const size_t n = size * count;
  if (body->size() + n > kMaxResponseBytes) {
    return 0;  // abort: far beyond what a terminal can show
  }
  body->append(data, n);
  return n;
}

/// The text of one JSON cell: strings unquoted, other scalars as JSON, nested
/// values as compact JSON; nullopt for null.
std::optional<std::string> CellText(simdjson::dom::element value) {
  switch (value.type()) {
    case simdjson::dom::element_type::NULL_VALUE:
      return std::nullopt;
    case simdjson::dom::element_type::STRING:
      return std::string(value.get_string().value());
    default:
      return simdjson::to_string(value);
  }
}

bool LooksNumeric(const std::string& type, const std::vector<std::optional<std::string>>& cells) {
  static const char* kNumeric[] = {"int", "uint", "float", "double", "decimal", "bigint",
                                   "smallint", "tinyint", "hugeint", "real", "numeric"};
  std::string lower = type;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const char* n : kNumeric) {
    if (lower.find(n) != std::string::npos) return true;
  }
  if (!type.empty()) return false;
  // No type from the server: numeric when every non-null cell parses as a number.
  bool any = false;
  for (const auto& c : cells) {
    if (!c) continue;
    char* end = nullptr;
    std::strtod(c->c_str(), &end);
    if (c->empty() || end != c->c_str() + c->size()) return false;
    any = true;
  }
  return any;
}

/// Return the error message of a failed request: the JSON `message`, or the
/// body itself.
std::string ServerMessage(long status, const std::string& body) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  std::string_view message;
  if (!parser.parse(body).get(doc) && doc.is_object() && !doc["message"].get_string().get(message)) {
    return std::string(message);
  }
  std::string text = body.substr(0, 2000);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  return text.empty() ? "HTTP " + std::to_string(status) : text;
}

}  // namespace

Result<std::string> QueryUrl(const std::string& server) {
  std::string address = server;
  if (address.rfind("http://", 0) == 0 || address.rfind("https://", 0) == 0) {
    while (!address.empty() && address.back() == '/') address.pop_back();
    return address + "/api/v1/query";
  }
  if (address.rfind("quack:", 0) == 0) {
    address = address.substr(6);
  }
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon + 1 == address.size() ||
      address.find_first_not_of("0123456789", colon + 1) != std::string::npos) {
    return Status::Invalid("server address '", server, "' needs a port (HOST:PORT)");
  }
  std::string host = address.substr(0, colon);
  if (host.empty() || host == "0.0.0.0") {
    host = "127.0.0.1";  // a wildcard bind is reached through loopback
  } else if (host.find(':') != std::string::npos && host.front() != '[') {
    host = "[" + host + "]";
  }
  return "http://" + host + address.substr(colon) + "/api/v1/query";
}

Result<QueryTable> ParseJsonResult(const std::string& json) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (auto error = parser.parse(json).get(doc); error) {
    return Status::Invalid("the server's answer is not JSON: ", simdjson::error_message(error));
  }
  QueryTable table;
  simdjson::dom::array columns;
  if (!doc["columns"].get_array().get(columns)) {
    for (simdjson::dom::element column : columns) {
      std::string_view name;
      std::string_view type;
      if (column.is_string()) {
        name = column.get_string().value();
      } else if (column["name"].get_string().get(name)) {
        return Status::Invalid("a column of the result has no name");
      }
      if (column.is_object()) {
        if (column["type"].get_string().get(type) != simdjson::SUCCESS) {
          type = {};
        }
      }
      table.names.emplace_back(name);
      table.types.emplace_back(type);
    }
  }
  simdjson::dom::array rows;
  if (doc["rows"].get_array().get(rows)) {
    return Status::Invalid("the server's answer has no \"rows\" list");
  }
  for (simdjson::dom::element row : rows) {
    std::vector<std::optional<std::string>> cells;
    if (row.is_array()) {
      simdjson::dom::array values = row.get_array().value();  // a view; keep it named
      for (simdjson::dom::element cell : values) {
        cells.push_back(CellText(cell));
      }
    } else if (row.is_object()) {
      simdjson::dom::object object = row.get_object().value();
      if (table.names.empty()) {
        for (auto field : object) {
          table.names.emplace_back(field.key);
          table.types.emplace_back();
        }
      }
      for (const std::string& name : table.names) {
        simdjson::dom::element cell;
        cells.push_back(object[name].get(cell) ? std::nullopt : CellText(cell));
      }
    } else {
      return Status::Invalid("a row of the result is neither a list nor an object");
    }
    cells.resize(std::max(cells.size(), table.names.size()));
    table.rows.push_back(std::move(cells));
  }
  return table;
}

std::string FormatTable(const QueryTable& table) {
  const size_t n = table.names.size();
  std::vector<size_t> width(n);
  std::vector<bool> right(n);
  for (size_t c = 0; c < n; ++c) {
    width[c] = table.names[c].size();
    std::vector<std::optional<std::string>> column;
    for (const auto& row : table.rows) {
      const std::optional<std::string>& cell = row[c];
      width[c] = std::max(width[c], cell ? cell->size() : 4);
      column.push_back(cell);
    }
    right[c] = LooksNumeric(c < table.types.size() ? table.types[c] : "", column);
  }
  auto pad = [](const std::string& text, size_t w, bool align_right) {
    std::string fill(w > text.size() ? w - text.size() : 0, ' ');
    return align_right ? fill + text : text + fill;
  };
  std::string out;
  auto line = [&](auto cell_at) {
    std::string text;
    for (size_t c = 0; c < n; ++c) {
      text += (c == 0 ? "" : " | ") + cell_at(c);
    }
    while (!text.empty() && text.back() == ' ') text.pop_back();
    out += text + "\n";
  };
  line([&](size_t c) { return pad(table.names[c], width[c], right[c]); });
  std::string rule;
  for (size_t c = 0; c < n; ++c) {
    rule += (c == 0 ? "" : "-+-") + std::string(width[c], '-');
  }
  out += rule + "\n";
  for (const auto& row : table.rows) {
    line([&](size_t c) { return pad(row[c] ? *row[c] : "NULL", width[c], right[c]); });
  }
  out += "(" + std::to_string(table.rows.size()) + (table.rows.size() == 1 ? " row)\n" : " rows)\n");
  return out;
}

namespace {

/// `server`'s URL of `path` (QueryUrl's address rules).
Result<std::string> UrlOf(const std::string& server, const std::string& path) {
  RILL_ASSIGN_OR_RAISE(std::string url, QueryUrl(server));
  return url.substr(0, url.size() - std::string("/api/v1/query").size()) + path;
}

/// One request to the server: POST `*post_body` as JSON, or GET when null.
/// Return 0 with the response in `*response`, 1 when the server refused it
/// (its message in `*err`), 2 when it could not be reached.
int Exchange(const std::string& server, const std::string& url, const std::string& token,
             const std::string* post_body, double timeout_seconds, std::string* response,
             std::string* err) {
  curl_global_init(CURL_GLOBAL_DEFAULT);
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> h(curl_easy_init(), curl_easy_cleanup);
  curl_slist* headers = curl_slist_append(nullptr, "Content-Type: application/json");
  headers = curl_slist_append(headers, "Expect:");
  if (!token.empty()) {
    headers = curl_slist_append(headers, ("Authorization: Bearer " + token).c_str());
  }
  std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> owned(headers, curl_slist_free_all);
  char error[CURL_ERROR_SIZE] = {};
  curl_easy_setopt(h.get(), CURLOPT_URL, url.c_str());
  curl_easy_setopt(h.get(), CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(h.get(), CURLOPT_PROXY, "");
  curl_easy_setopt(h.get(), CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h.get(), CURLOPT_TIMEOUT_MS, static_cast<long>(timeout_seconds * 1000));
  curl_easy_setopt(h.get(), CURLOPT_HTTPHEADER, headers);
  if (post_body != nullptr) {
    curl_easy_setopt(h.get(), CURLOPT_POSTFIELDS, post_body->c_str());
    curl_easy_setopt(h.get(), CURLOPT_POSTFIELDSIZE_LARGE,
                     static_cast<curl_off_t>(post_body->size()));
  }
  curl_easy_setopt(h.get(), CURLOPT_WRITEFUNCTION, Collect);
  curl_easy_setopt(h.get(), CURLOPT_WRITEDATA, response);
  curl_easy_setopt(h.get(), CURLOPT_ERRORBUFFER, error);
  if (CURLcode rc = curl_easy_perform(h.get()); rc != CURLE_OK) {
    *err = "cannot reach the rill server at " + server + ": " +
           (error[0] != '\0' ? error : curl_easy_strerror(rc));
    return 2;
  }
  long status = 0;
  curl_easy_getinfo(h.get(), CURLINFO_RESPONSE_CODE, &status);
  if (status == 401) {
    *err = "the server refused the token (HTTP 401): pass --token or set RILL_TOKEN";
    return 1;
  }
  if (status < 200 || status >= 300) {
    *err = ServerMessage(status, *response);
    return 1;
  }
  return 0;
}

/// The command tag (and notice) of a DDL answer {"command": ..., "notice": ...}
/// without rows; nullopt for any other answer.
std::optional<std::string> CommandOf(const std::string& json) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  std::string_view command, notice;
  if (parser.parse(json).get(doc) || !doc.is_object() ||
      doc["command"].get_string().get(command) || doc["columns"].error() == simdjson::SUCCESS) {
    return std::nullopt;
  }
  std::string out;
  if (!doc["notice"].get_string().get(notice) && !notice.empty()) {
    out += "NOTICE:  " + std::string(notice) + "\n";
  }
  return out + std::string(command) + "\n";
}

}  // namespace

int HttpExchange(const std::string& server, const std::string& url, const std::string& token,
                 const std::string* post_body, double timeout_seconds, std::string* response,
                 std::string* err) {
  return Exchange(server, url, token, post_body, timeout_seconds, response, err);
}

int RunQuery(const QueryOptions& options, std::string* out, std::string* err) {
  if (options.format != "table" && options.format != "csv" && options.format != "json") {
    *err = "unknown format '" + options.format + "' (expected table, csv or json)";
    return 2;
  }
  // /api/v1/sql: queries as /api/v1/query runs them, and DDL (with the admin token).
  auto url = UrlOf(options.server, "/api/v1/sql");
  if (!url.ok()) {
    *err = url.status().message();
    return 2;
  }
  const std::string wire_format = options.format == "csv" ? "csv" : "json";
  const std::string body = "{\"sql\":" + server::JsonQuote(options.sql) +
                           ",\"format\":" + server::JsonQuote(wire_format) + "}";
  std::string response;
  if (int rc = Exchange(options.server, *url, options.token, &body, options.timeout_seconds,
                        &response, err);
      rc != 0) {
    return rc;
  }
  if (auto command = CommandOf(response)) {
    *out = *command;
    return 0;
  }
  if (options.format != "table") {
    *out = response;
    if (!out->empty() && out->back() != '\n') *out += "\n";
    return 0;
  }
  auto table = ParseJsonResult(response);
  if (!table.ok()) {
    *err = table.status().message();
    return 2;
  }
  *out = FormatTable(*table);
  return 0;
}

int RunDump(const DumpOptions& options, std::string* out, std::string* err) {
  if (options.format != "yaml" && options.format != "sql") {
    *err = "unknown format '" + options.format + "' (expected yaml or sql)";
    return 2;
  }
  auto url = UrlOf(options.server, "/api/v1/pipeline/dump?format=" + options.format);
  if (!url.ok()) {
    *err = url.status().message();
    return 2;
  }
  return Exchange(options.server, *url, options.token, nullptr, options.timeout_seconds, out,
                  err);
}

}  // namespace rill::app
