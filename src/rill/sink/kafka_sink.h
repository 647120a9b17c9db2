// KafkaSinkWriter: a table's changes as Kafka messages (librdkafka producer).
//
// Key: the table's primary key (or key_columns) as a JSON object (a single
// column's value as a string with key_format="string"); no key for a table
// without one. Value: the row as JSON (format="json": the table's columns,
// plus _op and _version in changelog mode), or with format="avro" the same
// columns as Avro binary in the Confluent wire format (magic byte 0, schema id,
// body): the Avro schema of the columns (ArrowToAvroSchemaJson: every field a
// union [null, T]) is registered with the schema registry under the subject
// "<topic>-value" (POST /subjects/<topic>-value/versions) before the first
// message, and the id the registry returns is written in every value
// (docs/avro.md). In upsert mode a delete is a
// tombstone (null value), so a compacted topic holds the table (a snapshot
// also tombstones the keys the topic holds and the snapshot lacks, read from
// the topic first); in append mode only inserts are written. Messages go through librdkafka's default
// partitioner (one key, one partition, in order).
//
// Progress (sink/sink.h): a consumer group, progress_group (default
// "<transactional id>-progress"), whose committed offset for partition 0 of
// the sink's topic is the version, with metadata "rill:v=<version>;e=<epoch>".
// LoadProgress reads it back (rd_kafka_committed, read_committed, so an open
// transaction's offsets are never read). The group must be used by nothing
// else; its offsets expire as consumer offsets do (the broker's
// offsets.retention.minutes, 7 days by default, after the last commit).
//
// exactly_once=true: a transactional producer (transactional.id =
// kafka_config["transactional.id"], else `transactional_id`): Open calls
// init_transactions (fencing an earlier producer with the same id and
// aborting its open transaction), the first Write begins a transaction, Commit
// sends the progress (and CommitPoint::source_offsets for
// CommitPoint::source_group) with send_offsets_to_transaction and commits;
// Abort aborts. A read_committed consumer sees each committed change once.
// The source group's offsets are sent without a member id (generation -1),
// which the broker takes also while consumers are joined to the group.
// exactly_once=false: an idempotent producer (enable.idempotence=true unless
// kafka_config says otherwise); Commit waits for every delivery report (a
// failed delivery fails the Commit) and then sends the progress offset
// (non-transactional, asynchronous: the next Commit, LoadProgress and Close
// collect its result, and a failed one fails the next Commit). At-least-once:
// what was delivered before a crash and not in the stored progress is written
// again after it.
//
// Fatal errors (a fenced producer: another one took the transactional.id) are
// sticky: Open keeps failing, naming the topic and librdkafka's error, so two
// engines never take turns fencing each other.
//
// Threads: every method on the sink's thread only (SinkWriter); bytes_written
// from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "rill/common/status.h"
#include "rill/sink/sink.h"

namespace rill {

struct KafkaSinkOptions {
  std::string topic;
  /// librdkafka properties ("bootstrap.servers", "compression.type", ...),
  /// given to the producer and to the consumer that reads the progress.
  std::map<std::string, std::string> kafka_config;
  std::string format = "json";           ///< "json" | "avro" (then schema_registry_url)
  /// format="avro": the Confluent-compatible schema registry
  /// (http(s)://[user:password@]host:port); user/password: HTTP basic auth.
  std::string schema_registry_url;
  std::string schema_registry_user;
  std::string schema_registry_password;
  std::vector<std::string> key_columns;  ///< empty: the table's primary key
  std::string key_format = "json";       ///< "json" | "string" (one key column)
  bool exactly_once = false;
  /// transactional.id when kafka_config has none (the SinkSet sets it to
  /// "<engine id>-<sink name>"). Also names the progress group without
  /// exactly_once (the producer then has no transactional.id).
  std::string transactional_id;
  /// The progress group; "": "<transactional id>-progress" (or
  /// "rill-sink-<topic>-progress" when there is no id at all).
  std::string progress_group;
  /// Write each row to the partition its int32 column of this name holds,
  /// not by the key's hash ("": by the key). An application's changelog
  /// (cluster/): partition p of `<app>-<table>-changelog` holds the rows of
  /// input partition p. Set by code, not an option of the pipeline file.
  std::string partition_column;
  /// How long Open (init_transactions), Commit (flush, commit_transaction),
  /// Abort and LoadProgress wait for the cluster, in milliseconds.
  int64_t timeout_ms = 30000;
};

/// Make a writer (connects in Open). Invalid (naming the option) for an empty
/// topic, an unknown format or key_format, key_format="string" with more than
/// one key column, exactly_once without a transactional id, timeout_ms <= 0,
/// or format="avro" without a valid schema_registry_url.
Result<std::unique_ptr<SinkWriter>> MakeKafkaSinkWriter(KafkaSinkOptions options);

}  // namespace rill
