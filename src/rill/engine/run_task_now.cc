// Engine::RunTaskNow: one task run outside the tick schedule (the seed's
// DuckDBBridge.run_due_tasks), serialized with ticks like Step().
#include <cmath>
#include <thread>

#include "rill/engine/engine.h"
#include "rill/engine/task.h"

namespace rill {

Status Engine::RunTaskNow(const std::string& name) {
  std::unique_lock<std::mutex> lock(tick_mu_, std::try_to_lock);
  if (!lock.owns_lock()) {
    if (tick_owner_ == std::this_thread::get_id()) {
      return Status::Invalid("run_task_now('", name, "') called from inside a tick");
    }
    lock.lock();
  }
  std::shared_ptr<Task> task;
  {
    std::lock_guard<std::mutex> registry_lock(mu_);
    auto it = tasks_.find(name);
    if (it == tasks_.end()) return Status::KeyError("no task named '", name, "'");
    task = it->second;
  }
  tick_owner_ = std::this_thread::get_id();
  // Like a tick's time: strictly after the previous tick's.
  double now = clock_();
  if (now <= last_tick_now_) now = std::nextafter(last_tick_now_, INFINITY);
  last_tick_now_ = now;
  RunAndCountTask(*task, now);
  tick_owner_ = std::thread::id();
  return Status::OK();
}

}  // namespace rill
