// ViewSharing: the global views of an application, declared once for every
// instance.
//
// A global view is made of parts on every instance (global_view.h): an
// instance that lacks it publishes no partials, and every answer misses its
// partitions. So a global view declared on one instance (over SQL, from
// Python, or in one instance's pipeline file) is declared on all of them:
//   - its CREATE statement goes to the compacted topic "<app_id>-views"
//     (key: the view's name), and a DROP writes a tombstone;
//   - each instance reads that topic from its start for as long as it runs
//     (after its engine's first tick, so that its own pipeline file is
//     applied first) and declares each view it does not have, or drops one
//     that was dropped elsewhere.
// What an instance applies from the topic is not published again.
//
// Threads: Publish from any thread; the reader is a thread of its own,
// stopped by the destructor.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "rill/common/status.h"

namespace rill {

class Engine;

namespace cluster {

/// "<app_id>-views".
std::string ViewsTopic(const std::string& app_id);

class ViewSharing {
 public:
  /// `config`: the cluster's bootstrap.servers and security settings.
  /// `ready()`: whether the engine is ready to declare what the topic holds
  /// (its first tick has run).
  ViewSharing(Engine* engine, std::string app_id, std::map<std::string, std::string> config,
              std::function<bool()> ready);
  ~ViewSharing();
  ViewSharing(const ViewSharing&) = delete;
  ViewSharing& operator=(const ViewSharing&) = delete;

  /// Publish view `name`'s `statement` (null: it was dropped). Nothing when
  /// the calling thread is applying a shared view. Failures are recorded as
  /// engine events (the view stays declared here).
  void Publish(const std::string& name, const std::string* statement);

 private:
  void Run();
  /// Declare or drop view `name` as the topic says.
  void Apply(const std::string& name, const std::string* statement);

  Engine* engine_;
  const std::string app_id_;
  const std::map<std::string, std::string> config_;
  std::function<bool()> ready_;
  std::mutex publish_mu_;
  void* producer_ = nullptr;  // guarded by publish_mu_: an rd_kafka_t*, made on first use
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace cluster
}  // namespace rill
