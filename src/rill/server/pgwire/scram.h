// SCRAM-SHA-256 (RFC 5802 / 7677), server side, as PostgreSQL speaks it: the
// password is the engine's token, which never crosses the wire. OpenSSL
// provides the primitives (PBKDF2, HMAC-SHA-256, random bytes).
//
// Threads: ScramVerifier is immutable after Make and may be shared by every
// connection; a ScramExchange belongs to one connection.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "rill/common/status.h"

namespace rill::pgwire {

/// The stored form of a password: salt, iteration count and the derived keys.
class ScramVerifier {
 public:
  /// Derive the keys of `password` with a fresh random salt.
  static Result<std::shared_ptr<const ScramVerifier>> Make(std::string_view password,
                                                           int iterations = 4096);
  const std::string& salt() const { return salt_; }
  int iterations() const { return iterations_; }
  const std::string& stored_key() const { return stored_key_; }
  const std::string& server_key() const { return server_key_; }

 private:
  std::string salt_;
  int iterations_ = 0;
  std::string stored_key_;
  std::string server_key_;
};

/// One authentication exchange: client-first → server-first → client-final →
/// server-final.
class ScramExchange {
 public:
  explicit ScramExchange(std::shared_ptr<const ScramVerifier> verifier)
      : verifier_(std::move(verifier)) {}

  /// Take the client-first message; return the server-first message. Invalid
  /// for a malformed message or channel binding ("p=") requests.
  Result<std::string> ServerFirst(std::string_view client_first);
  /// Take the client-final message; return the server-final message
  /// ("v=<signature>"). Invalid for a malformed message; an empty string when
  /// the proof does not match the password (compared in constant time).
  Result<std::string> ServerFinal(std::string_view client_final);

 private:
  std::shared_ptr<const ScramVerifier> verifier_;
  std::string client_first_bare_;
  std::string server_first_;
  std::string nonce_;  ///< client nonce + server nonce
  std::string gs2_header_;
};

/// Base64 (standard alphabet, padded).
std::string Base64Encode(std::string_view bytes);
/// Invalid for characters outside the alphabet or a bad length.
Result<std::string> Base64Decode(std::string_view text);
/// Compare in time independent of where the inputs differ.
bool ConstantTimeEquals(std::string_view a, std::string_view b);

}  // namespace rill::pgwire
