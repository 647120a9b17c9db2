// InstanceCommitter: an application instance's one transactional producer.
//
// transactional.id = "<app_id>-<instance_id>": init_transactions fences an
// earlier producer with the same id (a zombie of this instance: SIGSTOPped
// past its session timeout, or a restart's predecessor) and aborts its open
// transaction. Every commit is one transaction that carries the input offsets
// (send_offsets_to_transaction with the consumer's group metadata, so that a
// member fenced out of the group by a rebalance cannot commit either: KIP-447)
// and the output of the same cut (the application's Kafka sinks, written by
// `produce`): read_committed readers see each interval's effects once.
//
// Errors: an abortable one aborts the transaction; a fatal one (fenced: a
// zombie of this instance woke up after its transaction timed out or a newer
// producer took the id) is sticky until Restart. Either way the application
// discards the cut's outputs and rewinds its inputs to the committed offsets,
// and restarts a fenced producer while its consumer is still the group's
// member for its instance_id.
//
// Threads: Commit from any thread (serialized); stats() from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "rill/common/status.h"
#include "rill/connector/kafka_connector.h"

namespace rill::cluster {

struct CommitterStats {
  int64_t commits = 0;           ///< committed transactions
  int64_t aborts = 0;            ///< aborted after an abortable error
  double last_commit_ms = 0;     ///< duration of the last commit
  double max_commit_ms = 0;
  bool fenced = false;           ///< a fatal error now: another producer took the id
  /// Producers made again after a fatal error (the next commit after it).
  int64_t producer_restarts = 0;
  std::string last_error;
};

class InstanceCommitter {
 public:
  /// Make the producer and init its transactions (fencing a zombie), waiting
  /// up to `timeout_ms`. IOError when the cluster cannot be reached.
  static Result<std::unique_ptr<InstanceCommitter>> Make(
      const std::string& transactional_id, const std::string& bootstrap_servers,
      const std::map<std::string, std::string>& kafka_config,
      std::shared_ptr<KafkaSharedConsumer> consumer, int64_t timeout_ms);
  ~InstanceCommitter();

  /// Commit `offsets` (the group's next offsets) and what `produce` writes
  /// with the producer (an rd_kafka_t*, its transaction open) in one
  /// transaction. OK without doing anything when there are no offsets and no
  /// `produce`. A failing `produce` aborts the transaction.
  Status Commit(const KafkaSharedConsumer::Offsets& offsets,
                const std::function<Status(void* producer)>& produce = nullptr);
  CommitterStats stats() const;
  /// After a fatal error: a new producer with the same transactional.id
  /// (init_transactions bumps the epoch, fencing whoever holds it now). Only
  /// for an instance that is still the group's member for its instance_id (a
  /// zombie woken after its transaction timed out); two live processes with
  /// one instance_id would take turns. OK when not failed.
  Status Restart();

 private:
  InstanceCommitter() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rill::cluster
