#include "rill/toolkit/queue_manager.h"

namespace rill::toolkit {

Result<std::unique_ptr<QueueManager>> QueueManager::Make(std::unique_ptr<QueueStore> store) {
  std::unique_ptr<QueueManager> manager(new QueueManager());
  manager->store_ = std::move(store);
  if (manager->store_ != nullptr) {
    RILL_ASSIGN_OR_RAISE(auto known, manager->store_->Queues());
    for (const auto& [name, max_size] : known) {
      QueueOptions options;
      options.name = name;
      options.max_size = max_size;
      RILL_ASSIGN_OR_RAISE(auto queue, MessageQueue::Make(options, manager->store_.get()));
      manager->queues_[name] = std::move(queue);
    }
  }
  return manager;
}

Result<std::shared_ptr<MessageQueue>> QueueManager::CreateQueue(QueueOptions options) {
  std::lock_guard<std::mutex> lock(mu_);
  if (queues_.count(options.name) > 0) {
    return Status::AlreadyExists("queue '", options.name, "' already exists");
  }
  RILL_ASSIGN_OR_RAISE(auto queue, MessageQueue::Make(options, store_.get()));
  if (store_ != nullptr) {
    RILL_RETURN_NOT_OK(store_->Register(options.name, options.max_size));
  }
  queues_[options.name] = queue;
  return queue;
}

Result<std::shared_ptr<MessageQueue>> QueueManager::GetQueue(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = queues_.find(name);
  if (it == queues_.end()) {
    return Status::KeyError("no queue named '", name, "'");
  }
  return it->second;
}

Status QueueManager::DeleteQueue(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = queues_.find(name);
  if (it == queues_.end()) {
    return Status::KeyError("no queue named '", name, "'");
  }
  if (store_ != nullptr) {
    RILL_RETURN_NOT_OK(store_->Unregister(name));
  }
  queues_.erase(it);
  return Status::OK();
}

std::vector<std::string> QueueManager::ListQueues() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> names;
  for (const auto& [name, queue] : queues_) names.push_back(name);
  return names;
}

QueueManagerStats QueueManager::stats() const {
  std::vector<std::shared_ptr<MessageQueue>> queues;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [name, queue] : queues_) queues.push_back(queue);
  }
  QueueManagerStats out;
  for (const auto& queue : queues) {
    QueueStats s = queue->stats();
    out.total_messages += s.current_size;
    out.total_enqueued += s.total_enqueued;
    out.total_dequeued += s.total_dequeued;
    out.queues.push_back(std::move(s));
  }
  out.total_queues = static_cast<int64_t>(out.queues.size());
  return out;
}

}  // namespace rill::toolkit
