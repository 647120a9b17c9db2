// SinkSet: the registry of an engine's sinks, their validation, and their
// part in the engine's checkpoints (a CheckpointParticipant).
#include "rill/sink/sink_set.h"

#include <cmath>

#include "rill/engine/engine.h"
#include "rill/sink/sink_driven.h"

namespace rill {

namespace {

using sink_internal::SinkRestore;
using sink_internal::SinkRunner;

constexpr char kExtensionKey[] = "rill.sinks";
constexpr char kParticipantName[] = "rill.sinks";
// The final flush of a sink that is removed or whose engine goes away.
constexpr double kFinalFlushSeconds = 3.0;

struct Registry {
  std::mutex mu;
  std::vector<std::shared_ptr<SinkRunner>> sinks;  // in the order added

  std::vector<std::shared_ptr<SinkRunner>> List() {
    std::lock_guard<std::mutex> lock(mu);
    return sinks;
  }
};

/// What a sink restores from `restored` (its section file, if any). At a tick
/// boundary or before the sink starts.
Result<std::shared_ptr<SinkRestore>> MakeRestore(const RestoredCheckpoint& restored,
                                                 const std::string& sink,
                                                 const LiveTable& table) {
  auto r = std::make_shared<SinkRestore>();
  r->checkpoint = restored;
  RILL_ASSIGN_OR_RAISE(r->section, sink_internal::ReadSinkSection(restored.path, sink));
  r->state = table.snapshot();
  auto it = restored.restored_versions.find(table.name());
  r->restored_version = it != restored.restored_versions.end() ? it->second : r->state->version();
  return r;
}

class SinksParticipant : public CheckpointParticipant {
 public:
  explicit SinksParticipant(std::shared_ptr<Registry> registry) : registry_(std::move(registry)) {}

  Result<CheckpointFileWriter> Capture(
      uint64_t id, const std::map<std::string, uint64_t>& table_versions) override {
    std::vector<CheckpointFileWriter> writers;
    for (const auto& sink : registry_->List()) {
      auto it = table_versions.find(sink->options().table);
      if (it == table_versions.end()) continue;
      if (auto writer = sink->CaptureSection(id, it->second)) writers.push_back(std::move(writer));
    }
    if (writers.empty()) return CheckpointFileWriter();
    return CheckpointFileWriter(
        [writers = std::move(writers)](const std::string& dir, bool sync) -> Result<int64_t> {
          int64_t bytes = 0;
          for (const auto& w : writers) {
            RILL_ASSIGN_OR_RAISE(int64_t n, w(dir, sync));
            bytes += n;
          }
          return bytes;
        });
  }

  void OnComplete(const CompletedCheckpoint& done) override {
    for (const auto& sink : registry_->List()) sink->OnCheckpointComplete(done);
  }

  Status Restore(const RestoredCheckpoint& restored) override {
    for (const auto& sink : registry_->List()) {
      auto table = sink->table();
      RILL_ASSIGN_OR_RAISE(auto restore, MakeRestore(restored, sink->name(), *table));
      sink->SetRestore(std::move(restore));
    }
    return Status::OK();
  }

 private:
  std::shared_ptr<Registry> registry_;
};

Status Validate(const SinkOptions& o, const LiveTable& table) {
  auto bad = [&](const std::string& what) {
    return Status::Invalid("sink '", o.name, "': ", what);
  };
  if (!(o.interval_seconds > 0) || !std::isfinite(o.interval_seconds)) {
    return bad("interval_seconds must be > 0, got " + std::to_string(o.interval_seconds));
  }
  if (o.max_batch_rows < 0) {
    return bad("max_batch_rows must be >= 0, got " + std::to_string(o.max_batch_rows));
  }
  if (!(o.retry_initial_seconds > 0) || !std::isfinite(o.retry_initial_seconds)) {
    return bad("retry_initial_seconds must be > 0, got " +
               std::to_string(o.retry_initial_seconds));
  }
  if (!(o.retry_max_seconds >= o.retry_initial_seconds) || !std::isfinite(o.retry_max_seconds)) {
    return bad("retry_max_seconds must be >= retry_initial_seconds, got " +
               std::to_string(o.retry_max_seconds));
  }
  if (o.max_backlog_rows <= 0) {
    return bad("max_backlog_rows must be > 0, got " + std::to_string(o.max_backlog_rows));
  }
  if (o.mode == SinkMode::kUpsert && table.primary_key().empty()) {
    return bad("mode upsert needs a table with a primary key; '" + table.name() +
               "' has none (use mode changelog or append)");
  }
  return Status::OK();
}

class SinkSetImpl : public SinkSet, public EngineExtension {
 public:
  explicit SinkSetImpl(Engine* engine)
      : engine_(engine),
        registry_(std::make_shared<Registry>()),
        participant_(std::make_shared<SinksParticipant>(registry_)) {
    engine_->AddCheckpointParticipant(kParticipantName, participant_);
  }

  ~SinkSetImpl() override {
    engine_->RemoveCheckpointParticipant(kParticipantName);
    std::vector<std::shared_ptr<SinkRunner>> sinks;
    {
      std::lock_guard<std::mutex> lock(registry_->mu);
      sinks.swap(registry_->sinks);
    }
    for (auto& s : sinks) {
      s->Stop(kFinalFlushSeconds);
      ForgetDriven(*s);
    }
  }

  Result<std::shared_ptr<Sink>> Add(SinkOptions options,
                                    std::unique_ptr<SinkWriter> writer) override {
    if (options.name.empty()) return Status::Invalid("sink: name is empty");
    if (!writer) return Status::Invalid("sink '", options.name, "': no writer");
    auto table = engine_->GetTable(options.table);
    if (!table.ok()) {
      return Status::Invalid("sink '", options.name, "': table: no table named '",
                             options.table, "'");
    }
    RILL_RETURN_NOT_OK(Validate(options, **table));
    std::lock_guard<std::mutex> add(add_mu_);  // one Add at a time: names stay unique
    if (Find(options.name)) {
      return Status::Invalid("sink '", options.name, "': name: a sink of that name exists");
    }
    std::shared_ptr<sink_internal::DrivenSinksImpl> driven;
    {
      std::lock_guard<std::mutex> lock(registry_->mu);
      driven = driven_;
    }
    const std::string cluster = writer->external_transaction_cluster();
    if (driven && (cluster.empty() || cluster != driven->kafka_cluster())) driven.reset();
    if (driven) {
      RILL_RETURN_NOT_OK(writer->OpenExternal((*table)->schema(), (*table)->primary_key()));
    }
    // A driven upsert sink writes a compacted topic: after falling behind the
    // log, its snapshot must also tombstone the keys deleted meanwhile.
    ChangeFeedOptions feed_options;
    feed_options.keep_forgotten_deletes = driven && options.mode == SinkMode::kUpsert &&
                                          !(*table)->primary_key().empty();
    auto feed = (*table)->OpenChangeFeed(feed_options);
    auto runner = std::make_shared<SinkRunner>(engine_, std::move(options), std::move(writer),
                                               *table, std::move(feed));
    if (driven) {
      // Committed by the application instance's transactions: no thread, no
      // checkpoint section, no restore (the instance's offsets and outputs
      // are committed together).
      runner->MarkDriven();
      {
        std::lock_guard<std::mutex> lock(registry_->mu);
        registry_->sinks.push_back(runner);
      }
      runner->StartDriven();
      driven->Add(runner);
      return std::static_pointer_cast<Sink>(runner);
    }
    if (auto restored = engine_->last_restored_checkpoint()) {
      if (restored->table_versions.count(runner->options().table)) {
        RILL_ASSIGN_OR_RAISE(auto restore, MakeRestore(*restored, runner->name(), **table));
        runner->SetRestore(std::move(restore));
      }
    }
    {
      std::lock_guard<std::mutex> lock(registry_->mu);
      registry_->sinks.push_back(runner);
    }
    runner->Start();
    return std::static_pointer_cast<Sink>(runner);
  }

  bool Remove(const std::string& name) override {
    std::shared_ptr<SinkRunner> gone;
    {
      std::lock_guard<std::mutex> lock(registry_->mu);
      for (auto it = registry_->sinks.begin(); it != registry_->sinks.end(); ++it) {
        if ((*it)->name() == name) {
          gone = *it;
          registry_->sinks.erase(it);
          break;
        }
      }
    }
    if (!gone) return false;
    gone->Stop(kFinalFlushSeconds);
    ForgetDriven(*gone);
    return true;
  }

  std::shared_ptr<DrivenSinks> DriveKafkaSinks(const std::string& kafka_cluster) override {
    std::lock_guard<std::mutex> lock(registry_->mu);
    if (!driven_ || driven_->kafka_cluster() != kafka_cluster) {
      driven_ = std::make_shared<sink_internal::DrivenSinksImpl>(kafka_cluster);
    }
    return driven_;
  }

  void BeginMoves(const std::string& table) override {
    for (const auto& runner : Runners(table)) {
      runner->BeginMoves(runner->table()->snapshot()->version());
    }
  }

  void EndMoves(const std::string& table) override {
    for (const auto& runner : Runners(table)) {
      runner->EndMoves(runner->table()->snapshot()->version());
    }
  }

  std::shared_ptr<Sink> Find(const std::string& name) const override {
    std::lock_guard<std::mutex> lock(registry_->mu);
    for (const auto& s : registry_->sinks) {
      if (s->name() == name) return s;
    }
    return nullptr;
  }

  std::vector<std::shared_ptr<Sink>> List() const override {
    std::lock_guard<std::mutex> lock(registry_->mu);
    return {registry_->sinks.begin(), registry_->sinks.end()};
  }

 private:
  /// The sinks of `table` not driven by an application.
  std::vector<std::shared_ptr<SinkRunner>> Runners(const std::string& table) const {
    std::vector<std::shared_ptr<SinkRunner>> out;
    for (const auto& runner : registry_->List()) {
      if (!runner->driven() && runner->table()->name() == table) out.push_back(runner);
    }
    return out;
  }

  void ForgetDriven(const SinkRunner& sink) {
    if (!sink.driven()) return;
    std::shared_ptr<sink_internal::DrivenSinksImpl> driven;
    {
      std::lock_guard<std::mutex> lock(registry_->mu);
      driven = driven_;
    }
    if (driven) driven->Remove(&sink);
  }

  Engine* const engine_;
  std::shared_ptr<Registry> registry_;
  std::shared_ptr<sink_internal::DrivenSinksImpl> driven_;  // guarded by registry_->mu
  std::shared_ptr<SinksParticipant> participant_;
  std::mutex add_mu_;
};

}  // namespace

SinkSet& SinkSet::For(Engine* engine) {
  EngineExtension* extension = engine->Extension(
      kExtensionKey, [engine] { return std::make_unique<SinkSetImpl>(engine); });
  return *static_cast<SinkSetImpl*>(extension);
}

}  // namespace rill
