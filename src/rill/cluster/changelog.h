// Changelogs: the compacted topics `<app_id>-<table>-changelog` an instance
// writes for its partition shards that replaying the input cannot rebuild.
//
// A keyed table held per input partition (a partition shard, see
// KafkaShardHook) is restored on assign by replaying its input topic up to the
// group's committed offset. That takes every record the table needs: a
// compacted topic keeps each key's last one, a topic with a retention time
// loses old keys. A table fed by a topic that is not compacted gets a
// changelog instead:
//   - a driven Kafka sink (mode upsert, keyed by the table's primary key, the
//     row's `_partition` choosing the topic partition) writes the table's
//     changes in the instance's transactions, with the input offsets of the
//     same cut; only the rows of partitions the instance owns, and never the
//     moves of a restore or a drop;
//   - a restore reads the changelog's partition p from its start to its end
//     (read_committed: what the committed offsets hold) and upserts each
//     key's last row; tombstones remove keys.
// The topic has as many partitions as the input, so changelog partition p
// holds exactly input partition p's rows.
//
// Threads: every method from any thread (the reader thread in a rebalance).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "rill/common/status.h"

namespace rill {

class Engine;
class DrivenSinks;

namespace cluster {

/// "<app_id>-<table>-changelog".
std::string ChangelogTopic(const std::string& app_id, const std::string& table);

/// Whether every topic of `topics` has cleanup.policy compact (a
/// DescribeConfigs through `rk`, an rd_kafka_t*). IOError when the cluster
/// does not answer.
Result<bool> TopicsCompacted(void* rk, const std::vector<std::string>& topics);

class Changelogs {
 public:
  /// `config`: the cluster's bootstrap.servers and security settings.
  /// `own_partitions_only(sink, column)`: make a driven sink write only the
  /// rows of partitions the instance owns.
  Changelogs(Engine* engine, std::string app_id, std::map<std::string, std::string> config,
             std::shared_ptr<DrivenSinks> driven,
             std::function<Status(const std::string&, const std::string&)> own_partitions_only);

  /// The changelog topic of `table`, fed by `topics`: made on the first call
  /// when the topics are not all compacted (the topic, compacted, with as
  /// many partitions as the most of theirs; the sink "<table>__changelog",
  /// starting at the table's current version); "" otherwise, and when the
  /// changelog cannot be made (the error goes to the engine's events, and the
  /// table is restored from the input).
  std::string For(const std::string& table, const std::vector<std::string>& topics);
  /// The changelog of a task's partitioned state table `table` over an input
  /// fed by `topics` (window_task.h): made on the first call whatever the
  /// topics' cleanup policy. `skip_existing`: the rows the table holds now
  /// are not written (they are in the changelog already, or about to be
  /// replaced by a restore from it); otherwise they are, as a snapshot.
  std::string ForState(const std::string& table, const std::vector<std::string>& topics,
                       bool skip_existing);

  /// Upsert into `table` each key's last row in `partitions` of `topic`
  /// (tombstones drop a key), at tick boundaries; add the records and bytes
  /// read.
  Status Restore(const std::string& table, const std::string& topic,
                 const std::vector<int32_t>& partitions, int64_t* records, int64_t* bytes);

 private:
  std::string Get(const std::string& table, const std::vector<std::string>& topics, bool state,
                  bool skip_existing);
  Result<std::string> Make(const std::string& table, const std::vector<std::string>& topics,
                           bool state, bool skip_existing);

  Engine* engine_;
  const std::string app_id_;
  const std::map<std::string, std::string> config_;
  std::shared_ptr<DrivenSinks> driven_;
  std::function<Status(const std::string&, const std::string&)> own_partitions_only_;
  std::mutex mu_;
  std::map<std::string, std::string> topics_;  // guarded by mu_: table -> changelog ("": none)
};

}  // namespace cluster
}  // namespace rill
