// Nexmark events to Kafka: the generator's third output (after NDJSON files
// and Parquet), so the Kafka connector can be measured on the same stream.
//
// Each event is one message whose value is its NDJSON line (the lines of
// AppendNdjson: {"kind": ..., fields; times as unix ms}), produced to the
// topic <prefix>person, <prefix>auction or <prefix>bid by kind; messages of a
// kind keep their event order within a partition (librdkafka's default
// partitioner, no key).
//
// Threads: one thread at a time per sink.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <arrow/result.h>
#include <arrow/status.h>

#include "nexmark/generator.h"

namespace rill::nexmark {

class KafkaSink {
 public:
  /// A producer for `bootstrap_servers` (librdkafka's list "host:port,...").
  /// Invalid for a configuration librdkafka refuses.
  /// `compression`: librdkafka's compression.type ("none", "lz4", "zstd", ...).
  static arrow::Result<std::unique_ptr<KafkaSink>> Make(const std::string& bootstrap_servers,
                                                        std::string topic_prefix = "nexmark-",
                                                        const std::string& compression = "none");
  ~KafkaSink();
  KafkaSink(const KafkaSink&) = delete;
  KafkaSink& operator=(const KafkaSink&) = delete;

  /// Queue every event of `batch` (waits for room when librdkafka's queue is full).
  arrow::Status Produce(const EventBatch& batch);
  /// Wait until every queued message is delivered; IOError naming the first
  /// delivery error, or when `timeout_ms` passes first.
  arrow::Status Flush(int timeout_ms = 30'000);
  /// The topic of a kind: "person", "auction" or "bid".
  std::string topic(const std::string& kind) const { return prefix_ + kind; }
  /// Messages delivered so far (as of the last Produce or Flush).
  int64_t delivered() const;
  /// The cluster's (low, high) watermark offsets of each partition of the
  /// topic of `kind`, by partition id: high - low messages are still held
  /// (low > 0: the cluster discarded the partition's oldest messages, e.g. by
  /// retention). IOError when the metadata or a watermark query fails.
  arrow::Result<std::vector<std::pair<int64_t, int64_t>>> Watermarks(const std::string& kind,
                                                                     int timeout_ms = 10'000);

  struct Impl;

 private:
  KafkaSink(std::unique_ptr<Impl> impl, std::string prefix);
  std::unique_ptr<Impl> impl_;
  std::string prefix_;
};

}  // namespace rill::nexmark
