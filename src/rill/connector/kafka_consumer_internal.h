// The consumer half of KafkaConnector (kafka_consumer.cc): reading, positions,
// commits and partition ownership across rebalances, shared by the connector's
// own consumer and by a KafkaSharedConsumer (kafka_group.cc), which routes the
// messages and rebalances of one consumer to several connectors.
//
// Partition ownership (group members come and go):
// - On revoke the connector gives the partitions back cleanly: rows buffered
//   and not yet polled are discarded (partitions it keeps are sought back to
//   their polled offsets), it waits until the engine applied the rows of its
//   last Poll (Connector::Applied), commits the revoked partitions' allowed
//   offsets synchronously, and forgets their positions, so that a later commit
//   never rewinds the new owner's offsets and no row of a revoked partition is
//   applied after the hand-back.
// - On assign a partition it holds a position for never had a revoke; one it
//   handed back resumes at its own position only while the group's committed
//   offset is still what it committed at the hand-back (nobody read the
//   partition meanwhile: the suspended state is current); otherwise at the
//   committed offset, and it counts the partition as moved away.
#pragma once

#include <librdkafka/rdkafka.h>

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "rill/connector/avro_decoder.h"
#include "rill/connector/kafka_connector.h"
#include "rill/connector/kafka_connector_internal.h"

namespace rill {

namespace kafka_internal {

struct ListDeleter {
  void operator()(rd_kafka_topic_partition_list_t* l) const {
    rd_kafka_topic_partition_list_destroy(l);
  }
};
using ListPtr = std::unique_ptr<rd_kafka_topic_partition_list_t, ListDeleter>;
using Offsets = std::map<KafkaConnector::TopicPartition, int64_t>;

/// A partition list of `offsets`.
ListPtr ToList(const Offsets& offsets);
/// True when the consumer's group uses the cooperative protocol.
bool Cooperative(rd_kafka_t* rk);
/// Hand `parts` to librdkafka after an assign / revoke event (incremental
/// under the cooperative protocol).
void Assign(rd_kafka_t* rk, rd_kafka_topic_partition_list_t* parts);
void Unassign(rd_kafka_t* rk, rd_kafka_topic_partition_list_t* parts);
/// Close `rk` as a consumer (leaving the group; rebalance events handed back)
/// for at most `seconds`, then destroy it without another close.
void CloseAndDestroy(rd_kafka_t* rk, int seconds);

}  // namespace kafka_internal

struct KafkaConnector::Impl {
  using MessagePtr = kafka_internal::MessagePtr;
  using Offsets = kafka_internal::Offsets;

  KafkaConnector* self = nullptr;
  KafkaOptions options;
  BoundedBuffer buffer;
  rd_kafka_t* rk = nullptr;  // own, or the shared consumer's (options.consumer)
  std::atomic<bool> stop{false};
  std::thread thread;  // own consumer only; a shared one has its reader
  std::condition_variable room_cv;

  bool subscribed = false;  // Start/Stop/RestorePosition (never concurrently)
  bool attached = false;    // shared consumer: Start attached us
  // Lock order: deliver_mu, then mu. deliver_mu makes "buffer a batch and
  // advance the positions" one step that Poll's drain never splits.
  std::mutex deliver_mu;
  mutable std::mutex mu;
  std::unique_ptr<JsonDecoder> decoder;             // guarded by mu (reader thread uses it)
  std::unique_ptr<kafka_internal::KeyReader> keys;  // guarded by mu; null: no key columns
  std::shared_ptr<AvroSource> avro_source;          // format="avro" only
  std::unique_ptr<AvroDecoder> avro_decoder;        // guarded by mu, format="avro" only
  // positions: the next offset per partition past the messages whose rows and
  // rejects are buffered (or were dropped by the overflow policy, counted);
  // polled: the same as of the last Poll, which handed out exactly those.
  Offsets positions;  // guarded by mu
  Offsets polled;     // guarded by mu
  // The first offset buffered since the last Poll, per partition (where a
  // revoke seeks a partition it keeps back to when Poll never saw it).
  Offsets buffered_from;                       // guarded by mu
  std::map<TopicPartition, int64_t> lags;      // guarded by mu
  std::vector<RejectedRecord> rejects;         // guarded by mu: of buffered messages
  std::vector<RejectedRecord> polled_rejects;  // guarded by mu: of polled ones (TakeRejects)
  // Commits: `commit_target` is what the engine allows (CommitApplied: what
  // it applied; CommitCheckpointed: what a complete checkpoint holds),
  // `commit_sent` what was last sent to the group coordinator.
  Offsets commit_target;       // guarded by mu
  Offsets commit_sent;         // guarded by mu
  double last_commit_at = 0;   // guarded by mu
  bool stopped = false;        // guarded by mu: Stop() ran, Start() not since
  // A Poll handed out rows the engine has not said it applied (Applied).
  bool unapplied = false;      // guarded by mu
  std::condition_variable applied_cv;
  // Partitions owned now (assigned and not revoked since).
  std::set<TopicPartition> assigned;  // guarded by mu
  // Per owned partition: the offset of the first row delivered since it was
  // assigned (what this member's table holds of it starts there), and whether
  // it was rewound since (the table may hold re-read rows twice). Guarded by mu.
  std::map<TopicPartition, int64_t> first_offset;
  std::set<TopicPartition> rewound;
  // Owned partitions whose shard was restored whole on assign.
  std::set<TopicPartition> restored_whole;
  // Partitions handed back at a revoke: the offset committed then, and the
  // position held (a quick return resumes there).
  std::map<TopicPartition, std::pair<int64_t, int64_t>> handed_back;  // guarded by mu
  // ... and what the table held of each (first_offset, rewound,
  // restored_whole), given back if it returns with nobody having read on.
  struct HeldShard {
    int64_t first_offset = -1;
    bool rewound = false;
    bool restored_whole = false;
  };
  std::map<TopicPartition, HeldShard> handed_back_held;  // guarded by mu
  KafkaGroupStats group;       // guarded by mu
  // Partitions whose messages were consumed from librdkafka but not buffered
  // when the reader stopped: the next Start seeks them back (first offset).
  Offsets resume_at;  // guarded by mu
  // Partitions whose first message after a restore must start at the
  // restored position (a seek can lose to the committed offset's fetch of the
  // first assignment): another first offset is sought back once.
  std::map<TopicPartition, bool> check_start;  // reader thread and RestorePosition (stopped)
  ConnectorStats counters;                     // guarded by mu
  std::string pending_error;                   // guarded by mu: next Poll reports it
  bool in_outage = false;                      // guarded by mu
  // Set by RestorePosition: the tables come from a checkpoint, so partitions
  // it does not name are read from their start under KafkaStart::kCommitted
  // (the group's committed offsets may be ahead of the checkpoint).
  bool restored = false;         // guarded by mu
  // Set by RestorePosition for an application's source: up to where the
  // checkpoint's table holds each partition. The first assign (RestoreShards)
  // takes it: assigned shards resume from there, the others are dropped.
  Offsets checkpointed;          // guarded by mu
  bool checkpoint_pending = false;  // guarded by mu: `checkpointed` not taken yet
  int64_t retried_records = 0;   // guarded by mu: refused pushes retried
  double last_lag_refresh = 0;   // reader thread only

  explicit Impl(KafkaOptions o) : options(std::move(o)), buffer(options.limits) {}

  /// True for a topic this connector reads.
  bool Reads(const char* topic) const;
  void ReportError(const std::string& what);
  static void OnError(rd_kafka_t*, int err, const char* reason, void* opaque);
  /// The rebalance callback of an own consumer.
  static void OnRebalance(rd_kafka_t* rk, rd_kafka_resp_err_t err,
                          rd_kafka_topic_partition_list_t* parts, void* opaque);
  /// Give back the partitions of `parts` this connector reads (see the file
  /// comment). The reader thread, inside a rebalance.
  void OnRevoke(const rd_kafka_topic_partition_list_t* parts);
  /// KafkaSharedConsumer::RequestRewind, on the reader thread: discard the
  /// buffer, wait for the last poll to be applied, restart every owned
  /// partition at the group's committed offset (the start option's offset
  /// when it has none).
  void Rewind();
  /// Wait (at most 5 s) until the engine applied the rows of the last Poll.
  void WaitForApplied();
  /// Stopped, or the shared consumer's restores aborted (the engine stops).
  bool Halted() const;
  /// Set the start offset of every partition of `parts` this connector reads
  /// and take them as owned. The reader thread, inside a rebalance.
  void OnAssign(rd_kafka_topic_partition_list_t* parts);
  /// The start offsets of the elements of `parts` this connector reads:
  /// positions held win; a handed-back partition resumes per the file
  /// comment; otherwise the configured start (after a restore, kCommitted
  /// starts at the beginning).
  void SetStartOffsets(rd_kafka_topic_partition_list_t* parts);
  /// After OnAssign: drop the rows of partitions handed back that went to
  /// another member, and restore the partitions of `parts` not held, when the
  /// shared consumer's KafkaShardHook holds this source's table per partition.
  void RestoreShards(const rd_kafka_topic_partition_list_t* parts);
  /// Replay each partition of `until` from `from`'s offset (its start when
  /// `from` has none) up to that offset (exclusive) through ProcessBatch, with
  /// a consumer of its own; returns the records and bytes replayed.
  std::pair<int64_t, int64_t> Replay(const Offsets& from, const Offsets& until);

  /// The loop of an own consumer's reader thread.
  void Run();
  /// Drop messages of partitions not owned or below the positions held (read
  /// twice) and, after a restore, seek a partition back whose first message is
  /// past its position.
  void Screen(std::vector<MessagePtr>* batch);
  void ProcessBatch(const std::vector<MessagePtr>& batch);
  /// Buffer `decoded` (the rows and rejects of batch[begin, end)) and advance
  /// the positions past those messages, as one step. False if stopped while
  /// waiting for room (on_overflow=error): nothing buffered, positions stay.
  bool Deliver(kafka_internal::DecodedMessages* decoded, const std::vector<MessagePtr>& batch,
               size_t begin, size_t end);
  /// Remember batch[begin, …) for the next Start to read again.
  void KeepForRestart(const std::vector<MessagePtr>& batch, size_t begin);
  /// Wait up to poll_timeout_ms, or until stopped.
  void Pause();
  /// Send `commit_target` to the group coordinator if it changed, at most once
  /// per commit_interval_ms unless `now` (then synchronously). Any thread.
  void SendCommit(bool now);
  /// Seek `parts` to their offsets (waits up to 10 s). Reader thread stopped,
  /// or the reader thread itself.
  Status Seek(rd_kafka_topic_partition_list_t* parts);
  void RefreshLags();
};

/// The shared consumer's state (kafka_group.cc).
struct KafkaSharedConsumer::Impl {
  KafkaSharedConsumer* self = nullptr;
  KafkaSharedConsumerOptions options;
  rd_kafka_t* rk = nullptr;
  std::thread thread;
  std::atomic<bool> stop{false};
  // The members in the order they attached. The reader holds members_mu while
  // it polls and hands messages out, so a Detach that returns is never inside
  // one of the member's calls.
  std::mutex members_mu;
  std::vector<KafkaConnector::Impl*> members;  // guarded by members_mu and list_mu
  // list_mu alone reads `members` (CommitTargets) without waiting for a poll.
  mutable std::mutex list_mu;
  // SetCommitter: offsets go through it instead of the group's commits.
  std::function<Status(const KafkaSharedConsumer::Offsets&)> committer;  // guarded by list_mu
  std::shared_ptr<KafkaShardHook> shard_hook;  // guarded by list_mu
  std::function<bool()> join_gate;             // guarded by list_mu
  bool JoinOpen() const {
    std::lock_guard<std::mutex> lock(list_mu);
    return !join_gate || join_gate();
  }
  std::shared_ptr<KafkaShardHook> ShardHook() const {
    std::lock_guard<std::mutex> lock(list_mu);
    return shard_hook;
  }
  // Whether a committer is set: the members' per-tick SendCommit reads only this.
  std::atomic<bool> external_commits{false};
  /// RequestRewind: the reader rewinds its members before its next poll.
  std::atomic<bool> rewind_requested{false};
  /// AbortRestores: a restore under way stops waiting for the engine.
  std::atomic<bool> abort_restores{false};
  /// The committer, if any (a copy). Any thread.
  std::function<Status(const KafkaSharedConsumer::Offsets&)> Committer() const {
    std::lock_guard<std::mutex> lock(list_mu);
    return committer;
  }
  mutable std::mutex mu;
  KafkaGroupStats stats;                        // guarded by mu
  std::set<KafkaConnector::TopicPartition> assignment;  // guarded by mu
  std::string last_error;                       // guarded by mu
  double rebalance_started = 0;                 // guarded by mu
  // Attach/Detach change the subscription on the reader thread, once the
  // members have been quiet for a moment: sources added together cost one
  // rebalance. 0: nothing pending.
  double resubscribe_at = 0;                    // guarded by members_mu
  bool left = false;                            // guarded by members_mu: Leave ran

  explicit Impl(KafkaSharedConsumerOptions o) : options(std::move(o)) {}

  static void OnRebalance(rd_kafka_t* rk, rd_kafka_resp_err_t err,
                          rd_kafka_topic_partition_list_t* parts, void* opaque);
  static void OnError(rd_kafka_t*, int err, const char* reason, void* opaque);
  /// Subscribe to the members' topics (unsubscribe when none). members_mu held.
  Status Resubscribe();
  void Run();
};

}  // namespace rill
