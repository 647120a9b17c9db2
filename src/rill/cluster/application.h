// Application: this engine as one instance of a scaled-out Rill application.
//
// An application is a Kafka consumer group (shared/DESIGN.md, "Scale-out"):
// every instance started with the same app_id reads the application's input
// topics as one member of the group `app_id`, with static membership
// (group.instance.id = instance_id: a restart within the session timeout
// causes no rebalance) and the range assignor, so that partition p of every
// input topic lands on the same instance (co-partitioned topics: joins and
// aggregates keyed like the input see all of a key's rows on one instance).
//
//     ClusterOptions o;
//     o.app_id = "orders-app";
//     o.instance_id = "node-1";
//     o.bootstrap_servers = "127.0.0.1:9092";
//     RILL_ASSIGN_OR_RAISE(Application* app, Application::Start(engine, o));
//     ... engine->AddConnector(kafka_source) ...  // reads through the group
//     app->status();                              // partitions owned, rebalances
//
// Start sets the engine's Kafka group (Engine::SetKafkaGroup): from then on
// every Kafka source added to the engine on the same cluster reads through the
// application's one consumer, and its own group.id no longer applies.
//
// Threads: Start and For from any thread; status() from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "rill/common/status.h"
#include "rill/cluster/instance_committer.h"
#include "rill/connector/kafka_connector.h"

namespace rill {

class Engine;

namespace cluster {

/// How an instance joins its application (the pipeline file's `cluster:`
/// section, RillEngine(app_id=, instance_id=, ...), `rill serve --instance-id`).
struct ClusterOptions {
  /// The application: its consumer group, and the prefix of the topics it
  /// creates ("<app_id>-<table>-changelog"). Letters, digits, '.', '_', '-'.
  std::string app_id;
  /// This instance, unique and stable per instance (static membership).
  std::string instance_id;
  /// The Kafka cluster ("host:port,..."); "" takes the first Kafka source's.
  std::string bootstrap_servers;
  /// Partitions of the topics of the global views' partial aggregates; 0: as
  /// many as the input topics have. A changelog always has as many as its
  /// table's input (partition p holds input partition p's rows).
  int partitions_per_table = 0;
  /// How often the instance commits its outputs and input offsets (ms, > 0).
  int64_t commit_interval_ms = 100;
  /// The group's session timeout (ms): how long a silent instance keeps its
  /// partitions (and a restart within it causes no rebalance).
  int64_t session_timeout_ms = 10000;
  /// More librdkafka properties of the consumer (security.*, ...).
  std::map<std::string, std::string> kafka_config;
  /// Leave the group when the instance stops (its partitions go to the others
  /// at once). Off: a stopped instance keeps its partitions for the session
  /// timeout, so that a restart within it causes no rebalance.
  bool leave_on_stop = false;
  /// Commit the input offsets (and, as issue 28 goes on, the outputs) in
  /// transactions of one producer per instance, transactional.id
  /// "<app_id>-<instance_id>" (instance_committer.h): a zombie of this
  /// instance is fenced. Off: the sources commit to the group themselves.
  bool exactly_once = true;
};

/// Invalid (naming the option) for an empty or malformed app_id or
/// instance_id, or values out of range.
Status ValidateClusterOptions(const ClusterOptions& options);

/// Where the instance stands in its group.
struct ClusterStatus {
  std::string app_id;
  std::string instance_id;
  std::string member_id;  ///< the coordinator's id of this member ("" before joining)
  int32_t generation = -1;  ///< the group generation it last joined (-1 before)
  std::string bootstrap_servers;
  /// The input partitions this instance owns now (topic, partition).
  std::vector<std::pair<std::string, int32_t>> partitions;
  KafkaGroupStats group;
  /// The transactional commits (exactly_once).
  CommitterStats commits;
  /// The whole application as the group's coordinator describes it (read at
  /// most once a second): its state and every member with its partitions.
  std::string group_state;
  std::vector<KafkaSharedConsumer::GroupMember> members;
  std::string members_error;  ///< why the description could not be read
  std::vector<KafkaSharedConsumer::PartitionState> partition_states;
};

/// The topic an application's members announce their servers on.
std::string MembersTopic(const std::string& app_id);
/// Create `topic` (cleanup.policy=compact) with `partitions` partitions on the
/// cluster of `rk` (an rd_kafka_t*) unless it exists.
Status EnsureCompactedTopic(void* rk, const std::string& topic, int partitions, int timeout_ms);

/// The instance as one JSON object: app_id, instance_id, member_id,
/// generation, bootstrap_servers, partitions ([{"topic", "partition"}]), assigns, revokes,
/// partitions_revoked, last_rebalance_at, last_rebalance_seconds,
/// commit_interval_ms, partitions_per_table, exactly_once, commits,
/// commit_aborts, last_commit_ms, max_commit_ms, producer_restarts, rewinds,
/// fenced, last_commit_error, group_state, members ([{"member_id",
/// "instance_id", "client_id", "host", "partitions": [{"topic",
/// "partition"}]}], every member of the application), members_error,
/// partition_states ([{"topic", "partition", "first_offset", "rewound", "restored"}]: what
/// this instance's tables hold of each partition it owns).
/// (GET /api/v1/telemetry/cluster and RillEngine.cluster_status().)
class Application;
std::string ClusterStatusJson(const Application& app);

/// This engine's membership in its application (an extension of the engine,
/// destroyed with it).
class Application {
 public:
  virtual ~Application() = default;

  /// Make this engine an instance of `options.app_id`. Invalid for bad
  /// options, or when the engine already is an instance (of another app_id or
  /// instance_id; the same options again return the running one). Without
  /// bootstrap_servers, the consumer is made when the first Kafka source
  /// arrives (EnsureConsumer).
  static Result<Application*> Start(Engine* engine, ClusterOptions options);
  /// The engine's application; null when it is none's instance.
  static Application* For(Engine* engine);

  virtual const ClusterOptions& options() const = 0;
  /// Make the group's consumer on `bootstrap_servers` if there is none yet
  /// (the first Kafka source's cluster, when the options named none).
  virtual Status EnsureConsumer(const std::string& bootstrap_servers) = 0;
  /// The group's consumer (null until made).
  virtual std::shared_ptr<KafkaSharedConsumer> consumer() const = 0;
  virtual ClusterStatus status() const = 0;
  /// Announce where this instance answers queries: `url` (its HTTP base,
  /// "http://host:port") as the value of key instance_id on the compacted
  /// topic "<app_id>-members" (created when missing), which `rill query
  /// --app` reads to find the members' servers. IOError when the cluster
  /// cannot be reached; Invalid before the consumer exists.
  virtual Status PublishMember(const std::string& url) = 0;
  /// Write, of the rows of driven sink `sink_name`, only those whose int32
  /// column `partition_column` is a partition this instance owns now (a global
  /// view's partials of a keyed table: a partition's partials come from its
  /// owner alone). OK and nothing when the sinks are not driven
  /// (exactly_once off).
  virtual Status WriteOwnedPartitionsOnly(const std::string& sink_name,
                                          const std::string& partition_column) = 0;
  /// Share global view `name` with the application's other instances: its
  /// CREATE `statement` (null: it was dropped) on the compacted topic
  /// "<app_id>-views", which every instance declares from (view_sharing.h).
  /// Nothing before the consumer exists, and for what an instance applies
  /// from that topic.
  virtual void ShareView(const std::string& name, const std::string* statement) = 0;
  /// Leave the group now (KafkaSharedConsumer::Leave): the partitions are
  /// committed and handed to the other instances at once. Call while the
  /// engine still ticks (its last polled rows are applied first). OK when
  /// there is no consumer.
  virtual Status Leave(double timeout_seconds) = 0;
};

}  // namespace cluster
}  // namespace rill
