// KafkaConnector: NDJSON messages of Kafka topics (librdkafka consumer).
//
// A reader thread polls a librdkafka consumer, decodes message values (one or
// more NDJSON rows per message, or a JSON array) in batches with JsonDecoder,
// optionally adds metadata columns, and pushes the rows into a BoundedBuffer.
// Per-partition positions (the next offset to read) are kept in the connector
// (positions(), for checkpoints) and committed to the consumer group
// asynchronously after each batch is buffered, for monitoring. Partition EOF
// is not an error. Broker errors (an outage) are counted, reported once per
// outage through Poll (the engine records them as alerts) and retried by
// librdkafka; the connector never stops on them.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

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

/// Options of a KafkaConnector.
struct KafkaOptions {
  std::vector<std::string> topics;
  /// librdkafka configuration, passed through (bootstrap.servers, group.id,
  /// security.*, …). group.id defaults to "rill-<connector name>";
  /// enable.auto.commit is forced off (the connector commits what it buffered).
  std::map<std::string, std::string> config;
  KafkaStart start = KafkaStart::kCommitted;
  int64_t start_timestamp_ms = 0;
  /// Add columns _topic (utf8), _partition (int32), _offset (int64),
  /// _key (binary) and _timestamp (timestamp[ms]) to every row.
  bool metadata_columns = false;
  int64_t poll_timeout_ms = 100;
  int64_t max_batch_messages = 10000;  ///< messages decoded together
  JsonDecodeOptions decode;
  BufferLimits limits;
  std::string name;
};

/// Reads Kafka topics on its own thread.
///
/// Threads: Start/Stop from the engine; Poll/TakeRejects from the tick thread;
/// stats(), positions() and lags() from any thread.
class KafkaConnector : public Connector {
 public:
  /// (topic, partition)
  using TopicPartition = std::pair<std::string, int32_t>;

  /// Make a connector (creates the librdkafka consumer, does not subscribe).
  /// Invalid for a bad option or configuration (librdkafka's message kept).
  static Result<std::shared_ptr<KafkaConnector>> Make(std::string target_table,
                                                      KafkaOptions options);
  ~KafkaConnector() override;

  /// Subscribe and start the reader thread.
  Status Start() override;
  /// Stop the thread, commit positions, close the consumer (leave the group).
  void Stop() override;
  /// The buffered rows; once per broker outage, IOError describing it (the
  /// rows stay buffered for the next call).
  Result<std::vector<std::shared_ptr<arrow::RecordBatch>>> Poll() override;
  std::vector<RejectedRecord> TakeRejects() override;
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
  Status RestorePosition(std::string_view position) override;

  /// The next offset to read per partition (what was buffered so far).
  std::map<TopicPartition, int64_t> positions() const;
  /// High watermark minus position per assigned partition (last known).
  std::map<TopicPartition, int64_t> lags() const;

  struct Impl;

 private:
  KafkaConnector(std::string target_table, KafkaOptions options);
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
  /// Take a broker down / bring it back (ids start at 1).
  Status SetBrokerDown(int broker_id, bool down);

  struct Impl;

 private:
  explicit KafkaMockCluster(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace rill
