// nexmark_bench --kafka: the generated events into Kafka (kafka_sink.h), the
// input for measuring the Kafka connector on the Nexmark stream, and read back
// through the KafkaConnector.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nexmark/generator.h"

namespace rill::nexmark {

struct KafkaRunOptions {
  /// Partitions per topic (mock cluster only; a real broker's topics are
  /// created by its auto-create setting or beforehand).
  int partitions = 4;
  /// Brokers of the mock cluster.
  int mock_brokers = 1;
  /// Read every topic back through a KafkaConnector after producing.
  bool read_back = true;
  /// Give up reading back after this long without a new row.
  double stall_seconds = 30;
  /// The producer's compression.type ("none", "lz4", "zstd", ...).
  std::string compression = "none";
};

/// Produce `events` to `servers` ("mock": librdkafka's in-process cluster)
/// and print one JSON line with the producer's events/s until every message
/// is delivered (nexmark_kafka_produce_events_per_s); then read back every
/// message the cluster still holds (nexmark_kafka_read_events_per_s, with
/// `complete`, `events` and `retained_events`).
///
/// The librdkafka mock cluster keeps at most 5 MiB (or 100,000 message sets)
/// per partition and silently discards the oldest message sets beyond that
/// (rdkafka_mock.c, rd_kafka_mock_msgset_new; not configurable through its
/// API): with uncompressed NDJSON that is ~28k Nexmark bids per partition, so
/// at 50k+ events on a few partitions the head of the busiest partitions is
/// gone before the read. The read-back therefore expects what the cluster's
/// watermarks say it holds (low..high per partition) and reports
/// retained_events next to events; `compression` (e.g. lz4) makes the mock
/// hold ~4x more.
struct KafkaRunResult {
  int64_t produced = 0;  ///< events delivered to the cluster
  int64_t retained = 0;  ///< events the cluster held when the read started
  int64_t read = 0;      ///< rows read back
  bool complete = false;  ///< every held message read, each partition to its end
};
KafkaRunResult KafkaRun(const std::vector<EventBatch>& events, const std::string& servers,
                        const KafkaRunOptions& options = {});

}  // namespace rill::nexmark
