// SSRF guard for outbound webhooks: decide whether a URL may be called.
//
// A webhook URL comes from a user (an HTTP request or an alert rule), and the
// server sends a POST to it from inside the host's network. Without a guard
// that POST can reach the loopback interface, the private network or a cloud
// metadata service (server-side request forgery). The guard
//   1. parses the URL with libcurl's own parser (so the guard and the sender
//      never disagree on the host), accepts only http and https,
//   2. resolves the host (IP literals in every form inet_aton accepts:
//      2130706433, 0x7f000001, 0177.0.0.1, 127.1, and all IPv6 forms),
//   3. refuses the URL when ANY resolved address is forbidden (see
//      ClassifyAddress), and
//   4. returns the checked address; the sender pins its connection to it
//      (CURLOPT_CONNECT_TO plus a socket callback that refuses any other
//      address), so DNS rebinding between the check and the connection cannot
//      redirect the request. The sender does not follow redirects.
//
// `allow_private` (ServerOptions::allow_private_webhooks, off by default)
// lifts the guard for loopback, private, CGNAT, unique-local and link-local
// receivers, e.g. a local test receiver. Cloud metadata addresses, unspecified,
// multicast, broadcast and reserved addresses stay refused even then.
//
// Threads: every function here is pure or calls the resolver; any thread.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rill/common/status.h"

namespace rill::server {

/// An IPv4 or IPv6 address in network byte order.
struct IpAddress {
  bool v6 = false;
  /// IPv4 uses the first 4 bytes.
  std::array<uint8_t, 16> bytes{};

  /// Return the IPv4 address as a host-order integer (v4 only).
  uint32_t v4() const;
  /// Return the canonical text ("127.0.0.1", "::1").
  std::string ToString() const;
  /// Parse a canonical IPv4 dotted quad or an IPv6 address (inet_pton; no
  /// brackets). nullopt otherwise.
  static std::optional<IpAddress> Parse(std::string_view text);
  bool operator==(const IpAddress& other) const = default;
};

/// Why an address is refused.
enum class AddressClass {
  kPublic,        ///< allowed
  kLoopback,      ///< 127/8, ::1
  kPrivate,       ///< 10/8, 172.16/12, 192.168/16, 100.64/10 (CGNAT), fc00::/7
  kLinkLocal,     ///< 169.254/16, fe80::/10, fec0::/10 (site-local)
  kUnspecified,   ///< 0/8, ::
  kMulticast,     ///< 224/4, ff00::/8
  kBroadcast,     ///< 255.255.255.255
  kReserved,      ///< 240/4, documentation and benchmark ranges, 100::/64, Teredo
  kCloudMetadata, ///< 169.254.169.254, fd00:ec2::254, 100.100.100.200
};

/// Return a short lowercase description ("loopback", "cloud metadata", ...).
const char* AddressClassName(AddressClass cls);

/// Classify `address`. IPv6 addresses that embed an IPv4 address (mapped
/// ::ffff:0:0/96, compatible ::/96, NAT64 64:ff9b::/96, 6to4 2002::/16) are
/// classified by the embedded address.
AddressClass ClassifyAddress(const IpAddress& address);

/// Return true when a webhook may connect to an address of class `cls`.
bool AddressAllowed(AddressClass cls, bool allow_private);

/// Resolve a host name (or IP literal, brackets removed) to every address.
/// IOError when it does not resolve.
using Resolver = std::function<Result<std::vector<IpAddress>>(const std::string& host)>;

/// The system resolver: getaddrinfo, TCP, IPv4 and IPv6.
Result<std::vector<IpAddress>> SystemResolve(const std::string& host);

/// A URL that passed the guard, with the address to connect to.
struct CheckedUrl {
  std::string url;     ///< the URL as given
  std::string scheme;  ///< "http" or "https"
  std::string host;    ///< as libcurl parsed it (IPv6 without brackets)
  int port = 0;        ///< explicit or the scheme's default
  /// Every resolved address (all allowed); the first is the one to pin.
  std::vector<IpAddress> addresses;
};

/// Check `url` as the file comment describes; on success return where to
/// connect. Invalid (with the reason and the offending address) for a refused
/// or malformed URL; IOError when the host does not resolve. Never connects.
Result<CheckedUrl> CheckWebhookUrl(std::string_view url, bool allow_private,
                                   const Resolver& resolver = SystemResolve);

}  // namespace rill::server
