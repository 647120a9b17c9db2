// MessageQueue, QueueStore, QueueManager and StreamAnalytics against plain
// reference models on random operation sequences (replayable from the seed).
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "rill/toolkit/message_queue.h"
#include "rill/toolkit/queue_manager.h"
#include "rill/toolkit/queue_store.h"
#include "rill/toolkit/stream_analytics.h"

namespace rill::toolkit {
namespace {

/// The reference: a list of (priority, seq, body), searched linearly.
struct ModelQueue {
  struct M {
    int64_t prio;
    int64_t seq;
    std::string body;
  };
  std::vector<M> items;
  int64_t max_size;
  QueueOverflow overflow;
  int64_t seq = 0;
  int64_t dropped = 0;

  /// Returns -1 for "full" (error), 0 dropped, 1 queued.
  int Enqueue(const std::string& body, int64_t prio) {
    if (static_cast<int64_t>(items.size()) >= max_size) {
      if (overflow == QueueOverflow::kError) return -1;
      ++dropped;
      if (overflow == QueueOverflow::kDropNewest) return 0;
      // the oldest of the lowest priority
      auto victim = items.begin();
      for (auto it = items.begin(); it != items.end(); ++it) {
        if (it->prio < victim->prio || (it->prio == victim->prio && it->seq < victim->seq)) {
          victim = it;
        }
      }
      items.erase(victim);
    }
    items.push_back(M{prio, seq++, body});
    return 1;
  }
  std::optional<std::string> Dequeue() {
    if (items.empty()) return std::nullopt;
    auto best = items.begin();
    for (auto it = items.begin(); it != items.end(); ++it) {
      if (it->prio > best->prio || (it->prio == best->prio && it->seq < best->seq)) best = it;
    }
    std::string body = best->body;
    items.erase(best);
    return body;
  }
};

void RunRandom(uint32_t seed, QueueOverflow overflow, QueueStore* store) {
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  QueueOptions options;
  options.name = "q" + std::to_string(seed);
  options.max_size = 1 + rng() % 20;
  options.on_overflow = overflow;
  auto queue = MessageQueue::Make(options, store).ValueOrDie();
  ModelQueue model{{}, options.max_size, overflow};
  int64_t enqueued = 0, dequeued = 0;
  for (int step = 0; step < 400; ++step) {
    int op = rng() % 10;
    if (op < 6) {
      std::string body = "\"m" + std::to_string(step) + "\"";
      bool with_prio = rng() % 2 == 0;
      int64_t prio = with_prio ? static_cast<int64_t>(rng() % 4) - 1 : 0;
      int expect = model.Enqueue(body, prio);
      auto got = queue->Enqueue(body, with_prio ? std::optional<int64_t>(prio) : std::nullopt);
      if (expect < 0) {
        ASSERT_TRUE(got.status().IsCapacityError()) << got.status().ToString();
      } else {
        ASSERT_TRUE(got.ok()) << got.status().ToString();
        ASSERT_EQ(*got, expect == 1);
        enqueued += expect;
      }
    } else if (op < 9) {
      auto got = queue->Dequeue().ValueOrDie();
      auto expect = model.Dequeue();
      ASSERT_EQ(got, expect) << "step " << step;
      dequeued += expect.has_value();
    } else {
      ASSERT_EQ(queue->Peek(), model.items.empty() ? std::nullopt : [&] {
        ModelQueue copy = model;
        return copy.Dequeue();
      }());
    }
    ASSERT_EQ(queue->size(), static_cast<int64_t>(model.items.size()));
  }
  QueueStats s = queue->stats();
  EXPECT_EQ(s.total_enqueued, enqueued);
  EXPECT_EQ(s.total_dequeued, dequeued);
  EXPECT_EQ(s.dropped, model.dropped);
  EXPECT_EQ(s.current_size, static_cast<int64_t>(model.items.size()));
  if (store != nullptr) {
    // A reopened queue holds exactly the model's messages, in order.
    auto again = MessageQueue::Make(options, store).ValueOrDie();
    for (auto expect = model.Dequeue(); expect; expect = model.Dequeue()) {
      ASSERT_EQ(again->Dequeue().ValueOrDie(), expect);
    }
    EXPECT_EQ(again->size(), 0);
  }
}

TEST(MessageQueue, MatchesTheReferenceOnRandomSequences) {
  for (uint32_t seed = 1; seed <= 30; ++seed) {
    for (auto overflow :
         {QueueOverflow::kError, QueueOverflow::kDropOldest, QueueOverflow::kDropNewest}) {
      RunRandom(seed, overflow, nullptr);
    }
  }
}

TEST(MessageQueue, PersistedQueueMatchesTheReferenceAndReopens) {
  auto store = QueueStore::Open(":memory:").ValueOrDie();
  for (uint32_t seed = 100; seed <= 110; ++seed) {
    for (auto overflow :
         {QueueOverflow::kError, QueueOverflow::kDropOldest, QueueOverflow::kDropNewest}) {
      RunRandom(seed * 3 + static_cast<int>(overflow), overflow, store.get());
    }
  }
}

TEST(MessageQueue, BatchTakesWhatFitsAndRejectsBadOptions) {
  QueueOptions options{"b", 3, QueueOverflow::kError};
  auto queue = MessageQueue::Make(options).ValueOrDie();
  EXPECT_EQ(queue->EnqueueBatch({"1", "2", "3", "4", "5"}).ValueOrDie(), 3);
  EXPECT_TRUE(queue->EnqueueBatch({"6"}).status().IsCapacityError());
  EXPECT_EQ(queue->DequeueBatch(10).ValueOrDie(), (std::vector<std::string>{"1", "2", "3"}));
  options.on_overflow = QueueOverflow::kDropOldest;
  options.name = "d";
  auto oldest = MessageQueue::Make(options).ValueOrDie();
  EXPECT_EQ(oldest->EnqueueBatch({"1", "2", "3", "4", "5"}).ValueOrDie(), 3);
  EXPECT_EQ(oldest->DequeueBatch(10).ValueOrDie(), (std::vector<std::string>{"3", "4", "5"}));
  EXPECT_EQ(oldest->stats().dropped, 2);
  EXPECT_TRUE(MessageQueue::Make(QueueOptions{"", 1}).status().IsInvalid());
  EXPECT_TRUE(MessageQueue::Make(QueueOptions{"x", 0}).status().IsInvalid());
  EXPECT_TRUE(ParseQueueOverflow("sometimes").status().IsInvalid());
}

TEST(QueueManager, CreatesListsDeletesAndReopensFromTheStore) {
  std::string path = ::testing::TempDir() + "/rill_queue_manager_" +
                     std::to_string(::getpid()) + ".db";
  std::filesystem::remove(path);
  {
    auto manager = QueueManager::Make(QueueStore::Open(path).ValueOrDie()).ValueOrDie();
    auto a = manager->CreateQueue(QueueOptions{"a", 10}).ValueOrDie();
    ASSERT_TRUE(manager->CreateQueue(QueueOptions{"b", 5}).ok());
    EXPECT_TRUE(manager->CreateQueue(QueueOptions{"a", 10}).status().IsAlreadyExists());
    ASSERT_TRUE(a->Enqueue("{\"x\":1}").ok());
    ASSERT_TRUE(a->Enqueue("{\"x\":2}", 5).ok());
    EXPECT_EQ(manager->ListQueues(), (std::vector<std::string>{"a", "b"}));
    auto s = manager->stats();
    EXPECT_EQ(s.total_queues, 2);
    EXPECT_EQ(s.total_messages, 2);
    EXPECT_TRUE(manager->DeleteQueue("nope").IsKeyError());
  }
  auto manager = QueueManager::Make(QueueStore::Open(path).ValueOrDie()).ValueOrDie();
  EXPECT_EQ(manager->ListQueues(), (std::vector<std::string>{"a", "b"}));
  auto a = manager->GetQueue("a").ValueOrDie();
  EXPECT_EQ(a->options().max_size, 10);
  EXPECT_EQ(a->Dequeue().ValueOrDie(), "{\"x\":2}");
  EXPECT_EQ(a->Dequeue().ValueOrDie(), "{\"x\":1}");
  ASSERT_TRUE(manager->DeleteQueue("b").ok());
  EXPECT_TRUE(manager->GetQueue("b").status().IsKeyError());
  std::filesystem::remove(path);
}

// kill -9 a child after its enqueues were acknowledged (it reports each ack on
// a pipe); the reopened queue holds every acknowledged message exactly once.
TEST(QueueStore, AcknowledgedMessagesSurviveKillNine) {
  std::string path = ::testing::TempDir() + "/rill_queue_kill_" + std::to_string(::getpid()) +
                     ".db";
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(fds[0]);
    auto store = QueueStore::Open(path).ValueOrDie();
    auto queue = MessageQueue::Make(QueueOptions{"k", 1000000}, store.get()).ValueOrDie();
    for (int64_t i = 0;; ++i) {
      if (!queue->Enqueue(std::to_string(i)).ok()) ::_exit(3);
      if (i % 3 == 2 && !queue->Dequeue().ok()) ::_exit(4);
      if (::write(fds[1], &i, sizeof(i)) != sizeof(i)) ::_exit(5);
    }
  }
  ::close(fds[1]);
  int64_t acked = -1, v;
  while (acked < 300 && ::read(fds[0], &v, sizeof(v)) == sizeof(v)) acked = v;
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  while (::read(fds[0], &v, sizeof(v)) == sizeof(v)) acked = v;  // acks written before the kill
  ::close(fds[0]);
  ASSERT_GE(acked, 300);
  auto store = QueueStore::Open(path).ValueOrDie();
  auto queue = MessageQueue::Make(QueueOptions{"k", 1000000}, store.get()).ValueOrDie();
  // Step i enqueued i and (every third step) dequeued the oldest: after the
  // acknowledged step `acked`, the queue holds i in [(acked+1)/3, acked]; the
  // unacknowledged step acked+1 may have enqueued acked+1 (and dequeued one).
  std::vector<int64_t> got;
  for (auto m = queue->Dequeue().ValueOrDie(); m; m = queue->Dequeue().ValueOrDie()) {
    got.push_back(std::stoll(*m));
  }
  ASSERT_FALSE(got.empty());
  std::set<int64_t> unique(got.begin(), got.end());
  EXPECT_EQ(unique.size(), got.size()) << "a message came back twice";
  EXPECT_TRUE(std::is_sorted(got.begin(), got.end()));
  int64_t first = (acked + 1) / 3;
  EXPECT_GE(got.front(), first);
  EXPECT_LE(got.front(), first + 1);
  EXPECT_GE(got.back(), acked);
  EXPECT_LE(got.back(), acked + 1);
  EXPECT_EQ(got.back() - got.front() + 1, static_cast<int64_t>(got.size()));
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
}

TEST(StreamAnalytics, StatisticsAndRatesMatchPlainComputation) {
  double now = 1000;
  StreamAnalyticsOptions options;
  options.rate_window_seconds = 10;
  options.clock = [&now] { return now; };
  auto analytics = StreamAnalytics::Make(options).ValueOrDie();
  std::mt19937 rng(7);
  std::vector<double> values;
  for (int i = 0; i < 100; ++i) {
    double v = static_cast<double>(rng() % 1000) / 7.0;
    values.push_back(v);
    ASSERT_TRUE(analytics->Track("m", v, now).ok());
    now += 0.25;  // 4 per second
  }
  auto s = analytics->Get("m").value();
  double sum = 0;
  for (double v : values) sum += v;
  EXPECT_EQ(s.count, 100);
  EXPECT_NEAR(s.sum, sum, 1e-9);
  EXPECT_NEAR(s.avg, sum / 100, 1e-9);
  EXPECT_EQ(*s.min, *std::min_element(values.begin(), values.end()));
  EXPECT_EQ(*s.max, *std::max_element(values.begin(), values.end()));
  EXPECT_EQ(*s.last, values.back());
  // now = 1025; values at 1015..1024.75 are within the window: 40 of them.
  EXPECT_NEAR(s.rate_per_second, 4.0, 1e-9);
  EXPECT_FALSE(analytics->Get("nope").has_value());
  EXPECT_TRUE(analytics->Track("", 1).IsInvalid());
  EXPECT_TRUE(analytics->Track("x", std::nan("")).IsInvalid());
  EXPECT_EQ(analytics->All().size(), 1u);
  EXPECT_EQ(analytics->Reset(), 1);
}

}  // namespace
}  // namespace rill::toolkit
