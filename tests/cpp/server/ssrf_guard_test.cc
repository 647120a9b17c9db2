// The SSRF guard refuses every internal address form before any connection.
#include "rill/server/ssrf_guard.h"

#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "rill/server/webhook.h"
#include "server/webhook_test_receiver.h"

namespace rill::server {
namespace {

using rill::testing::TestReceiver;

IpAddress Ip(const char* text) {
  auto ip = IpAddress::Parse(text);
  EXPECT_TRUE(ip.has_value()) << text;
  return ip.value_or(IpAddress{});
}

/// A resolver that knows a few names and refuses the rest (no DNS in tests).
Resolver FakeResolver(std::map<std::string, std::vector<std::string>> names) {
  return [names](const std::string& host) -> Result<std::vector<IpAddress>> {
    auto it = names.find(host);
    if (it == names.end()) {
      if (auto literal = IpAddress::Parse(host)) {
        return std::vector<IpAddress>{*literal};
      }
      return Status::IOError("cannot resolve '", host, "' (fake resolver)");
    }
    std::vector<IpAddress> out;
    for (const auto& text : it->second) {
      out.push_back(*IpAddress::Parse(text));
    }
    return out;
  };
}

TEST(ClassifyAddress, KnowsEveryInternalRange) {
  struct Case {
    const char* ip;
    AddressClass cls;
  };
  const std::vector<Case> cases = {
      {"8.8.8.8", AddressClass::kPublic},
      {"1.1.1.1", AddressClass::kPublic},
      {"2606:4700:4700::1111", AddressClass::kPublic},
      {"127.0.0.1", AddressClass::kLoopback},
      {"127.255.255.254", AddressClass::kLoopback},
      {"::1", AddressClass::kLoopback},
      {"10.1.2.3", AddressClass::kPrivate},
      {"172.16.0.1", AddressClass::kPrivate},
      {"172.31.255.255", AddressClass::kPrivate},
      {"172.32.0.1", AddressClass::kPublic},
      {"192.168.0.1", AddressClass::kPrivate},
      {"100.64.0.1", AddressClass::kPrivate},
      {"100.127.255.255", AddressClass::kPrivate},
      {"100.128.0.1", AddressClass::kPublic},
      {"fc00::1", AddressClass::kPrivate},
      {"fdff::1", AddressClass::kPrivate},
      {"169.254.1.1", AddressClass::kLinkLocal},
      {"fe80::1", AddressClass::kLinkLocal},
      {"febf::1", AddressClass::kLinkLocal},
      {"0.0.0.0", AddressClass::kUnspecified},
      {"0.1.2.3", AddressClass::kUnspecified},
      {"::", AddressClass::kUnspecified},
      {"224.0.0.1", AddressClass::kMulticast},
      {"239.255.255.250", AddressClass::kMulticast},
      {"ff02::1", AddressClass::kMulticast},
      {"255.255.255.255", AddressClass::kBroadcast},
      {"240.0.0.1", AddressClass::kReserved},
      {"192.0.2.1", AddressClass::kReserved},
      {"2001:db8::1", AddressClass::kReserved},
      {"169.254.169.254", AddressClass::kCloudMetadata},
      {"fd00:ec2::254", AddressClass::kCloudMetadata},
      {"100.100.100.200", AddressClass::kCloudMetadata},
      // IPv6 forms embedding an IPv4 address are judged by the IPv4 address.
      {"::ffff:127.0.0.1", AddressClass::kLoopback},
      {"::ffff:7f00:1", AddressClass::kLoopback},
      {"::ffff:10.0.0.1", AddressClass::kPrivate},
      {"::ffff:169.254.169.254", AddressClass::kCloudMetadata},
      {"::ffff:8.8.8.8", AddressClass::kPublic},
      {"::127.0.0.1", AddressClass::kLoopback},
      {"64:ff9b::7f00:1", AddressClass::kLoopback},
      {"2002:7f00:1::", AddressClass::kLoopback},
      {"2002:0808:0808::", AddressClass::kPublic},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(AddressClassName(ClassifyAddress(Ip(c.ip))), std::string(AddressClassName(c.cls)))
        << c.ip;
  }
}

TEST(AddressAllowed, PrivateOptionLiftsLocalRangesButNotMetadata) {
  EXPECT_TRUE(AddressAllowed(AddressClass::kPublic, false));
  for (AddressClass cls : {AddressClass::kLoopback, AddressClass::kPrivate,
                           AddressClass::kLinkLocal}) {
    EXPECT_FALSE(AddressAllowed(cls, false));
    EXPECT_TRUE(AddressAllowed(cls, true));
  }
  for (AddressClass cls : {AddressClass::kCloudMetadata, AddressClass::kUnspecified,
                           AddressClass::kMulticast, AddressClass::kBroadcast,
                           AddressClass::kReserved}) {
    EXPECT_FALSE(AddressAllowed(cls, true)) << AddressClassName(cls);
  }
}

/// Every form below must be refused by the guard and by the sender, and the
/// receiver listening on 127.0.0.1 must never see a connection.
TEST(SsrfGuard, RefusesInternalAddressFormsBeforeConnecting) {
  TestReceiver receiver;
  const std::string p = std::to_string(receiver.port());
  const std::vector<std::string> urls = {
      "http://127.0.0.1:" + p + "/hook",
      "http://2130706433:" + p + "/",            // decimal
      "http://0177.0.0.1:" + p + "/",            // octal
      "http://0x7f000001:" + p + "/",            // hex
      "http://0x7f.0.0.1:" + p + "/",            // hex first part
      "http://127.1:" + p + "/",                 // short form
      "http://127.0.1:" + p + "/",               // short form
      "http://0:" + p + "/",                     // 0 = 0.0.0.0
      "http://0.0.0.0:" + p + "/",
      "http://[::1]:" + p + "/",
      "http://[0:0:0:0:0:0:0:1]:" + p + "/",
      "http://[::ffff:127.0.0.1]:" + p + "/",     // IPv4-mapped
      "http://[::ffff:7f00:1]:" + p + "/",        // IPv4-mapped, hex
      "http://[::127.0.0.1]:" + p + "/",          // IPv4-compatible
      "http://[::]:" + p + "/",
      "http://[64:ff9b::7f00:1]:" + p + "/",      // NAT64
      "http://localhost:" + p + "/",
      "http://LOCALHOST:" + p + "/",
      "http://localhost.:" + p + "/",
      "http://hooks.localhost:" + p + "/",
      "http://evil@127.0.0.1:" + p + "/",         // userinfo
      "http://user:pass@127.0.0.1:" + p + "/",
      "http://example.com@127.0.0.1:" + p + "/",
      "HTTP://127.0.0.1:" + p + "/",              // uppercase scheme
      "hTTpS://127.0.0.1:" + p + "/",
      "http://127.0.0.1:" + p + "#@example.com/",
      "http://127.0.0.1:" + p + "/?@example.com",
      "http://%31%32%37.0.0.1:" + p + "/",        // percent-encoded host
      "file:///etc/passwd",
      "gopher://127.0.0.1:" + p + "/_GET%20/",
      "ftp://127.0.0.1:" + p + "/",
      "dict://127.0.0.1:" + p + "/",
      "ldap://127.0.0.1:" + p + "/",
      "127.0.0.1:" + p,                           // no scheme
      "//127.0.0.1:" + p + "/",
      "",
      "http://10.0.0.1/",
      "http://172.16.5.4/",
      "http://192.168.1.1/",
      "http://100.64.0.1/",
      "http://[fe80::1]/",
      "http://[fc00::1]/",
      "http://224.0.0.1/",
      "http://255.255.255.255/",
      "http://[ff02::1]/",
      "http://169.254.169.254/latest/meta-data/",
      "http://0251.0376.0251.0376/",              // metadata, octal
      "http://[::ffff:a9fe:a9fe]/",               // metadata, mapped
      "http://[fd00:ec2::254]/",
      "http://metadata.google.internal/computeMetadata/v1/",
      "http://METADATA.google.internal./",
  };
  ASSERT_GE(urls.size(), 30u);
  auto sender = WebhookSender::Make().ValueOrDie();
  for (const std::string& url : urls) {
    auto checked = CheckWebhookUrl(url, /*allow_private=*/false);
    EXPECT_TRUE(checked.status().IsInvalid()) << url << " -> " << checked.status().ToString();
    auto sent = sender->Send(url, WebhookFormat::kCustom, "{}");
    EXPECT_TRUE(sent.status().IsInvalid()) << url << " -> " << sent.status().ToString();
  }
  EXPECT_EQ(sender->stats().attempts, 0);
  EXPECT_EQ(sender->stats().refused, static_cast<int64_t>(urls.size()));
  EXPECT_EQ(receiver.connections(), 0);
}

TEST(SsrfGuard, RefusalNamesTheAddressAndTheOption) {
  auto checked = CheckWebhookUrl("http://2130706433:8080/", false);
  ASSERT_TRUE(checked.status().IsInvalid());
  EXPECT_NE(checked.status().message().find("loopback address 127.0.0.1"), std::string::npos)
      << checked.status().message();
  EXPECT_NE(checked.status().message().find("allow_private_webhooks"), std::string::npos);
  auto scheme = CheckWebhookUrl("gopher://example.com/", false);
  EXPECT_NE(scheme.status().message().find("scheme 'gopher'"), std::string::npos);
}

TEST(SsrfGuard, RefusesANameWhenAnyResolvedAddressIsInternal) {
  Resolver resolver = FakeResolver({{"rebind.test", {"93.184.216.34", "127.0.0.1"}},
                                    {"v6.test", {"2606:4700::1", "::ffff:10.0.0.1"}},
                                    {"public.test", {"93.184.216.34", "2606:4700::1"}}});
  EXPECT_TRUE(CheckWebhookUrl("http://rebind.test/", false, resolver).status().IsInvalid());
  EXPECT_TRUE(CheckWebhookUrl("http://v6.test/", false, resolver).status().IsInvalid());
  auto ok = CheckWebhookUrl("https://public.test/services/T0/B0/x", false, resolver);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->scheme, "https");
  EXPECT_EQ(ok->host, "public.test");
  EXPECT_EQ(ok->port, 443);
  ASSERT_EQ(ok->addresses.size(), 2u);
  EXPECT_EQ(ok->addresses[0].ToString(), "93.184.216.34");
}

TEST(SsrfGuard, UnresolvableHostIsAnIOError) {
  Resolver resolver = FakeResolver({});
  EXPECT_TRUE(CheckWebhookUrl("http://nowhere.test/", false, resolver).status().IsIOError());
}

TEST(SsrfGuard, AllowPrivateAcceptsLoopbackButNeverMetadata) {
  auto ok = CheckWebhookUrl("http://127.0.0.1:9/x", /*allow_private=*/true);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->port, 9);
  EXPECT_TRUE(CheckWebhookUrl("http://[::1]:9/", true).ok());
  EXPECT_TRUE(CheckWebhookUrl("http://localhost:9/", true).ok());
  EXPECT_TRUE(CheckWebhookUrl("http://169.254.169.254/", true).status().IsInvalid());
  EXPECT_TRUE(CheckWebhookUrl("http://[::ffff:169.254.169.254]/", true).status().IsInvalid());
  EXPECT_TRUE(CheckWebhookUrl("http://metadata.google.internal/", true).status().IsInvalid());
  EXPECT_TRUE(CheckWebhookUrl("http://0.0.0.0:9/", true).status().IsInvalid());
  EXPECT_TRUE(CheckWebhookUrl("file:///etc/passwd", true).status().IsInvalid());
}

TEST(SsrfGuard, DoesNotFollowRedirectsToLoopback) {
  TestReceiver target;
  TestReceiver::Response redirect;
  redirect.status = 302;
  redirect.extra_headers = "Location: " + target.url("/internal") + "\r\n";
  TestReceiver receiver({redirect});
  WebhookOptions options;
  options.allow_private = true;
  auto sender = WebhookSender::Make(options).ValueOrDie();
  auto response = sender->Send(receiver.url(), WebhookFormat::kCustom, "{\"a\":1}");
  ASSERT_TRUE(response.ok()) << response.status().ToString();
  EXPECT_EQ(response->status, 302);
  EXPECT_EQ(receiver.connections(), 1);
  EXPECT_EQ(target.connections(), 0);
}

TEST(SsrfGuard, ConnectionIsPinnedToTheCheckedAddress) {
  // "receiver.test" exists only in this resolver: the request can only reach
  // the receiver if libcurl connects to the address the guard checked.
  TestReceiver receiver;
  WebhookOptions options;
  options.allow_private = true;
  options.resolver = FakeResolver({{"receiver.test", {"127.0.0.1"}}});
  auto sender = WebhookSender::Make(options).ValueOrDie();
  const std::string url = "http://receiver.test:" + std::to_string(receiver.port()) + "/pin";
  auto response = sender->Send(url, WebhookFormat::kCustom, "{}");
  ASSERT_TRUE(response.ok()) << response.status().ToString();
  EXPECT_EQ(response->status, 200);
  ASSERT_EQ(receiver.requests().size(), 1u);
  EXPECT_EQ(receiver.requests()[0].target, "/pin");
  EXPECT_EQ(receiver.requests()[0].headers["host"],
            "receiver.test:" + std::to_string(receiver.port()));
}

TEST(SsrfGuard, TriesTheNextCheckedAddressWhenOneRefusesTheConnection) {
  // Nothing listens on [::1]:port (the receiver binds 127.0.0.1 only).
  TestReceiver receiver;
  WebhookOptions options;
  options.allow_private = true;
  options.resolver = FakeResolver({{"dual.test", {"::1", "127.0.0.1"}}});
  auto sender = WebhookSender::Make(options).ValueOrDie();
  const std::string url = "http://dual.test:" + std::to_string(receiver.port()) + "/";
  auto response = sender->Send(url, WebhookFormat::kCustom, "{}");
  ASSERT_TRUE(response.ok()) << response.status().ToString();
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(receiver.connections(), 1);
}

}  // namespace
}  // namespace rill::server
