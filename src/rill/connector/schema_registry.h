// SchemaRegistryClient: a client of a Confluent-compatible schema registry
// (libcurl), with the schemas it fetched cached by id.
//
//   GET  {url}/schemas/ids/{id}               -> {"schema": "<Avro schema JSON>", ...}
//   POST {url}/subjects/{subject}/versions    <- {"schema": "<Avro schema JSON>"}
//                                             -> {"id": N}
// Credentials: `user`/`password` (HTTP basic auth), or the URL's userinfo
// (http://user:password@host:port); the options win over the URL. Every
// request has a total timeout and a response-size limit.
//
// Errors: a schema the registry does not have (HTTP 404) is KeyError (the
// records that name it are rejected, and the answer is cached so a bad id
// costs one request); a registry that cannot be reached, answers 5xx, times out
// or sends too much is IOError (transient: a Kafka consumer retries the
// messages later); a schema that does not parse is Invalid (cached as well).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "rill/common/status.h"
#include "rill/connector/avro_schema.h"

namespace rill {

/// Options of a SchemaRegistryClient.
struct SchemaRegistryOptions {
  /// http(s)://[user:password@]host[:port][/path]
  std::string url;
  std::string user;
  std::string password;
  int64_t timeout_ms = 10000;                ///< per request, connection included
  int64_t max_response_bytes = 8 << 20;      ///< a longer answer is an IOError
};

/// Fetches (and registers) Avro schemas. Thread-safe: any thread; requests
/// run on the calling thread without holding the cache's lock.
class SchemaRegistryClient {
 public:
  /// Make a client (no request yet). Invalid for a URL that is not http(s).
  static Result<std::shared_ptr<SchemaRegistryClient>> Make(SchemaRegistryOptions options);

  /// Return the schema of `id`: from the cache, else fetched and parsed.
  Result<std::shared_ptr<const AvroSchema>> GetSchema(int32_t id);
  /// Register `schema_json` under `subject` and return its id (the registry
  /// returns the existing id for a schema it already has). The schema is
  /// cached under that id.
  Result<int32_t> Register(const std::string& subject, const std::string& schema_json);

  /// The URL without its userinfo (for messages).
  const std::string& url() const { return base_url_; }
  /// Requests sent so far (fetches and registrations). Any thread.
  int64_t requests() const;

 private:
  explicit SchemaRegistryClient(SchemaRegistryOptions options);
  /// One request; `*status` is the HTTP status. IOError for transport failures.
  Status Request(const std::string& path, const std::string* post_body, long* status,
                 std::string* body);

  SchemaRegistryOptions options_;
  std::string base_url_;
  mutable std::mutex mu_;
  std::map<int32_t, Result<std::shared_ptr<const AvroSchema>>> cache_;  // guarded by mu_
  int64_t requests_ = 0;                                                 // guarded by mu_
};

}  // namespace rill
