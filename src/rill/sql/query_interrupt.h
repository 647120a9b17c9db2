// QueryInterrupt: lets another thread stop a query SqlEngine is running
// (a PostgreSQL CancelRequest, a statement timeout).
//
// Threads: Interrupt, interrupted and Reset may be called from any thread;
// Attach/Detach are called by SqlEngine on the query's thread.
#pragma once

#include <atomic>
#include <functional>
#include <mutex>

namespace rill {

class QueryInterrupt {
 public:
  /// Stop the query running with this object, if any, and mark it
  /// interrupted: a query started later with it fails at once until Reset().
  void Interrupt() {
    interrupted_.store(true);
    std::lock_guard<std::mutex> lock(mu_);
    if (hook_) {
      hook_();  // DuckDB's Interrupt: sets a flag, never blocks
    }
  }
  bool interrupted() const { return interrupted_.load(); }
  /// Clear the mark before a new query.
  void Reset() { interrupted_.store(false); }

  /// Install the hook that stops the running query (SqlEngine only).
  void Attach(std::function<void()> hook) {
    std::lock_guard<std::mutex> lock(mu_);
    hook_ = std::move(hook);
  }
  /// Remove the hook once the query ended (SqlEngine only): after this,
  /// Interrupt() cannot reach the connection, which may serve another query.
  void Detach() {
    std::lock_guard<std::mutex> lock(mu_);
    hook_ = nullptr;
  }

 private:
  std::atomic<bool> interrupted_{false};
  std::mutex mu_;
  std::function<void()> hook_;  // guarded by mu_
};

}  // namespace rill
