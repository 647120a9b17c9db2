// Tokens: generation (OpenSSL CSPRNG), constant-time comparison, and the
// check of a request's credentials (bearer header or login cookie).
#pragma once

#include <string>
#include <string_view>

#include "rill/common/status.h"
#include "rill/server/http_types.h"

namespace rill::server {

/// Name of the cookie set by POST /api/v1/login.
inline constexpr const char* kTokenCookie = "rill_token";

/// WebSocket subprotocol prefix that carries the token, base64url-encoded:
/// browsers cannot set headers on a WebSocket, and cookies are shared by every
/// port of a host (so they would reach other servers). The client offers
/// ["rill", "rill.auth.<base64url(token)>"]; the server selects "rill".
inline constexpr std::string_view kWebSocketAuthPrefix = "rill.auth.";
inline constexpr const char* kWebSocketProtocol = "rill";

/// The token in a Sec-WebSocket-Protocol header value, or "" when none.
std::string WebSocketProtocolToken(std::string_view protocols);

/// Return a new random token: 32 random bytes (256 bits) from OpenSSL's
/// CSPRNG as 64 hex digits. IOError if the CSPRNG fails.
Result<std::string> GenerateToken();

/// Compare in time that depends only on the lengths, never on the contents.
bool ConstantTimeEquals(std::string_view a, std::string_view b);

/// True when `token` is empty (authentication off) or the request carries it
/// as "Authorization: Bearer <token>", as the rill_token cookie, or (WebSocket
/// upgrades) in the Sec-WebSocket-Protocol offer.
bool IsAuthorized(const HttpRequest& request, const std::string& token);

/// As above, also accepting the admin credential `admin_token` (when not empty).
bool IsAuthorized(const HttpRequest& request, const std::string& token,
                  const std::string& admin_token);

/// True when `admin_token` is not empty and the request carries it (the
/// credential that may run DDL).
bool IsAdmin(const HttpRequest& request, const std::string& admin_token);

/// Return the value of cookie `name` in a Cookie header, or "".
std::string_view CookieValue(std::string_view cookie_header, std::string_view name);

}  // namespace rill::server
