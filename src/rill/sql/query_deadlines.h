// QueryDeadlines: query timeouts for any number of queries on one thread.
//
//     QueryInterrupt interrupt;
//     QueryDeadlines::Scope deadline(&deadlines, timeout_seconds, &interrupt);
//     auto result = engine.sql().Query(sql, &interrupt);
//     if (!result.ok() && deadline.Fired()) { ... the timeout, not the query ... }
//
// Threads: every method may be called from any thread. The thread starts with
// the first deadline armed and is joined by the destructor.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <thread>

#include "rill/sql/query_interrupt.h"

namespace rill {

class QueryDeadlines {
 public:
  using Clock = std::chrono::steady_clock;
  QueryDeadlines() = default;
  ~QueryDeadlines();
  QueryDeadlines(const QueryDeadlines&) = delete;
  QueryDeadlines& operator=(const QueryDeadlines&) = delete;

  /// Interrupt `interrupt` (borrowed until Disarm) after `seconds`. Returns
  /// the id for Disarm; 0 (never fires) when `seconds` <= 0.
  uint64_t Arm(double seconds, QueryInterrupt* interrupt);
  /// Forget `id`; return true when it had fired. After this returns the
  /// interrupt is not touched any more. Disarm(0) returns false.
  bool Disarm(uint64_t id);
  /// Interrupt every armed query now (shutdown). Each still needs Disarm.
  void InterruptAll();

  /// Arms on construction, disarms on destruction.
  class Scope {
   public:
    Scope(QueryDeadlines* deadlines, double seconds, QueryInterrupt* interrupt)
        : deadlines_(deadlines), id_(deadlines->Arm(seconds, interrupt)) {}
    ~Scope() { Fired(); }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    /// Disarm (once) and return whether the deadline had passed.
    bool Fired() {
      if (id_ != 0) {
        fired_ = deadlines_->Disarm(id_);
        id_ = 0;
      }
      return fired_;
    }

   private:
    QueryDeadlines* deadlines_;
    uint64_t id_;
    bool fired_ = false;
  };

 private:
  struct Armed {
    uint64_t id;
    QueryInterrupt* interrupt;
  };
  void Loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::multimap<Clock::time_point, Armed> due_;  // guarded by mu_
  std::map<uint64_t, bool> fired_;               // armed ids -> fired; guarded by mu_
  uint64_t next_id_ = 1;                         // guarded by mu_
  bool stop_ = false;                            // guarded by mu_
  std::thread thread_;                           // started by the first Arm
};

}  // namespace rill
