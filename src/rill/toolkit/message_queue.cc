#include "rill/toolkit/message_queue.h"

#include <chrono>

#include "rill/toolkit/queue_store.h"

namespace rill::toolkit {

namespace {

double WallNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

Result<QueueOverflow> ParseQueueOverflow(std::string_view text) {
  if (text == "error") return QueueOverflow::kError;
  if (text == "drop_oldest") return QueueOverflow::kDropOldest;
  if (text == "drop_newest") return QueueOverflow::kDropNewest;
  return Status::Invalid("on_overflow must be error, drop_oldest or drop_newest, got '",
                         std::string(text), "'");
}

const char* QueueOverflowName(QueueOverflow overflow) {
  switch (overflow) {
    case QueueOverflow::kDropOldest:
      return "drop_oldest";
    case QueueOverflow::kDropNewest:
      return "drop_newest";
    case QueueOverflow::kError:
      break;
  }
  return "error";
}

MessageQueue::MessageQueue(QueueOptions options, QueueStore* store)
    : options_(std::move(options)), store_(store), created_at_(WallNow()) {}

Result<std::shared_ptr<MessageQueue>> MessageQueue::Make(QueueOptions options,
                                                         QueueStore* store) {
  if (options.name.empty() || options.name.size() > 200) {
    return Status::Invalid("queue name must be 1 to 200 bytes");
  }
  if (options.max_size < 1) {
    return Status::Invalid("max_size must be >= 1, got ", options.max_size);
  }
  std::shared_ptr<MessageQueue> queue(new MessageQueue(std::move(options), store));
  if (store != nullptr) {
    RILL_ASSIGN_OR_RAISE(auto stored, store->Load(queue->options_.name));
    // Load returns seq order, so each priority's deque stays in enqueue order.
    for (auto& m : stored) {
      queue->by_priority_[m.priority].push_back(Entry{m.seq, std::move(m.body)});
      queue->next_seq_ = std::max(queue->next_seq_, m.seq + 1);
      ++queue->size_;
    }
  }
  return queue;
}

void MessageQueue::EvictOldestLocked(std::vector<std::string>* dropped) {
  // The lowest priority is the map's last key; its front is the oldest.
  auto lowest = std::prev(by_priority_.end());
  if (dropped != nullptr) dropped->push_back(std::move(lowest->second.front().body));
  lowest->second.pop_front();
  if (lowest->second.empty()) {
    by_priority_.erase(lowest);
  }
  --size_;
  ++dropped_;
}

Result<bool> MessageQueue::Enqueue(std::string body, std::optional<int64_t> priority) {
  if (store_ == nullptr) {
    // Fast path: in memory with room (no batch bookkeeping).
    std::lock_guard<std::mutex> lock(mu_);
    if (size_ < options_.max_size) {
      by_priority_[priority.value_or(0)].push_back(Entry{next_seq_++, std::move(body)});
      ++size_;
      ++total_enqueued_;
      last_enqueue_at_ = WallNow();
      return true;
    }
  }
  std::vector<std::string> one;
  one.push_back(std::move(body));
  RILL_ASSIGN_OR_RAISE(int64_t n, EnqueueBatch(std::move(one), priority));
  return n == 1;
}

Result<int64_t> MessageQueue::EnqueueBatch(std::vector<std::string> bodies,
                                           std::optional<int64_t> priority,
                                           std::vector<std::string>* dropped) {
  const int64_t prio = priority.value_or(0);
  std::lock_guard<std::mutex> lock(mu_);
  // Decide first (without touching the queue), so that a store failure leaves
  // memory unchanged: which bodies are taken and which queued seqs are evicted.
  size_t take = 0;
  int64_t dropped_newest = 0;
  int64_t evict = 0;
  int64_t free_slots = options_.max_size - size_;
  for (size_t i = 0; i < bodies.size(); ++i) {
    if (free_slots > 0) {
      --free_slots;
      ++take;
      continue;
    }
    if (options_.on_overflow == QueueOverflow::kError) {
      if (take == 0) {
        return Status::CapacityError("queue '", options_.name, "' is full (",
                                     options_.max_size, " messages)");
      }
      break;
    }
    if (options_.on_overflow == QueueOverflow::kDropNewest) {
      ++dropped_newest;
      continue;
    }
    ++take;
    ++evict;
  }
  // Taken bodies are a prefix (refused or unfitting ones come after them).
  if (dropped != nullptr && dropped_newest > 0) {
    for (size_t i = take; i < bodies.size(); ++i) dropped->push_back(std::move(bodies[i]));
  }
  bodies.resize(take);
  // drop_oldest: evicting queued messages first, then (when the batch alone is
  // larger than max_size) the batch's own oldest.
  int64_t evict_queued = std::min<int64_t>(evict, size_);
  int64_t skip_own = evict - evict_queued;
  std::vector<StoredMessage> added;
  added.reserve(bodies.size() - skip_own);
  int64_t seq = next_seq_ + skip_own;
  for (size_t i = skip_own; i < bodies.size(); ++i) {
    added.push_back(StoredMessage{seq, prio, seq, std::string()});
    ++seq;
  }
  if (store_ != nullptr) {
    // The victims, without removing them yet.
    std::vector<int64_t> victims;
    auto it = by_priority_.end();
    int64_t left = evict_queued;
    while (left > 0 && it != by_priority_.begin()) {
      --it;
      for (auto e = it->second.begin(); left > 0 && e != it->second.end(); ++e, --left) {
        victims.push_back(e->seq);
      }
    }
    for (size_t i = 0; i < added.size(); ++i) {
      added[i].body = bodies[skip_own + i];
    }
    RILL_RETURN_NOT_OK(store_->Save(options_.name, added, victims));
  }
  for (int64_t i = 0; i < evict_queued; ++i) {
    EvictOldestLocked(dropped);
  }
  if (dropped != nullptr) {
    for (int64_t i = 0; i < skip_own; ++i) dropped->push_back(std::move(bodies[i]));
  }
  dropped_ += skip_own + dropped_newest;
  auto& lane = by_priority_[prio];
  for (size_t i = 0; i < added.size(); ++i) {
    lane.push_back(Entry{added[i].seq, std::move(bodies[skip_own + i])});
  }
  next_seq_ = seq;
  size_ += static_cast<int64_t>(added.size());
  if (lane.empty()) {
    by_priority_.erase(prio);
  }
  total_enqueued_ += static_cast<int64_t>(added.size());
  if (!added.empty()) {
    last_enqueue_at_ = WallNow();
  }
  return static_cast<int64_t>(added.size());
}

MessageQueue::Entry MessageQueue::PopLocked() {
  auto first = by_priority_.begin();
  Entry entry = std::move(first->second.front());
  first->second.pop_front();
  if (first->second.empty()) {
    by_priority_.erase(first);
  }
  --size_;
  return entry;
}

Result<std::optional<std::string>> MessageQueue::Dequeue() {
  std::lock_guard<std::mutex> lock(mu_);
  if (size_ == 0) {
    return std::optional<std::string>();
  }
  if (store_ != nullptr) {
    int64_t id = by_priority_.begin()->second.front().seq;
    RILL_RETURN_NOT_OK(store_->Delete(options_.name, {id}));
  }
  Entry entry = PopLocked();
  ++total_dequeued_;
  last_dequeue_at_ = WallNow();
  return std::optional<std::string>(std::move(entry.body));
}

Result<std::vector<std::string>> MessageQueue::DequeueBatch(int64_t max_messages) {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t n = std::min(std::max<int64_t>(max_messages, 0), size_);
  std::vector<std::string> out;
  if (n == 0) {
    return out;
  }
  if (store_ != nullptr) {
    std::vector<int64_t> ids;
    ids.reserve(n);
    for (auto it = by_priority_.begin(); it != by_priority_.end() && (int64_t)ids.size() < n;
         ++it) {
      for (auto e = it->second.begin(); e != it->second.end() && (int64_t)ids.size() < n; ++e) {
        ids.push_back(e->seq);
      }
    }
    RILL_RETURN_NOT_OK(store_->Delete(options_.name, ids));
  }
  out.reserve(n);
  for (int64_t i = 0; i < n; ++i) {
    out.push_back(PopLocked().body);
  }
  total_dequeued_ += n;
  last_dequeue_at_ = WallNow();
  return out;
}

std::optional<std::string> MessageQueue::Peek() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (size_ == 0) {
    return std::nullopt;
  }
  return by_priority_.begin()->second.front().body;
}

Result<int64_t> MessageQueue::Clear() {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t n = size_;
  if (store_ != nullptr && n > 0) {
    std::vector<int64_t> ids;
    for (const auto& [prio, lane] : by_priority_) {
      for (const auto& e : lane) ids.push_back(e.seq);
    }
    RILL_RETURN_NOT_OK(store_->Delete(options_.name, ids));
  }
  by_priority_.clear();
  size_ = 0;
  return n;
}

int64_t MessageQueue::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return size_;
}

QueueStats MessageQueue::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  QueueStats s;
  s.name = options_.name;
  s.current_size = size_;
  s.max_size = options_.max_size;
  s.total_enqueued = total_enqueued_;
  s.total_dequeued = total_dequeued_;
  s.dropped = dropped_;
  s.persistent = store_ != nullptr;
  s.on_overflow = QueueOverflowName(options_.on_overflow);
  s.created_at = created_at_;
  s.last_enqueue_at = last_enqueue_at_;
  s.last_dequeue_at = last_dequeue_at_;
  return s;
}

}  // namespace rill::toolkit
