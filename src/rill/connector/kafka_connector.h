// KafkaConnector: NDJSON or Avro messages of Kafka topics (librdkafka consumer).
//
// A reader thread polls a librdkafka consumer, decodes message values (one or
// more NDJSON rows per message, or a JSON array) in batches with JsonDecoder,
// optionally adds metadata columns, and pushes the rows into a BoundedBuffer.
// Per-partition positions (the next offset to read) are kept in the connector
// (positions(), for checkpoints); they advance only past messages whose rows
// and rejects are buffered (a message the decoder cannot read at all is a
// reject holding its bytes; a failed metadata step is an error and the
// messages are decoded again).
//
// Commits (group offsets): never what is only buffered. The engine says what
// it applied (CommitApplied, after each tick: the rows of the last Poll are in
// their table or in rill_rejects) or, with a checkpoint directory, what a
// complete checkpoint holds (CommitCheckpointed); the connector commits exactly
// that, asynchronously, at most every commit_interval_ms, and synchronously on
// Stop. A crash or a stop therefore re-reads at most what was not applied
// (at-least-once with start=committed). Rows dropped by drop_oldest /
// drop_newest are counted in dropped_records and their offsets are committed
// with the rest: the user chose to drop them.
//
// Tombstones (a null value): with key columns (KafkaOptions::key_columns or
// key_format), a delete of the message key's row; without, under format
// debezium, skipped and counted in `tombstones` (Debezium writes one after
// each delete event, for log compaction: the delete event already deleted the
// row); otherwise a reject naming the options. Every tombstone is counted in
// ConnectorStats::tombstones.
//
// Group members (rebalances): a revoke hands the partitions back cleanly and a
// returning partition resumes only where nobody read on (kafka_consumer_internal.h
// has the rules); KafkaGroupStats counts them. Several connectors can share one
// consumer (KafkaSharedConsumer, options.consumer): the Kafka sources of one
// application are then one group member, and partition p of every topic they
// read lands on the same member (the range assignor co-partitions topics).
//
// Partition EOF is not an error. Broker errors (an outage) are counted,
// reported once per outage through Poll (the engine records them as alerts)
// and retried by librdkafka; the connector never stops on them.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "rill/connector/avro_source.h"
#include "rill/connector/bounded_buffer.h"
#include "rill/connector/connector.h"
#include "rill/connector/json_decoder.h"

namespace rill {

/// Where a consumer starts in partitions it has no position for.
enum class KafkaStart {
  kCommitted,  ///< the group's committed offsets (else auto.offset.reset, default earliest)
  kEarliest,
  kLatest,
  kTimestamp,  ///< the first offset at or after `start_timestamp_ms`
};

/// Parse "committed", "earliest", "latest" or "timestamp".
Result<KafkaStart> ParseKafkaStart(std::string_view text);

/// How message keys are read (KafkaOptions::key_format).
enum class KafkaKeyFormat {
  kJson,    ///< "json": a JSON object of the key columns, or a scalar for one column
  kString,  ///< "string": the key bytes are the value of the one key column
};

/// Parse "json" or "string".
Result<KafkaKeyFormat> ParseKafkaKeyFormat(std::string_view text);

class KafkaSharedConsumer;

/// What a consumer went through in its group. Counters are monotonic.
struct KafkaGroupStats {
  int64_t assigns = 0;           ///< assign events (each rebalance has one)
  int64_t revokes = 0;           ///< revoke events
  int64_t partitions_revoked = 0;
  /// Handed-back partitions that came back with the committed offset still
  /// where this member left it (resumed at its own position).
  int64_t partitions_resumed = 0;
  /// Handed-back partitions that came back after another member read on (or
  /// whose committed offset could not be read): resumed at the committed offset.
  int64_t partitions_moved_away = 0;
  /// Partition shards (KafkaShardHook): partitions restored on assign from
  /// the topic (their start up to the group's committed offset), the records
  /// and bytes replayed, the seconds the last restore took, and partitions
  /// whose rows were dropped (gone to another member).
  int64_t partitions_restored = 0;
  int64_t restored_records = 0;
  int64_t restored_bytes = 0;
  double last_restore_seconds = 0;
  int64_t partitions_dropped = 0;
  /// Of partitions_restored: those whose rows came from the instance's local
  /// checkpoint, only the records after it replayed (0 records when the
  /// checkpoint was current).
  int64_t partitions_from_checkpoint = 0;
  /// Of partitions_restored: those read from their table's changelog topic
  /// (`<app>-<table>-changelog`) instead of the input.
  int64_t partitions_from_changelog = 0;
  /// Buffered rows discarded at revokes (read again by whoever owns the
  /// partition next).
  int64_t discarded_records = 0;
  /// Rewinds to the group's committed offsets (RequestRewind: an
  /// application's commit failed, so what was applied since is read again).
  int64_t rewinds = 0;
  double last_rebalance_at = 0;       ///< wall time (s) of the last assign
  double last_rebalance_seconds = 0;  ///< revoke to assign of the last rebalance
};

/// Partition shards of an application's tables (issue 28; cluster/ sets it on
/// the application's consumer). A sharded table holds exactly the rows of the
/// input partitions its instance owns: a partition assigned that the member
/// does not hold is restored by replaying its topic partition from the start
/// up to the group's committed offset before the member reads on, and the
/// rows of partitions that went to another member are dropped. Called on the
/// reader thread, inside a rebalance, in the order Begin, Drop, (the replayed
/// rows are applied), End.
class KafkaShardHook {
 public:
  virtual ~KafkaShardHook() = default;
  /// Whether `table` (a source's target, fed with metadata columns) is held
  /// per partition.
  virtual bool Sharded(const std::string& table) = 0;
  /// A drop or restore of `table`'s shards starts: the outputs so far are
  /// committed, and no commit happens until End.
  virtual void Begin(const std::string& table) = 0;
  /// Delete the rows of `partitions` from `table`.
  virtual void Drop(const std::string& table, const std::vector<int32_t>& partitions) = 0;
  /// The compacted changelog topic `table` is restored from, made on the
  /// first call (its topic and the sink that writes it); "" when the table is
  /// restored by replaying the source's `topics` (compacted: they keep every
  /// key's last record). Default: "".
  virtual std::string Changelog(const std::string& table, const std::vector<std::string>& topics) {
    (void)table;
    (void)topics;
    return std::string();
  }
  /// Restore the rows of `partitions` (dropped before) of `table` from its
  /// changelog `topic`: each partition read to its end (committed records
  /// only); add the records and bytes read. Default: nothing.
  virtual Status RestoreFromChangelog(const std::string& table, const std::string& topic,
                                      const std::vector<int32_t>& partitions, int64_t* records,
                                      int64_t* bytes) {
    (void)table;
    (void)topic;
    (void)partitions;
    (void)records;
    (void)bytes;
    return Status::OK();
  }
  /// `partitions` of `table` (fed by `topics`) were not held and are
  /// restored now (from the input, a changelog or the local checkpoint):
  /// the state of the tasks over it (Task::PartitionedStateTable) is restored
  /// too. Called after the restore's rows are applied, before End. Default:
  /// nothing.
  virtual void Restored(const std::string& table, const std::vector<std::string>& topics,
                        const std::vector<int32_t>& partitions) {
    (void)table;
    (void)topics;
    (void)partitions;
  }
  /// The drop and the replayed rows are applied to `table`: they are moves,
  /// not changes, for its sinks; commits go on.
  virtual void End(const std::string& table) = 0;
};

/// Options of a KafkaConnector.
struct KafkaOptions {
  std::vector<std::string> topics;
  /// librdkafka configuration, passed through (bootstrap.servers, group.id,
  /// security.*, …). group.id defaults to "rill-<connector name>";
  /// enable.auto.commit is forced off (the connector commits what the engine
  /// applied, see the file comment).
  std::map<std::string, std::string> config;
  KafkaStart start = KafkaStart::kCommitted;
  int64_t start_timestamp_ms = 0;
  /// Add columns _topic (utf8), _partition (int32), _offset (int64),
  /// _key (binary) and _timestamp (timestamp[ms]) to every row.
  bool metadata_columns = false;
  int64_t poll_timeout_ms = 100;
  int64_t max_batch_messages = 10000;  ///< messages decoded together
  /// At most one asynchronous offset commit per interval (0: one per tick
  /// with new applied rows); Stop and checkpoints commit at once.
  int64_t commit_interval_ms = 100;
  /// The pool of the arrays the connector builds itself (metadata columns);
  /// null: Arrow's default pool.
  arrow::MemoryPool* pool = nullptr;
  /// Decoding of the message values: format json or debezium, op_column,
  /// ts_ms_column (json_decoder.h).
  JsonDecodeOptions decode;
  /// The columns the message key holds (docs/debezium.md, "Kafka keys and
  /// tombstones"): the key is JSON, an object with these columns (or, for one
  /// column, a JSON scalar; Debezium's {"schema", "payload"} wrapper is
  /// unwrapped). A message with a key and a null value (a tombstone) then
  /// deletes that key; the key also fills these columns of upsert rows whose
  /// value lacks them (null or missing). Empty: keys are not read, except with
  /// key_format kString.
  std::vector<std::string> key_columns;
  /// kString: the key bytes are the value of the single key column
  /// (key_columns' one column, else the target table's one-column primary key).
  KafkaKeyFormat key_format = KafkaKeyFormat::kJson;
  /// Message value format: "json" (NDJSON, or the Debezium envelope with
  /// decode.format, the default) or "avro" (one Avro record per message: the
  /// Confluent wire format with schemas from `avro.schema_registry_url`, or
  /// plain Avro binary of `avro.avro_schema`; decoded into `decode.schema` or
  /// the target table's schema; docs/avro.md).
  std::string format = "json";
  AvroSourceOptions avro;
  BufferLimits limits;
  std::string name;
  /// When the engine is an instance of an application (cluster/), read
  /// through the application's consumer group (JoinGroup). False: this source
  /// keeps a consumer of its own (a global view's partials: every instance
  /// reads every partition).
  bool application_group = true;
  /// Read through this consumer, shared with other connectors (its group and
  /// configuration apply; `config` is then used only for the Avro source);
  /// null: a consumer of the connector's own.
  std::shared_ptr<KafkaSharedConsumer> consumer;
};

/// Reads Kafka topics on its own thread.
///
/// Threads: Start/Stop from the engine; Poll/TakeRejects/CommitApplied from the
/// tick thread; CommitCheckpointed from the checkpoint writer; stats(),
/// positions(), commit_target() and lags() from any thread.
class KafkaConnector : public Connector {
 public:
  /// (topic, partition)
  using TopicPartition = std::pair<std::string, int32_t>;

  /// Make a connector (creates the librdkafka consumer, does not subscribe).
  /// Invalid for a bad option or configuration (librdkafka's message kept).
  static Result<std::shared_ptr<KafkaConnector>> Make(std::string target_table,
                                                      KafkaOptions options);
  ~KafkaConnector() override;

  /// Read through `consumer` (an application's shared consumer) from now on
  /// instead of a consumer of its own, unless this source names another
  /// cluster (its bootstrap.servers differ: it keeps its own consumer). The
  /// source's group.id no longer applies: the application is the group.
  /// Invalid once started. Any thread, before Start.
  Status JoinGroup(std::shared_ptr<KafkaSharedConsumer> consumer);
  /// bootstrap.servers of the connector's own configuration ("" when unset).
  std::string bootstrap_servers() const;
  /// Subscribe and start the reader thread. After a Stop, messages the reader
  /// had taken from librdkafka but not buffered are read again.
  Status Start() override;
  /// Stop the thread and commit (synchronously) what the engine last allowed:
  /// rows still buffered are not committed. The consumer is closed (leaving the
  /// group) by the destructor.
  void Stop() override;
  /// The buffered rows; once per broker outage or failed metadata step, IOError
  /// describing it (the rows stay buffered for the next call).
  Result<std::vector<std::shared_ptr<arrow::RecordBatch>>> Poll() override;
  /// The rejects of the messages the last Poll passed (with topic, partition
  /// and offset in `position`, the bytes in `raw`).
  std::vector<RejectedRecord> TakeRejects() override;
  /// The rows of the last Poll are applied (a revoke waits for this).
  void Applied() override;
  /// Commit the positions as of the last Poll (asynchronous; synchronous after
  /// Stop).
  void CommitApplied() override;
  /// Commit the offsets of a checkpoint's position document (nothing for an
  /// application's source: its commits follow the ticks).
  void CommitCheckpointed(std::string_view position) override;
  /// True for an application's source (a shared consumer).
  bool CommitsFollowTicks() const override;
  /// The group.id (default "rill-<connector name>").
  std::string source_group() const override;
  void SetTargetSchema(const std::shared_ptr<arrow::Schema>& schema) override;
  ConnectorStats stats() const override;

  /// {"partitions": [{"topic", "partition", "offset"}, ...]}: the next offset
  /// per partition as of the last Poll (exactly the messages whose rows Poll
  /// returned). Tick thread.
  Result<std::string> SavePosition() const override;
  /// Resume at the offsets of `position`: buffered rows are discarded (fetched
  /// again), assigned partitions seek there, later assignments start there;
  /// partitions the position does not name start from the configured start,
  /// where kCommitted means earliest (the group's committed offsets can be
  /// ahead of the checkpoint: rows read after it would be lost). The offsets
  /// are committed to the group.
  ///
  /// An application's source (a shared consumer) is different: the group's
  /// committed offsets say where it reads on, and the position only says up
  /// to where the restored table holds each partition. A partition shard
  /// (KafkaShardHook) assigned at the first rebalance keeps the checkpoint's
  /// rows when the group's committed offset is at or past the checkpoint's,
  /// and replays only the records between the two; the checkpoint's other
  /// partitions are dropped. Invalid once the source reads (restore before
  /// the engine starts).
  Status RestorePosition(std::string_view position) override;
  /// False for an application's source into a table that is not held per
  /// partition (it starts empty; the records since the checkpoint were
  /// applied and committed by the instance that crashed).
  bool RestoresTableFromCheckpoint() const override;

  /// The next offset to read per partition (what was buffered so far).
  std::map<TopicPartition, int64_t> positions() const;
  /// The offsets the engine last allowed to commit (sent or about to be).
  std::map<TopicPartition, int64_t> commit_target() const;
  /// High watermark minus position per assigned partition (last known).
  std::map<TopicPartition, int64_t> lags() const;
  /// The partitions of this connector's topics its consumer owns now.
  std::vector<TopicPartition> assigned() const;
  KafkaGroupStats group_stats() const;

  struct Impl;

 private:
  KafkaConnector(std::string target_table, KafkaOptions options);
  std::unique_ptr<Impl> impl_;
};

/// Options of a KafkaSharedConsumer.
struct KafkaSharedConsumerOptions {
  /// librdkafka configuration: bootstrap.servers, group.id (required),
  /// group.instance.id (static membership), security.*, ...
  /// partition.assignment.strategy defaults to "range" (topics are
  /// co-partitioned: partition p of each topic goes to the same member),
  /// enable.auto.commit is forced off and enable.partition.eof on.
  std::map<std::string, std::string> config;
  int64_t poll_timeout_ms = 100;
  int64_t max_batch_messages = 10000;  ///< messages taken per poll round
};

/// One Kafka consumer (one group member) that several KafkaConnectors read
/// through: it subscribes to the union of their topics, routes each message to
/// the connector of its topic and each rebalance to every connector, on one
/// reader thread. Connectors attach on Start and detach on Stop (the
/// subscription follows, one rebalance for changes made together); when the
/// last one detaches the subscription stays, and the consumer closes when its
/// last owner lets it go (destructor): a static member (group.instance.id)
/// then keeps its partitions for the session timeout, so that a restart gets
/// them back without a rebalance; Leave() hands them over at once.
///
/// The range assignor (the default here; librdkafka 2.0.2's cooperative-sticky
/// close path can crash or hang during a rebalance) gives partition p of every
/// topic with the same partition count to one member, so a join or an
/// aggregate over topics keyed alike sees all of a key's rows on one instance.
///
/// Threads: any; stats() and assignment() from any thread.
class KafkaSharedConsumer {
 public:
  /// Make the consumer (no subscription until a connector starts). Invalid
  /// without group.id or for configuration librdkafka refuses.
  static Result<std::shared_ptr<KafkaSharedConsumer>> Make(KafkaSharedConsumerOptions options);
  ~KafkaSharedConsumer();

  const std::string& group_id() const;
  /// bootstrap.servers of its configuration.
  std::string bootstrap_servers() const;
  /// group.instance.id, "" without static membership.
  std::string instance_id() const;
  /// The partitions this member owns now (all topics).
  std::vector<KafkaConnector::TopicPartition> assignment() const;
  KafkaGroupStats stats() const;
  /// The member id the group coordinator gave this member ("" before joining).
  std::string member_id() const;
  /// The group generation this member last joined (-1 before joining).
  int32_t generation() const;
  /// Hold the tables of the members' sources per partition (see
  /// KafkaShardHook); null: no shards. Before the members start.
  void SetShardHook(std::shared_ptr<KafkaShardHook> hook);
  /// Join the group only once `gate` returns true (the reader asks before
  /// each subscription): an application joins after its engine's first tick,
  /// so that a checkpoint restored before it is in place when the partitions
  /// are assigned. Null: at once. Any thread.
  void SetJoinGate(std::function<bool()> gate);
  /// The engine stops applying rows: a restore under way (and any member
  /// waiting for room) gives up instead of waiting. For good.
  void AbortRestores();

  /// For KafkaConnector: read for `member` too (subscribe to its topics) /
  /// stop reading for it; Detach returns when the reader is not inside one of
  /// the member's calls and never will be again.
  Status Attach(KafkaConnector::Impl* member);
  void Detach(KafkaConnector::Impl* member);
  /// Offsets as (topic, partition) -> next offset.
  using Offsets = std::map<KafkaConnector::TopicPartition, int64_t>;
  /// Commit through `commit` from now on (an application's transactional
  /// producer, cluster/): the connectors no longer commit offsets themselves;
  /// CommitTargets() gives what they allow, and a revoke calls `commit` with
  /// the revoked partitions' offsets before handing them back (synchronously).
  /// Null: the connectors commit to the group themselves. Any thread.
  void SetCommitter(std::function<Status(const Offsets&)> commit);
  /// Read every owned partition again from the group's committed offset: the
  /// reader thread, before its next poll, discards what is buffered, waits
  /// until the engine applied its last poll, and seeks (an application's
  /// transaction failed: what was applied since its last commit is not
  /// committed anywhere, and is read again). Any thread.
  void RequestRewind();
  /// One member of the group as the coordinator describes it.
  struct GroupMember {
    std::string member_id;
    std::string client_id;  ///< an application instance's is "<app_id>-<instance_id>"
    std::string host;
    std::vector<std::pair<std::string, int32_t>> partitions;  ///< its assignment
  };
  struct GroupDescription {
    std::string state;  ///< "Stable", "PreparingRebalance", "CompletingRebalance", ...
    std::vector<GroupMember> members;
  };
  /// The group's members and their assignments (ListGroups for this group,
  /// the consumer protocol's assignment decoded), waiting up to `timeout_ms`.
  Result<GroupDescription> DescribeGroup(int timeout_ms) const;
  /// What this member's tables hold of each partition it owns: the offset of
  /// the first row delivered since the partition was assigned (-1: none yet),
  /// whether a rewind since may have applied rows twice, and whether the
  /// partition was restored whole on assign (a partition shard, from the
  /// input, the changelog or the local checkpoint).
  struct PartitionState {
    std::string topic;
    int32_t partition = 0;
    int64_t first_offset = -1;
    bool rewound = false;
    bool restored = false;
  };
  std::vector<PartitionState> PartitionStates() const;
  /// librdkafka's fatal error of the consumer ("" when none), e.g. another
  /// process joined with this group.instance.id (FENCED_INSTANCE_ID).
  std::string fatal_error() const;
  /// What the connectors allow to commit now (their commit targets), for the
  /// partitions they own. Any thread.
  Offsets CommitTargets() const;
  /// The consumer's group metadata (generation, member id) for a
  /// transactional producer's send_offsets_to_transaction; the caller frees
  /// it with rd_kafka_consumer_group_metadata_destroy. Any thread.
  void* GroupMetadata() const;
  /// Leave the group now (LeaveGroup, also as a static member): the members
  /// commit and hand their partitions back, and the group gives them to the
  /// other instances at once instead of after the session timeout. Returns
  /// when nothing is assigned any more (IOError after `timeout_seconds`). The
  /// consumer reads nothing afterwards.
  Status Leave(double timeout_seconds);

  struct Impl;
  /// The consumer's state, for the connectors reading through it.
  Impl* impl() const { return impl_.get(); }

 private:
  explicit KafkaSharedConsumer(KafkaSharedConsumerOptions options);
  std::unique_ptr<Impl> impl_;
};

/// An in-process Kafka cluster (librdkafka's mock cluster) for tests and
/// benchmarks, listening on 127.0.0.1. Any thread.
class KafkaMockCluster {
 public:
  /// Start a cluster of `brokers` brokers.
  static Result<std::unique_ptr<KafkaMockCluster>> Make(int brokers = 1);
  ~KafkaMockCluster();

  /// "127.0.0.1:port,…", for bootstrap.servers.
  std::string bootstrap_servers() const;
  Status CreateTopic(const std::string& topic, int partitions);
  /// Produce one message and wait for its delivery. partition -1: any.
  Status Produce(const std::string& topic, int32_t partition, std::string_view value,
                 std::string_view key = {}, int64_t timestamp_ms = 0);
  /// Produce many messages (librdkafka's default partitioner) and wait.
  Status ProduceMany(const std::string& topic, const std::vector<std::string>& values);
  /// The offsets consumer group `group` has committed for partitions 0..n-1 of
  /// `topic` (-1001: none), asked by a consumer of its own that does not join.
  Result<std::vector<int64_t>> CommittedOffsets(const std::string& group,
                                                const std::string& topic, int partitions);
  /// Take a broker down / bring it back (ids start at 1).
  Status SetBrokerDown(int broker_id, bool down);

  struct Impl;

 private:
  explicit KafkaMockCluster(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// ListGroups for `group` through any client `rk` (an rd_kafka_t*): its
/// state and members with their decoded consumer-protocol assignments.
Result<KafkaSharedConsumer::GroupDescription> DescribeKafkaGroup(void* rk,
                                                                 const std::string& group,
                                                                 int timeout_ms);

}  // namespace rill
