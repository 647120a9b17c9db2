// KafkaSharedConsumer: one consumer, one reader thread, several connectors.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <set>

#include "rill/common/logging.h"
#include "rill/connector/kafka_client.h"
#include "rill/connector/kafka_consumer_internal.h"

namespace rill {

using kafka_internal::ListPtr;
using kafka_internal::MessagePtr;

namespace {

constexpr int kCloseSeconds = 5;
/// Attach/Detach wait this long for more changes before resubscribing.
constexpr double kResubscribeDelaySeconds = 0.1;

double SteadySeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

double WallSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

using SharedImpl = KafkaSharedConsumer::Impl;

void SharedImpl::OnError(rd_kafka_t*, int err, const char* reason, void* opaque) {
  auto* impl = static_cast<SharedImpl*>(opaque);
  const std::string what = std::string("Kafka error: ") +
                           rd_kafka_err2str(static_cast<rd_kafka_resp_err_t>(err)) + ": " +
                           reason + " (retrying)";
  {
    std::lock_guard<std::mutex> lock(impl->mu);
    impl->last_error = what;
  }
  // Every source of the application hears of it (the engine alerts once per
  // outage per source). The members are stable while the reader polls.
  for (KafkaConnector::Impl* m : impl->members) m->ReportError(what);
}

void SharedImpl::OnRebalance(rd_kafka_t* rk, rd_kafka_resp_err_t err,
                             rd_kafka_topic_partition_list_t* parts, void* opaque) {
  // Called inside rd_kafka_consumer_poll on the reader thread, which holds
  // members_mu.
  auto* impl = static_cast<SharedImpl*>(opaque);
  if (err != RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
    {
      std::lock_guard<std::mutex> lock(impl->mu);
      impl->rebalance_started = WallSeconds();
      ++impl->stats.revokes;
      impl->stats.partitions_revoked += parts->cnt;
    }
    for (KafkaConnector::Impl* m : impl->members) m->OnRevoke(parts);
    kafka_internal::Unassign(rk, parts);
    std::lock_guard<std::mutex> lock(impl->mu);
    for (int i = 0; i < parts->cnt; ++i) {
      impl->assignment.erase({parts->elems[i].topic, parts->elems[i].partition});
    }
    if (!kafka_internal::Cooperative(rk)) impl->assignment.clear();
    return;
  }
  // Partitions of a topic no member reads any more (a detach raced the
  // subscription change) start from the committed offsets.
  for (int i = 0; i < parts->cnt; ++i) parts->elems[i].offset = RD_KAFKA_OFFSET_INVALID;
  for (KafkaConnector::Impl* m : impl->members) m->OnAssign(parts);
  kafka_internal::Assign(rk, parts);
  std::lock_guard<std::mutex> lock(impl->mu);
  for (int i = 0; i < parts->cnt; ++i) {
    impl->assignment.emplace(parts->elems[i].topic, parts->elems[i].partition);
  }
  ++impl->stats.assigns;
  const double now = WallSeconds();
  if (impl->rebalance_started > 0) {
    impl->stats.last_rebalance_seconds = now - impl->rebalance_started;
  }
  impl->stats.last_rebalance_at = now;
}

Status SharedImpl::Resubscribe() {
  std::set<std::string> topics;
  for (const KafkaConnector::Impl* m : members) {
    topics.insert(m->options.topics.begin(), m->options.topics.end());
  }
  if (topics.empty()) {
    rd_kafka_unsubscribe(rk);
    return Status::OK();
  }
  ListPtr list(rd_kafka_topic_partition_list_new(static_cast<int>(topics.size())));
  for (const auto& t : topics) {
    rd_kafka_topic_partition_list_add(list.get(), t.c_str(), RD_KAFKA_PARTITION_UA);
  }
  rd_kafka_resp_err_t err = rd_kafka_subscribe(rk, list.get());
  if (err) return Status::IOError("Kafka consumer group '", options.config.at("group.id"),
                                  "': subscribe: ", rd_kafka_err2str(err));
  return Status::OK();
}

void SharedImpl::Run() {
  std::vector<MessagePtr> polled;
  std::map<KafkaConnector::Impl*, std::vector<MessagePtr>> routed;
  while (!stop) {
    std::unique_lock<std::mutex> lock(members_mu);
    if (resubscribe_at > 0 && SteadySeconds() >= resubscribe_at && !left && JoinOpen()) {
      resubscribe_at = 0;
      Status st = Resubscribe();
      if (!st.ok()) {
        for (KafkaConnector::Impl* member : members) member->ReportError(st.ToString());
      }
    }
    if (members.empty()) {
      lock.unlock();
      std::this_thread::sleep_for(std::chrono::milliseconds(options.poll_timeout_ms));
      continue;
    }
    if (rewind_requested.exchange(false)) {
      for (KafkaConnector::Impl* member : members) member->Rewind();
      std::lock_guard<std::mutex> stats_lock(mu);
      ++stats.rewinds;
    }
    polled.clear();
    for (int64_t i = 0; i < options.max_batch_messages && !stop; ++i) {
      MessagePtr m(rd_kafka_consumer_poll(rk, i == 0 ? static_cast<int>(options.poll_timeout_ms)
                                                     : 0));
      if (!m) break;
      if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) continue;  // not an error
      if (m->err) {
        const std::string what =
            std::string("Kafka consumer error: ") + rd_kafka_message_errstr(m.get());
        for (KafkaConnector::Impl* member : members) member->ReportError(what);
        continue;
      }
      polled.push_back(std::move(m));
    }
    // Route by topic; a message of a topic no member reads any more is
    // dropped (uncommitted: its partition's next owner, or a re-attached
    // member, reads it from the committed offset).
    for (auto& m : polled) {
      const char* topic = rd_kafka_topic_name(m->rkt);
      for (KafkaConnector::Impl* member : members) {
        if (member->Reads(topic)) {
          routed[member].push_back(std::move(m));
          break;
        }
      }
    }
    for (auto& [member, batch] : routed) {
      if (batch.empty() || member->stop) continue;
      member->Screen(&batch);
      if (!batch.empty()) member->ProcessBatch(batch);
      batch.clear();
    }
    for (KafkaConnector::Impl* member : members) member->RefreshLags();
  }
}

// KafkaSharedConsumer ---------------------------------------------------------------

Result<std::shared_ptr<KafkaSharedConsumer>> KafkaSharedConsumer::Make(
    KafkaSharedConsumerOptions options) {
  if (options.config.count("group.id") == 0 || options.config.at("group.id").empty()) {
    return Status::Invalid("KafkaSharedConsumer: group.id is required");
  }
  if (options.poll_timeout_ms <= 0 || options.max_batch_messages <= 0) {
    return Status::Invalid(
        "KafkaSharedConsumer: poll_timeout_ms and max_batch_messages must be > 0");
  }
  auto config = options.config;
  config.emplace("partition.assignment.strategy", "range");
  config.emplace("auto.offset.reset", "earliest");
  config["enable.auto.commit"] = "false";
  config["enable.partition.eof"] = "true";
  std::shared_ptr<KafkaSharedConsumer> c(new KafkaSharedConsumer(std::move(options)));
  Impl& impl = *c->impl_;
  impl.self = c.get();
  RILL_ASSIGN_OR_RAISE(impl.rk, MakeKafkaClient(RD_KAFKA_CONSUMER, config, "KafkaSharedConsumer",
                                                {&impl, &Impl::OnError, &Impl::OnRebalance}));
  impl.thread = std::thread([&impl] { impl.Run(); });
  return c;
}

KafkaSharedConsumer::KafkaSharedConsumer(KafkaSharedConsumerOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}

KafkaSharedConsumer::~KafkaSharedConsumer() {
  impl_->stop = true;
  if (impl_->thread.joinable()) impl_->thread.join();
  // Connectors hold the consumer (options.consumer) and detach in Stop: none
  // is attached any more.
  if (impl_->rk) kafka_internal::CloseAndDestroy(impl_->rk, kCloseSeconds);
}

Status KafkaSharedConsumer::Attach(KafkaConnector::Impl* member) {
  std::lock_guard<std::mutex> lock(impl_->members_mu);
  for (const KafkaConnector::Impl* m : impl_->members) {
    for (const auto& t : member->options.topics) {
      if (m->Reads(t.c_str())) {
        return Status::Invalid("Kafka topic '", t, "' is read by two sources of consumer group '",
                               group_id(), "' ('", m->self->name(), "' and '",
                               member->self->name(), "'): one source per topic");
      }
    }
  }
  {
    std::lock_guard<std::mutex> list(impl_->list_mu);
    impl_->members.push_back(member);
  }
  impl_->resubscribe_at = SteadySeconds() + kResubscribeDelaySeconds;
  return Status::OK();
}

void KafkaSharedConsumer::Detach(KafkaConnector::Impl* member) {
  member->stop = true;
  member->room_cv.notify_all();
  std::lock_guard<std::mutex> lock(impl_->members_mu);
  auto& ms = impl_->members;
  {
    std::lock_guard<std::mutex> list(impl_->list_mu);
    ms.erase(std::remove(ms.begin(), ms.end(), member), ms.end());
  }
  // The last one going (the engine stops) keeps the subscription: a static
  // member then closes without leaving the group, so that a restart within
  // the session timeout gets its partitions back without a rebalance.
  if (!ms.empty()) impl_->resubscribe_at = SteadySeconds() + kResubscribeDelaySeconds;
}

void KafkaSharedConsumer::RequestRewind() { impl_->rewind_requested = true; }

namespace {

/// Reads the consumer protocol's Assignment (big-endian: int16 version,
/// [string topic, [int32 partition]], bytes user data).
class AssignmentReader {
 public:
  AssignmentReader(const void* data, int size)
      : p_(static_cast<const uint8_t*>(data)), end_(p_ + (size > 0 ? size : 0)) {}
  bool Read(std::vector<std::pair<std::string, int32_t>>* out) {
    int16_t version;
    int32_t topics;
    if (!Int(&version) || !Int(&topics) || topics < 0) return false;
    for (int32_t t = 0; t < topics; ++t) {
      int16_t len;
      if (!Int(&len) || len < 0 || end_ - p_ < len) return false;
      std::string topic(reinterpret_cast<const char*>(p_), static_cast<size_t>(len));
      p_ += len;
      int32_t n;
      if (!Int(&n) || n < 0) return false;
      for (int32_t i = 0; i < n; ++i) {
        int32_t partition;
        if (!Int(&partition)) return false;
        out->emplace_back(topic, partition);
      }
    }
    return true;
  }

 private:
  template <typename T>
  bool Int(T* v) {
    if (end_ - p_ < static_cast<std::ptrdiff_t>(sizeof(T))) return false;
    uint64_t x = 0;
    for (size_t i = 0; i < sizeof(T); ++i) x = (x << 8) | p_[i];
    p_ += sizeof(T);
    *v = static_cast<T>(x);
    return true;
  }
  const uint8_t* p_;
  const uint8_t* end_;
};

}  // namespace

Result<KafkaSharedConsumer::GroupDescription> KafkaSharedConsumer::DescribeGroup(
    int timeout_ms) const {
  return DescribeKafkaGroup(impl_->rk, group_id(), timeout_ms);
}

std::vector<KafkaSharedConsumer::PartitionState> KafkaSharedConsumer::PartitionStates() const {
  std::vector<PartitionState> out;
  std::lock_guard<std::mutex> list(impl_->list_mu);
  for (const KafkaConnector::Impl* m : impl_->members) {
    std::lock_guard<std::mutex> lock(m->mu);
    for (const auto& tp : m->assigned) {
      PartitionState st;
      st.topic = tp.first;
      st.partition = tp.second;
      auto first = m->first_offset.find(tp);
      if (first != m->first_offset.end()) st.first_offset = first->second;
      st.rewound = m->rewound.count(tp) > 0;
      st.restored = m->restored_whole.count(tp) > 0;
      out.push_back(std::move(st));
    }
  }
  return out;
}

Result<KafkaSharedConsumer::GroupDescription> DescribeKafkaGroup(void* handle,
                                                                 const std::string& group,
                                                                 int timeout_ms) {
  auto* rk = static_cast<rd_kafka_t*>(handle);
  const rd_kafka_group_list* list = nullptr;
  rd_kafka_resp_err_t err = rd_kafka_list_groups(rk, group.c_str(), &list, timeout_ms);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return Status::IOError("describing consumer group '", group, "': ", rd_kafka_err2str(err));
  }
  KafkaSharedConsumer::GroupDescription out;
  for (int g = 0; list && g < list->group_cnt; ++g) {
    const rd_kafka_group_info& info = list->groups[g];
    if (group != info.group) continue;
    out.state = info.state ? info.state : "";
    for (int m = 0; m < info.member_cnt; ++m) {
      const rd_kafka_group_member_info& mi = info.members[m];
      KafkaSharedConsumer::GroupMember member;
      member.member_id = mi.member_id ? mi.member_id : "";
      member.client_id = mi.client_id ? mi.client_id : "";
      member.host = mi.client_host ? mi.client_host : "";
      AssignmentReader(mi.member_assignment, mi.member_assignment_size).Read(&member.partitions);
      out.members.push_back(std::move(member));
    }
  }
  if (list) rd_kafka_group_list_destroy(list);
  return out;
}

std::string KafkaSharedConsumer::fatal_error() const {
  char reason[512];
  const rd_kafka_resp_err_t err = rd_kafka_fatal_error(impl_->rk, reason, sizeof(reason));
  if (err == RD_KAFKA_RESP_ERR_NO_ERROR) return "";
  return std::string(rd_kafka_err2name(err)) + ": " + reason;
}

void KafkaSharedConsumer::SetCommitter(std::function<Status(const Offsets&)> commit) {
  std::lock_guard<std::mutex> lock(impl_->list_mu);
  impl_->external_commits = static_cast<bool>(commit);
  impl_->committer = std::move(commit);
}

KafkaSharedConsumer::Offsets KafkaSharedConsumer::CommitTargets() const {
  Offsets out;
  std::lock_guard<std::mutex> list(impl_->list_mu);
  for (const KafkaConnector::Impl* m : impl_->members) {
    std::lock_guard<std::mutex> lock(m->mu);
    for (const auto& [tp, offset] : m->commit_target) {
      if (m->assigned.count(tp)) out[tp] = offset;
    }
  }
  return out;
}

void* KafkaSharedConsumer::GroupMetadata() const {
  return rd_kafka_consumer_group_metadata(impl_->rk);
}

Status KafkaSharedConsumer::Leave(double timeout_seconds) {
  {
    std::lock_guard<std::mutex> lock(impl_->members_mu);
    impl_->left = true;
    impl_->resubscribe_at = 0;
  }
  // Unsubscribing sends LeaveGroup (also for a static member): the group
  // rebalances at once; the reader serves the revoke (the members commit and
  // hand their partitions back).
  rd_kafka_resp_err_t err = rd_kafka_unsubscribe(impl_->rk);
  if (err) {
    return Status::IOError("Kafka consumer group '", group_id(), "': leave: ",
                           rd_kafka_err2str(err));
  }
  const double deadline = SteadySeconds() + timeout_seconds;
  while (SteadySeconds() < deadline) {
    {
      std::lock_guard<std::mutex> lock(impl_->mu);
      if (impl_->assignment.empty()) return Status::OK();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return Status::IOError("Kafka consumer group '", group_id(), "': partitions still assigned ",
                         timeout_seconds, " s after leaving");
}

const std::string& KafkaSharedConsumer::group_id() const {
  return impl_->options.config.at("group.id");
}

std::string KafkaSharedConsumer::bootstrap_servers() const {
  auto it = impl_->options.config.find("bootstrap.servers");
  return it != impl_->options.config.end() ? it->second : std::string();
}

std::string KafkaSharedConsumer::instance_id() const {
  auto it = impl_->options.config.find("group.instance.id");
  return it != impl_->options.config.end() ? it->second : std::string();
}

std::vector<KafkaConnector::TopicPartition> KafkaSharedConsumer::assignment() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return {impl_->assignment.begin(), impl_->assignment.end()};
}

KafkaGroupStats KafkaSharedConsumer::stats() const {
  KafkaGroupStats out;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    out = impl_->stats;
  }
  // The partition shards are restored by the members (one per source).
  std::lock_guard<std::mutex> list(impl_->list_mu);
  for (const KafkaConnector::Impl* m : impl_->members) {
    std::lock_guard<std::mutex> lock(m->mu);
    out.partitions_restored += m->group.partitions_restored;
    out.restored_records += m->group.restored_records;
    out.restored_bytes += m->group.restored_bytes;
    out.partitions_dropped += m->group.partitions_dropped;
    out.partitions_from_checkpoint += m->group.partitions_from_checkpoint;
    out.partitions_from_changelog += m->group.partitions_from_changelog;
    out.last_restore_seconds = std::max(out.last_restore_seconds, m->group.last_restore_seconds);
  }
  return out;
}

void KafkaSharedConsumer::SetJoinGate(std::function<bool()> gate) {
  std::lock_guard<std::mutex> lock(impl_->list_mu);
  impl_->join_gate = std::move(gate);
}

void KafkaSharedConsumer::SetShardHook(std::shared_ptr<KafkaShardHook> hook) {
  std::lock_guard<std::mutex> lock(impl_->list_mu);
  impl_->shard_hook = std::move(hook);
}

void KafkaSharedConsumer::AbortRestores() { impl_->abort_restores = true; }

int32_t KafkaSharedConsumer::generation() const {
  rd_kafka_consumer_group_metadata_t* md = rd_kafka_consumer_group_metadata(impl_->rk);
  if (md == nullptr) return -1;
  void* buf = nullptr;
  size_t size = 0;
  rd_kafka_error_t* error = rd_kafka_consumer_group_metadata_write(md, &buf, &size);
  rd_kafka_consumer_group_metadata_destroy(md);
  if (error != nullptr) {
    rd_kafka_error_destroy(error);
    return -1;
  }
  // librdkafka's serialization (the one public reader of the generation):
  // "CGMDv2:", the generation id (int32, host order), then the group id, the
  // member id and the instance id, each NUL-terminated. Anything else: -1.
  int32_t generation = -1;
  const std::string_view bytes(static_cast<const char*>(buf), size);
  const std::string& group = group_id();
  constexpr size_t kMagic = 7;
  if (bytes.substr(0, kMagic) == "CGMDv2:" &&
      bytes.substr(kMagic + sizeof(generation), group.size() + 1) ==
          std::string_view(group.c_str(), group.size() + 1)) {
    std::memcpy(&generation, bytes.data() + kMagic, sizeof(generation));
  }
  rd_kafka_mem_free(nullptr, buf);
  return generation;
}

std::string KafkaSharedConsumer::member_id() const {
  char* id = rd_kafka_memberid(impl_->rk);
  std::string out = id ? id : "";
  if (id) rd_kafka_mem_free(impl_->rk, id);
  return out;
}

}  // namespace rill
