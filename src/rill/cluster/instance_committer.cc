#include "rill/cluster/instance_committer.h"

#include <librdkafka/rdkafka.h>

#include <chrono>

#include "rill/connector/kafka_client.h"

namespace rill::cluster {

namespace {

struct ErrorDeleter {
  void operator()(rd_kafka_error_t* e) const { rd_kafka_error_destroy(e); }
};
using ErrorPtr = std::unique_ptr<rd_kafka_error_t, ErrorDeleter>;
struct ListDeleter {
  void operator()(rd_kafka_topic_partition_list_t* l) const {
    rd_kafka_topic_partition_list_destroy(l);
  }
};
using ListPtr = std::unique_ptr<rd_kafka_topic_partition_list_t, ListDeleter>;

}  // namespace

struct InstanceCommitter::Impl {
  rd_kafka_t* producer = nullptr;
  std::shared_ptr<KafkaSharedConsumer> consumer;
  int64_t timeout_ms = 10000;
  std::mutex commit_mu;  // one transaction at a time
  mutable std::mutex mu;
  CommitterStats stats;  // guarded by mu
  Status fatal;          // guarded by commit_mu: sticky

  ~Impl() {
    if (producer) rd_kafka_destroy(producer);
  }

  std::string transactional_id;
  std::map<std::string, std::string> config;

  Status Recreate() {
    if (producer) rd_kafka_destroy(producer);
    producer = nullptr;
    RILL_ASSIGN_OR_RAISE(producer,
                         MakeKafkaClient(RD_KAFKA_PRODUCER, config, "application producer"));
    ErrorPtr error(rd_kafka_init_transactions(producer, static_cast<int>(timeout_ms)));
    if (error) {
      return Status::IOError("application '", transactional_id,
                             "': init_transactions: ", rd_kafka_error_string(error.get()));
    }
    fatal = Status::OK();
    std::lock_guard<std::mutex> lock(mu);
    stats.fenced = false;
    ++stats.producer_restarts;
    return Status::OK();
  }

  /// Abort the open transaction and count it.
  void Abort() {
    ErrorPtr aborted(rd_kafka_abort_transaction(producer, static_cast<int>(timeout_ms)));
    std::lock_guard<std::mutex> lock(mu);
    ++stats.aborts;
  }

  /// The Status of transaction step `step` failing with `e` (commit_mu held):
  /// a fatal error is remembered (sticky until Restart); one that requires it
  /// aborts the transaction.
  Status Failed(ErrorPtr e, const char* step) {
    const std::string what = std::string(step) + ": " + rd_kafka_error_string(e.get());
    if (rd_kafka_error_is_fatal(e.get())) {
      fatal = Status::IOError("application producer fenced or failed for good: ", what);
      Fail(what, /*fenced=*/true);
      return fatal;
    }
    if (rd_kafka_error_txn_requires_abort(e.get())) Abort();
    Fail(what, /*fenced=*/false);
    return Status::IOError("application commit: ", what);
  }

  void Fail(const std::string& what, bool fenced) {
    std::lock_guard<std::mutex> lock(mu);
    stats.last_error = what;
    stats.fenced |= fenced;
  }
};

Result<std::unique_ptr<InstanceCommitter>> InstanceCommitter::Make(
    const std::string& transactional_id, const std::string& bootstrap_servers,
    const std::map<std::string, std::string>& kafka_config,
    std::shared_ptr<KafkaSharedConsumer> consumer, int64_t timeout_ms) {
  std::unique_ptr<InstanceCommitter> c(new InstanceCommitter());
  c->impl_ = std::make_unique<Impl>();
  Impl& impl = *c->impl_;
  impl.consumer = std::move(consumer);
  impl.timeout_ms = timeout_ms;
  // Security settings of the consumer apply, and transaction.timeout.ms (how
  // long a crashed instance's open transaction holds read_committed readers
  // back before the broker aborts it); consumer-only ones do not.
  std::map<std::string, std::string> config = KafkaSecurityConfig(kafka_config);
  if (auto t = kafka_config.find("transaction.timeout.ms"); t != kafka_config.end()) {
    config[t->first] = t->second;
  }
  config["bootstrap.servers"] = bootstrap_servers;
  config["transactional.id"] = transactional_id;
  config["enable.idempotence"] = "true";
  config.emplace("transaction.timeout.ms", "60000");
  impl.transactional_id = transactional_id;
  impl.config = config;
  RILL_ASSIGN_OR_RAISE(impl.producer,
                       MakeKafkaClient(RD_KAFKA_PRODUCER, config, "application producer"));
  ErrorPtr error(rd_kafka_init_transactions(impl.producer, static_cast<int>(timeout_ms)));
  if (error) {
    return Status::IOError("application '", transactional_id,
                           "': init_transactions: ", rd_kafka_error_string(error.get()));
  }
  return c;
}

InstanceCommitter::~InstanceCommitter() = default;

Status InstanceCommitter::Commit(const KafkaSharedConsumer::Offsets& offsets,
                                 const std::function<Status(void* producer)>& produce) {
  if (offsets.empty() && !produce) return Status::OK();
  Impl& impl = *impl_;
  std::lock_guard<std::mutex> serial(impl.commit_mu);
  if (!impl.fatal.ok()) return impl.fatal;
  const auto t0 = std::chrono::steady_clock::now();
  const int timeout = static_cast<int>(impl.timeout_ms);
  if (ErrorPtr e{rd_kafka_begin_transaction(impl.producer)}) {
    return impl.Failed(std::move(e), "begin_transaction");
  }
  if (produce) {
    Status st = produce(impl.producer);
    if (!st.ok()) {
      impl.Abort();
      impl.Fail(st.ToString(), /*fenced=*/false);
      return st;
    }
  }
  if (!offsets.empty()) {
    ListPtr list(rd_kafka_topic_partition_list_new(static_cast<int>(offsets.size())));
    for (const auto& [tp, offset] : offsets) {
      rd_kafka_topic_partition_list_add(list.get(), tp.first.c_str(), tp.second)->offset = offset;
    }
    auto* metadata =
        static_cast<rd_kafka_consumer_group_metadata_t*>(impl.consumer->GroupMetadata());
    ErrorPtr sent(
        rd_kafka_send_offsets_to_transaction(impl.producer, list.get(), metadata, timeout));
    rd_kafka_consumer_group_metadata_destroy(metadata);
    if (sent) return impl.Failed(std::move(sent), "send_offsets_to_transaction");
  }
  for (int attempt = 0;; ++attempt) {
    ErrorPtr e(rd_kafka_commit_transaction(impl.producer, timeout));
    if (!e) break;
    // Retriable (a timeout): the outcome is unknown until asked again.
    if (rd_kafka_error_is_retriable(e.get()) && attempt < 3) continue;
    return impl.Failed(std::move(e), "commit_transaction");
  }
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::lock_guard<std::mutex> lock(impl.mu);
  ++impl.stats.commits;
  impl.stats.last_commit_ms = ms;
  impl.stats.max_commit_ms = std::max(impl.stats.max_commit_ms, ms);
  return Status::OK();
}

Status InstanceCommitter::Restart() {
  std::lock_guard<std::mutex> serial(impl_->commit_mu);
  if (impl_->fatal.ok()) return Status::OK();
  return impl_->Recreate();
}

CommitterStats InstanceCommitter::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->stats;
}

}  // namespace rill::cluster
