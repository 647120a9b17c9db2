// QueueManager: seed 001's registry of named MessageQueues, with totals.
//
// With a QueueStore the queues are persistent: Make reopens every queue the
// store knows (with its messages), CreateQueue registers the new queue there
// and DeleteQueue removes it and its messages.
//
// Threads: any thread. Queues are shared_ptr: a queue obtained by GetQueue
// stays valid after DeleteQueue (it is then only unregistered).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "rill/common/status.h"
#include "rill/toolkit/message_queue.h"
#include "rill/toolkit/queue_store.h"

namespace rill::toolkit {

/// Totals over every queue of a manager (get_all_stats()).
struct QueueManagerStats {
  std::vector<QueueStats> queues;  ///< by name
  int64_t total_queues = 0;
  int64_t total_messages = 0;
  int64_t total_enqueued = 0;
  int64_t total_dequeued = 0;
};

class QueueManager {
 public:
  /// A manager; with `store` (owned) the stored queues are reopened (IOError
  /// when SQLite fails).
  static Result<std::unique_ptr<QueueManager>> Make(std::unique_ptr<QueueStore> store = nullptr);

  /// Create a queue. AlreadyExists if the name is taken; Invalid for bad options.
  Result<std::shared_ptr<MessageQueue>> CreateQueue(QueueOptions options);
  /// KeyError naming the queue when unknown.
  Result<std::shared_ptr<MessageQueue>> GetQueue(const std::string& name) const;
  /// Delete a queue (and its stored messages). KeyError when unknown.
  Status DeleteQueue(const std::string& name);
  /// The queue names, sorted.
  std::vector<std::string> ListQueues() const;
  QueueManagerStats stats() const;
  bool persistent() const { return store_ != nullptr; }

 private:
  QueueManager() = default;
  std::unique_ptr<QueueStore> store_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<MessageQueue>> queues_;  // guarded by mu_
};

}  // namespace rill::toolkit
