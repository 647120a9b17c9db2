#include "rill/server/auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

namespace rill::server {

Result<std::string> GenerateToken() {
  unsigned char bytes[32];
  if (RAND_bytes(bytes, sizeof(bytes)) != 1) {
    return Status::IOError("OpenSSL RAND_bytes failed: cannot generate a token");
  }
  static const char* kHex = "0123456789abcdef";
  std::string token;
  token.reserve(64);
  for (unsigned char b : bytes) {
    token.push_back(kHex[b >> 4]);
    token.push_back(kHex[b & 15]);
  }
  return token;
}

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) {
    return false;
  }
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string_view CookieValue(std::string_view cookies, std::string_view name) {
  while (!cookies.empty()) {
    size_t semi = cookies.find(';');
    std::string_view part = cookies.substr(0, semi);
    cookies = semi == std::string_view::npos ? std::string_view() : cookies.substr(semi + 1);
    while (!part.empty() && part.front() == ' ') {
      part.remove_prefix(1);
    }
    size_t eq = part.find('=');
    if (eq != std::string_view::npos && part.substr(0, eq) == name) {
      return part.substr(eq + 1);
    }
  }
  return {};
}

std::string WebSocketProtocolToken(std::string_view protocols) {
  while (!protocols.empty()) {
    size_t comma = protocols.find(',');
    std::string_view item = protocols.substr(0, comma);
    protocols = comma == std::string_view::npos ? std::string_view() : protocols.substr(comma + 1);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (item.substr(0, kWebSocketAuthPrefix.size()) != kWebSocketAuthPrefix) continue;
    std::string b64(item.substr(kWebSocketAuthPrefix.size()));
    if (b64.empty() || b64.size() > 4096) return {};
    for (char& c : b64) {
      if (c == '-') c = '+';
      if (c == '_') c = '/';
    }
    while (b64.size() % 4 != 0) b64.push_back('=');
    std::string out(b64.size() / 4 * 3, '\0');
    int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                            reinterpret_cast<const unsigned char*>(b64.data()),
                            static_cast<int>(b64.size()));
    if (n < 0) return {};
    size_t pad = 0;
    while (pad < 2 && b64.size() > pad && b64[b64.size() - 1 - pad] == '=') ++pad;
    out.resize(static_cast<size_t>(n) - pad);
    return out;
  }
  return {};
}

bool IsAuthorized(const HttpRequest& request, const std::string& token) {
  if (token.empty()) {
    return true;
  }
  std::string_view auth = request.header("authorization");
  constexpr std::string_view kBearer = "Bearer ";
  if (auth.size() > kBearer.size() && auth.substr(0, kBearer.size()) == kBearer &&
      ConstantTimeEquals(auth.substr(kBearer.size()), token)) {
    return true;
  }
  std::string_view cookie = CookieValue(request.header("cookie"), kTokenCookie);
  if (!cookie.empty() && ConstantTimeEquals(cookie, token)) {
    return true;
  }
  std::string offered = WebSocketProtocolToken(request.header("sec-websocket-protocol"));
  return !offered.empty() && ConstantTimeEquals(offered, token);
}

bool IsAuthorized(const HttpRequest& request, const std::string& token,
                  const std::string& admin_token) {
  return IsAuthorized(request, token) || IsAdmin(request, admin_token);
}

bool IsAdmin(const HttpRequest& request, const std::string& admin_token) {
  return !admin_token.empty() && IsAuthorized(request, admin_token);
}

}  // namespace rill::server
