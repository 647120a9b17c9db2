#include "rill/cluster/application.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>

#include <arrow/array.h>
#include <arrow/builder.h>
#include <arrow/compute/api_vector.h>
#include <arrow/datum.h>
#include <arrow/record_batch.h>
#include <arrow/table.h>
#include <arrow/type.h>
#include <librdkafka/rdkafka.h>

#include "rill/cluster/changelog.h"
#include "rill/cluster/global_view.h"
#include "rill/cluster/view_sharing.h"
#include "rill/common/json_text.h"
#include "rill/connector/kafka_client.h"
#include "rill/engine/engine.h"
#include "rill/sink/sink_set.h"
#include "rill/table/live_table.h"
#include "rill/table/schema.h"

namespace rill::cluster {

namespace {

constexpr const char* kExtensionKey = "rill.cluster.application";
/// How long a transaction step (init, send offsets, commit) may wait.
constexpr int64_t kCommitTimeoutMs = 30000;

bool ValidName(const std::string& s) {
  if (s.empty() || s.size() > 200) return false;
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

/// Whether `table` is held per input partition (a partition shard): a keyed
/// or append table with the `_partition` column.
bool HeldPerPartition(Engine* engine, const std::string& table) {
  auto t = engine->GetTable(table);
  return t.ok() && ((*t)->keyed() || (*t)->mode() == TableMode::kAppend) &&
         (*t)->user_schema()->GetFieldIndex("_partition") >= 0;
}

class ApplicationImpl final : public Application, public EngineExtension {
 public:
  ApplicationImpl(Engine* engine, ClusterOptions options)
      : engine_(engine), options_(std::move(options)) {
    // Windows over partition shards keep their state per partition
    // (window_task.h), from their first run on, whenever the group's
    // consumer is made; their state tables get changelogs (RestoreStates,
    // MakeStateChangelogs).
    engine_->SetPartitionShards(
        [engine](const std::string& table) { return HeldPerPartition(engine, table); },
        [this](const std::string& state, const std::string& table) {
          std::lock_guard<std::mutex> lock(state_mu_);
          pending_states_[state] = table;
        });
  }

  ~ApplicationImpl() override {
    views_.reset();  // its reader declares views: stopped first
    engine_->SetKafkaGroupProvider(nullptr);
    engine_->SetPartitionShards(nullptr, nullptr);
    if (tick_hook_) engine_->RemoveTickEndHook(tick_hook_);
    if (shards_) {
      consumer_->SetShardHook(nullptr);
      // A restore under way (it holds commit_mu_) gives up waiting for the
      // stopped engine and ends before the last commit below.
      consumer_->AbortRestores();
      shards_->Detach();
    }
    // The engine's loop has stopped (extensions go after it): one last
    // transaction with what the last ticks applied. The connectors stop
    // later; the consumer keeps the committer (shared) for a last revoke.
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    if (!committer_) return;
    (void)CommitCut(nullptr);
    // The connectors stop after us and their last revoke still commits: with
    // the committer alone (nothing is applied any more, so the outputs are
    // all in the transaction above).
    std::shared_ptr<InstanceCommitter> committer = committer_;
    consumer_->SetCommitter([committer](const KafkaSharedConsumer::Offsets& offsets) {
      return committer->Commit(offsets);
    });
  }

  const ClusterOptions& options() const override { return options_; }

  Status EnsureConsumer(const std::string& bootstrap_servers) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (consumer_) return Status::OK();
    const std::string servers =
        options_.bootstrap_servers.empty() ? bootstrap_servers : options_.bootstrap_servers;
    if (servers.empty()) {
      return Status::Invalid("application '", options_.app_id,
                             "': no bootstrap_servers (in the cluster options or the source)");
    }
    KafkaSharedConsumerOptions o;
    o.config = options_.kafka_config;
    o.config.erase("transaction.timeout.ms");  // the instance's producer's
    o.config["bootstrap.servers"] = servers;
    o.config["group.id"] = options_.app_id;
    o.config["group.instance.id"] = options_.instance_id;
    o.config.emplace("client.id", options_.app_id + "-" + options_.instance_id);
    o.config["session.timeout.ms"] = std::to_string(options_.session_timeout_ms);
    o.config.emplace("heartbeat.interval.ms",
                     std::to_string(std::max<int64_t>(100, options_.session_timeout_ms / 10)));
    o.config["partition.assignment.strategy"] = "range";
    // Input written by upstream applications' transactions: only committed.
    o.config.emplace("isolation.level", "read_committed");
    RILL_ASSIGN_OR_RAISE(consumer_, KafkaSharedConsumer::Make(std::move(o)));
    // The group is joined after the engine's first tick: a checkpoint restored
    // before it (rill serve) is in the tables when the partitions are assigned.
    auto ticked = std::make_shared<std::atomic<bool>>(false);
    consumer_->SetJoinGate([ticked] { return ticked->load(); });
    tick_hook_ = engine_->AddTickEndHook([ticked](double) { ticked->store(true); });
    {
      std::map<std::string, std::string> cluster = KafkaSecurityConfig(options_.kafka_config);
      cluster["bootstrap.servers"] = servers;
      views_ = std::make_unique<ViewSharing>(engine_, options_.app_id, std::move(cluster),
                                             [ticked] { return ticked->load(); });
    }
    shards_ = std::make_shared<Shards>(this);
    consumer_->SetShardHook(shards_);
    if (!options_.exactly_once) return Status::OK();
    // One transactional producer per instance; init_transactions fences a
    // zombie of this instance.
    auto made = InstanceCommitter::Make(options_.app_id + "-" + options_.instance_id, servers,
                                        options_.kafka_config, consumer_, kCommitTimeoutMs);
    if (!made.ok()) {
      consumer_.reset();
      return made.status();
    }
    committer_ = std::move(*made);
    // The Kafka sinks on the same cluster added from now on write in this
    // instance's transactions (sink_set.h, DrivenSinks).
    driven_ = SinkSet::For(engine_).DriveKafkaSinks(servers);
    std::map<std::string, std::string> cluster = KafkaSecurityConfig(options_.kafka_config);
    cluster["bootstrap.servers"] = servers;
    changelogs_ = std::make_shared<Changelogs>(
        engine_, options_.app_id, std::move(cluster), driven_,
        [this](const std::string& sink, const std::string& column) {
          return WriteOwnedPartitionsOnly(sink, column);
        });
    consumer_->SetCommitter([this](const KafkaSharedConsumer::Offsets& handing) {
      return CommitCut(&handing);
    });
    thread_ = std::thread([this] { CommitLoop(); });
    return Status::OK();
  }

  /// One transaction with a cut taken at a tick boundary: the input offsets
  /// the engine has applied (plus `handing`: the offsets of partitions being
  /// handed back, which the sources no longer list) and the driven sinks'
  /// changes up to their table versions of the same moment. Nothing when
  /// neither changed since the last commit.
  Status CommitCut(const KafkaSharedConsumer::Offsets* handing) {
    std::lock_guard<std::mutex> serial(commit_mu_);
    KafkaSharedConsumer::Offsets offsets;
    DrivenSinks::Cut cut;
    Status at = engine_->AtTickBoundary([&] {
      offsets = consumer_->CommitTargets();
      cut = driven_->Capture();
      return Status::OK();
    });
    if (!at.ok()) return at;
    if (handing) {
      for (const auto& [tp, offset] : *handing) offsets[tp] = offset;
    }
    const bool outputs = driven_->HasChanges(cut);
    if (!outputs && (offsets.empty() || offsets == last_committed_)) return Status::OK();
    Status st = committer_->Commit(
        offsets, outputs ? std::function<Status(void*)>([&](void* producer) {
          return driven_->Write(cut, producer);
        })
                         : nullptr);
    if (!st.ok()) {
      // Aborted: nothing of it is anywhere. What the engine applied since the
      // last commit is read again from the committed offsets (here, or by the
      // partitions' new owner after a rebalance), and makes its outputs
      // again; keeping them for a later transaction would write them twice.
      if (outputs) driven_->Discard(cut, st);
      consumer_->RequestRewind();
      // A fenced producer (this process was a zombie: stopped past its
      // session and transaction timeouts) gets a new epoch, unless another
      // process now holds this instance_id (its consumer is fenced too).
      if (committer_->stats().fenced && consumer_->fatal_error().empty()) {
        (void)committer_->Restart();
      }
      return st;
    }
    if (outputs) driven_->Committed(cut);
    last_committed_ = std::move(offsets);
    return Status::OK();
  }

  /// Partition shards (KafkaShardHook): keyed tables fed with the input's
  /// metadata columns hold exactly the rows of the partitions owned.
  /// It outlives the application (the consumer holds it): once the
  /// application is gone (Detach), every call does nothing.
  class Shards final : public KafkaShardHook {
   public:
    explicit Shards(ApplicationImpl* app) : app_(app) {}
    /// The application is going: no call reaches it after this returns (a
    /// restore between Begin and End keeps commit_mu_, which the
    /// application's last commit waits for).
    void Detach() {
      std::lock_guard<std::mutex> lock(mu_);
      app_ = nullptr;
    }
    bool Sharded(const std::string& table) override {
      std::lock_guard<std::mutex> lock(mu_);
      return app_ && HeldPerPartition(app_->engine_, table);
    }
    void Begin(const std::string& table) override {
      std::lock_guard<std::mutex> lock(mu_);
      if (!app_ || holder_) return;
      // What the engine applied so far goes out first; nothing more until End.
      if (app_->committer_) (void)app_->CommitCut(nullptr);
      app_->commit_mu_.lock();
      holder_ = app_;
      // The sinks that are not driven skip what follows, up to End, too.
      (void)app_->engine_->AtTickBoundary([&] {
        SinkSet::For(app_->engine_).BeginMoves(table);
        // The tasks over it wait for the moves (End), and the moves of their
        // partitioned state are moves too.
        app_->engine_->PauseNewRowsOf(table);
        moving_states_ = app_->engine_->PartitionedStateTables(table);
        for (const auto& state : moving_states_) SinkSet::For(app_->engine_).BeginMoves(state);
        return Status::OK();
      });
    }
    void Drop(const std::string& table, const std::vector<int32_t>& partitions) override {
      std::lock_guard<std::mutex> lock(mu_);
      if (!app_) return;
      Status st = app_->DropPartitions(table, partitions);
      for (const auto& state : moving_states_) {
        Status dropped = app_->DropPartitions(state, partitions);
        if (st.ok()) st = dropped;
      }
      Status tasks = app_->engine_->AtTickBoundary(
          [&] { return app_->engine_->DropTaskPartitions(table, partitions); });
      if (st.ok()) st = tasks;
      if (!st.ok()) {
        app_->engine_->RecordEvent(EngineEvent::Engine(
            Severity::kError, table, "Dropping the rows of partitions that moved away failed",
            st.ToString(), app_->engine_->Now()));
      }
    }
    std::string Changelog(const std::string& table,
                          const std::vector<std::string>& topics) override {
      std::shared_ptr<Changelogs> changelogs;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (!app_) return std::string();
        // An append table's shard is its partition's records (what its
        // retention keeps of them): replayed from the input, no changelog.
        auto t = app_->engine_->GetTable(table);
        if (!t.ok() || !(*t)->keyed()) return std::string();
        changelogs = app_->changelogs_;
      }
      return changelogs ? changelogs->For(table, topics) : std::string();
    }
    Status RestoreFromChangelog(const std::string& table, const std::string& topic,
                                const std::vector<int32_t>& partitions, int64_t* records,
                                int64_t* bytes) override {
      std::shared_ptr<Changelogs> changelogs;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (app_) changelogs = app_->changelogs_;
      }
      if (!changelogs) return Status::OK();
      return changelogs->Restore(table, topic, partitions, records, bytes);
    }
    void Restored(const std::string& table, const std::vector<std::string>& topics,
                  const std::vector<int32_t>& partitions) override {
      std::lock_guard<std::mutex> lock(mu_);
      if (!app_) return;
      if (moving_states_.empty()) {
        // No task keeps state over it yet: one added later gets a changelog
        // from its first row (MakeStateChangelogs).
        app_->NoteTopics(table, topics);
        return;
      }
      Status st = app_->RestoreStates(table, topics, moving_states_, partitions);
      if (!st.ok()) {
        app_->engine_->RecordEvent(EngineEvent::Engine(
            Severity::kError, table,
            "Restoring the window state of partitions that moved here failed; their open "
            "windows lack the earlier rows",
            st.ToString(), app_->engine_->Now()));
      }
    }
    void End(const std::string& table) override {
      std::lock_guard<std::mutex> lock(mu_);
      // Even when detached meanwhile: the application waits for commit_mu_.
      ApplicationImpl* app = holder_;
      if (!app) return;
      (void)app->engine_->AtTickBoundary([&] {
        if (app->driven_) app->driven_->Skip(table);
        SinkSet::For(app->engine_).EndMoves(table);
        for (const auto& state : moving_states_) {
          if (app->driven_) app->driven_->Skip(state);
          SinkSet::For(app->engine_).EndMoves(state);
        }
        moving_states_.clear();
        // Nor are they new rows for the windows and stream tasks over it.
        app->engine_->SkipNewRowsOf(table);
        return Status::OK();
      });
      holder_ = nullptr;
      app->commit_mu_.unlock();
    }

   private:
    std::mutex mu_;
    ApplicationImpl* app_;               // guarded by mu_; null once detached
    ApplicationImpl* holder_ = nullptr;  // guarded by mu_: Begin took its commit_mu_
    std::vector<std::string> moving_states_;  // guarded by mu_: Begin to End
  };

  /// Restore the state tables `states` of the tasks over `table` for
  /// `partitions` from their changelogs (made now when missing; the rows the
  /// tables hold now are stale or written already), then the tasks' state
  /// from them. Between a shard hook's Begin and End.
  Status RestoreStates(const std::string& table, const std::vector<std::string>& topics,
                       const std::vector<std::string>& states,
                       const std::vector<int32_t>& partitions) {
    Status first;
    for (const auto& state : states) {
      RILL_RETURN_NOT_OK(DropPartitions(state, partitions));
      if (!changelogs_) continue;  // without exactly_once: no changelog
      const std::string topic = changelogs_->ForState(state, topics, /*skip_existing=*/true);
      if (topic.empty()) continue;
      int64_t records = 0, bytes = 0;
      Status st = changelogs_->Restore(state, topic, partitions, &records, &bytes);
      if (!st.ok() && first.ok()) first = st;
    }
    NoteTopics(table, topics);
    Status tasks = engine_->AtTickBoundary(
        [&] { return engine_->RestoreTaskPartitions(table, partitions); });
    return first.ok() ? tasks : first;
  }

  /// `table` is fed by `topics`: from now on a state table over it made later
  /// gets its changelog (CommitLoop).
  void NoteTopics(const std::string& table, const std::vector<std::string>& topics) {
    std::lock_guard<std::mutex> lock(state_mu_);
    table_topics_[table] = topics;
  }

  /// The changelogs of state tables made after their input's first restore
  /// (a window task added later): from their first row on.
  void MakeStateChangelogs() {
    if (!changelogs_) return;
    std::map<std::string, std::string> pending;
    std::map<std::string, std::vector<std::string>> topics;
    {
      std::lock_guard<std::mutex> lock(state_mu_);
      pending = pending_states_;
      topics = table_topics_;
    }
    for (const auto& [state, table] : pending) {
      auto t = topics.find(table);
      if (t == topics.end()) continue;  // its input's first restore makes it
      (void)changelogs_->ForState(state, t->second, /*skip_existing=*/false);
      std::lock_guard<std::mutex> lock(state_mu_);
      pending_states_.erase(state);
    }
  }

  /// Delete the rows of `partitions` from `table`, at a tick boundary.
  Status DropPartitions(const std::string& table, const std::vector<int32_t>& partitions) {
    RILL_ASSIGN_OR_RAISE(auto t, engine_->GetTable(table));
    if (!t->keyed()) {
      std::vector<int64_t> values(partitions.begin(), partitions.end());
      return engine_->AtTickBoundary(
          [&]() -> Status { return t->DeleteWhereIn("_partition", values).status(); });
    }
    std::string in;
    for (int32_t p : partitions) in += (in.empty() ? "" : ",") + std::to_string(p);
    std::string keys;
    for (const auto& k : t->primary_key()) {
      keys += (keys.empty() ? "\"" : ", \"") + k + "\"";
    }
    return engine_->AtTickBoundary([&]() -> Status {
      RILL_ASSIGN_OR_RAISE(auto rows, engine_->Query("SELECT " + keys + " FROM \"" + table +
                                                     "\" WHERE _partition IN (" + in + ")"));
      if (rows->num_rows() == 0) return Status::OK();
      return t->Delete(rows).status();
    });
  }

  /// Every commit_interval_ms: CommitCut.
  void CommitLoop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      cv_.wait_for(lock, std::chrono::milliseconds(options_.commit_interval_ms),
                   [this] { return stop_; });
      if (stop_) break;
      lock.unlock();
      MakeStateChangelogs();
      (void)CommitCut(nullptr);  // failures are counted in the committer's stats
      lock.lock();
    }
  }

  std::shared_ptr<KafkaSharedConsumer> consumer() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return consumer_;
  }

  void ShareView(const std::string& name, const std::string* statement) override {
    ViewSharing* views;
    {
      std::lock_guard<std::mutex> lock(mu_);
      views = views_.get();  // lives until the destructor
    }
    if (views) views->Publish(name, statement);
  }

  Status WriteOwnedPartitionsOnly(const std::string& sink_name,
                                  const std::string& partition_column) override {
    if (!driven_) return Status::OK();
    std::weak_ptr<KafkaSharedConsumer> weak = consumer();
    auto filter = [weak, partition_column](const std::shared_ptr<arrow::RecordBatch>& batch)
        -> Result<std::shared_ptr<arrow::RecordBatch>> {
      auto c = weak.lock();
      auto column = batch->GetColumnByName(partition_column);
      if (!c || !column || column->type_id() != arrow::Type::INT32) return batch;
      // Owned, counting a rebalance under way: the partitions being handed
      // back until the revoke completes (the group's assignment drops them
      // last) and those being assigned from its start (the sources take them
      // first), whose restore's partials are committed within the assign.
      std::set<int32_t> owned;
      for (const auto& tp : c->assignment()) owned.insert(tp.second);
      for (const auto& st : c->PartitionStates()) owned.insert(st.partition);
      const auto& partitions = static_cast<const arrow::Int32Array&>(*column);
      arrow::BooleanBuilder keep;
      RILL_RETURN_NOT_OK(keep.Reserve(partitions.length()));
      for (int64_t i = 0; i < partitions.length(); ++i) {
        keep.UnsafeAppend(partitions.IsValid(i) && owned.count(partitions.Value(i)) > 0);
      }
      RILL_ASSIGN_OR_RAISE(auto mask, keep.Finish());
      RILL_ASSIGN_OR_RAISE(arrow::Datum kept,
                           arrow::compute::Filter(arrow::Datum(batch), arrow::Datum(mask)));
      return kept.record_batch();
    };
    if (!driven_->SetRowFilter(sink_name, std::move(filter))) {
      return Status::KeyError("no driven sink '", sink_name, "'");
    }
    return Status::OK();
  }

  Status Leave(double timeout_seconds) override {
    auto c = consumer();
    return c ? c->Leave(timeout_seconds) : Status::OK();
  }

  Status PublishMember(const std::string& url) override {
    auto c = consumer();
    if (!c) return Status::Invalid("application '", options_.app_id, "': not connected yet");
    std::map<std::string, std::string> config = KafkaSecurityConfig(options_.kafka_config);
    config["bootstrap.servers"] = c->bootstrap_servers();
    RILL_ASSIGN_OR_RAISE(rd_kafka_t * rk,
                         MakeKafkaClient(RD_KAFKA_PRODUCER, config, "members producer"));
    std::unique_ptr<rd_kafka_t, void (*)(rd_kafka_t*)> owned(rk, rd_kafka_destroy);
    const std::string topic = MembersTopic(options_.app_id);
    RILL_RETURN_NOT_OK(EnsureCompactedTopic(rk, topic, 1, 10000));
    std::string value = "{\"instance_id\":";
    AppendJsonString(&value, options_.instance_id);
    value += ",\"url\":";
    AppendJsonString(&value, url);
    value += "}";
    rd_kafka_resp_err_t err = rd_kafka_producev(
        rk, RD_KAFKA_V_TOPIC(topic.c_str()), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
        RD_KAFKA_V_KEY(options_.instance_id.data(), options_.instance_id.size()),
        RD_KAFKA_V_VALUE(value.data(), value.size()), RD_KAFKA_V_END);
    if (err == RD_KAFKA_RESP_ERR_NO_ERROR) err = rd_kafka_flush(rk, 10000);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR || rd_kafka_outq_len(rk) > 0) {
      return Status::IOError("application '", options_.app_id, "': announcing ", url, " on ",
                             topic, ": ", rd_kafka_err2str(err));
    }
    return Status::OK();
  }

  ClusterStatus status() const override {
    ClusterStatus s;
    s.app_id = options_.app_id;
    s.instance_id = options_.instance_id;
    auto c = consumer();
    if (!c) return s;
    s.member_id = c->member_id();
    s.generation = c->generation();
    s.bootstrap_servers = c->bootstrap_servers();
    s.partitions = c->assignment();
    s.group = c->stats();
    s.partition_states = c->PartitionStates();
    if (committer_) s.commits = committer_->stats();
    {
      std::lock_guard<std::mutex> lock(describe_mu_);
      const auto now = std::chrono::steady_clock::now();
      if (now - described_at_ > std::chrono::seconds(1)) {
        described_at_ = now;
        auto d = c->DescribeGroup(2000);
        if (d.ok()) {
          description_ = std::move(*d);
          describe_error_.clear();
        } else {
          describe_error_ = d.status().ToString();
        }
      }
      s.group_state = description_.state;
      s.members = description_.members;
      s.members_error = describe_error_;
    }
    return s;
  }

 private:
  Engine* engine_;
  const ClusterOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::shared_ptr<KafkaSharedConsumer> consumer_;  // guarded by mu_ (set once)
  std::shared_ptr<InstanceCommitter> committer_;   // set once with consumer_
  std::shared_ptr<DrivenSinks> driven_;            // set once with committer_
  std::shared_ptr<Changelogs> changelogs_;         // set once with driven_
  std::unique_ptr<ViewSharing> views_;             // set once with consumer_
  std::shared_ptr<Shards> shards_;                 // set once with consumer_
  std::mutex commit_mu_;                           // one CommitCut at a time
  // The group's description, read at most once a second (status()).
  mutable std::mutex describe_mu_;
  mutable std::chrono::steady_clock::time_point described_at_;
  mutable KafkaSharedConsumer::GroupDescription description_;
  mutable std::string describe_error_;
  KafkaSharedConsumer::Offsets last_committed_;    // guarded by commit_mu_
  std::thread thread_;                             // CommitLoop
  int64_t tick_hook_ = 0;                          // opens the consumer's join gate
  bool stop_ = false;                              // guarded by mu_
  std::mutex state_mu_;
  std::map<std::string, std::string> pending_states_;  // guarded by state_mu_: state -> input
  std::map<std::string, std::vector<std::string>> table_topics_;  // guarded by state_mu_
};

}  // namespace

std::string ClusterStatusJson(const Application& app) {
  const ClusterStatus s = app.status();
  const ClusterOptions& o = app.options();
  std::string out = "{";
  auto key = [&out](const char* name) {
    if (out.size() > 1) out += ',';
    AppendJsonString(&out, name);
    out += ':';
  };
  auto text = [&](const char* name, const std::string& value) {
    key(name);
    AppendJsonString(&out, value);
  };
  auto number = [&](const char* name, double value) {
    key(name);
    AppendJsonNumber(&out, value);
  };
  auto flag = [&](const char* name, bool value) {
    key(name);
    out += value ? "true" : "false";
  };
  text("app_id", s.app_id);
  text("instance_id", s.instance_id);
  text("member_id", s.member_id);
  number("generation", s.generation);
  text("bootstrap_servers", s.bootstrap_servers);
  key("partitions");
  out += '[';
  for (size_t i = 0; i < s.partitions.size(); ++i) {
    if (i > 0) out += ',';
    out += "{\"topic\":";
    AppendJsonString(&out, s.partitions[i].first);
    out += ",\"partition\":" + std::to_string(s.partitions[i].second) + "}";
  }
  out += ']';
  number("assigns", static_cast<double>(s.group.assigns));
  number("revokes", static_cast<double>(s.group.revokes));
  number("partitions_revoked", static_cast<double>(s.group.partitions_revoked));
  number("last_rebalance_at", s.group.last_rebalance_at);
  number("last_rebalance_seconds", s.group.last_rebalance_seconds);
  number("commit_interval_ms", static_cast<double>(o.commit_interval_ms));
  number("partitions_per_table", o.partitions_per_table);
  flag("exactly_once", o.exactly_once);
  number("commits", static_cast<double>(s.commits.commits));
  number("commit_aborts", static_cast<double>(s.commits.aborts));
  number("last_commit_ms", s.commits.last_commit_ms);
  number("max_commit_ms", s.commits.max_commit_ms);
  number("producer_restarts", static_cast<double>(s.commits.producer_restarts));
  number("rewinds", static_cast<double>(s.group.rewinds));
  number("partitions_restored", static_cast<double>(s.group.partitions_restored));
  number("restored_records", static_cast<double>(s.group.restored_records));
  number("restored_bytes", static_cast<double>(s.group.restored_bytes));
  number("last_restore_seconds", s.group.last_restore_seconds);
  number("partitions_dropped", static_cast<double>(s.group.partitions_dropped));
  number("partitions_from_checkpoint", static_cast<double>(s.group.partitions_from_checkpoint));
  number("partitions_from_changelog", static_cast<double>(s.group.partitions_from_changelog));
  flag("fenced", s.commits.fenced);
  text("last_commit_error", s.commits.last_error);
  text("group_state", s.group_state);
  key("members");
  out += '[';
  const std::string prefix = o.app_id + "-";
  for (size_t i = 0; i < s.members.size(); ++i) {
    const auto& m = s.members[i];
    if (i > 0) out += ',';
    out += "{\"member_id\":";
    AppendJsonString(&out, m.member_id);
    out += ",\"instance_id\":";
    AppendJsonString(&out, m.client_id.rfind(prefix, 0) == 0 ? m.client_id.substr(prefix.size())
                                                             : m.client_id);
    out += ",\"client_id\":";
    AppendJsonString(&out, m.client_id);
    out += ",\"host\":";
    AppendJsonString(&out, m.host);
    out += ",\"partitions\":[";
    for (size_t j = 0; j < m.partitions.size(); ++j) {
      if (j > 0) out += ',';
      out += "{\"topic\":";
      AppendJsonString(&out, m.partitions[j].first);
      out += ",\"partition\":" + std::to_string(m.partitions[j].second) + "}";
    }
    out += "]}";
  }
  out += ']';
  text("members_error", s.members_error);
  key("partition_states");
  out += '[';
  for (size_t i = 0; i < s.partition_states.size(); ++i) {
    const auto& p = s.partition_states[i];
    if (i > 0) out += ',';
    out += "{\"topic\":";
    AppendJsonString(&out, p.topic);
    out += ",\"partition\":" + std::to_string(p.partition) +
           ",\"first_offset\":" + std::to_string(p.first_offset) +
           ",\"rewound\":" + (p.rewound ? "true" : "false") +
           ",\"restored\":" + (p.restored ? "true" : "false") + "}";
  }
  out += ']';
  out += '}';
  return out;
}

std::string MembersTopic(const std::string& app_id) { return app_id + "-members"; }

Status EnsureCompactedTopic(void* handle, const std::string& topic, int partitions,
                            int timeout_ms) {
  auto* rk = static_cast<rd_kafka_t*>(handle);
  char errstr[512];
  rd_kafka_NewTopic_t* nt =
      rd_kafka_NewTopic_new(topic.c_str(), partitions, -1, errstr, sizeof(errstr));
  if (!nt) return Status::Invalid("topic '", topic, "': ", errstr);
  rd_kafka_NewTopic_set_config(nt, "cleanup.policy", "compact");
  rd_kafka_queue_t* queue = rd_kafka_queue_new(rk);
  rd_kafka_AdminOptions_t* options =
      rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_CREATETOPICS);
  rd_kafka_AdminOptions_set_operation_timeout(options, timeout_ms, errstr, sizeof(errstr));
  rd_kafka_CreateTopics(rk, &nt, 1, options, queue);
  rd_kafka_event_t* event = rd_kafka_queue_poll(queue, timeout_ms + 2000);
  Status st = Status::IOError("creating topic '", topic, "': no answer within ", timeout_ms,
                              " ms");
  if (event) {
    const rd_kafka_CreateTopics_result_t* result = rd_kafka_event_CreateTopics_result(event);
    size_t n = 0;
    const rd_kafka_topic_result_t** topics =
        result ? rd_kafka_CreateTopics_result_topics(result, &n) : nullptr;
    const rd_kafka_resp_err_t err =
        n == 1 ? rd_kafka_topic_result_error(topics[0]) : rd_kafka_event_error(event);
    if (err == RD_KAFKA_RESP_ERR_NO_ERROR || err == RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS) {
      st = Status::OK();
    } else {
      st = Status::IOError("creating topic '", topic, "': ", rd_kafka_err2str(err));
    }
    rd_kafka_event_destroy(event);
  }
  rd_kafka_AdminOptions_destroy(options);
  rd_kafka_NewTopic_destroy(nt);
  rd_kafka_queue_destroy(queue);
  return st;
}

Status ValidateClusterOptions(const ClusterOptions& o) {
  if (!ValidName(o.app_id)) {
    return Status::Invalid("cluster app_id '", o.app_id,
                           "' must be 1-200 letters, digits, '.', '_' or '-'");
  }
  if (!ValidName(o.instance_id)) {
    return Status::Invalid("cluster instance_id '", o.instance_id,
                           "' must be 1-200 letters, digits, '.', '_' or '-'");
  }
  if (o.partitions_per_table < 0) {
    return Status::Invalid("cluster partitions_per_table must be >= 0, got ",
                           o.partitions_per_table);
  }
  if (o.commit_interval_ms <= 0) {
    return Status::Invalid("cluster commit_interval_ms must be > 0, got ", o.commit_interval_ms);
  }
  if (o.session_timeout_ms < 1000) {
    return Status::Invalid("cluster session_timeout_ms must be >= 1000, got ",
                           o.session_timeout_ms);
  }
  return Status::OK();
}

Result<Application*> Application::Start(Engine* engine, ClusterOptions options) {
  RILL_RETURN_NOT_OK(ValidateClusterOptions(options));
  if (Application* running = For(engine)) {
    const ClusterOptions& r = running->options();
    if (r.app_id != options.app_id || r.instance_id != options.instance_id) {
      return Status::Invalid("this engine already is instance '", r.instance_id,
                             "' of application '", r.app_id, "'");
    }
    return running;
  }
  auto* made = static_cast<ApplicationImpl*>(engine->Extension(
      kExtensionKey, [engine, &options] {
        return std::make_unique<ApplicationImpl>(engine, options);
      }));
  if (!options.bootstrap_servers.empty()) {
    RILL_RETURN_NOT_OK(made->EnsureConsumer(options.bootstrap_servers));
  }
  engine->SetKafkaGroupProvider(
      [made](const std::string& servers) -> Result<std::shared_ptr<KafkaSharedConsumer>> {
        RILL_RETURN_NOT_OK(made->EnsureConsumer(servers));
        return made->consumer();
      });
  // Views of scope 'global' (global_view.h).
  pipeline::Catalog::For(engine).SetGlobalViewMaker(MakeGlobalViews(engine, made));
  return made;
}

Application* Application::For(Engine* engine) {
  EngineExtension* e = engine->FindExtension(kExtensionKey);
  return e ? static_cast<ApplicationImpl*>(e) : nullptr;
}

}  // namespace rill::cluster
