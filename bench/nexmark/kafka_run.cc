#include "nexmark/kafka_run.h"

#include <cmath>
#include <thread>

#include "bench_util.h"
#include "nexmark/kafka_sink.h"
#include "rill/connector/kafka_connector.h"

namespace rill::nexmark {
using bench::Check;
using bench::Log;
using bench::NowSeconds;

namespace {

struct Kind {
  const char* kind;
  std::shared_ptr<arrow::Schema> schema;
  int64_t produced = 0;
  std::vector<std::pair<int64_t, int64_t>> watermarks;  // (low, high) per partition
  int64_t retained() const {
    int64_t n = 0;
    for (const auto& [low, high] : watermarks) n += high - low;
    return n;
  }
};

/// Poll `conns` on this thread (as the engine's tick would) until `want` rows
/// arrived or `stall_seconds` passed without a new row. Rows per connector
/// into `got`; returns (seconds from start to the last row, to the first row).
std::pair<double, double> Drain(const std::vector<std::shared_ptr<KafkaConnector>>& conns,
                                const std::vector<Kind>& kinds, int64_t want,
                                double stall_seconds, std::vector<int64_t>* got) {
  const double t0 = NowSeconds();
  for (auto& c : conns) Check(c->Start(), "kafka connector start");
  double last = t0, first = -1;
  int64_t total = 0;
  while (total < want && NowSeconds() - last < stall_seconds) {
    bool any = false;
    for (size_t i = 0; i < conns.size(); ++i) {
      auto polled = conns[i]->Poll();
      if (!polled.ok()) {
        Log("kafka read %s: %s", kinds[i].kind, polled.status().ToString().c_str());
        continue;
      }
      for (const auto& b : *polled) {
        (*got)[i] += b->num_rows();
        total += b->num_rows();
        any = any || b->num_rows() > 0;
      }
    }
    if (any) {
      last = NowSeconds();
      if (first < 0) first = last;
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  return {last - t0, first < 0 ? NAN : first - t0};
}

/// Read every topic back through one KafkaConnector each (own consumer group,
/// earliest offsets): exactly the messages the cluster still holds (its
/// watermarks), checked per partition. Emits nexmark_kafka_read_events_per_s.
KafkaRunResult ReadBack(const std::string& bootstrap, KafkaSink& sink, std::vector<Kind>& kinds,
                        const KafkaRunOptions& options) {
  int64_t produced = 0, want = 0;
  for (auto& k : kinds) {
    k.watermarks = Check(sink.Watermarks(k.kind), "watermarks");
    produced += k.produced;
    want += k.retained();
    for (size_t p = 0; p < k.watermarks.size(); ++p) {
      if (k.watermarks[p].first > 0) {
        Log("kafka: %s[%zu] starts at offset %lld of %lld: the cluster discarded its oldest "
            "messages (the librdkafka mock keeps at most 5 MiB per partition)",
            sink.topic(k.kind).c_str(), p, (long long)k.watermarks[p].first,
            (long long)k.watermarks[p].second);
      }
    }
  }
  std::vector<std::shared_ptr<KafkaConnector>> conns;
  const std::string run = std::to_string(static_cast<int64_t>(NowSeconds() * 1000));
  for (const auto& k : kinds) {
    KafkaOptions o;
    o.name = std::string("nexmark-read-") + k.kind;
    o.topics = {sink.topic(k.kind)};
    o.config = {{"bootstrap.servers", bootstrap},
                {"group.id", "nexmark-bench-" + std::string(k.kind) + "-" + run}};
    o.start = KafkaStart::kEarliest;
    o.decode.schema = k.schema;
    o.limits.max_records = 1'000'000;
    o.limits.on_overflow = OverflowPolicy::kError;  // the reader waits, never drops
    conns.push_back(Check(KafkaConnector::Make("nexmark_" + std::string(k.kind), o), "connector"));
  }
  std::vector<int64_t> got(kinds.size(), 0);
  const auto [seconds, first_row] = Drain(conns, kinds, want, options.stall_seconds, &got);
  int64_t total = 0, rejected = 0;
  bool complete = true;
  for (size_t i = 0; i < conns.size(); ++i) {
    total += got[i];
    rejected += conns[i]->stats().rejected_records;
    const auto positions = conns[i]->positions();
    for (size_t p = 0; p < kinds[i].watermarks.size(); ++p) {
      const auto [low, high] = kinds[i].watermarks[p];
      auto it = positions.find({sink.topic(kinds[i].kind), static_cast<int32_t>(p)});
      const int64_t at = it == positions.end() ? -1 : it->second;
      if (high > low && at != high) {
        complete = false;
        Log("kafka read %s[%zu]: position %lld, high watermark %lld (low %lld)",
            sink.topic(kinds[i].kind).c_str(), p, (long long)at, (long long)high, (long long)low);
      }
    }
    if (got[i] != kinds[i].retained()) {
      complete = false;
      Log("kafka read %s: %lld of %lld rows", kinds[i].kind, (long long)got[i],
          (long long)kinds[i].retained());
    }
  }
  for (auto& c : conns) c->Stop();
  bench::Measurement m;
  m.name = "nexmark_kafka_read_events_per_s";
  // From the first row to the last: the consumer group's join (~3 s on the
  // mock: its initial rebalance delay) is not in the rate; it is in seconds.
  m.value = total / (seconds - first_row);
  m.unit = "events/s";
  m.extra_numbers = {{"events", static_cast<double>(produced)},
                     {"retained_events", static_cast<double>(want)},
                     {"read_events", static_cast<double>(total)},
                     {"rejected_records", static_cast<double>(rejected)},
                     {"partitions", static_cast<double>(options.partitions)},
                     {"seconds", seconds},
                     {"seconds_to_first_row", first_row},
                     {"events_per_s_including_join", total / seconds}};
  m.extra = {{"what", "every topic read back from the earliest offset by one KafkaConnector "
                      "each (own group; NDJSON decoded to the Nexmark schemas), polled on one "
                      "thread; value: events/s from the first row to the last; seconds: from "
                      "Start to the last row, group join included"},
             {"compression", options.compression}};
  // complete: every message the cluster holds was read, each partition up to
  // its high watermark. retained_events < events: the cluster discarded some
  // before the read (the mock's 5 MiB per partition), not the connector.
  m.extra_bools = {{"complete", complete && total == want}};
  bench::Emit(m);
  return {produced, want, total, complete && total == want};
}

}  // namespace

KafkaRunResult KafkaRun(const std::vector<EventBatch>& events, const std::string& servers,
                        const KafkaRunOptions& options) {
  std::unique_ptr<KafkaMockCluster> mock;
  std::string bootstrap = servers;
  if (servers == "mock") {
    mock = Check(KafkaMockCluster::Make(options.mock_brokers), "mock cluster");
    bootstrap = mock->bootstrap_servers();
    for (const char* kind : {"person", "auction", "bid"}) {
      Check(mock->CreateTopic(std::string("nexmark-") + kind, options.partitions), "topic");
    }
  }
  auto sink = Check(KafkaSink::Make(bootstrap, "nexmark-", options.compression), "sink");
  int64_t total = 0;
  std::vector<Kind> kinds = {{"person", PersonSchema(), 0, {}},
                             {"auction", AuctionSchema(), 0, {}},
                             {"bid", BidSchema(), 0, {}}};
  const double p0 = NowSeconds();
  for (const auto& e : events) {
    Check(sink->Produce(e), "produce");
    total += e.events();
    kinds[0].produced += e.person->num_rows();
    kinds[1].produced += e.auction->num_rows();
    kinds[2].produced += e.bid->num_rows();
  }
  Check(sink->Flush(), "flush");
  bench::Measurement produce;
  produce.name = "nexmark_kafka_produce_events_per_s";
  produce.value = total / (NowSeconds() - p0);
  produce.unit = "events/s";
  produce.extra_numbers = {{"events", static_cast<double>(total)},
                           {"partitions", static_cast<double>(options.partitions)}};
  produce.extra = {{"what", "the generator's events as NDJSON messages through librdkafka's "
                            "producer, until delivered (the input of the connector run)"},
                   {"cluster", servers == "mock" ? "librdkafka mock cluster" : servers},
                   {"compression", options.compression}};
  bench::Emit(produce);
  if (options.read_back) return ReadBack(bootstrap, *sink, kinds, options);
  return {total, -1, 0, false};
}

}  // namespace rill::nexmark
