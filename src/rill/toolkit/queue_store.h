// QueueStore: SQLite persistence of message queues (WAL mode).
//
// The file layout is the one of the Python rills.queue.queue_store.QueueStore
// (tables `queues(name, max_size)` and `queue_messages(queue, id, priority,
// seq, body)`), so either side can reopen the other's file. Each Save is one
// transaction committed (synchronous=FULL) before it returns, so an
// acknowledged message survives a kill -9; each Delete is one transaction.
//
// Threads: any thread; one connection guarded by a mutex. Statements are
// prepared once.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "rill/common/status.h"
#include "rill/toolkit/message_queue.h"

struct sqlite3;
struct sqlite3_stmt;

namespace rill::toolkit {

class QueueStore {
 public:
  /// Open (or create) the SQLite file `path` (":memory:" for a private
  /// in-memory database). IOError naming the path when SQLite fails.
  static Result<std::unique_ptr<QueueStore>> Open(const std::string& path);
  ~QueueStore();
  QueueStore(const QueueStore&) = delete;
  QueueStore& operator=(const QueueStore&) = delete;

  /// Insert `added` and delete the ids `evicted` of `queue`, in one transaction.
  Status Save(const std::string& queue, const std::vector<StoredMessage>& added,
              const std::vector<int64_t>& evicted);
  /// Delete the messages `ids` of `queue`, in one transaction.
  Status Delete(const std::string& queue, const std::vector<int64_t>& ids);
  /// Return the stored messages of `queue` in seq order.
  Result<std::vector<StoredMessage>> Load(const std::string& queue);
  /// Remember that `queue` exists (QueueManager reopens it at start).
  Status Register(const std::string& queue, int64_t max_size);
  /// Forget `queue` and delete its messages.
  Status Unregister(const std::string& queue);
  /// The registered queues (name, max_size), by name.
  Result<std::vector<std::pair<std::string, int64_t>>> Queues();

  const std::string& path() const { return path_; }

 private:
  explicit QueueStore(std::string path) : path_(std::move(path)) {}
  Status Exec(const char* sql);
  Status Check(int rc, const char* what);
  Status DeleteLocked(const std::string& queue, const std::vector<int64_t>& ids);

  const std::string path_;
  std::mutex mu_;
  sqlite3* db_ = nullptr;
  sqlite3_stmt* insert_ = nullptr;
  sqlite3_stmt* delete_ = nullptr;
  sqlite3_stmt* delete_range_ = nullptr;  // ids in [lo, hi]
};

}  // namespace rill::toolkit
