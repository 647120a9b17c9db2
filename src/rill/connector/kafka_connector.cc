#include "rill/connector/kafka_connector.h"

#include <librdkafka/rdkafka.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>

#include <simdjson.h>

#include <arrow/record_batch.h>

#include "rill/common/json_text.h"
#include "rill/connector/decode_counters.h"
#include "rill/connector/kafka_avro_internal.h"
#include "rill/connector/json_stream_connector.h"
#include "rill/connector/kafka_connector_internal.h"

namespace rill {

using kafka_internal::DecodedMessages;
using kafka_internal::MessagePtr;

namespace {

constexpr int64_t kMaxPendingRejects = 10000;
constexpr double kLagRefreshS = 0.5;

double NowSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct ListDeleter {
  void operator()(rd_kafka_topic_partition_list_t* l) const {
    rd_kafka_topic_partition_list_destroy(l);
  }
};
using ListPtr = std::unique_ptr<rd_kafka_topic_partition_list_t, ListDeleter>;

using Offsets = std::map<KafkaConnector::TopicPartition, int64_t>;

ListPtr ToList(const Offsets& offsets) {
  ListPtr list(rd_kafka_topic_partition_list_new(static_cast<int>(offsets.size())));
  for (const auto& [tp, offset] : offsets) {
    rd_kafka_topic_partition_list_add(list.get(), tp.first.c_str(), tp.second)->offset = offset;
  }
  return list;
}

/// Parse a SavePosition document.
Result<Offsets> ParsePosition(const std::string& connector, std::string_view position) {
  Offsets out;
  if (position.empty()) return out;
  simdjson::dom::parser parser;
  simdjson::padded_string padded(position);
  simdjson::dom::element doc;
  simdjson::dom::array parts;
  if (parser.parse(padded).get(doc) || doc["partitions"].get_array().get(parts)) {
    return Status::Invalid("KafkaConnector '", connector,
                           "': the checkpoint position is not {\"partitions\": [...]}");
  }
  for (simdjson::dom::element p : parts) {
    std::string_view topic;
    int64_t partition = 0;
    int64_t offset = 0;
    if (p["topic"].get_string().get(topic) || p["partition"].get_int64().get(partition) ||
        p["offset"].get_int64().get(offset)) {
      return Status::Invalid("KafkaConnector '", connector,
                             "': a partition entry of the checkpoint position lacks "
                             "topic, partition or offset");
    }
    out[{std::string(topic), static_cast<int32_t>(partition)}] = offset;
  }
  return out;
}

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
  std::unique_ptr<kafka_internal::KeyReader> keys;  // guarded by mu; null: no key columns
  std::shared_ptr<AvroSource> avro_source;          // format="avro" only
  std::unique_ptr<AvroDecoder> avro_decoder;        // guarded by mu, format="avro" only
  // positions: the next offset per partition past the messages whose rows and
  // rejects are buffered (or were dropped by the overflow policy, counted);
  // polled: the same as of the last Poll, which handed out exactly those.
  std::map<TopicPartition, int64_t> positions;  // guarded by mu
  std::map<TopicPartition, int64_t> polled;     // guarded by mu
  std::map<TopicPartition, int64_t> lags;       // guarded by mu
  std::vector<RejectedRecord> rejects;          // guarded by mu: of buffered messages
  std::vector<RejectedRecord> polled_rejects;   // guarded by mu: of polled ones (TakeRejects)
  // Commits: `commit_target` is what the engine allows (CommitApplied: what
  // it applied; CommitCheckpointed: what a complete checkpoint holds),
  // `commit_sent` what was last sent to the group coordinator.
  Offsets commit_target;                        // guarded by mu
  Offsets commit_sent;                          // guarded by mu
  double last_commit_at = 0;                    // guarded by mu
  bool stopped = false;                         // guarded by mu: Stop() ran, Start() not since
  // Partitions whose messages were consumed from librdkafka but not buffered
  // when the reader stopped: the next Start seeks them back (first offset).
  Offsets resume_at;                            // guarded by mu
  // Partitions whose first message after a restore must start at the
  // restored position (a seek can lose to the committed offset's fetch of the
  // first assignment): another first offset is sought back once.
  std::map<TopicPartition, bool> check_start;   // reader thread and RestorePosition (stopped)
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
      if (!batch.empty()) Screen(&batch);
      if (!batch.empty()) ProcessBatch(batch);
      RefreshLags();
    }
  }

  /// Drop messages below the positions held (read twice) and, after a
  /// restore, seek a partition back whose first message is past its position.
  void Screen(std::vector<MessagePtr>* batch);
  void ProcessBatch(const std::vector<MessagePtr>& batch);
  /// Buffer `decoded` (the rows and rejects of batch[begin, end)) and advance
  /// the positions past those messages, as one step. False if stopped while
  /// waiting for room (on_overflow=error): nothing buffered, positions stay.
  bool Deliver(DecodedMessages* decoded, const std::vector<MessagePtr>& batch, size_t begin,
               size_t end);
  /// Remember batch[begin, …) for the next Start to read again.
  void KeepForRestart(const std::vector<MessagePtr>& batch, size_t begin);
  /// Wait up to poll_timeout_ms, or until stopped.
  void Pause();
  /// Send `commit_target` to the group coordinator if it changed, at most once
  /// per commit_interval_ms unless `now` (then synchronously). Any thread.
  void SendCommit(bool now);
  /// Seek `parts` to their offsets (waits up to 10 s). Reader thread stopped.
  Status Seek(rd_kafka_topic_partition_list_t* parts);
  void RefreshLags();
};

void KafkaConnector::Impl::Screen(std::vector<MessagePtr>* batch) {
  Offsets seek_back;
  std::vector<MessagePtr> kept;
  {
    std::lock_guard<std::mutex> lock(mu);
    for (auto& m : *batch) {
      TopicPartition tp(rd_kafka_topic_name(m->rkt), m->partition);
      if (seek_back.count(tp)) continue;
      auto at = positions.find(tp);
      // Below the position: already buffered once (a fetch that started from a
      // committed offset behind the position). Never twice.
      if (at != positions.end() && m->offset < at->second) continue;
      auto check = check_start.find(tp);
      if (check != check_start.end()) {
        if (at != positions.end() && m->offset > at->second && !check->second) {
          check->second = true;  // once: later gaps are the log's own
          seek_back[tp] = at->second;
          continue;
        }
        check_start.erase(check);
      }
      kept.push_back(std::move(m));
    }
  }
  if (!seek_back.empty()) {
    std::vector<MessagePtr> rest;
    for (auto& m : kept) {
      if (!seek_back.count({rd_kafka_topic_name(m->rkt), m->partition})) {
        rest.push_back(std::move(m));
      }
    }
    kept = std::move(rest);
    Status st = Seek(ToList(seek_back).get());
    if (!st.ok()) ReportError(st.ToString());
  }
  *batch = std::move(kept);
}

void KafkaConnector::Impl::ProcessBatch(const std::vector<MessagePtr>& batch) {
  size_t begin = 0;
  bool reported = false;
  while (begin < batch.size()) {
    DecodedMessages decoded;
    {
      std::lock_guard<std::mutex> lock(mu);
      in_outage = false;
      decoded = avro_decoder
                    ? kafka_internal::DecodeAvroMessages(
                          avro_source.get(), avro_decoder.get(), batch, begin, batch.size(),
                          options.metadata_columns, options.pool, options.decode.max_raw_bytes)
                    : kafka_internal::DecodeMessages(decoder.get(), options.decode, batch, begin,
                                                     batch.size(), options.metadata_columns,
                                                     options.pool, keys.get());
    }
    const size_t end = begin + decoded.messages;
    if (end > begin && !Deliver(&decoded, batch, begin, end)) {
      KeepForRestart(batch, begin);
      return;
    }
    begin = end;
    if (decoded.error.ok()) continue;
    // Adding the metadata columns failed (Arrow could not allocate), or the
    // schema registry of format="avro" could not be asked: the
    // messages from `begin` on are neither buffered nor passed; decode them
    // again after a pause. Counted per attempt, reported once per batch.
    {
      std::lock_guard<std::mutex> lock(mu);
      ++counters.errors;
      if (!reported) {
        pending_error = std::string(avro_decoder ? "Kafka: decoding Avro stopped at "
                                                 : "Kafka: adding the metadata columns failed at ") +
                        kafka_internal::MessagePosition(*batch[begin]) +
                        " (retrying): " + decoded.error.ToString();
      }
    }
    reported = true;
    Pause();
    if (stop) {
      KeepForRestart(batch, begin);
      return;
    }
  }
}

bool KafkaConnector::Impl::Deliver(DecodedMessages* decoded,
                                   const std::vector<MessagePtr>& batch, size_t begin,
                                   size_t end) {
  int64_t rows = 0;
  for (const auto& b : decoded->rows) rows += b->num_rows();
  // on_overflow = error: wait for room (the topic keeps the data meanwhile).
  for (;;) {
    {
      std::lock_guard<std::mutex> deliver(deliver_mu);
      // A batch larger than the limits goes into an empty buffer whole: its
      // messages' positions advance together, so it cannot be split.
      Status st = rows > 0 ? buffer.Push(decoded->rows, /*oversize_when_empty=*/true)
                           : Status::OK();
      if (!st.IsCapacityError()) {
        std::lock_guard<std::mutex> lock(mu);
        counters.parsed_records += rows;
        counters.received_bytes += decoded->received_bytes;
        counters.received_records += decoded->received_records;
        counters.unknown_fields += decoded->unknown_fields;
        counters.tombstones += decoded->tombstones;
        counters.rejected_records += static_cast<int64_t>(decoded->rejects.size());
        CollectRejects(self->name(), std::move(decoded->rejects), kMaxPendingRejects, &rejects,
                       &counters.dropped_records);
        for (size_t i = begin; i < end; ++i) {
          const auto& m = batch[i];
          positions[{rd_kafka_topic_name(m->rkt), m->partition}] = m->offset + 1;
        }
        return true;
      }
      // Not refused for good: the same rows are pushed again once there is room.
      std::lock_guard<std::mutex> lock(mu);
      retried_records += rows;
    }
    if (stop) return false;
    Pause();
  }
}

void KafkaConnector::Impl::KeepForRestart(const std::vector<MessagePtr>& batch,
                                          size_t begin) {
  std::lock_guard<std::mutex> lock(mu);
  for (size_t i = begin; i < batch.size(); ++i) {
    const auto& m = batch[i];
    // Messages of a partition arrive in offset order: the first one counts.
    resume_at.emplace(TopicPartition(rd_kafka_topic_name(m->rkt), m->partition), m->offset);
  }
}

void KafkaConnector::Impl::Pause() {
  std::unique_lock<std::mutex> lock(mu);
  room_cv.wait_for(lock, std::chrono::milliseconds(options.poll_timeout_ms),
                   [this] { return stop.load(); });
}

void KafkaConnector::Impl::SendCommit(bool now) {
  ListPtr list;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (commit_target.empty() || (commit_target == commit_sent && !now)) return;
    const double t = NowSeconds();
    if (!now && t - last_commit_at < options.commit_interval_ms / 1000.0) return;
    list = ToList(commit_target);
    commit_sent = commit_target;
    last_commit_at = t;
  }
  rd_kafka_commit(rk, list.get(), now ? 0 : 1);
}

Status KafkaConnector::Impl::Seek(rd_kafka_topic_partition_list_t* parts) {
  if (parts->cnt == 0) return Status::OK();
  rd_kafka_error_t* e = rd_kafka_seek_partitions(rk, parts, 10000);
  if (!e) return Status::OK();
  std::string what = rd_kafka_error_string(e);
  rd_kafka_error_destroy(e);
  return Status::IOError("KafkaConnector '", self->name(), "': seek: ", what);
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
  if (options.commit_interval_ms < 0) {
    return Status::Invalid("KafkaConnector: commit_interval_ms must be >= 0");
  }
  if (options.key_format == KafkaKeyFormat::kString && options.key_columns.size() > 1) {
    return Status::Invalid("KafkaConnector: key_format 'string' takes one key column, got ",
                           options.key_columns.size());
  }
  const bool keys = !options.key_columns.empty() || options.key_format == KafkaKeyFormat::kString;
  // Rows map back to their messages for the metadata columns and the keys.
  options.decode.row_offsets = options.metadata_columns || keys;
  std::shared_ptr<KafkaConnector> c(new KafkaConnector(std::move(target_table), options));
  Impl& impl = *c->impl_;
  impl.self = c.get();
  RILL_ASSIGN_OR_RAISE(impl.decoder, JsonDecoder::Make(options.decode));
  if (options.format == "avro") {
    if (options.decode.format != JsonFormat::kJson || keys || !options.decode.op_column.empty()) {
      return Status::Invalid(
          "KafkaConnector: format 'avro' reads each value as one row; the Debezium envelope, "
          "op_column, key_columns and key_format (tombstones) are for JSON values");
    }
    RILL_ASSIGN_OR_RAISE(impl.avro_source, AvroSource::Make(options.avro));
    AvroDecodeOptions avro;
    avro.schema = options.decode.schema;
    avro.pool = options.pool;
    RILL_ASSIGN_OR_RAISE(impl.avro_decoder, AvroDecoder::Make(std::move(avro)));
  } else if (options.format != "json") {
    return Status::Invalid("KafkaConnector: unknown format '", options.format,
                           "': expected 'json' or 'avro'");
  }
  if (keys) {
    impl.keys = std::make_unique<kafka_internal::KeyReader>(options.key_columns,
                                                            options.key_format);
  }

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
  Offsets resume;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    resume = std::move(impl_->resume_at);
    impl_->resume_at.clear();
    impl_->stopped = false;
  }
  // Messages the last run took from librdkafka but never buffered are read again.
  if (!resume.empty()) RILL_RETURN_NOT_OK(impl_->Seek(ToList(resume).get()));
  impl_->stop = false;
  impl_->thread = std::thread([this] { impl_->Run(); });
  return Status::OK();
}

void KafkaConnector::Stop() {
  impl_->stop = true;
  impl_->room_cv.notify_all();
  if (!impl_->thread.joinable()) return;
  impl_->thread.join();
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stopped = true;
  }
  // Only what the engine allowed: rows still buffered are not committed (a
  // later run reads them again; at-least-once).
  impl_->SendCommit(/*now=*/true);
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
    CollectRejects(name(), std::move(impl_->rejects), kMaxPendingRejects,
                   &impl_->polled_rejects, &impl_->counters.dropped_records);
    impl_->rejects.clear();
  }
  impl_->room_cv.notify_all();
  return out;
}

std::vector<RejectedRecord> KafkaConnector::TakeRejects() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  std::vector<RejectedRecord> out = std::move(impl_->polled_rejects);
  impl_->polled_rejects.clear();
  return out;
}

void KafkaConnector::CommitApplied() {
  bool stopped;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->commit_target = impl_->polled;
    stopped = impl_->stopped;
  }
  // Stopped (Engine::RemoveConnector's last write): nothing else will send it.
  impl_->SendCommit(/*now=*/stopped);
}

void KafkaConnector::CommitCheckpointed(std::string_view position) {
  auto offsets = ParsePosition(name(), position);
  if (!offsets.ok()) {
    std::lock_guard<std::mutex> lock(impl_->mu);
    ++impl_->counters.errors;
    impl_->pending_error = offsets.status().ToString();
    return;
  }
  bool stopped;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->commit_target = std::move(*offsets);
    impl_->last_commit_at = 0;  // not held back by the interval
    stopped = impl_->stopped;
  }
  impl_->SendCommit(/*now=*/stopped);
}

std::map<KafkaConnector::TopicPartition, int64_t> KafkaConnector::commit_target() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->commit_target;
}

void KafkaConnector::SetTargetSchema(const std::shared_ptr<arrow::Schema>& schema) {
  if (!schema) return;
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (impl_->keys) impl_->keys->SetTableSchema(schema);  // its primary key
  if (impl_->options.decode.schema) return;
  if (!impl_->decoder->SetSchema(schema).ok()) ++impl_->counters.errors;
  if (impl_->avro_decoder && !impl_->avro_decoder->SetSchema(schema).ok()) {
    ++impl_->counters.errors;
  }
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

std::string KafkaConnector::source_group() const {
  auto it = impl_->options.config.find("group.id");
  return it != impl_->options.config.end() ? it->second : "rill-" + name();
}

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
  RILL_ASSIGN_OR_RAISE(Offsets restored, ParsePosition(name(), position));
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
    impl.polled_rejects.clear();
    impl.resume_at.clear();  // every assigned partition is sought below
    impl.pending_error.clear();
    impl.commit_target = restored;
    impl.last_commit_at = 0;
    impl.check_start.clear();
    for (const auto& [tp, offset] : restored) impl.check_start[tp] = false;
  }
  // Partitions already assigned move to the restored offsets now (the others
  // get them from the rebalance callback); those the checkpoint does not know
  // start over from the configured start (kCommitted: the beginning).
  rd_kafka_topic_partition_list_t* assigned = nullptr;
  if (rd_kafka_assignment(impl.rk, &assigned) == RD_KAFKA_RESP_ERR_NO_ERROR && assigned) {
    ListPtr owned(assigned);
    impl.SetStartOffsets(assigned);  // restored: never RD_KAFKA_OFFSET_INVALID
    Status st = impl.Seek(assigned);
    if (!st.ok()) return Status::IOError(st.message(), " (to the checkpoint)");
  }
  // A checkpoint holds these rows: asynchronous, so a restore never waits for
  // the group coordinator (a synchronous commit before the group is joined
  // takes seconds).
  impl.SendCommit(/*now=*/false);
  if (was_running) {
    impl.stop = false;
    impl.thread = std::thread([this] { impl_->Run(); });
  }
  return Status::OK();
}

}  // namespace rill
