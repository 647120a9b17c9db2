// Concurrency: pushers on their own threads, SQL and snapshot readers, and the
// background tick loop, all at once. At the end every pushed row is in its
// table or counted by its connector as dropped or refused.
//
// Runs under ThreadSanitizer too (label "threads"); keep it a few seconds.
#include <atomic>
#include <chrono>
#include <map>
#include <random>
#include <thread>

#include <arrow/api.h>
#include <gtest/gtest.h>

#include "rill/connector/memory_connector.h"
#include "rill/engine/engine.h"
#include "table/test_util.h"

#if defined(__SANITIZE_THREAD__)
#define RILL_UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define RILL_UNDER_TSAN 1
#endif
#endif

namespace rill {
namespace {

constexpr int64_t kIdsPerPusher = int64_t{1} << 40;

std::shared_ptr<arrow::Schema> Schema() {
  return arrow::schema({arrow::field("id", arrow::int64()), arrow::field("pusher", arrow::int32()),
                        arrow::field("payload", arrow::utf8())});
}

std::shared_ptr<arrow::RecordBatch> Batch(int pusher, int64_t first_id, int rows) {
  arrow::Int64Builder ids;
  arrow::Int32Builder pushers;
  arrow::StringBuilder payload;
  for (int i = 0; i < rows; ++i) {
    EXPECT_TRUE(ids.Append(first_id + i).ok());
    EXPECT_TRUE(pushers.Append(pusher).ok());
    EXPECT_TRUE(payload.Append("p" + std::to_string(pusher) + "-" + std::to_string(i)).ok());
  }
  return arrow::RecordBatch::Make(Schema(), rows,
                                  {ids.Finish().ValueOrDie(), pushers.Finish().ValueOrDie(),
                                   payload.Finish().ValueOrDie()});
}

struct Pusher {
  std::string table;
  BufferLimits limits;
  std::shared_ptr<MemoryConnector> connector;
  std::atomic<int64_t> offered{0};
  std::atomic<int64_t> refused{0};
};

double Seconds() {
#ifdef RILL_UNDER_TSAN
  return 2.0;
#else
  return 3.0;
#endif
}

TEST(EngineConcurrency, EveryPushedRowIsInItsTableOrCountedAsDropped) {
  EngineOptions options;
  options.trigger_interval_ms = 2;
  auto made = Engine::Make(options);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  std::unique_ptr<Engine> engine = std::move(*made);

  TableOptions keyed_options;
  keyed_options.primary_key = {"id"};
  keyed_options.auto_compact_chunks = 8;
  RILL_ASSERT_OK_AND_ASSIGN(auto keyed, engine->RegisterTable("keyed", Schema(), keyed_options));
  TableOptions log_options;
  log_options.mode = TableMode::kAppend;
  log_options.retention = test::Retention(int64_t{1} << 40);
  log_options.auto_compact_chunks = 8;
  RILL_ASSERT_OK_AND_ASSIGN(auto log, engine->RegisterTable("log", Schema(), log_options));

  std::vector<std::unique_ptr<Pusher>> pushers;
  auto add = [&](const std::string& table, int64_t max_records, OverflowPolicy policy) {
    auto p = std::make_unique<Pusher>();
    p->table = table;
    p->limits.max_records = max_records;
    p->limits.on_overflow = policy;
    p->connector = std::make_shared<MemoryConnector>(table, Schema(), p->limits,
                                                     "pusher-" + std::to_string(pushers.size()));
    RILL_EXPECT_OK(engine->AddConnector(p->connector));
    pushers.push_back(std::move(p));
  };
  add("keyed", 0, OverflowPolicy::kDropOldest);
  add("keyed", 200, OverflowPolicy::kDropOldest);
  add("log", 150, OverflowPolicy::kDropNewest);
  add("log", 100, OverflowPolicy::kError);
  add("keyed", 64, OverflowPolicy::kDropNewest);

  RILL_ASSERT_OK(engine->Start());
  std::atomic<bool> stop_pushers{false}, stop_readers{false};
  std::atomic<int64_t> queries{0}, snapshot_reads{0}, reader_errors{0};
  std::vector<std::thread> threads;

  for (size_t i = 0; i < pushers.size(); ++i) {
    threads.emplace_back([&, i] {
      Pusher& p = *pushers[i];
      std::mt19937 rng(static_cast<unsigned>(i) + 1);
      int64_t next_id = static_cast<int64_t>(i) * kIdsPerPusher;
      while (!stop_pushers.load()) {
        const int rows = std::uniform_int_distribution<int>(1, 64)(rng);
        auto batch = Batch(static_cast<int>(i), next_id, rows);
        next_id += rows;
        p.offered += rows;
        Status st = p.connector->Push(batch);
        if (st.IsCapacityError()) {
          p.refused += rows;
        } else if (!st.ok()) {
          ADD_FAILURE() << "push failed: " << st.ToString();
        }
        if (rng() % 4 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    });
  }

  // SQL readers: every query sees one consistent version (ids unique, counts never shrink).
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&] {
      int64_t last_count = 0;
      while (!stop_readers.load()) {
        auto result = engine->Query("SELECT count(*) AS n, count(DISTINCT id) AS d FROM keyed");
        if (!result.ok()) {
          ++reader_errors;
          ADD_FAILURE() << result.status().ToString();
          continue;
        }
        auto rows = test::RowStrings(**result);
        if (rows.size() != 1) {
          ADD_FAILURE() << "one row expected";
          continue;
        }
        const auto bar = rows[0].find('|');
        const int64_t n = std::stoll(rows[0].substr(0, bar));
        const int64_t d = std::stoll(rows[0].substr(bar + 1));
        EXPECT_EQ(n, d) << "duplicate keys visible in a snapshot";
        EXPECT_GE(n, last_count) << "a later query saw fewer rows";
        last_count = n;
        ++queries;
      }
    });
  }

  // Snapshot readers: versions are immutable and self-consistent.
  threads.emplace_back([&] {
    uint64_t last_version = 0;
    int64_t last_rows = 0;
    while (!stop_readers.load()) {
      for (const auto& table : {keyed, log}) {
        auto version = table->snapshot();
        int64_t live = 0;
        for (const auto& chunk : version->chunks()) live += chunk.live_rows;
        EXPECT_EQ(live, version->num_rows());
        if (snapshot_reads % 16 == 0) {
          auto full = version->ToTable();
          EXPECT_TRUE(full.ok());
          if (full.ok()) {
            EXPECT_EQ((*full)->num_rows(), version->num_rows());
          }
        }
        if (table == keyed) {
          EXPECT_GE(version->version(), last_version);
          EXPECT_GE(version->num_rows(), last_rows);
          last_version = version->version();
          last_rows = version->num_rows();
        }
      }
      ++snapshot_reads;
    }
  });

  // Observers of metrics and events.
  threads.emplace_back([&] {
    int64_t last_processed = 0;
    while (!stop_readers.load()) {
      auto m = engine->GetMetrics();
      EXPECT_GE(m.total_records_processed, last_processed) << "the counter went back";
      last_processed = m.total_records_processed;
      (void)engine->RecentEvents();
      (void)engine->TableNames();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });

  std::this_thread::sleep_for(std::chrono::duration<double>(Seconds()));
  stop_pushers = true;
  for (size_t i = 0; i < pushers.size(); ++i) threads[i].join();
  engine->Stop();
  EXPECT_FALSE(engine->running());
  RILL_ASSERT_OK(engine->Step());  // drain what the loop had not taken yet
  stop_readers = true;
  for (size_t i = pushers.size(); i < threads.size(); ++i) threads[i].join();

  EXPECT_GT(queries.load(), 0);
  EXPECT_GT(snapshot_reads.load(), 0);
  EXPECT_EQ(reader_errors.load(), 0);

  std::map<std::string, int64_t> drained_by_table;
  int64_t total_offered = 0, total_drained = 0, total_dropped = 0;
  for (size_t i = 0; i < pushers.size(); ++i) {
    const Pusher& p = *pushers[i];
    const ConnectorStats s = p.connector->stats();
    SCOPED_TRACE("pusher " + std::to_string(i) + " (" + OverflowPolicyName(p.limits.on_overflow) +
                 ", max_records " + std::to_string(p.limits.max_records) + ")");
    EXPECT_EQ(s.buffered_records, 0);
    EXPECT_EQ(s.refused_records, p.refused.load());
    EXPECT_EQ(p.offered.load(), s.drained_records + s.dropped_records + s.refused_records)
        << "offered " << p.offered.load() << " drained " << s.drained_records << " dropped "
        << s.dropped_records << " refused " << s.refused_records;
    if (p.limits.on_overflow != OverflowPolicy::kError) {
      EXPECT_EQ(s.refused_records, 0);
    }
    drained_by_table[p.table] += s.drained_records;
    total_offered += p.offered.load();
    total_drained += s.drained_records;
    total_dropped += s.dropped_records + s.refused_records;

    // The rows of this pusher in its table are exactly the drained ones.
    auto counted = engine->Query("SELECT count(*) FROM " + p.table +
                                 " WHERE pusher = " + std::to_string(i));
    ASSERT_TRUE(counted.ok()) << counted.status().ToString();
    EXPECT_EQ(test::RowStrings(**counted), (std::vector<std::string>{std::to_string(s.drained_records)}));
  }
  EXPECT_EQ(keyed->num_rows(), drained_by_table["keyed"]);
  EXPECT_EQ(log->num_rows(), drained_by_table["log"]);
  auto metrics = engine->GetMetrics();
  EXPECT_EQ(metrics.total_records_processed, total_drained);
  EXPECT_EQ(metrics.rejected_records, 0);
  EXPECT_EQ(metrics.errors, 0);
  std::printf("offered %lld rows, written %lld, dropped or refused %lld; %lld queries, %lld "
              "snapshot reads, %lld ticks\n",
              static_cast<long long>(total_offered), static_cast<long long>(total_drained),
              static_cast<long long>(total_dropped), static_cast<long long>(queries.load()),
              static_cast<long long>(snapshot_reads.load()), static_cast<long long>(metrics.ticks));
  EXPECT_GT(total_drained, 0);
}

TEST(EngineConcurrency, StepFromManyThreadsIsSerializedWithTheLoop) {
  EngineOptions options;
  options.trigger_interval_ms = 1;
  auto made = Engine::Make(options);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  std::unique_ptr<Engine> engine = std::move(*made);
  TableOptions table_options;
  table_options.primary_key = {"id"};
  RILL_ASSERT_OK_AND_ASSIGN(auto table, engine->RegisterTable("t", Schema(), table_options));
  auto connector = std::make_shared<MemoryConnector>("t", Schema(), BufferLimits{0, 0, OverflowPolicy::kError});
  RILL_ASSERT_OK(engine->AddConnector(connector));
  RILL_ASSERT_OK(engine->Start());
  std::vector<std::thread> threads;
  std::atomic<int64_t> pushed{0};
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        EXPECT_TRUE(connector->Push(Batch(t, t * kIdsPerPusher + i * 10, 10)).ok());
        pushed += 10;
        auto latency = engine->Step();
        EXPECT_TRUE(latency.ok()) << latency.status().ToString();
      }
    });
  }
  for (auto& th : threads) th.join();
  engine->Stop();
  RILL_ASSERT_OK(engine->Step());
  EXPECT_EQ(table->num_rows(), pushed.load());
  EXPECT_EQ(connector->stats().drained_records, pushed.load());
}

}  // namespace
}  // namespace rill
