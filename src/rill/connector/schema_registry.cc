// SchemaRegistryClient: requests with libcurl, answers read with simdjson.
#include "rill/connector/schema_registry.h"

#include <curl/curl.h>

#include <charconv>
#include <cstdio>
#include <mutex>

#include <simdjson.h>

namespace rill {

namespace {

struct Sink {
  std::string* body;
  size_t limit;
  bool overflow = false;
};

size_t WriteBody(char* data, size_t size, size_t n, void* user) {
  auto* sink = static_cast<Sink*>(user);
  const size_t bytes = size * n;
  if (sink->body->size() + bytes > sink->limit) {
    sink->overflow = true;
    return 0;  // curl stops with CURLE_WRITE_ERROR
  }
  sink->body->append(data, bytes);
  return bytes;
}

struct CurlDeleter {
  void operator()(CURL* c) const { curl_easy_cleanup(c); }
};
struct HeadersDeleter {
  void operator()(curl_slist* h) const { curl_slist_free_all(h); }
};

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string PercentDecode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && HexDigit(s[i + 1]) >= 0 && HexDigit(s[i + 2]) >= 0) {
      out.push_back(static_cast<char>(HexDigit(s[i + 1]) * 16 + HexDigit(s[i + 2])));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

/// The JSON string value of `key` in the object `body`.
Result<std::string> JsonField(const std::string& body, const char* key) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(body).get(doc)) return Status::Invalid("the answer is not JSON");
  std::string_view s;
  if (!doc[key].get_string().get(s)) return std::string(s);
  int64_t i;
  if (!doc[key].get_int64().get(i)) return std::to_string(i);
  return Status::Invalid("the answer has no \"", key, "\"");
}

std::string Excerpt(const std::string& body) {
  return body.size() <= 200 ? body : body.substr(0, 200) + "…";
}

}  // namespace

Result<std::shared_ptr<SchemaRegistryClient>> SchemaRegistryClient::Make(
    SchemaRegistryOptions options) {
  const std::string& url = options.url;
  const size_t scheme = url.find("://");
  if (scheme == std::string::npos ||
      (url.compare(0, scheme, "http") != 0 && url.compare(0, scheme, "https") != 0)) {
    return Status::Invalid("schema_registry_url '", url, "': expected http(s)://host[:port]");
  }
  if (options.timeout_ms <= 0 || options.max_response_bytes <= 0) {
    return Status::Invalid("schema registry: timeout_ms and max_response_bytes must be > 0");
  }
  static std::once_flag init;
  std::call_once(init, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  return std::shared_ptr<SchemaRegistryClient>(new SchemaRegistryClient(std::move(options)));
}

SchemaRegistryClient::SchemaRegistryClient(SchemaRegistryOptions options)
    : options_(std::move(options)) {
  // Split userinfo off the URL: "http://user:pw@host/..." (the options win).
  std::string url = options_.url;
  const size_t start = url.find("://") + 3;
  const size_t slash = url.find('/', start);
  const size_t at = url.rfind('@', slash == std::string::npos ? url.size() : slash);
  if (at != std::string::npos && at >= start) {
    const std::string userinfo = url.substr(start, at - start);
    const size_t colon = userinfo.find(':');
    if (options_.user.empty()) {
      options_.user = PercentDecode(userinfo.substr(0, colon));
      if (colon != std::string::npos) options_.password = PercentDecode(userinfo.substr(colon + 1));
    }
    url.erase(start, at + 1 - start);
  }
  while (!url.empty() && url.back() == '/') url.pop_back();
  base_url_ = url;
}

int64_t SchemaRegistryClient::requests() const {
  std::lock_guard<std::mutex> lock(mu_);
  return requests_;
}

Status SchemaRegistryClient::Request(const std::string& path, const std::string* post_body,
                                     long* status, std::string* body) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++requests_;
  }
  std::unique_ptr<CURL, CurlDeleter> h(curl_easy_init());
  if (!h) return Status::OutOfMemory("curl_easy_init failed");
  const std::string url = base_url_ + path;
  std::unique_ptr<curl_slist, HeadersDeleter> headers(curl_slist_append(
      nullptr, "Accept: application/vnd.schemaregistry.v1+json, application/json"));
  if (post_body) {
    headers.reset(curl_slist_append(headers.release(),
                                    "Content-Type: application/vnd.schemaregistry.v1+json"));
  }
  Sink sink{body, static_cast<size_t>(options_.max_response_bytes)};
  char error[CURL_ERROR_SIZE] = {0};
  CURL* c = h.get();
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(c, CURLOPT_NOPROXY, "127.0.0.1,localhost,::1");
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(options_.timeout_ms));
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(options_.timeout_ms));
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers.get());
  curl_easy_setopt(c, CURLOPT_USERAGENT, "rill-schema-registry/1");
  if (!options_.user.empty()) {
    curl_easy_setopt(c, CURLOPT_HTTPAUTH, CURLAUTH_BASIC);
    curl_easy_setopt(c, CURLOPT_USERNAME, options_.user.c_str());
    curl_easy_setopt(c, CURLOPT_PASSWORD, options_.password.c_str());
  }
  if (post_body) {
    curl_easy_setopt(c, CURLOPT_POST, 1L);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, post_body->data());
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(post_body->size()));
  }
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, WriteBody);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &sink);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, error);
  const CURLcode rc = curl_easy_perform(c);
  if (sink.overflow) {
    return Status::IOError("schema registry ", base_url_, path, ": answer over ",
                           options_.max_response_bytes, " bytes");
  }
  if (rc != CURLE_OK) {
    return Status::IOError("schema registry ", base_url_, path, ": ",
                           error[0] != '\0' ? error : curl_easy_strerror(rc));
  }
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
  return Status::OK();
}

Result<std::shared_ptr<const AvroSchema>> SchemaRegistryClient::GetSchema(int32_t id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = cache_.find(id);
    if (it != cache_.end()) return it->second;
  }
  long status = 0;
  std::string body;
  const std::string path = "/schemas/ids/" + std::to_string(id);
  RILL_RETURN_NOT_OK(Request(path, nullptr, &status, &body));
  Result<std::shared_ptr<const AvroSchema>> result;
  if (status == 404) {
    result = Status::KeyError("schema id ", id, " is not in the schema registry at ", base_url_);
  } else if (status != 200) {
    return Status::IOError("schema registry ", base_url_, path, ": HTTP ", status, " ",
                           Excerpt(body));
  } else {
    auto text = JsonField(body, "schema");
    if (!text.ok()) {
      return Status::IOError("schema registry ", base_url_, path, ": ", text.status().message());
    }
    auto parsed = AvroSchema::Parse(*text);
    if (parsed.ok()) {
      result = std::move(parsed);
    } else {
      result = parsed.status().WithMessage("schema id ", id, ": ", parsed.status().message());
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  return cache_.emplace(id, std::move(result)).first->second;
}

Result<int32_t> SchemaRegistryClient::Register(const std::string& subject,
                                               const std::string& schema_json) {
  RILL_ASSIGN_OR_RAISE(auto parsed, AvroSchema::Parse(schema_json));
  std::string escaped_subject;
  for (unsigned char ch : subject) {
    if (std::isalnum(ch) || ch == '-' || ch == '_' || ch == '.') {
      escaped_subject += static_cast<char>(ch);
    } else {
      char buf[4];
      std::snprintf(buf, sizeof(buf), "%%%02X", ch);
      escaped_subject += buf;
    }
  }
  const std::string path = "/subjects/" + escaped_subject + "/versions";
  const std::string request = "{\"schema\":" + AvroJsonQuote(schema_json) + "}";
  long status = 0;
  std::string body;
  RILL_RETURN_NOT_OK(Request(path, &request, &status, &body));
  if (status != 200) {
    return Status::IOError("schema registry ", base_url_, path, ": HTTP ", status, " ",
                           Excerpt(body));
  }
  auto id_text = JsonField(body, "id");
  if (!id_text.ok()) {
    return Status::IOError("schema registry ", base_url_, path, ": ", id_text.status().message());
  }
  int32_t id = 0;
  const char* end = id_text->data() + id_text->size();
  if (std::from_chars(id_text->data(), end, id).ptr != end) {
    return Status::IOError("schema registry ", base_url_, path, ": bad id '", *id_text, "'");
  }
  std::lock_guard<std::mutex> lock(mu_);
  cache_.emplace(id, std::move(parsed));
  return id;
}

}  // namespace rill
