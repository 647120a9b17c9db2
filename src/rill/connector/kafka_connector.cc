#include "rill/connector/kafka_connector.h"

#include <librdkafka/rdkafka.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>

#include <simdjson.h>

#include <arrow/builder.h>
#include <arrow/record_batch.h>
#include <arrow/type.h>

#include "rill/common/json_text.h"
#include "rill/connector/decode_counters.h"
#include "rill/connector/json_stream_connector.h"

namespace rill {

namespace {

constexpr int64_t kMaxPendingRejects = 10000;
constexpr double kLagRefreshS = 0.5;

double NowSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct MessageDeleter {
  void operator()(rd_kafka_message_t* m) const { rd_kafka_message_destroy(m); }
};
using MessagePtr = std::unique_ptr<rd_kafka_message_t, MessageDeleter>;

struct ListDeleter {
  void operator()(rd_kafka_topic_partition_list_t* l) const {
    rd_kafka_topic_partition_list_destroy(l);
  }
};
using ListPtr = std::unique_ptr<rd_kafka_topic_partition_list_t, ListDeleter>;

}  // namespace

Result<KafkaStart> ParseKafkaStart(std::string_view text) {
  if (text == "committed") return KafkaStart::kCommitted;
  if (text == "earliest") return KafkaStart::kEarliest;
  if (text == "latest") return KafkaStart::kLatest;
  if (text == "timestamp") return KafkaStart::kTimestamp;
  return Status::Invalid("Unknown start position '", text,
                         "': expected 'committed', 'earliest', 'latest' or 'timestamp'");
}

struct KafkaConnector::Impl {
  KafkaConnector* self = nullptr;
  KafkaOptions options;
  BoundedBuffer buffer;
  rd_kafka_t* rk = nullptr;
  std::atomic<bool> stop{false};
  std::thread thread;
  std::condition_variable room_cv;

  bool subscribed = false;  // Start/Stop/RestorePosition (never concurrently)
  // Lock order: deliver_mu, then mu. deliver_mu makes "buffer a batch and
  // advance the positions" one step that Poll's drain never splits.
  std::mutex deliver_mu;
  mutable std::mutex mu;
  std::unique_ptr<JsonDecoder> decoder;         // guarded by mu (reader thread uses it)
  std::map<TopicPartition, int64_t> positions;  // guarded by mu
  std::map<TopicPartition, int64_t> polled;     // guarded by mu: positions at the last Poll
  std::map<TopicPartition, int64_t> lags;       // guarded by mu
  std::vector<RejectedRecord> rejects;          // guarded by mu
  ConnectorStats counters;                      // guarded by mu
  std::string pending_error;                    // guarded by mu: next Poll reports it
  bool in_outage = false;                       // guarded by mu
  // Set by RestorePosition: the tables come from a checkpoint, so partitions
  // it does not name are read from their start under KafkaStart::kCommitted
  // (the group's committed offsets may be ahead of the checkpoint).
  bool restored = false;  // guarded by mu
  int64_t retried_records = 0;                  // guarded by mu: refused pushes retried
  double last_lag_refresh = 0;                  // reader thread only

  explicit Impl(KafkaOptions o) : options(std::move(o)), buffer(options.limits) {}

  void ReportError(const std::string& what) {
    std::lock_guard<std::mutex> lock(mu);
    ++counters.errors;
    if (!in_outage) {  // once per outage; cleared by the next good message
      in_outage = true;
      pending_error = what;
    }
  }

  static void OnError(rd_kafka_t*, int err, const char* reason, void* opaque) {
    auto* impl = static_cast<Impl*>(opaque);
    impl->ReportError(std::string("Kafka error: ") +
                      rd_kafka_err2str(static_cast<rd_kafka_resp_err_t>(err)) + ": " + reason +
                      " (retrying)");
  }

  static void OnRebalance(rd_kafka_t* rk, rd_kafka_resp_err_t err,
                          rd_kafka_topic_partition_list_t* parts, void* opaque) {
    auto* impl = static_cast<Impl*>(opaque);
    const bool cooperative = std::strcmp(rd_kafka_rebalance_protocol(rk), "COOPERATIVE") == 0;
    if (err != RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
      if (cooperative) {
        rd_kafka_error_t* e = rd_kafka_incremental_unassign(rk, parts);
        if (e) rd_kafka_error_destroy(e);
      } else {
        rd_kafka_assign(rk, nullptr);
      }
      return;
    }
    impl->SetStartOffsets(parts);
    if (cooperative) {
      rd_kafka_error_t* e = rd_kafka_incremental_assign(rk, parts);
      if (e) rd_kafka_error_destroy(e);
    } else {
      rd_kafka_assign(rk, parts);
    }
  }

  /// Positions we hold win; otherwise the configured start (after a restore,
  /// kCommitted starts at the beginning).
  void SetStartOffsets(rd_kafka_topic_partition_list_t* parts) {
    bool by_time = false;
    {
      std::lock_guard<std::mutex> lock(mu);
      for (int i = 0; i < parts->cnt; ++i) {
        auto& p = parts->elems[i];
        auto it = positions.find({p.topic, p.partition});
        if (it != positions.end()) {
          p.offset = it->second;
          continue;
        }
        switch (options.start) {
          case KafkaStart::kEarliest: p.offset = RD_KAFKA_OFFSET_BEGINNING; break;
          case KafkaStart::kLatest: p.offset = RD_KAFKA_OFFSET_END; break;
          case KafkaStart::kTimestamp:
            p.offset = options.start_timestamp_ms;
            by_time = true;
            break;
          case KafkaStart::kCommitted:
            p.offset = restored ? RD_KAFKA_OFFSET_BEGINNING : RD_KAFKA_OFFSET_INVALID;
            break;
        }
      }
    }
    if (by_time) {
      // Offsets we already hold are not timestamps: look up a copy with only the others.
      ListPtr lookup(rd_kafka_topic_partition_list_copy(parts));
      if (rd_kafka_offsets_for_times(rk, lookup.get(), 10000) != RD_KAFKA_RESP_ERR_NO_ERROR) {
        ReportError("Kafka: offsets_for_times failed; starting from the earliest offsets");
      }
      std::lock_guard<std::mutex> lock(mu);
      for (int i = 0; i < parts->cnt; ++i) {
        auto& p = parts->elems[i];
        if (positions.count({p.topic, p.partition})) continue;
        int64_t found = lookup->elems[i].offset;
        p.offset = found >= 0 ? found : RD_KAFKA_OFFSET_END;
        if (lookup->elems[i].err) p.offset = RD_KAFKA_OFFSET_BEGINNING;
      }
    }
  }

  void Run() {
    std::vector<MessagePtr> batch;
    // With on_overflow=error and a row limit, a batch stays within the limit
    // when messages hold one row each (the usual case).
    int64_t max_messages = options.max_batch_messages;
    if (options.limits.on_overflow == OverflowPolicy::kError && options.limits.max_records > 0) {
      max_messages = std::min(max_messages, options.limits.max_records);
    }
    while (!stop) {
      batch.clear();
      for (int64_t i = 0; i < max_messages && !stop; ++i) {
        MessagePtr m(rd_kafka_consumer_poll(rk, i == 0 ? static_cast<int>(options.poll_timeout_ms)
                                                       : 0));
        if (!m) break;
        if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) continue;  // not an error
        if (m->err) {
          ReportError(std::string("Kafka consumer error: ") + rd_kafka_message_errstr(m.get()));
          continue;
        }
        batch.push_back(std::move(m));
      }
      if (!batch.empty()) ProcessBatch(batch);
      RefreshLags();
    }
  }

  void ProcessBatch(const std::vector<MessagePtr>& batch);
  std::shared_ptr<arrow::RecordBatch> AddMetadata(
      std::shared_ptr<arrow::RecordBatch> rows, const std::vector<int64_t>& row_offsets,
      const std::vector<int64_t>& starts, const std::vector<MessagePtr>& batch);
  bool Deliver(const std::shared_ptr<arrow::RecordBatch>& rows,
               const std::vector<MessagePtr>& batch);
  void Commit(bool async = true);
  void RefreshLags();
};

void KafkaConnector::Impl::ProcessBatch(const std::vector<MessagePtr>& batch) {
  // All values as one NDJSON input; starts[i] = offset of message i in it.
  std::string data;
  std::vector<int64_t> starts;
  starts.reserve(batch.size());
  for (const auto& m : batch) {
    starts.push_back(static_cast<int64_t>(data.size()));
    data.append(static_cast<const char*>(m->payload), m->len);
    if (m->len == 0 || static_cast<const char*>(m->payload)[m->len - 1] != '\n') data += '\n';
  }
  auto message_of = [&](int64_t offset) {
    auto it = std::upper_bound(starts.begin(), starts.end(), offset);
    return static_cast<size_t>(it - starts.begin()) - 1;
  };
  DecodeResult decoded;
  {
    std::lock_guard<std::mutex> lock(mu);
    in_outage = false;
    auto result = decoder->Decode(data);
    if (!result.ok()) {
      ++counters.errors;
      pending_error = "Kafka: decoding failed: " + result.status().ToString();
      return;
    }
    decoded = std::move(*result);
    counters.received_bytes += static_cast<int64_t>(data.size());
    counters.received_records += decoded.records;
    counters.unknown_fields += decoded.unknown_fields;
    counters.rejected_records += static_cast<int64_t>(decoded.rejects.size());
    for (auto& r : decoded.rejects) {
      const auto& m = batch[message_of(r.byte_offset)];
      r.position = std::string("topic ") + rd_kafka_topic_name(m->rkt) + ", partition " +
                   std::to_string(m->partition) + ", offset " + std::to_string(m->offset);
    }
    CollectRejects(self->name(), std::move(decoded.rejects), kMaxPendingRejects, &rejects,
                   &counters.dropped_records);
  }
  std::shared_ptr<arrow::RecordBatch> rows;
  if (decoded.batch) {
    rows = decoded.batch;
    if (options.metadata_columns) rows = AddMetadata(rows, decoded.row_offsets, starts, batch);
  }
  if (!Deliver(rows, batch)) return;  // stopped before it fit: positions stay
  Commit();
}

std::shared_ptr<arrow::RecordBatch> KafkaConnector::Impl::AddMetadata(
    std::shared_ptr<arrow::RecordBatch> rows, const std::vector<int64_t>& row_offsets,
    const std::vector<int64_t>& starts, const std::vector<MessagePtr>& batch) {
  arrow::StringBuilder topic;
  arrow::Int32Builder partition;
  arrow::Int64Builder offset;
  arrow::BinaryBuilder key;
  arrow::TimestampBuilder ts(arrow::timestamp(arrow::TimeUnit::MILLI),
                             arrow::default_memory_pool());
  Status st;
  for (int64_t row_offset : row_offsets) {
    auto it = std::upper_bound(starts.begin(), starts.end(), row_offset);
    const auto& m = batch[static_cast<size_t>(it - starts.begin()) - 1];
    st &= topic.Append(rd_kafka_topic_name(m->rkt));
    st &= partition.Append(m->partition);
    st &= offset.Append(m->offset);
    st &= m->key ? key.Append(static_cast<const uint8_t*>(m->key), static_cast<int32_t>(m->key_len))
                 : key.AppendNull();
    rd_kafka_timestamp_type_t type;
    int64_t t = rd_kafka_message_timestamp(m.get(), &type);
    st &= t >= 0 ? ts.Append(t) : ts.AppendNull();
  }
  std::shared_ptr<arrow::Array> arrays[5];
  st &= topic.Finish(&arrays[0]);
  st &= partition.Finish(&arrays[1]);
  st &= offset.Finish(&arrays[2]);
  st &= key.Finish(&arrays[3]);
  st &= ts.Finish(&arrays[4]);
  const char* names[5] = {"_topic", "_partition", "_offset", "_key", "_timestamp"};
  for (int i = 0; i < 5 && st.ok(); ++i) {
    auto field = arrow::field(names[i], arrays[i]->type());
    int at = rows->schema()->GetFieldIndex(names[i]);
    auto next = at >= 0 ? rows->SetColumn(at, field, arrays[i])
                        : rows->AddColumn(rows->num_columns(), field, arrays[i]);
    st &= next.status();
    if (next.ok()) rows = *next;
  }
  if (!st.ok()) {
    std::lock_guard<std::mutex> lock(mu);
    ++counters.errors;
    pending_error = "Kafka: metadata columns: " + st.ToString();
    return nullptr;
  }
  return rows;
}

bool KafkaConnector::Impl::Deliver(const std::shared_ptr<arrow::RecordBatch>& rows,
                                   const std::vector<MessagePtr>& batch) {
  // on_overflow = error: wait for room (the topic keeps the data meanwhile).
  for (;;) {
    {
      std::lock_guard<std::mutex> deliver(deliver_mu);
      // A batch larger than the limits goes into an empty buffer whole: its
      // messages' positions advance together, so it cannot be split.
      Status st = rows ? buffer.Push({rows}, /*oversize_when_empty=*/true) : Status::OK();
      if (!st.IsCapacityError()) {
        std::lock_guard<std::mutex> lock(mu);
        if (rows) counters.parsed_records += rows->num_rows();
        for (const auto& m : batch) {
          positions[{rd_kafka_topic_name(m->rkt), m->partition}] = m->offset + 1;
        }
        return true;
      }
      // Not refused for good: the same rows are pushed again once there is room.
      std::lock_guard<std::mutex> lock(mu);
      retried_records += rows->num_rows();
    }
    if (stop) return false;
    std::unique_lock<std::mutex> lock(mu);
    room_cv.wait_for(lock, std::chrono::milliseconds(options.poll_timeout_ms));
  }
}

void KafkaConnector::Impl::Commit(bool async) {
  ListPtr list(rd_kafka_topic_partition_list_new(0));
  {
    std::lock_guard<std::mutex> lock(mu);
    for (const auto& [tp, pos] : positions) {
      rd_kafka_topic_partition_list_add(list.get(), tp.first.c_str(), tp.second)->offset = pos;
    }
  }
  if (list->cnt > 0) rd_kafka_commit(rk, list.get(), async ? 1 : 0);
}

void KafkaConnector::Impl::RefreshLags() {
  const double now = NowSeconds();
  if (now - last_lag_refresh < kLagRefreshS) return;
  last_lag_refresh = now;
  rd_kafka_topic_partition_list_t* assigned = nullptr;
  if (rd_kafka_assignment(rk, &assigned) != RD_KAFKA_RESP_ERR_NO_ERROR || !assigned) return;
  ListPtr owned(assigned);
  std::map<TopicPartition, int64_t> fresh;
  for (int i = 0; i < assigned->cnt; ++i) {
    const auto& p = assigned->elems[i];
    int64_t low = -1;
    int64_t high = -1;
    if (rd_kafka_get_watermark_offsets(rk, p.topic, p.partition, &low, &high) !=
            RD_KAFKA_RESP_ERR_NO_ERROR ||
        high < 0) {
      continue;
    }
    std::lock_guard<std::mutex> lock(mu);
    auto it = positions.find({p.topic, p.partition});
    int64_t pos = it != positions.end() ? it->second : low;
    fresh[{p.topic, p.partition}] = std::max<int64_t>(0, high - pos);
  }
  std::lock_guard<std::mutex> lock(mu);
  lags = std::move(fresh);
}

// KafkaConnector -------------------------------------------------------------------

Result<std::shared_ptr<KafkaConnector>> KafkaConnector::Make(std::string target_table,
                                                             KafkaOptions options) {
  if (target_table.empty()) return Status::Invalid("KafkaConnector: empty target_table");
  if (options.topics.empty()) return Status::Invalid("KafkaConnector: no topics");
  if (options.max_batch_messages <= 0 || options.poll_timeout_ms <= 0) {
    return Status::Invalid("KafkaConnector: max_batch_messages and poll_timeout_ms must be > 0");
  }
  options.decode.row_offsets = options.metadata_columns;
  std::shared_ptr<KafkaConnector> c(new KafkaConnector(std::move(target_table), options));
  Impl& impl = *c->impl_;
  impl.self = c.get();
  RILL_ASSIGN_OR_RAISE(impl.decoder, JsonDecoder::Make(options.decode));

  auto config = options.config;
  config.emplace("group.id", "rill-" + c->name());
  config.emplace("auto.offset.reset",
                 options.start == KafkaStart::kLatest ? "latest" : "earliest");
  config["enable.auto.commit"] = "false";
  config["enable.partition.eof"] = "true";
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  char errstr[512];
  for (const auto& [key, value] : config) {
    if (rd_kafka_conf_set(conf, key.c_str(), value.c_str(), errstr, sizeof(errstr)) !=
        RD_KAFKA_CONF_OK) {
      rd_kafka_conf_destroy(conf);
      return Status::Invalid("KafkaConnector: kafka_config '", key, "': ", errstr);
    }
  }
  rd_kafka_conf_set_opaque(conf, &impl);
  rd_kafka_conf_set_error_cb(conf, &Impl::OnError);
  rd_kafka_conf_set_rebalance_cb(conf, &Impl::OnRebalance);
  impl.rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof(errstr));
  if (!impl.rk) {
    rd_kafka_conf_destroy(conf);  // not taken over on failure
    return Status::Invalid("KafkaConnector: ", errstr);
  }
  rd_kafka_poll_set_consumer(impl.rk);
  return c;
}

KafkaConnector::KafkaConnector(std::string target_table, KafkaOptions options)
    : Connector(options.name, std::move(target_table), options.decode.schema),
      impl_(std::make_unique<Impl>(std::move(options))) {}

KafkaConnector::~KafkaConnector() {
  Stop();
  if (!impl_->rk) return;
  // Leave the group, but never hang: rd_kafka_consumer_close() waits for the
  // group coordinator forever when the broker is down or gone. Close through a
  // queue for at most kCloseSeconds, then destroy without a consumer close.
  constexpr auto kCloseSeconds = std::chrono::seconds(5);
  rd_kafka_t* rk = impl_->rk;
  rd_kafka_queue_t* queue = rd_kafka_queue_new(rk);
  if (rd_kafka_error_t* error = rd_kafka_consumer_close_queue(rk, queue)) {
    rd_kafka_error_destroy(error);
  } else {
    const auto deadline = std::chrono::steady_clock::now() + kCloseSeconds;
    while (!rd_kafka_consumer_closed(rk) && std::chrono::steady_clock::now() < deadline) {
      rd_kafka_event_t* event = rd_kafka_queue_poll(queue, 100);
      if (event == nullptr) continue;
      if (rd_kafka_event_type(event) == RD_KAFKA_EVENT_REBALANCE) {
        // Closing revokes everything: give the partitions up.
        if (std::strcmp(rd_kafka_rebalance_protocol(rk), "COOPERATIVE") == 0) {
          rd_kafka_error_t* e =
              rd_kafka_incremental_unassign(rk, rd_kafka_event_topic_partition_list(event));
          if (e) rd_kafka_error_destroy(e);
        } else {
          rd_kafka_assign(rk, nullptr);
        }
      }
      rd_kafka_event_destroy(event);
    }
  }
  rd_kafka_queue_destroy(queue);
  rd_kafka_destroy_flags(rk, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE);
}

Status KafkaConnector::Start() {
  if (impl_->thread.joinable()) return Status::OK();
  ListPtr topics(rd_kafka_topic_partition_list_new(static_cast<int>(impl_->options.topics.size())));
  for (const auto& t : impl_->options.topics) {
    rd_kafka_topic_partition_list_add(topics.get(), t.c_str(), RD_KAFKA_PARTITION_UA);
  }
  if (!impl_->subscribed) {
    rd_kafka_resp_err_t err = rd_kafka_subscribe(impl_->rk, topics.get());
    if (err) return Status::IOError("KafkaConnector: subscribe: ", rd_kafka_err2str(err));
    impl_->subscribed = true;
  }
  impl_->stop = false;
  impl_->thread = std::thread([this] { impl_->Run(); });
  return Status::OK();
}

void KafkaConnector::Stop() {
  impl_->stop = true;
  impl_->room_cv.notify_all();
  if (impl_->thread.joinable()) {
    impl_->thread.join();
    impl_->Commit(/*async=*/false);
  }
}

Result<std::vector<std::shared_ptr<arrow::RecordBatch>>> KafkaConnector::Poll() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (!impl_->pending_error.empty()) {
      std::string error = std::move(impl_->pending_error);
      impl_->pending_error.clear();
      return Status::IOError(error);
    }
  }
  std::vector<std::shared_ptr<arrow::RecordBatch>> out;
  {
    std::lock_guard<std::mutex> deliver(impl_->deliver_mu);
    out = impl_->buffer.Drain();
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->polled = impl_->positions;
  }
  impl_->room_cv.notify_all();
  return out;
}

std::vector<RejectedRecord> KafkaConnector::TakeRejects() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return std::move(impl_->rejects);
}

void KafkaConnector::SetTargetSchema(const std::shared_ptr<arrow::Schema>& schema) {
  if (impl_->options.decode.schema || !schema) return;
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (!impl_->decoder->SetSchema(schema).ok()) ++impl_->counters.errors;
}

ConnectorStats KafkaConnector::stats() const {
  const ConnectorStats buffered = impl_->buffer.stats();  // before mu, as Poll takes them
  std::lock_guard<std::mutex> lock(impl_->mu);
  ConnectorStats s = WithDecodeCounters(buffered, impl_->counters);
  // on_overflow=error makes the reader wait, never lose rows: its retried
  // pushes are not refusals.
  s.refused_records = std::max<int64_t>(0, s.refused_records - impl_->retried_records);
  for (const auto& [tp, lag] : impl_->lags) s.lag += lag;
  return s;
}

std::map<KafkaConnector::TopicPartition, int64_t> KafkaConnector::positions() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->positions;
}

std::map<KafkaConnector::TopicPartition, int64_t> KafkaConnector::lags() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->lags;
}

// Checkpoints -----------------------------------------------------------------------

Result<std::string> KafkaConnector::SavePosition() const {
  std::string out = "{\"partitions\":[";
  std::lock_guard<std::mutex> lock(impl_->mu);
  bool first = true;
  for (const auto& [tp, offset] : impl_->polled) {
    if (!first) out += ',';
    first = false;
    out += "{\"topic\":";
    AppendJsonString(&out, tp.first);
    out += ",\"partition\":" + std::to_string(tp.second) +
           ",\"offset\":" + std::to_string(offset) + "}";
  }
  out += "]}";
  return out;
}

Status KafkaConnector::RestorePosition(std::string_view position) {
  std::map<TopicPartition, int64_t> restored;
  if (!position.empty()) {
    simdjson::dom::parser parser;
    simdjson::padded_string padded(position);
    simdjson::dom::element doc;
    simdjson::dom::array parts;
    if (parser.parse(padded).get(doc) || doc["partitions"].get_array().get(parts)) {
      return Status::Invalid("KafkaConnector '", name(),
                             "': the checkpoint position is not {\"partitions\": [...]}");
    }
    for (simdjson::dom::element p : parts) {
      std::string_view topic;
      int64_t partition = 0;
      int64_t offset = 0;
      if (p["topic"].get_string().get(topic) || p["partition"].get_int64().get(partition) ||
          p["offset"].get_int64().get(offset)) {
        return Status::Invalid("KafkaConnector '", name(),
                               "': a partition entry of the checkpoint position lacks "
                               "topic, partition or offset");
      }
      restored[{std::string(topic), static_cast<int32_t>(partition)}] = offset;
    }
  }
  Impl& impl = *impl_;
  const bool was_running = impl.thread.joinable();
  impl.stop = true;
  impl.room_cv.notify_all();
  if (was_running) impl.thread.join();
  {
    // What is buffered came after the position: it is fetched again.
    std::lock_guard<std::mutex> deliver(impl.deliver_mu);
    impl.buffer.Drain();
    std::lock_guard<std::mutex> lock(impl.mu);
    impl.positions = restored;
    impl.polled = restored;
    impl.restored = true;
    impl.rejects.clear();
    impl.pending_error.clear();
  }
  // Partitions already assigned move to the restored offsets now (the others
  // get them from the rebalance callback); those the checkpoint does not know
  // start over from the configured start (kCommitted: the beginning).
  rd_kafka_topic_partition_list_t* assigned = nullptr;
  if (rd_kafka_assignment(impl.rk, &assigned) == RD_KAFKA_RESP_ERR_NO_ERROR && assigned) {
    ListPtr owned(assigned);
    impl.SetStartOffsets(assigned);  // restored: never RD_KAFKA_OFFSET_INVALID
    if (assigned->cnt > 0) {
      rd_kafka_error_t* e = rd_kafka_seek_partitions(impl.rk, assigned, 10000);
      if (e) {
        std::string what = rd_kafka_error_string(e);
        rd_kafka_error_destroy(e);
        return Status::IOError("KafkaConnector '", name(), "': seek to the checkpoint: ", what);
      }
    }
  }
  // For monitoring only: asynchronous, so a restore never waits for the group
  // coordinator (a synchronous commit before the group is joined takes seconds).
  if (!restored.empty()) impl.Commit(/*async=*/true);
  if (was_running) {
    impl.stop = false;
    impl.thread = std::thread([this] { impl_->Run(); });
  }
  return Status::OK();
}

}  // namespace rill
