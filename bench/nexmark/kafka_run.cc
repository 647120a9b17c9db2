#include "nexmark/kafka_run.h"

#include "bench_util.h"
#include "nexmark/kafka_sink.h"
#include "rill/connector/kafka_connector.h"

namespace rill::nexmark {
using bench::Check;
using bench::NowSeconds;

void KafkaRun(const std::vector<EventBatch>& events, const std::string& servers) {
  std::unique_ptr<KafkaMockCluster> mock;
  std::string bootstrap = servers;
  if (servers == "mock") {
    mock = Check(KafkaMockCluster::Make(1), "mock cluster");
    bootstrap = mock->bootstrap_servers();
    for (const char* kind : {"person", "auction", "bid"}) {
      Check(mock->CreateTopic(std::string("nexmark-") + kind, 4), "topic");
    }
  }
  auto sink = Check(KafkaSink::Make(bootstrap), "sink");
  int64_t total = 0;
  const double p0 = NowSeconds();
  for (const auto& e : events) {
    Check(sink->Produce(e), "produce");
    total += e.events();
  }
  Check(sink->Flush(), "flush");
  bench::Measurement produce;
  produce.name = "nexmark_kafka_produce_events_per_s";
  produce.value = total / (NowSeconds() - p0);
  produce.unit = "events/s";
  produce.extra_numbers = {{"events", static_cast<double>(total)}};
  produce.extra = {{"what", "the generator's events as NDJSON messages through librdkafka's "
                            "producer, until delivered (the input of the connector run)"},
                   {"cluster", servers == "mock" ? "librdkafka mock cluster" : servers}};
  bench::Emit(produce);

}

}  // namespace rill::nexmark
