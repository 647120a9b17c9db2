// WebhookSender used from many threads at once (run under TSan too): queued
// and synchronous deliveries, a failure callback being replaced, and Stop.
#include <atomic>
#include <chrono>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "rill/server/webhook.h"
#include "server/webhook_test_receiver.h"

namespace rill::server {
namespace {

using rill::testing::TestReceiver;

TEST(WebhookConcurrency, ManyThreadsEnqueueAndSendWhileTheWorkerDelivers) {
  TestReceiver receiver;
  WebhookOptions options;
  options.allow_private = true;
  options.queue_capacity = 1000;
  auto sender = WebhookSender::Make(options).ValueOrDie();
  std::atomic<int> failures{0};
  sender->SetFailureCallback([&](const WebhookFailure&) { failures.fetch_add(1); });

  constexpr int kThreads = 4;
  constexpr int kQueuedPerThread = 20;
  constexpr int kSentPerThread = 5;
  std::atomic<int> sync_ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kQueuedPerThread; ++i) {
        const std::string payload = "{\"t\":" + std::to_string(t) + ",\"i\":" +
                                    std::to_string(i) + "}";
        EXPECT_TRUE(sender->Enqueue({receiver.url(), WebhookFormat::kCustom, payload, "q"}).ok());
        if (i == kQueuedPerThread / 2) {
          sender->SetFailureCallback([&](const WebhookFailure&) { failures.fetch_add(1); });
        }
      }
      for (int i = 0; i < kSentPerThread; ++i) {
        auto response = sender->Send(receiver.url(), WebhookFormat::kSlack, "\"sync\"");
        if (response.ok() && response->status == 200) {
          sync_ok.fetch_add(1);
        }
      }
      (void)sender->stats();
    });
  }
  for (auto& th : threads) {
    th.join();
  }
  ASSERT_TRUE(sender->WaitIdle(30));
  EXPECT_EQ(sync_ok.load(), kThreads * kSentPerThread);
  EXPECT_EQ(failures.load(), 0);
  WebhookStats stats = sender->stats();
  EXPECT_EQ(stats.delivered, kThreads * kQueuedPerThread);
  EXPECT_EQ(stats.attempts, kThreads * (kQueuedPerThread + kSentPerThread));
  EXPECT_EQ(static_cast<int>(receiver.requests().size()),
            kThreads * (kQueuedPerThread + kSentPerThread));
  // Every queued payload arrived exactly once.
  std::set<std::string> bodies;
  for (const auto& r : receiver.requests()) {
    if (r.body != "{\"text\":\"sync\"}") {
      EXPECT_TRUE(bodies.insert(r.body).second) << "duplicate " << r.body;
    }
  }
  EXPECT_EQ(static_cast<int>(bodies.size()), kThreads * kQueuedPerThread);
}

TEST(WebhookConcurrency, StopWhileThreadsEnqueue) {
  TestReceiver receiver;
  WebhookOptions options;
  options.allow_private = true;
  auto sender = WebhookSender::Make(options).ValueOrDie();
  std::atomic<int> accepted{0};
  std::atomic<int> cancelled{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 50; ++i) {
        Status st = sender->Enqueue({receiver.url(), WebhookFormat::kCustom, "{}", "s"});
        (st.ok() ? accepted : cancelled).fetch_add(1);
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  sender->Stop();
  for (auto& th : threads) {
    th.join();
  }
  WebhookStats stats = sender->stats();
  EXPECT_EQ(accepted.load() + cancelled.load(), 150);
  // Every accepted delivery was either delivered or dropped by Stop.
  EXPECT_EQ(stats.delivered + stats.dropped + stats.failed, accepted.load());
  EXPECT_EQ(stats.queued, 0);
}

}  // namespace
}  // namespace rill::server
