#include "rill/server/pgwire/scram.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include <cctype>
#include <vector>

namespace rill::pgwire {
namespace {

std::string Hmac(std::string_view key, std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, &len);
  return std::string(reinterpret_cast<char*>(out), len);
}

std::string Sha256(std::string_view data) {
  unsigned char out[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), out);
  return std::string(reinterpret_cast<char*>(out), sizeof(out));
}

Result<std::string> RandomBytes(int n) {
  std::string out(static_cast<size_t>(n), '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(out.data()), n) != 1) {
    return Status::IOError("OpenSSL could not produce random bytes");
  }
  return out;
}

// Split "a=x,b=y" into attributes; values may contain '=' but not ','.
std::vector<std::pair<char, std::string_view>> Attributes(std::string_view s) {
  std::vector<std::pair<char, std::string_view>> out;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t comma = s.find(',', pos);
    if (comma == std::string_view::npos) {
      comma = s.size();
    }
    std::string_view part = s.substr(pos, comma - pos);
    if (part.size() >= 2 && part[1] == '=') {
      out.emplace_back(part[0], part.substr(2));
    } else {
      out.emplace_back('\0', part);
    }
    pos = comma + 1;
  }
  return out;
}

}  // namespace

std::string Base64Encode(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(bytes.data()),
                          static_cast<int>(bytes.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

Result<std::string> Base64Decode(std::string_view text) {
  if (text.size() % 4 != 0 || text.size() > (1 << 20)) {
    return Status::Invalid("invalid base64 length ", text.size());
  }
  for (char c : text) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '/' || c == '=')) {
      return Status::Invalid("invalid base64 character");
    }
  }
  std::string out(3 * text.size() / 4 + 1, '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(text.data()),
                          static_cast<int>(text.size()));
  if (n < 0) {
    return Status::Invalid("invalid base64");
  }
  // EVP_DecodeBlock keeps the zero bytes that padding stands for.
  size_t pad = 0;
  if (!text.empty() && text.back() == '=') ++pad;
  if (text.size() >= 2 && text[text.size() - 2] == '=') ++pad;
  out.resize(static_cast<size_t>(n) - pad);
  return out;
}

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) {
    return false;
  }
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

Result<std::shared_ptr<const ScramVerifier>> ScramVerifier::Make(std::string_view password,
                                                                  int iterations) {
  auto v = std::make_shared<ScramVerifier>();
  RILL_ASSIGN_OR_RAISE(v->salt_, RandomBytes(16));
  v->iterations_ = iterations;
  unsigned char salted[SHA256_DIGEST_LENGTH];
  if (PKCS5_PBKDF2_HMAC(password.data(), static_cast<int>(password.size()),
                        reinterpret_cast<const unsigned char*>(v->salt_.data()),
                        static_cast<int>(v->salt_.size()), iterations, EVP_sha256(),
                        sizeof(salted), salted) != 1) {
    return Status::IOError("OpenSSL PBKDF2 failed");
  }
  std::string salted_password(reinterpret_cast<char*>(salted), sizeof(salted));
  v->stored_key_ = Sha256(Hmac(salted_password, "Client Key"));
  v->server_key_ = Hmac(salted_password, "Server Key");
  return std::shared_ptr<const ScramVerifier>(std::move(v));
}

Result<std::string> ScramExchange::ServerFirst(std::string_view client_first) {
  // gs2-header: "n,," (no channel binding) or "y,," (client could, server
  // did not offer); "p=..." asks for binding we do not offer.
  if (client_first.size() < 3 || (client_first[0] != 'n' && client_first[0] != 'y')) {
    return Status::Invalid("SCRAM: unsupported channel binding in client-first message");
  }
  size_t second_comma = client_first.find(',', 2);
  if (client_first[1] != ',' || second_comma == std::string_view::npos) {
    return Status::Invalid("SCRAM: malformed client-first message");
  }
  gs2_header_ = std::string(client_first.substr(0, second_comma + 1));
  client_first_bare_ = std::string(client_first.substr(second_comma + 1));
  std::string_view client_nonce;
  for (auto& [key, value] : Attributes(client_first_bare_)) {
    if (key == 'r') {
      client_nonce = value;
    } else if (key == 'm') {
      return Status::Invalid("SCRAM: unsupported extension in client-first message");
    }
  }
  if (client_nonce.empty()) {
    return Status::Invalid("SCRAM: client-first message has no nonce");
  }
  RILL_ASSIGN_OR_RAISE(auto server_nonce, RandomBytes(18));
  nonce_ = std::string(client_nonce) + Base64Encode(server_nonce);
  server_first_ = "r=" + nonce_ + ",s=" + Base64Encode(verifier_->salt()) +
                  ",i=" + std::to_string(verifier_->iterations());
  return server_first_;
}

Result<std::string> ScramExchange::ServerFinal(std::string_view client_final) {
  if (server_first_.empty()) {
    return Status::Invalid("SCRAM: client-final message before client-first");
  }
  size_t proof_pos = client_final.rfind(",p=");
  if (proof_pos == std::string_view::npos) {
    return Status::Invalid("SCRAM: client-final message has no proof");
  }
  std::string_view without_proof = client_final.substr(0, proof_pos);
  std::string_view channel, nonce;
  for (auto& [key, value] : Attributes(without_proof)) {
    if (key == 'c') channel = value;
    if (key == 'r') nonce = value;
  }
  RILL_ASSIGN_OR_RAISE(auto channel_bytes, Base64Decode(channel));
  if (channel_bytes != gs2_header_) {
    return Status::Invalid("SCRAM: channel binding does not match the client-first message");
  }
  if (nonce != nonce_) {
    return Status::Invalid("SCRAM: nonce does not match");
  }
  RILL_ASSIGN_OR_RAISE(auto proof, Base64Decode(client_final.substr(proof_pos + 3)));
  const std::string auth_message =
      client_first_bare_ + "," + server_first_ + "," + std::string(without_proof);
  std::string client_signature = Hmac(verifier_->stored_key(), auth_message);
  if (proof.size() != client_signature.size()) {
    return Status::Invalid("SCRAM: proof has the wrong length");
  }
  std::string client_key(proof.size(), '\0');
  for (size_t i = 0; i < proof.size(); ++i) {
    client_key[i] = static_cast<char>(proof[i] ^ client_signature[i]);
  }
  if (!ConstantTimeEquals(Sha256(client_key), verifier_->stored_key())) {
    return std::string();  // wrong password
  }
  return "v=" + Base64Encode(Hmac(verifier_->server_key(), auth_message));
}

}  // namespace rill::pgwire
