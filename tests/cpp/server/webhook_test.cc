// WebhookSender and the /api/webhook/send handler against a real HTTP
// receiver on 127.0.0.1 (allow_private on).
#include "rill/server/webhook.h"

#include <atomic>
#include <chrono>
#include <thread>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "server/webhook_test_receiver.h"

namespace rill::server {
namespace {

using rill::testing::TestReceiver;

std::unique_ptr<WebhookSender> LocalSender(int max_attempts = 3, double timeout = 5.0) {
  WebhookOptions options;
  options.allow_private = true;
  options.max_attempts = max_attempts;
  options.initial_backoff_seconds = 0.02;
  options.timeout_seconds = timeout;
  return WebhookSender::Make(options).ValueOrDie();
}

TEST(WebhookFormat, ParsesTheThreeFormats) {
  EXPECT_EQ(*ParseWebhookFormat("slack"), WebhookFormat::kSlack);
  EXPECT_EQ(*ParseWebhookFormat("Google_Chat"), WebhookFormat::kGoogleChat);
  EXPECT_EQ(*ParseWebhookFormat("google-chat"), WebhookFormat::kGoogleChat);
  EXPECT_EQ(*ParseWebhookFormat("custom"), WebhookFormat::kCustom);
  auto bad = ParseWebhookFormat("teams");
  ASSERT_TRUE(bad.status().IsInvalid());
  EXPECT_NE(bad.status().message().find("slack, google_chat or custom"), std::string::npos);
}

TEST(FormatWebhookBody, SlackGetsText) {
  EXPECT_EQ(*FormatWebhookBody(WebhookFormat::kSlack, R"({"text":"CPU \"high\"\n"})"),
            R"({"text":"CPU \"high\"\n"})");
  EXPECT_EQ(*FormatWebhookBody(WebhookFormat::kSlack, R"({"message":"m","x":1})"),
            R"({"text":"m"})");
  EXPECT_EQ(*FormatWebhookBody(WebhookFormat::kSlack, R"("just text")"), R"({"text":"just text"})");
  // Without text or message, the payload itself is the text.
  EXPECT_EQ(*FormatWebhookBody(WebhookFormat::kSlack, R"({"v":1})"), R"({"text":"{\"v\":1}"})");
}

TEST(FormatWebhookBody, GoogleChatGetsACard) {
  EXPECT_EQ(
      *FormatWebhookBody(WebhookFormat::kGoogleChat,
                         R"({"title":"Rule fired","severity":"warning","text":"cpu > 90"})"),
      R"({"cardsV2":[{"cardId":"rill-alert","card":{"header":{"title":"Rule fired",)"
      R"("subtitle":"warning"},"sections":[{"widgets":[{"textParagraph":{"text":"cpu > 90"}}]}]}}]})");
  EXPECT_EQ(*FormatWebhookBody(WebhookFormat::kGoogleChat, R"("hi")"),
            R"({"cardsV2":[{"cardId":"rill-alert","card":{"header":{"title":"Rill alert"},)"
            R"("sections":[{"widgets":[{"textParagraph":{"text":"hi"}}]}]}}]})");
}

TEST(FormatWebhookBody, CustomPassesThePayloadAndRejectsBadJson) {
  EXPECT_EQ(*FormatWebhookBody(WebhookFormat::kCustom, R"( {"a": [1, 2.5, "x"], "b": null} )"),
            R"({"a":[1,2.5,"x"],"b":null})");
  EXPECT_TRUE(FormatWebhookBody(WebhookFormat::kCustom, "{nope").status().IsInvalid());
}

TEST(WebhookSender, PostsTheFormattedBodyWithJsonHeaders) {
  TestReceiver receiver;
  auto sender = LocalSender();
  auto response = sender->Send(receiver.url(), WebhookFormat::kSlack, R"({"text":"hello"})");
  ASSERT_TRUE(response.ok()) << response.status().ToString();
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(response->body, "ok");
  auto requests = receiver.requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].method, "POST");
  EXPECT_EQ(requests[0].target, "/hook");
  EXPECT_EQ(requests[0].body, R"({"text":"hello"})");
  EXPECT_EQ(requests[0].headers["content-type"], "application/json");
  EXPECT_EQ(requests[0].headers["content-length"], "16");
  EXPECT_EQ(requests[0].headers["user-agent"], "rill-webhook/1");
  EXPECT_EQ(requests[0].headers.count("expect"), 0u);
}

TEST(WebhookSender, ReturnsTheRemoteStatusOfAFailingReceiver) {
  TestReceiver receiver({{503, "busy"}});
  auto sender = LocalSender();
  auto response = sender->Send(receiver.url(), WebhookFormat::kCustom, "{}");
  ASSERT_TRUE(response.ok());
  EXPECT_EQ(response->status, 503);
  EXPECT_EQ(response->body, "busy");
  EXPECT_EQ(receiver.connections(), 1);  // Send makes one attempt
}

TEST(WebhookSender, TimesOutOnASilentReceiver) {
  TestReceiver::Response hang;
  hang.hang = true;
  TestReceiver receiver({hang});
  auto sender = LocalSender(1, /*timeout=*/0.3);
  auto response = sender->Send(receiver.url(), WebhookFormat::kCustom, "{}");
  ASSERT_TRUE(response.status().IsIOError()) << response.status().ToString();
  EXPECT_NE(response.status().message().find("127.0.0.1"), std::string::npos);
}

TEST(WebhookSender, ConnectionRefusedIsAnIOError) {
  int port;
  {
    TestReceiver closed;
    port = closed.port();
  }
  auto sender = LocalSender();
  auto response = sender->Send("http://127.0.0.1:" + std::to_string(port) + "/",
                               WebhookFormat::kCustom, "{}");
  EXPECT_TRUE(response.status().IsIOError()) << response.status().ToString();
}

TEST(WebhookSender, RetriesAQueuedDeliveryUntilTheReceiverAccepts) {
  TestReceiver receiver({{503, "down"}, {500, "still down"}, {200, "ok"}});
  auto sender = LocalSender(/*max_attempts=*/3);
  std::atomic<int> failures{0};
  sender->SetFailureCallback([&](const WebhookFailure&) { failures.fetch_add(1); });
  ASSERT_TRUE(sender
                  ->Enqueue({receiver.url(), WebhookFormat::kSlack, R"({"text":"t"})",
                             "test delivery"})
                  .ok());
  ASSERT_TRUE(sender->WaitIdle(10));
  auto requests = receiver.requests();
  ASSERT_EQ(requests.size(), 3u);
  for (const auto& r : requests) {
    EXPECT_EQ(r.body, R"({"text":"t"})");
  }
  WebhookStats stats = sender->stats();
  EXPECT_EQ(stats.delivered, 1);
  EXPECT_EQ(stats.retries, 2);
  EXPECT_EQ(stats.failed, 0);
  EXPECT_EQ(failures.load(), 0);
}

TEST(WebhookSender, ReportsADeliveryThatFailsForGood) {
  TestReceiver receiver({{500, "no"}});
  auto sender = LocalSender(/*max_attempts=*/2);
  std::mutex mu;
  std::vector<WebhookFailure> failures;
  sender->SetFailureCallback([&](const WebhookFailure& f) {
    std::lock_guard<std::mutex> lock(mu);
    failures.push_back(f);
  });
  ASSERT_TRUE(sender->Enqueue({receiver.url(), WebhookFormat::kCustom, "{}", "rule 'x'"}).ok());
  ASSERT_TRUE(sender->WaitIdle(10));
  EXPECT_EQ(receiver.connections(), 2);
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_EQ(failures[0].attempts, 2);
  EXPECT_EQ(failures[0].last_status, 500);
  EXPECT_EQ(failures[0].delivery.description, "rule 'x'");
  EXPECT_NE(failures[0].error.find("500"), std::string::npos);
  EXPECT_EQ(sender->stats().failed, 1);
}

TEST(WebhookSender, DoesNotRetryAClientErrorOrARefusedUrl) {
  TestReceiver receiver({{400, "bad"}});
  auto sender = LocalSender(/*max_attempts=*/5);
  std::atomic<int> failures{0};
  sender->SetFailureCallback([&](const WebhookFailure&) { failures.fetch_add(1); });
  ASSERT_TRUE(sender->Enqueue({receiver.url(), WebhookFormat::kCustom, "{}", "a"}).ok());
  ASSERT_TRUE(sender->Enqueue({"http://169.254.169.254/", WebhookFormat::kCustom, "{}", "b"}).ok());
  ASSERT_TRUE(sender->WaitIdle(10));
  EXPECT_EQ(receiver.connections(), 1);
  EXPECT_EQ(failures.load(), 2);
  EXPECT_EQ(sender->stats().retries, 0);
}

TEST(WebhookSender, BoundedQueueRefusesWhenFullAndStopDropsTheRest) {
  TestReceiver::Response hang;
  hang.hang = true;
  TestReceiver receiver({hang});
  WebhookOptions options;
  options.allow_private = true;
  options.queue_capacity = 2;
  options.timeout_seconds = 1;
  options.max_attempts = 1;
  auto sender = WebhookSender::Make(options).ValueOrDie();
  WebhookDelivery d{receiver.url(), WebhookFormat::kCustom, "{}", "d"};
  ASSERT_TRUE(sender->Enqueue(d).ok());  // taken by the worker (hangs up to 1 s)
  // Wait until the worker has taken it, then fill the queue.
  for (int i = 0; i < 200 && receiver.connections() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(sender->Enqueue(d).ok());
  ASSERT_TRUE(sender->Enqueue(d).ok());
  EXPECT_TRUE(sender->Enqueue(d).IsCapacityError());
  EXPECT_TRUE(sender->Enqueue({receiver.url(), WebhookFormat::kCustom, "{bad", "x"}).IsInvalid());
  sender->Stop();
  EXPECT_TRUE(sender->Enqueue(d).IsCancelled());
  WebhookStats stats = sender->stats();
  EXPECT_EQ(stats.dropped, 3);  // one refused when full + two abandoned by Stop
  EXPECT_EQ(stats.queued, 0);
}

TEST(HandleWebhookSend, RequiresAUrl) {
  auto sender = LocalSender();
  for (const char* body : {R"({"format":"slack","payload":{"text":"x"}})", R"({"url":""})",
                           R"({"url":42})", "[1]", "not json", ""}) {
    WebhookHttpReply reply = HandleWebhookSend(body, *sender);
    EXPECT_EQ(reply.status, 400) << body;
    EXPECT_NE(reply.json.find("\"code\":\"invalid\""), std::string::npos) << reply.json;
  }
  WebhookHttpReply reply = HandleWebhookSend(R"({"format":"slack"})", *sender);
  EXPECT_EQ(reply.json, R"({"code":"invalid","message":"url is required"})");
}

TEST(HandleWebhookSend, RejectsAnUnknownFormatAndARefusedUrl) {
  auto sender = LocalSender();
  WebhookHttpReply reply = HandleWebhookSend(R"({"url":"http://x/","format":"teams"})", *sender);
  EXPECT_EQ(reply.status, 400);
  EXPECT_NE(reply.json.find("unknown webhook format 'teams'"), std::string::npos);
  reply = HandleWebhookSend(R"({"url":"http://169.254.169.254/","payload":{}})", *sender);
  EXPECT_EQ(reply.status, 400);
  EXPECT_NE(reply.json.find("cloud metadata"), std::string::npos) << reply.json;
}

TEST(HandleWebhookSend, DeliversEachFormatAndPassesTheRemoteStatusBack) {
  TestReceiver receiver({{200, "ok"}, {201, "created"}, {500, "boom"}});
  auto sender = LocalSender();
  const std::string url = receiver.url("/relay");
  WebhookHttpReply reply = HandleWebhookSend(
      R"({"url":")" + url + R"(","format":"slack","payload":{"text":"Revenue low"}})", *sender);
  EXPECT_EQ(reply.status, 200);
  EXPECT_EQ(reply.json, R"({"ok":true,"status":200,"body":"ok"})");
  reply = HandleWebhookSend(
      R"({"url":")" + url + R"(","format":"google_chat","payload":{"text":"t","title":"T"}})",
      *sender);
  EXPECT_EQ(reply.status, 201);
  reply = HandleWebhookSend(R"({"url":")" + url + R"(","payload":{"k":[1,2]}})", *sender);
  EXPECT_EQ(reply.status, 500);
  EXPECT_EQ(reply.json, R"({"ok":false,"status":500,"body":"boom"})");
  auto requests = receiver.requests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_EQ(requests[0].body, R"({"text":"Revenue low"})");
  EXPECT_NE(requests[1].body.find(R"("header":{"title":"T"})"), std::string::npos);
  EXPECT_NE(requests[1].body.find(R"("textParagraph":{"text":"t"})"), std::string::npos);
  EXPECT_EQ(requests[2].body, R"({"k":[1,2]})");
}

TEST(HandleWebhookSend, UnreachableReceiverIs502) {
  int port;
  {
    TestReceiver closed;
    port = closed.port();
  }
  auto sender = LocalSender();
  WebhookHttpReply reply = HandleWebhookSend(
      R"({"url":"http://127.0.0.1:)" + std::to_string(port) + R"(/"})", *sender);
  EXPECT_EQ(reply.status, 502);
  EXPECT_NE(reply.json.find("webhook_unreachable"), std::string::npos);
}

TEST(HandleWebhookSend, ReceiverAuthFailureDoesNotLookLikeOurs) {
  TestReceiver receiver({{401, "who?"}});
  auto sender = LocalSender();
  WebhookHttpReply reply =
      HandleWebhookSend(R"({"url":")" + receiver.url() + R"("})", *sender);
  EXPECT_EQ(reply.status, 502);
  EXPECT_EQ(reply.json, R"({"ok":false,"status":401,"body":"who?"})");
}

TEST(HandleWebhookSend, AnswersEveryMalformedBodyWithAnError) {
  // No name resolves and no connection is possible: every reply is an error.
  WebhookOptions options;
  options.resolver = [](const std::string& host) -> Result<std::vector<IpAddress>> {
    return Status::IOError("no DNS in this test: ", host);
  };
  auto sender = WebhookSender::Make(options).ValueOrDie();
  const std::string valid =
      R"({"url":"https://hooks.example/x","format":"google_chat","payload":{"text":"a\u00e9","n":[1,2.5e3,null,true]}})";
  std::mt19937 rng(1234);
  std::vector<std::string> bodies;
  for (size_t cut = 0; cut < valid.size(); ++cut) {
    bodies.push_back(valid.substr(0, cut));  // every truncation
  }
  for (int i = 0; i < 400; ++i) {  // random byte flips, inserts and deletes
    std::string b = valid;
    for (int k = 0; k < 1 + static_cast<int>(rng() % 4); ++k) {
      const size_t at = rng() % b.size();
      switch (rng() % 3) {
        case 0: b[at] = static_cast<char>(rng() % 256); break;
        case 1: b.insert(b.begin() + at, static_cast<char>(rng() % 256)); break;
        default: b.erase(at, 1);
      }
    }
    bodies.push_back(b);
  }
  bodies.push_back(std::string(1 << 20, '['));  // deep nesting
  bodies.push_back(R"({"url":"https://hooks.example/x","url":"http://127.0.0.1/"})");
  for (const std::string& body : bodies) {
    WebhookHttpReply reply = HandleWebhookSend(body, *sender);
    EXPECT_TRUE(reply.status == 400 || reply.status == 502) << reply.status << " for " << body;
    EXPECT_EQ(reply.json.rfind("{\"code\":", 0), 0u) << reply.json;
  }
  EXPECT_EQ(sender->stats().attempts, 0);
}

}  // namespace
}  // namespace rill::server
