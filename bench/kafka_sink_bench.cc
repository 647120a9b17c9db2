// The Kafka sink's writer (KafkaSinkWriter: change rows -> JSON keys and values
// -> librdkafka, a commit per batch) against librdkafka's producer alone
// producing the same messages, already encoded, with the same batching (one
// flush per batch) and the same producer configuration; both on librdkafka's
// mock cluster (in-process) or a broker (--brokers). Also the writer with
// exactly_once=true (a transaction per batch) against itself without, as the
// overhead of exactly-once.
//
//   kafka_sink_bench [--rows 200k] [--batch 10k] [--partitions 4] [--reps 3]
//                    [--brokers HOST:PORT]
#include <librdkafka/rdkafka.h>

#include <charconv>

#include "bench_util.h"
#include "rill/connector/kafka_connector.h"
#include "rill/sink/kafka_sink.h"

namespace rill::bench {
namespace {

std::shared_ptr<arrow::Schema> TableSchema() {
  return arrow::schema({arrow::field("id", arrow::int64()), arrow::field("user", arrow::utf8()),
                        arrow::field("amount", arrow::float64()),
                        arrow::field("ok", arrow::boolean())});
}

std::string Double(double v) {
  char buf[32];
  auto end = std::to_chars(buf, buf + sizeof(buf), v).ptr;
  return std::string(buf, end);
}

/// The rows as change batches of `batch` rows (upserts of new keys, version =
/// batch number) and the same rows as the messages the writer makes of them.
struct Workload {
  std::vector<ChangeSet> sets;
  std::vector<std::vector<std::pair<std::string, std::string>>> messages;  // key, value
  int64_t rows = 0;
  int64_t bytes = 0;
};

Workload MakeWorkload(int64_t rows, int64_t batch) {
  Workload w;
  w.rows = rows;
  auto schema = ChangeSchema(TableSchema());
  uint64_t version = 0;
  for (int64_t start = 0; start < rows; start += batch) {
    const int64_t n = std::min(batch, rows - start);
    ++version;
    arrow::Int64Builder ids;
    arrow::StringBuilder users;
    arrow::DoubleBuilder amounts;
    arrow::BooleanBuilder oks;
    arrow::StringBuilder ops;
    arrow::UInt64Builder versions;
    std::vector<std::pair<std::string, std::string>> messages;
    for (int64_t i = start; i < start + n; ++i) {
      const std::string user = "u-" + std::to_string(i % 997);
      const double amount = static_cast<double>(i % 1000) * 0.25;
      const bool ok = i % 3 != 0;
      Check(ids.Append(i), "ids");
      Check(users.Append(user), "users");
      Check(amounts.Append(amount), "amounts");
      Check(oks.Append(ok), "oks");
      Check(ops.Append("insert"), "ops");
      Check(versions.Append(version), "versions");
      std::string key = "{\"id\":" + std::to_string(i) + "}";
      std::string value = "{\"id\":" + std::to_string(i) + ",\"user\":\"" + user +
                          "\",\"amount\":" + Double(amount) +
                          ",\"ok\":" + (ok ? "true" : "false") + "}";
      w.bytes += static_cast<int64_t>(key.size() + value.size());
      messages.emplace_back(std::move(key), std::move(value));
    }
    std::vector<std::shared_ptr<arrow::Array>> columns = {
        Check(ids.Finish(), "ids"), Check(users.Finish(), "users"),
        Check(amounts.Finish(), "amounts"), Check(oks.Finish(), "oks"),
        Check(ops.Finish(), "ops"), Check(versions.Finish(), "versions")};
    ChangeSet set;
    set.from_version = version - 1;
    set.to_version = version;
    set.num_rows = n;
    set.batches = {arrow::RecordBatch::Make(schema, n, columns)};
    w.sets.push_back(std::move(set));
    w.messages.push_back(std::move(messages));
  }
  return w;
}

std::map<std::string, std::string> ProducerConfig(const std::string& servers) {
  return {{"bootstrap.servers", servers},
          {"linger.ms", "5"},
          {"batch.num.messages", "10000"},
          {"enable.idempotence", "true"}};
}

void OnDelivery(rd_kafka_t*, const rd_kafka_message_t* m, void* opaque) {
  if (m->err) ++*static_cast<int64_t*>(opaque);
}

/// librdkafka alone: produce each batch's encoded messages, flush; rows/s.
double PlainProduce(const std::string& servers, const std::string& topic, const Workload& w) {
  char err[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  for (const auto& [k, v] : ProducerConfig(servers)) {
    rd_kafka_conf_set(conf, k.c_str(), v.c_str(), err, sizeof(err));
  }
  int64_t failed = 0;
  rd_kafka_conf_set_opaque(conf, &failed);
  rd_kafka_conf_set_dr_msg_cb(conf, &OnDelivery);
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
  if (!rk) Die(std::string("producer: ") + err);
  rd_kafka_topic_t* rkt = rd_kafka_topic_new(rk, topic.c_str(), nullptr);
  auto produce = [&](const std::string& key, const std::string& value) {
    while (rd_kafka_produce(rkt, RD_KAFKA_PARTITION_UA, RD_KAFKA_MSG_F_COPY,
                            const_cast<char*>(value.data()), value.size(), key.data(),
                            key.size(), nullptr) != 0) {
      if (rd_kafka_last_error() != RD_KAFKA_RESP_ERR__QUEUE_FULL) Die("produce failed");
      rd_kafka_poll(rk, 10);
    }
  };
  produce("{\"id\":-1}", "{}");  // warm-up: metadata and connections before the clock
  rd_kafka_flush(rk, 30000);
  const double t0 = NowSeconds();
  double producing = 0;
  for (const auto& batch : w.messages) {
    const double p0 = NowSeconds();
    int64_t unpolled = 0;
    for (const auto& [key, value] : batch) {
      produce(key, value);
      if (++unpolled >= 1000) {  // as the writer serves its delivery reports
        unpolled = 0;
        rd_kafka_poll(rk, 0);
      }
    }
    producing += NowSeconds() - p0;
    if (rd_kafka_flush(rk, 60000) != RD_KAFKA_RESP_ERR_NO_ERROR) Die("flush timed out");
  }
  const double s = NowSeconds() - t0;
  Log("kafka_sink: plain: %.3f s producing, %.3f s flushing", producing, s - producing);
  if (failed) Die("plain producer: deliveries failed");
  rd_kafka_topic_destroy(rkt);
  rd_kafka_destroy(rk);
  return static_cast<double>(w.rows) / s;
}

/// The writer: Write + Commit per batch; rows/s. `bytes` gets what it counted.
double SinkProduce(const std::string& servers, const std::string& topic, const Workload& w,
                   bool exactly_once, const std::string& id, int64_t* bytes) {
  KafkaSinkOptions o;
  o.topic = topic;
  o.kafka_config = ProducerConfig(servers);
  o.exactly_once = exactly_once;
  o.transactional_id = id;
  auto writer = Check(MakeKafkaSinkWriter(o), "writer");
  Check(writer->Open(TableSchema(), {"id"}), "open");
  // Warm-up as for librdkafka alone: one message (metadata, connections) and a
  // commit (the progress group's coordinator) before the clock.
  ChangeSet warm = w.sets.front();
  warm.batches = {warm.batches.front()->Slice(0, 1)};
  Check(writer->Write(warm, SinkMode::kUpsert), "warm-up write");
  Check(writer->Commit({/*version=*/0}), "warm-up commit");
  const int64_t before = writer->bytes_written();
  const double t0 = NowSeconds();
  double writing = 0;
  for (const auto& set : w.sets) {
    const double w0 = NowSeconds();
    Check(writer->Write(set, SinkMode::kUpsert), "write");
    writing += NowSeconds() - w0;
    Check(writer->Commit({set.to_version}), "commit");
  }
  const double s = NowSeconds() - t0;
  Log("kafka_sink: %s: %.3f s in Write (encode + produce), %.3f s in Commit",
      exactly_once ? "exactly_once" : "at_least_once", writing, s - writing);
  *bytes = writer->bytes_written() - before;
  writer->Close();
  return static_cast<double>(w.rows) / s;
}

/// Create `topic` on a broker (which may not auto-create topics).
void CreateBrokerTopic(const std::string& servers, const std::string& topic, int partitions) {
  char err[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  rd_kafka_conf_set(conf, "bootstrap.servers", servers.c_str(), err, sizeof(err));
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
  if (!rk) Die(std::string("admin client: ") + err);
  rd_kafka_NewTopic_t* t = rd_kafka_NewTopic_new(topic.c_str(), partitions, 1, err, sizeof(err));
  rd_kafka_queue_t* queue = rd_kafka_queue_new(rk);
  rd_kafka_CreateTopics(rk, &t, 1, nullptr, queue);
  rd_kafka_event_t* event = rd_kafka_queue_poll(queue, 30000);
  if (!event) Die("CreateTopics timed out");
  size_t n = 0;
  const rd_kafka_topic_result_t** results =
      rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(event), &n);
  if (n != 1 || rd_kafka_topic_result_error(results[0]) != RD_KAFKA_RESP_ERR_NO_ERROR) {
    Die("CreateTopics failed");
  }
  rd_kafka_event_destroy(event);
  rd_kafka_queue_destroy(queue);
  rd_kafka_NewTopic_destroy(t);
  rd_kafka_destroy(rk);
}

/// Whether the cluster can run a transaction at all (init, begin, commit).
bool SupportsTransactions(const std::string& servers, const std::string& topic) {
  KafkaSinkOptions o;
  o.topic = topic;
  o.kafka_config = ProducerConfig(servers);
  o.exactly_once = true;
  o.transactional_id = "bench-probe";
  o.timeout_ms = 10000;
  auto writer = Check(MakeKafkaSinkWriter(o), "writer");
  return writer->Open(TableSchema(), {"id"}).ok() && writer->Commit({/*version=*/0}).ok();
}

int Run(const Args& args) {
  const int64_t rows = args.Int("rows", 200000);
  const int64_t batch = args.Int("batch", 10000);
  const int partitions = static_cast<int>(args.Int("partitions", 4));
  const int reps = static_cast<int>(args.Int("reps", 3));
  std::unique_ptr<KafkaMockCluster> cluster;
  std::string servers = args.Str("brokers", "");
  const std::string run = std::to_string(static_cast<int64_t>(NowSeconds() * 1000));
  const std::string topic = "sink-bench-" + run;
  if (servers.empty()) {
    cluster = Check(KafkaMockCluster::Make(1), "cluster");
    Check(cluster->CreateTopic(topic, partitions), "topic");
    servers = cluster->bootstrap_servers();
  } else {
    CreateBrokerTopic(servers, topic, partitions);
  }
  Workload w = MakeWorkload(rows, batch);
  const bool transactions = SupportsTransactions(servers, topic);
  if (!transactions) Log("kafka_sink: the cluster refuses transactions; no exactly_once figure");
  std::vector<double> plain, ours, eo;
  int64_t bytes = 0;
  for (int r = 0; r < reps; ++r) {
    const bool plain_first = r % 2 == 0;
    if (plain_first) plain.push_back(PlainProduce(servers, topic, w));
    ours.push_back(SinkProduce(servers, topic, w, false, "", &bytes));
    if (!plain_first) plain.push_back(PlainProduce(servers, topic, w));
    if (transactions) {
      int64_t eo_bytes = 0;
      eo.push_back(SinkProduce(servers, topic, w, true, "bench-" + run, &eo_bytes));
    }
    Log("kafka_sink rep %d: plain %.0f, sink %.0f, exactly_once %.0f rows/s", r, plain.back(),
        ours.back(), eo.empty() ? 0.0 : eo.back());
  }
  const std::string where = cluster ? "mock" : "broker";
  Measurement m;
  m.name = "sink_kafka_rows_per_s";
  m.value = Median(ours);
  m.unit = "rows/s";
  m.baseline = "librdkafka_produce_encoded";
  m.baseline_value = Median(plain);
  m.ratio = m.value / *m.baseline_value;
  m.targets = {{"ratio", ">=", 0.8}};
  m.reps = reps;
  m.extra = {{"cluster", where}, {"mode", "upsert"}};
  m.extra_numbers = {{"rows", static_cast<double>(rows)},
                     {"batch_rows", static_cast<double>(batch)},
                     {"partitions", static_cast<double>(partitions)},
                     {"message_bytes", static_cast<double>(w.bytes)},
                     {"sink_counted_bytes", static_cast<double>(bytes)}};
  Emit(m);
  if (!eo.empty()) {
    Measurement e;
    e.name = "sink_kafka_exactly_once_rows_per_s";
    e.value = Median(eo);
    e.unit = "rows/s";
    e.baseline = "sink_kafka_at_least_once";
    e.baseline_value = Median(ours);
    e.ratio = e.value / *e.baseline_value;  // 1 - ratio: the overhead of exactly-once
    e.reps = reps;
    e.extra = {{"cluster", where}, {"mode", "upsert"}};
    e.extra_numbers = {{"rows", static_cast<double>(rows)},
                       {"batch_rows", static_cast<double>(batch)},
                       {"vs_librdkafka", e.value / Median(plain)}};
    Emit(e);
  }
  return 0;
}

}  // namespace
}  // namespace rill::bench

int main(int argc, char** argv) {
  rill::bench::Args args(argc, argv);
  if (args.Flag("help")) {
    std::puts("kafka_sink_bench [--rows 200k] [--batch 10k] [--partitions 4] [--reps 3] "
              "[--brokers HOST:PORT]");
    return 0;
  }
  return rill::bench::Run(args);
}
