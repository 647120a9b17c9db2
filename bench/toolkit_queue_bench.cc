// toolkit_queue_bench: seed 001's C++ MessageQueue (src/rill/toolkit) without
// Python, in the same process as its baselines, alternating repetitions:
//   queue_msgs_per_s_cpp_memory   rill::toolkit::MessageQueue (priority lanes,
//                                 overflow policy, stats) vs std::deque under a
//                                 std::mutex (the bare minimum of a shared queue)
//   queue_msgs_per_s_cpp_sqlite   MessageQueue + QueueStore (WAL, synchronous=FULL,
//                                 one transaction per batch) vs a plain SQLite
//                                 table used as a queue through the C API
//                                 (INSERT per batch; SELECT .. LIMIT + DELETE per batch)
// Each message: enqueued then dequeued (msgs/s counts one of each). The Python
// classes over this core are measured by bench/queue_bench.py.
//
//   toolkit_queue_bench [--messages 200k] [--batch 100] [--reps 3]
#include <sqlite3.h>
#include <unistd.h>

#include <deque>
#include <filesystem>
#include <mutex>

#include "bench_util.h"
#include "rill/toolkit/message_queue.h"
#include "rill/toolkit/queue_store.h"

namespace rill::bench {
namespace {

using toolkit::MessageQueue;
using toolkit::QueueOptions;
using toolkit::QueueStore;

std::vector<std::string> Messages(int64_t n) {
  std::vector<std::string> out;
  out.reserve(n);
  for (int64_t i = 0; i < n; ++i) {
    out.push_back("{\"event\":\"page_view\",\"user_id\":" + std::to_string(i) +
                  ",\"value\":" + std::to_string(i * 0.5) + "}");
  }
  return out;
}

double RillMemory(const std::vector<std::string>& msgs) {
  auto q = MessageQueue::Make(QueueOptions{"bench", static_cast<int64_t>(msgs.size()) + 1})
               .ValueOrDie();
  double t0 = NowSeconds();
  for (const auto& m : msgs) Check(q->Enqueue(m).status(), "enqueue");
  int64_t n = 0;
  while (true) {
    auto m = q->Dequeue().ValueOrDie();
    if (!m) break;
    ++n;
  }
  if (n != static_cast<int64_t>(msgs.size())) Die("lost messages");
  return NowSeconds() - t0;
}

double MutexDeque(const std::vector<std::string>& msgs) {
  std::mutex mu;
  std::deque<std::string> q;
  double t0 = NowSeconds();
  for (const auto& m : msgs) {
    std::lock_guard<std::mutex> lock(mu);
    q.push_back(m);
  }
  int64_t n = 0;
  while (true) {
    std::lock_guard<std::mutex> lock(mu);
    if (q.empty()) break;
    std::string m = std::move(q.front());
    q.pop_front();
    ++n;
  }
  if (n != static_cast<int64_t>(msgs.size())) Die("lost messages");
  return NowSeconds() - t0;
}

double RillSqlite(const std::vector<std::string>& msgs, int64_t batch, const std::string& path) {
  auto store = QueueStore::Open(path).ValueOrDie();
  auto q = MessageQueue::Make(QueueOptions{"bench", static_cast<int64_t>(msgs.size()) + 1},
                              store.get())
               .ValueOrDie();
  double t0 = NowSeconds();
  for (size_t i = 0; i < msgs.size(); i += batch) {
    size_t end = std::min(msgs.size(), i + batch);
    Check(q->EnqueueBatch({msgs.begin() + i, msgs.begin() + end}).status(), "enqueue");
  }
  int64_t n = 0;
  while (true) {
    auto got = q->DequeueBatch(batch).ValueOrDie();
    if (got.empty()) break;
    n += static_cast<int64_t>(got.size());
  }
  if (n != static_cast<int64_t>(msgs.size())) Die("lost messages");
  return NowSeconds() - t0;
}

void Exec(sqlite3* db, const char* sql) {
  if (sqlite3_exec(db, sql, nullptr, nullptr, nullptr) != SQLITE_OK) {
    Die(std::string("sqlite: ") + sqlite3_errmsg(db));
  }
}

double PlainSqlite(const std::vector<std::string>& msgs, int64_t batch, const std::string& path) {
  sqlite3* db = nullptr;
  sqlite3_open(path.c_str(), &db);
  Exec(db, "PRAGMA journal_mode=WAL");
  Exec(db, "PRAGMA synchronous=FULL");
  Exec(db, "CREATE TABLE q (id INTEGER PRIMARY KEY AUTOINCREMENT, body TEXT NOT NULL)");
  sqlite3_stmt *ins = nullptr, *sel = nullptr, *del = nullptr;
  sqlite3_prepare_v2(db, "INSERT INTO q (body) VALUES (?)", -1, &ins, nullptr);
  sqlite3_prepare_v2(db, "SELECT id, body FROM q ORDER BY id LIMIT ?", -1, &sel, nullptr);
  sqlite3_prepare_v2(db, "DELETE FROM q WHERE id <= ?", -1, &del, nullptr);
  double t0 = NowSeconds();
  for (size_t i = 0; i < msgs.size(); i += batch) {
    Exec(db, "BEGIN IMMEDIATE");
    for (size_t j = i; j < std::min(msgs.size(), i + batch); ++j) {
      sqlite3_reset(ins);
      sqlite3_bind_text(ins, 1, msgs[j].data(), static_cast<int>(msgs[j].size()),
                        SQLITE_STATIC);
      if (sqlite3_step(ins) != SQLITE_DONE) Die("insert");
    }
    Exec(db, "COMMIT");
  }
  int64_t n = 0;
  while (true) {
    Exec(db, "BEGIN IMMEDIATE");
    sqlite3_reset(sel);
    sqlite3_bind_int64(sel, 1, batch);
    int64_t last = -1;
    std::vector<std::string> got;
    while (sqlite3_step(sel) == SQLITE_ROW) {
      last = sqlite3_column_int64(sel, 0);
      got.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(sel, 1)));
    }
    if (got.empty()) {
      Exec(db, "COMMIT");
      break;
    }
    sqlite3_reset(del);
    sqlite3_bind_int64(del, 1, last);
    if (sqlite3_step(del) != SQLITE_DONE) Die("delete");
    Exec(db, "COMMIT");
    n += static_cast<int64_t>(got.size());
  }
  if (n != static_cast<int64_t>(msgs.size())) Die("lost messages");
  sqlite3_finalize(ins);
  sqlite3_finalize(sel);
  sqlite3_finalize(del);
  sqlite3_close(db);
  return NowSeconds() - t0;
}

void Report(const std::string& name, const std::string& baseline, int64_t n,
            const std::vector<double>& ours, const std::vector<double>& theirs, int reps,
            int64_t batch) {
  Measurement m;
  m.name = name;
  m.value = static_cast<double>(n) / Median(ours);
  m.unit = "msgs/s";
  m.baseline = baseline;
  m.baseline_value = static_cast<double>(n) / Median(theirs);
  m.ratio = m.value / *m.baseline_value;
  m.reps = reps;
  m.extra_numbers = {{"messages", static_cast<double>(n)}, {"batch", static_cast<double>(batch)}};
  Emit(m);
}

}  // namespace
}  // namespace rill::bench

int main(int argc, char** argv) {
  using namespace rill::bench;
  Args args(argc, argv);
  const int64_t n = args.Int("messages", 200000);
  const int64_t batch = std::max<int64_t>(1, args.Int("batch", 100));
  const int reps = static_cast<int>(std::max<int64_t>(1, args.Int("reps", 3)));
  auto msgs = Messages(n);
  auto dir = std::filesystem::temp_directory_path() /
             ("rill_toolkit_queue_bench_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::vector<double> rill_mem, deque_mem, rill_db, sqlite_db;
  for (int rep = 0; rep < reps; ++rep) {
    rill_mem.push_back(RillMemory(msgs));
    deque_mem.push_back(MutexDeque(msgs));
    rill_db.push_back(RillSqlite(msgs, batch, (dir / ("r" + std::to_string(rep))).string()));
    sqlite_db.push_back(PlainSqlite(msgs, batch, (dir / ("s" + std::to_string(rep))).string()));
  }
  std::filesystem::remove_all(dir);
  Report("queue_msgs_per_s_cpp_memory", "std::deque under a std::mutex", n, rill_mem,
         deque_mem, reps, batch);
  Report("queue_msgs_per_s_cpp_sqlite", "plain SQLite table as a queue (C API)", n, rill_db,
         sqlite_db, reps, batch);
  return 0;
}
