// Kafka ingest: topic -> live table through KafkaConnector (librdkafka consumer,
// NDJSON decoding, buffer, table append) against librdkafka alone consuming the
// same messages without decoding, both through librdkafka's mock cluster.
//
//   kafka_bench [--messages 50k] [--partitions 4] [--reps 3]
#include <librdkafka/rdkafka.h>

#include <thread>

#include "bench_util.h"
#include "rill/connector/kafka_connector.h"
#include "rill/table/live_table.h"

namespace rill::bench {
namespace {

/// Consume `n` messages of `topic` from the start with a fresh group; seconds.
double PlainConsume(const std::string& servers, const std::string& topic, int64_t n,
                    const std::string& group) {
  char err[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  rd_kafka_conf_set(conf, "bootstrap.servers", servers.c_str(), err, sizeof(err));
  rd_kafka_conf_set(conf, "group.id", group.c_str(), err, sizeof(err));
  rd_kafka_conf_set(conf, "auto.offset.reset", "earliest", err, sizeof(err));
  rd_kafka_conf_set(conf, "enable.auto.commit", "false", err, sizeof(err));
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof(err));
  rd_kafka_poll_set_consumer(rk);
  rd_kafka_topic_partition_list_t* topics = rd_kafka_topic_partition_list_new(1);
  rd_kafka_topic_partition_list_add(topics, topic.c_str(), RD_KAFKA_PARTITION_UA);
  rd_kafka_subscribe(rk, topics);
  rd_kafka_topic_partition_list_destroy(topics);
  int64_t got = 0;
  int64_t bytes = 0;
  double t0 = 0;
  while (got < n) {
    rd_kafka_message_t* m = rd_kafka_consumer_poll(rk, 100);
    if (!m) continue;
    if (!m->err) {
      if (got == 0) t0 = NowSeconds();  // from the first message: group join excluded
      ++got;
      bytes += static_cast<int64_t>(m->len);
    }
    rd_kafka_message_destroy(m);
  }
  double s = NowSeconds() - t0;
  rd_kafka_consumer_close(rk);
  rd_kafka_destroy(rk);
  return s;
}

/// Read `n` rows of `topic` into an append table through KafkaConnector; seconds.
double RillConsume(const std::string& servers, const std::string& topic, int64_t rows,
                   const std::string& group) {
  auto schema = arrow::schema({arrow::field("id", arrow::int64()),
                               arrow::field("user", arrow::utf8()),
                               arrow::field("amount", arrow::float64()),
                               arrow::field("ok", arrow::boolean())});
  TableOptions topts;
  topts.mode = TableMode::kAppend;
  RetentionPolicy retention;
  retention.max_rows = rows * 2;
  topts.retention = retention;
  auto table = Check(LiveTable::Make("events", schema, topts), "table");
  KafkaOptions o;
  o.topics = {topic};
  o.config = {{"bootstrap.servers", servers}, {"group.id", group}};
  o.start = KafkaStart::kEarliest;
  o.decode.schema = schema;
  o.limits.max_records = 0;
  auto c = Check(KafkaConnector::Make("events", o), "connector");
  Check(c->Start(), "start");
  int64_t got = 0;
  double t0 = 0;
  while (got < rows) {
    auto batches = c->Poll();
    if (!batches.ok() || batches->empty()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      continue;
    }
    if (got == 0) t0 = NowSeconds() - 0.001;  // from the first rows, as the baseline
    Check(table->Write(*batches).status(), "write");
    for (const auto& b : *batches) got += b->num_rows();
  }
  double s = NowSeconds() - t0;
  c->Stop();
  return s;
}

int Run(int64_t messages, int partitions, int reps) {
  auto cluster = Check(KafkaMockCluster::Make(1), "cluster");
  Check(cluster->CreateTopic("events", partitions), "topic");
  std::vector<std::string> values;
  values.reserve(static_cast<size_t>(messages));
  for (int64_t i = 0; i < messages; ++i) {
    values.push_back("{\"id\":" + std::to_string(i) + ",\"user\":\"u-" + std::to_string(i % 997) +
                     "\",\"amount\":" + std::to_string((i % 1000) * 0.25) + ",\"ok\":" +
                     (i % 3 ? "true" : "false") + "}");
  }
  Log("kafka: producing %lld messages", static_cast<long long>(messages));
  Check(cluster->ProduceMany("events", values), "produce");
  std::vector<double> ours, plain;
  for (int r = 0; r < reps; ++r) {
    double p = PlainConsume(cluster->bootstrap_servers(), "events", messages,
                            "plain-" + std::to_string(r));
    double q = RillConsume(cluster->bootstrap_servers(), "events", messages,
                           "rill-" + std::to_string(r));
    plain.push_back(static_cast<double>(messages) / p);
    ours.push_back(static_cast<double>(messages) / q);
  }
  Measurement m;
  m.name = "kafka_ingest_rows_per_s";
  m.value = Median(ours);
  m.unit = "rows/s";
  m.baseline = "librdkafka_consume_only";
  m.baseline_value = Median(plain);
  m.ratio = m.value / *m.baseline_value;
  m.targets = {{"ratio", ">=", 0.5}};
  m.reps = reps;
  m.extra_numbers = {{"messages", static_cast<double>(messages)},
                     {"partitions", static_cast<double>(partitions)}};
  Emit(m);
  return 0;
}

}  // namespace
}  // namespace rill::bench

int main(int argc, char** argv) {
  rill::bench::Args args(argc, argv);
  if (args.Flag("help")) {
    std::puts("kafka_bench [--messages 50k] [--partitions 4] [--reps 3]");
    return 0;
  }
  return rill::bench::Run(args.Int("messages", 50000), static_cast<int>(args.Int("partitions", 4)),
                          static_cast<int>(args.Int("reps", 3)));
}
