// nexmark_bench --kafka: the generated events into Kafka (kafka_sink.h), the
// input for measuring the Kafka connector on the Nexmark stream.
#pragma once

#include <string>
#include <vector>

#include "nexmark/generator.h"

namespace rill::nexmark {

/// Produce `events` to `servers` ("mock": librdkafka's in-process cluster,
/// topics of 4 partitions) and print one JSON line with the producer's
/// events/s until every message is delivered.
void KafkaRun(const std::vector<EventBatch>& events, const std::string& servers);

}  // namespace rill::nexmark
