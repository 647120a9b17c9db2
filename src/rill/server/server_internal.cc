#include "rill/server/server_internal.h"

#include <pthread.h>

#include <cstdio>

namespace rill::server {

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::Observe(double value) {
  size_t i = 0;
  while (i < bounds_.size() && value > bounds_[i]) {
    ++i;
  }
  std::lock_guard<std::mutex> lock(mu_);
  ++counts_[i];
  sum_ += value;
  ++count_;
}

void Histogram::Render(const std::string& name, const std::string& labels,
                       std::string* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string sep = labels.empty() ? "" : ",";
  int64_t cumulative = 0;
  char buf[64];
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cumulative += counts_[i];
    std::string le = "+Inf";
    if (i < bounds_.size()) {
      std::snprintf(buf, sizeof(buf), "%g", bounds_[i]);
      le = buf;
    }
    *out += name + "_bucket{" + labels + sep + "le=\"" + le + "\"} " +
            std::to_string(cumulative) + "\n";
  }
  std::snprintf(buf, sizeof(buf), "%.9g", sum_);
  std::string braces = labels.empty() ? "" : "{" + labels + "}";
  *out += name + "_sum" + braces + " " + buf + "\n";
  *out += name + "_count" + braces + " " + std::to_string(count_) + "\n";
}

Watchdog::Watchdog() : thread_([this] { Loop(); }) {}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

uint64_t Watchdog::Schedule(double seconds, std::function<void()> fn) {
  auto when = std::chrono::steady_clock::now() +
              std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                  std::chrono::duration<double>(seconds));
  uint64_t id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    id = next_id_++;
    deadlines_.emplace(when, id);
    callbacks_[id] = std::move(fn);
  }
  cv_.notify_all();
  return id;
}

void Watchdog::Cancel(uint64_t id) {
  std::unique_lock<std::mutex> lock(mu_);
  callbacks_.erase(id);
  // Wait out a callback of this id that is running now.
  cv_.wait(lock, [&] { return running_id_ != id; });
}

void Watchdog::Loop() {
  pthread_setname_np(pthread_self(), "rill-watchdog");
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    if (deadlines_.empty()) {
      cv_.wait(lock);
      continue;
    }
    auto it = deadlines_.begin();
    if (std::chrono::steady_clock::now() < it->first) {
      const auto due = it->first;  // a copy: the entry may be erased while waiting
      cv_.wait_until(lock, due);
      continue;
    }
    uint64_t id = it->second;
    deadlines_.erase(it);
    auto cb = callbacks_.find(id);
    if (cb == callbacks_.end()) {
      continue;  // cancelled
    }
    std::function<void()> fn = std::move(cb->second);
    callbacks_.erase(cb);
    running_id_ = id;
    lock.unlock();
    fn();
    lock.lock();
    running_id_ = 0;
    cv_.notify_all();
  }
}

}  // namespace rill::server
