// MessageQueue: seed 001's bounded FIFO / priority message queue, in C++.
//
// A queue holds opaque message bodies (the REST API and the Python classes
// store JSON text). Order: higher priority first; a message without a
// priority has priority 0; equal priorities leave in enqueue order (stable).
// A full queue behaves as `on_overflow` says, like the connectors' buffers:
//   kError       Enqueue returns CapacityError naming the queue (the default);
//   kDropOldest  the oldest message of the lowest priority present is evicted
//                (in a FIFO queue: the head) and the new one is queued;
//   kDropNewest  the new message is refused (Enqueue returns false).
// Every drop is counted in stats().dropped; nothing vanishes uncounted.
//
// Persistence: with a QueueStore (queue_store.h) every enqueue batch is one
// SQLite transaction committed before Enqueue returns, and every dequeue is
// deleted there before the message is returned, so a process killed at any
// point and restarted gets back exactly the acknowledged, not yet dequeued
// messages. The store must outlive the queue.
//
// Threads: every method may be called from any thread (one mutex per queue;
// SQLite I/O happens under it so that memory and file agree).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rill/common/status.h"

namespace rill::toolkit {

class QueueStore;

/// What Enqueue does when the queue holds max_size messages.
enum class QueueOverflow { kError, kDropOldest, kDropNewest };

/// Parse "error" | "drop_oldest" | "drop_newest"; Invalid otherwise.
Result<QueueOverflow> ParseQueueOverflow(std::string_view text);
/// Return the name of `overflow` ("error", ...).
const char* QueueOverflowName(QueueOverflow overflow);

struct QueueOptions {
  /// Non-empty; at most 200 bytes.
  std::string name;
  /// At least 1.
  int64_t max_size = 1000;
  QueueOverflow on_overflow = QueueOverflow::kError;
};

/// The statistics of get_stats() in seed 001 (plus drops and times).
struct QueueStats {
  std::string name;
  int64_t current_size = 0;
  int64_t max_size = 0;
  int64_t total_enqueued = 0;
  int64_t total_dequeued = 0;
  int64_t dropped = 0;
  bool persistent = false;
  std::string on_overflow;
  double created_at = 0;                    ///< unix seconds
  std::optional<double> last_enqueue_at;    ///< unix seconds
  std::optional<double> last_dequeue_at;    ///< unix seconds

  /// Fraction of max_size in use.
  double utilization() const {
    return max_size > 0 ? static_cast<double>(current_size) / static_cast<double>(max_size)
                        : 0.0;
  }
  /// Call visit(field_name, value) for every reported field, in the order the
  /// REST API and Python's get_stats() show them (the one list of both).
  /// Values are std::string, int64_t, double, bool or std::optional<double>.
  template <typename Visit>
  void ForEachField(Visit&& visit) const {
    visit("name", name);
    visit("current_size", current_size);
    visit("max_size", max_size);
    visit("total_enqueued", total_enqueued);
    visit("total_dequeued", total_dequeued);
    visit("dropped", dropped);
    visit("utilization", utilization());
    visit("persistent", persistent);
    visit("on_overflow", on_overflow);
    visit("created_at", created_at);
    visit("last_enqueue_at", last_enqueue_at);
    visit("last_dequeue_at", last_dequeue_at);
  }
};

/// One stored message (the persisted form).
struct StoredMessage {
  int64_t id = 0;        ///< unique within the queue (= seq)
  int64_t priority = 0;
  int64_t seq = 0;       ///< enqueue order
  std::string body;
};

class MessageQueue {
 public:
  /// Invalid for an empty or over-long name, max_size < 1. With `store`, the
  /// queue loads the messages stored under its name (IOError when SQLite
  /// fails); the store must outlive the queue.
  static Result<std::shared_ptr<MessageQueue>> Make(QueueOptions options,
                                                    QueueStore* store = nullptr);

  /// Add one message. Return true if queued, false if dropped as the newest;
  /// CapacityError when full with kError; IOError when the store fails (then
  /// nothing changed).
  Result<bool> Enqueue(std::string body, std::optional<int64_t> priority = std::nullopt);
  /// Add several messages with one priority, in one store transaction; return
  /// how many were queued. With kError a full queue takes what fits (and
  /// CapacityError if nothing fits). When `dropped` is given, the bodies that
  /// were dropped (evicted queued messages, refused or evicted new ones) are
  /// appended to it, so a caller keeping per-message state can release it.
  Result<int64_t> EnqueueBatch(std::vector<std::string> bodies,
                               std::optional<int64_t> priority = std::nullopt,
                               std::vector<std::string>* dropped = nullptr);
  /// Remove and return the next message; nullopt when empty.
  Result<std::optional<std::string>> Dequeue();
  /// Remove and return up to `max_messages` messages in order.
  Result<std::vector<std::string>> DequeueBatch(int64_t max_messages);
  /// Return the next message without removing it; nullopt when empty.
  std::optional<std::string> Peek() const;
  /// Remove every message; return how many there were.
  Result<int64_t> Clear();

  int64_t size() const;
  const QueueOptions& options() const { return options_; }
  bool persistent() const { return store_ != nullptr; }
  QueueStats stats() const;

 private:
  explicit MessageQueue(QueueOptions options, QueueStore* store);
  struct Entry {
    int64_t seq;
    std::string body;
  };
  void EvictOldestLocked(std::vector<std::string>* dropped);
  Entry PopLocked();

  const QueueOptions options_;
  QueueStore* const store_;
  const double created_at_;
  mutable std::mutex mu_;
  // priority (highest first) -> messages in enqueue order. Guarded by mu_.
  std::map<int64_t, std::deque<Entry>, std::greater<int64_t>> by_priority_;
  int64_t size_ = 0;
  int64_t next_seq_ = 0;
  int64_t total_enqueued_ = 0;
  int64_t total_dequeued_ = 0;
  int64_t dropped_ = 0;
  std::optional<double> last_enqueue_at_;
  std::optional<double> last_dequeue_at_;
};

}  // namespace rill::toolkit
