// Engine hooks for the layers above: extensions (the SinkSet), checkpoint
// participants, and backpressure on a table's connectors.
#include "rill/engine/engine.h"

namespace rill {

EngineExtension* Engine::Extension(
    const std::string& key, const std::function<std::unique_ptr<EngineExtension>()>& make) {
  std::lock_guard<std::mutex> lock(extensions_mu_);
  auto& slot = extensions_[key];
  if (!slot) slot = make();
  return slot.get();
}

EngineExtension* Engine::FindExtension(const std::string& key) const {
  std::lock_guard<std::mutex> lock(extensions_mu_);
  auto it = extensions_.find(key);
  return it != extensions_.end() ? it->second.get() : nullptr;
}

void Engine::AddCheckpointParticipant(const std::string& name,
                                      std::shared_ptr<CheckpointParticipant> participant) {
  std::lock_guard<std::mutex> lock(mu_);
  participants_[name] = std::move(participant);
}

void Engine::RemoveCheckpointParticipant(const std::string& name) {
  std::shared_ptr<CheckpointParticipant> gone;  // released outside the lock
  std::lock_guard<std::mutex> lock(mu_);
  auto it = participants_.find(name);
  if (it == participants_.end()) return;
  gone = std::move(it->second);
  participants_.erase(it);
}

std::map<std::string, std::shared_ptr<CheckpointParticipant>> Engine::CheckpointParticipants()
    const {
  std::lock_guard<std::mutex> lock(mu_);
  return participants_;
}

std::optional<RestoredCheckpoint> Engine::last_restored_checkpoint() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_restore_;
}

void Engine::SetRestoredCheckpoint(RestoredCheckpoint restored) {
  std::lock_guard<std::mutex> lock(mu_);
  last_restore_ = std::move(restored);
}

void Engine::SetTableBackpressure(const std::string& table, const std::string& source,
                                  bool on) {
  std::lock_guard<std::mutex> lock(mu_);
  if (on) {
    backpressure_[table].insert(source);
    return;
  }
  auto it = backpressure_.find(table);
  if (it == backpressure_.end()) return;
  it->second.erase(source);
  if (it->second.empty()) backpressure_.erase(it);
}

bool Engine::TableBackpressured(const std::string& table) const {
  std::lock_guard<std::mutex> lock(mu_);
  return backpressure_.count(table) > 0;
}

}  // namespace rill
