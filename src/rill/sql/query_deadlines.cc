#include "rill/sql/query_deadlines.h"

#include <pthread.h>

namespace rill {

QueryDeadlines::~QueryDeadlines() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) {
    thread_.join();
  }
}

uint64_t QueryDeadlines::Arm(double seconds, QueryInterrupt* interrupt) {
  if (!(seconds > 0) || interrupt == nullptr) {
    return 0;
  }
  const auto due = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(seconds));
  std::lock_guard<std::mutex> lock(mu_);
  if (!thread_.joinable()) {
    thread_ = std::thread([this] { Loop(); });
  }
  const uint64_t id = next_id_++;
  const bool earliest = due_.empty() || due < due_.begin()->first;
  due_.emplace(due, Armed{id, interrupt});
  fired_[id] = false;
  if (earliest) {
    cv_.notify_all();
  }
  return id;
}

bool QueryDeadlines::Disarm(uint64_t id) {
  if (id == 0) {
    return false;
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = due_.begin(); it != due_.end(); ++it) {
    if (it->second.id == id) {
      due_.erase(it);
      break;
    }
  }
  auto it = fired_.find(id);
  const bool fired = it != fired_.end() && it->second;
  if (it != fired_.end()) {
    fired_.erase(it);
  }
  return fired;
}

void QueryDeadlines::InterruptAll() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [due, armed] : due_) {
    armed.interrupt->Interrupt();  // sets flags only (QueryInterrupt's hook)
  }
}

void QueryDeadlines::Loop() {
  pthread_setname_np(pthread_self(), "rill-deadlines");
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    if (due_.empty()) {
      cv_.wait(lock);
      continue;
    }
    auto first = due_.begin();
    if (first->first > Clock::now()) {
      const Clock::time_point due = first->first;  // a copy: Disarm may erase the entry meanwhile
      cv_.wait_until(lock, due);
      continue;
    }
    // Under mu_, so Disarm cannot return while the interrupt is being touched.
    first->second.interrupt->Interrupt();
    fired_[first->second.id] = true;
    due_.erase(first);
  }
}

}  // namespace rill
