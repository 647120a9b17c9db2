#include "rill/common/reaper.h"

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>

namespace rill {

namespace {

class Reaper {
 public:
  ~Reaper() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    work_cv_.notify_all();
    if (thread_.joinable()) thread_.join();  // after the queue is empty
  }

  void Defer(std::function<void()> destroy) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(std::move(destroy));
      ++handed_;
      if (!thread_.joinable()) {
        thread_ = std::thread([this] { Run(); });
        thread_id_ = thread_.get_id();
      }
    }
    work_cv_.notify_one();
  }

  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    if (std::this_thread::get_id() == thread_id_) return;
    const uint64_t target = handed_;
    done_cv_.wait(lock, [&] { return done_ >= target; });
  }

  bool OnThread() {
    std::lock_guard<std::mutex> lock(mu_);
    return thread_.joinable() && std::this_thread::get_id() == thread_id_;
  }

 private:
  void Run() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      work_cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and nothing left
      std::function<void()> destroy = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      destroy();
      destroy = nullptr;  // what it captured goes now, before it counts as done
      lock.lock();
      ++done_;
      done_cv_.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  std::deque<std::function<void()>> queue_;  // guarded by mu_
  uint64_t handed_ = 0;                      // guarded by mu_
  uint64_t done_ = 0;                        // guarded by mu_
  bool stopping_ = false;                    // guarded by mu_
  std::thread thread_;                       // started under mu_
  std::thread::id thread_id_;                // guarded by mu_
};

Reaper& TheReaper() {
  // Destroyed at exit in reverse order of construction: the loggers and memory
  // pools a destruction uses were constructed earlier, so they outlive it.
  static Reaper reaper;
  return reaper;
}

}  // namespace

void DeferDestruction(std::function<void()> destroy) { TheReaper().Defer(std::move(destroy)); }

void WaitForDeferredDestructions() { TheReaper().Wait(); }

bool OnReaperThread() { return TheReaper().OnThread(); }

}  // namespace rill
