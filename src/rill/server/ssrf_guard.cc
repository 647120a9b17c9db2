#include "rill/server/ssrf_guard.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <memory>

#include <curl/curl.h>

namespace rill::server {
namespace {

bool InV4(uint32_t a, uint32_t net, int bits) {
  const uint32_t mask = bits == 0 ? 0 : ~uint32_t{0} << (32 - bits);
  return (a & mask) == (net & mask);
}

constexpr uint32_t V4(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
  return (uint32_t{a} << 24) | (uint32_t{b} << 16) | (uint32_t{c} << 8) | d;
}

AddressClass ClassifyV4(uint32_t a) {
  if (a == V4(169, 254, 169, 254) || a == V4(100, 100, 100, 200) ||
      a == V4(192, 0, 0, 192)) {  // AWS/GCP/Azure, Alibaba, Oracle metadata
    return AddressClass::kCloudMetadata;
  }
  if (a == V4(255, 255, 255, 255)) return AddressClass::kBroadcast;
  if (InV4(a, V4(0, 0, 0, 0), 8)) return AddressClass::kUnspecified;
  if (InV4(a, V4(127, 0, 0, 0), 8)) return AddressClass::kLoopback;
  if (InV4(a, V4(10, 0, 0, 0), 8) || InV4(a, V4(172, 16, 0, 0), 12) ||
      InV4(a, V4(192, 168, 0, 0), 16) || InV4(a, V4(100, 64, 0, 0), 10)) {
    return AddressClass::kPrivate;
  }
  if (InV4(a, V4(169, 254, 0, 0), 16)) return AddressClass::kLinkLocal;
  if (InV4(a, V4(224, 0, 0, 0), 4)) return AddressClass::kMulticast;
  if (InV4(a, V4(240, 0, 0, 0), 4) || InV4(a, V4(192, 0, 0, 0), 24) ||
      InV4(a, V4(192, 0, 2, 0), 24) || InV4(a, V4(198, 18, 0, 0), 15) ||
      InV4(a, V4(198, 51, 100, 0), 24) || InV4(a, V4(203, 0, 113, 0), 24) ||
      InV4(a, V4(192, 88, 99, 0), 24)) {
    return AddressClass::kReserved;
  }
  return AddressClass::kPublic;
}

uint32_t V4At(const std::array<uint8_t, 16>& b, int offset) {
  return (uint32_t{b[offset]} << 24) | (uint32_t{b[offset + 1]} << 16) |
         (uint32_t{b[offset + 2]} << 8) | b[offset + 3];
}

bool ZeroBytes(const std::array<uint8_t, 16>& b, int from, int to) {
  return std::all_of(b.begin() + from, b.begin() + to, [](uint8_t x) { return x == 0; });
}

AddressClass ClassifyV6(const std::array<uint8_t, 16>& b) {
  static const IpAddress kEc2Metadata = *IpAddress::Parse("fd00:ec2::254");
  if (b == kEc2Metadata.bytes) return AddressClass::kCloudMetadata;
  if (ZeroBytes(b, 0, 16)) return AddressClass::kUnspecified;
  if (ZeroBytes(b, 0, 15) && b[15] == 1) return AddressClass::kLoopback;
  // ::ffff:a.b.c.d (mapped) and ::a.b.c.d (compatible): the embedded v4 decides.
  if (ZeroBytes(b, 0, 10) && ((b[10] == 0xff && b[11] == 0xff) || (b[10] == 0 && b[11] == 0))) {
    return ClassifyV4(V4At(b, 12));
  }
  // NAT64 64:ff9b::/96 and 64:ff9b:1::/48 translate to the embedded v4.
  if (b[0] == 0x00 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b) {
    return ClassifyV4(V4At(b, 12));
  }
  // 6to4 2002:AABB:CCDD::/48 carries AA.BB.CC.DD.
  if (b[0] == 0x20 && b[1] == 0x02) {
    return ClassifyV4(V4At(b, 2));
  }
  if ((b[0] & 0xfe) == 0xfc) return AddressClass::kPrivate;               // fc00::/7
  if (b[0] == 0xfe && (b[1] & 0xc0) == 0x80) return AddressClass::kLinkLocal;  // fe80::/10
  if (b[0] == 0xfe && (b[1] & 0xc0) == 0xc0) return AddressClass::kLinkLocal;  // fec0::/10
  if (b[0] == 0xff) return AddressClass::kMulticast;
  // 100::/64 discard, 2001::/32 Teredo (embeds an obfuscated v4),
  // 2001:db8::/32 documentation, 2001:10::/28 ORCHID.
  if ((b[0] == 0x01 && b[1] == 0x00 && ZeroBytes(b, 2, 8)) ||
      (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x00 && b[3] == 0x00) ||
      (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x0d && b[3] == 0xb8) ||
      (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x00 && (b[3] & 0xf0) == 0x10)) {
    return AddressClass::kReserved;
  }
  return AddressClass::kPublic;
}

std::string Lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

/// Classify a host by name alone (before resolution), for names that must be
/// refused whatever DNS says.
std::optional<AddressClass> ClassifyName(std::string host) {
  host = Lower(host);
  while (!host.empty() && host.back() == '.') {
    host.pop_back();
  }
  if (host == "metadata.google.internal" || host == "metadata.goog" || host == "metadata" ||
      host == "instance-data" || EndsWith(host, ".metadata.google.internal")) {
    return AddressClass::kCloudMetadata;
  }
  if (host == "localhost" || EndsWith(host, ".localhost")) {
    return AddressClass::kLoopback;
  }
  return std::nullopt;
}

struct CurlUrlDeleter {
  void operator()(CURLU* u) const { curl_url_cleanup(u); }
};

/// Read one part of a parsed URL; empty when absent.
std::string UrlPart(CURLU* url, CURLUPart part, unsigned int flags = 0) {
  char* value = nullptr;
  if (curl_url_get(url, part, &value, flags) != CURLUE_OK || value == nullptr) {
    return "";
  }
  std::string out(value);
  curl_free(value);
  return out;
}

}  // namespace

uint32_t IpAddress::v4() const { return V4At(bytes, 0); }

std::string IpAddress::ToString() const {
  char buf[INET6_ADDRSTRLEN] = {};
  inet_ntop(v6 ? AF_INET6 : AF_INET, bytes.data(), buf, sizeof(buf));
  return buf;
}

std::optional<IpAddress> IpAddress::Parse(std::string_view text) {
  std::string s(text);
  IpAddress out;
  if (inet_pton(AF_INET, s.c_str(), out.bytes.data()) == 1) {
    return out;
  }
  out.v6 = true;
  if (inet_pton(AF_INET6, s.c_str(), out.bytes.data()) == 1) {
    return out;
  }
  return std::nullopt;
}

const char* AddressClassName(AddressClass cls) {
  switch (cls) {
    case AddressClass::kPublic:
      return "public";
    case AddressClass::kLoopback:
      return "loopback";
    case AddressClass::kPrivate:
      return "private";
    case AddressClass::kLinkLocal:
      return "link-local";
    case AddressClass::kUnspecified:
      return "unspecified";
    case AddressClass::kMulticast:
      return "multicast";
    case AddressClass::kBroadcast:
      return "broadcast";
    case AddressClass::kReserved:
      return "reserved";
    case AddressClass::kCloudMetadata:
      return "cloud metadata";
  }
  return "?";
}

AddressClass ClassifyAddress(const IpAddress& address) {
  return address.v6 ? ClassifyV6(address.bytes) : ClassifyV4(address.v4());
}

bool AddressAllowed(AddressClass cls, bool allow_private) {
  switch (cls) {
    case AddressClass::kPublic:
      return true;
    case AddressClass::kLoopback:
    case AddressClass::kPrivate:
    case AddressClass::kLinkLocal:
      return allow_private;
    default:
      return false;
  }
}

Result<std::vector<IpAddress>> SystemResolve(const std::string& host) {
  addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* list = nullptr;
  const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &list);
  if (rc != 0) {
    return Status::IOError("cannot resolve '", host, "': ", gai_strerror(rc));
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> owned(list, freeaddrinfo);
  std::vector<IpAddress> out;
  for (addrinfo* ai = list; ai != nullptr; ai = ai->ai_next) {
    IpAddress address;
    if (ai->ai_family == AF_INET) {
      const auto* sin = reinterpret_cast<const sockaddr_in*>(ai->ai_addr);
      std::memcpy(address.bytes.data(), &sin->sin_addr, 4);
    } else if (ai->ai_family == AF_INET6) {
      const auto* sin6 = reinterpret_cast<const sockaddr_in6*>(ai->ai_addr);
      address.v6 = true;
      std::memcpy(address.bytes.data(), &sin6->sin6_addr, 16);
    } else {
      continue;
    }
    if (std::find(out.begin(), out.end(), address) == out.end()) {
      out.push_back(address);
    }
  }
  if (out.empty()) {
    return Status::IOError("cannot resolve '", host, "': no IPv4 or IPv6 address");
  }
  return out;
}

Result<CheckedUrl> CheckWebhookUrl(std::string_view url, bool allow_private,
                                   const Resolver& resolver) {
  if (url.empty()) {
    return Status::Invalid("webhook url is empty");
  }
  if (url.size() > 8192) {
    return Status::Invalid("webhook url is longer than 8192 bytes");
  }
  std::unique_ptr<CURLU, CurlUrlDeleter> parsed(curl_url());
  if (!parsed) {
    return Status::OutOfMemory("curl_url");
  }
  const std::string text(url);
  if (const CURLUcode rc = curl_url_set(parsed.get(), CURLUPART_URL, text.c_str(), 0);
      rc != CURLUE_OK) {
    return Status::Invalid("webhook url '", text, "' is not a valid URL: ", curl_url_strerror(rc));
  }
  CheckedUrl out;
  out.url = text;
  out.scheme = Lower(UrlPart(parsed.get(), CURLUPART_SCHEME));
  if (out.scheme != "http" && out.scheme != "https") {
    return Status::Invalid("webhook url '", text, "' refused: scheme '", out.scheme,
                           "' is not http or https");
  }
  if (!UrlPart(parsed.get(), CURLUPART_ZONEID).empty()) {
    return Status::Invalid("webhook url '", text, "' refused: IPv6 zone ids are not allowed");
  }
  out.host = UrlPart(parsed.get(), CURLUPART_HOST, CURLU_URLDECODE);
  if (out.host.size() >= 2 && out.host.front() == '[' && out.host.back() == ']') {
    out.host = out.host.substr(1, out.host.size() - 2);
  }
  if (out.host.empty()) {
    return Status::Invalid("webhook url '", text, "' has no host");
  }
  const std::string port = UrlPart(parsed.get(), CURLUPART_PORT, CURLU_DEFAULT_PORT);
  out.port = port.empty() ? 0 : std::atoi(port.c_str());
  if (out.port <= 0 || out.port > 65535) {
    return Status::Invalid("webhook url '", text, "' has an invalid port '", port, "'");
  }
  if (std::optional<AddressClass> cls = ClassifyName(out.host);
      cls.has_value() && !AddressAllowed(*cls, allow_private)) {
    return Status::Invalid("webhook url '", text, "' refused: host '", out.host, "' is a ",
                           AddressClassName(*cls), " name");
  }
  RILL_ASSIGN_OR_RAISE(out.addresses, resolver(out.host));
  if (out.addresses.empty()) {
    return Status::IOError("cannot resolve '", out.host, "': no address");
  }
  for (const IpAddress& address : out.addresses) {
    const AddressClass cls = ClassifyAddress(address);
    if (!AddressAllowed(cls, allow_private)) {
      return Status::Invalid("webhook url '", text, "' refused: host '", out.host,
                             "' resolves to ", AddressClassName(cls), " address ",
                             address.ToString(),
                             AddressAllowed(cls, true) ? " (allow_private_webhooks is off)" : "");
    }
  }
  return out;
}

}  // namespace rill::server
