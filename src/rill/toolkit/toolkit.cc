#include "rill/toolkit/toolkit.h"

namespace rill::toolkit {

Result<std::shared_ptr<Toolkit>> Toolkit::Make(ToolkitOptions options) {
  auto toolkit = std::make_shared<Toolkit>();
  std::unique_ptr<QueueStore> store;
  if (!options.queue_db.empty()) {
    RILL_ASSIGN_OR_RAISE(store, QueueStore::Open(options.queue_db));
  }
  RILL_ASSIGN_OR_RAISE(toolkit->queues, QueueManager::Make(std::move(store)));
  RILL_ASSIGN_OR_RAISE(toolkit->analytics, StreamAnalytics::Make(options.analytics));
  return toolkit;
}

}  // namespace rill::toolkit
