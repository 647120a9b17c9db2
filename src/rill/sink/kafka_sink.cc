#include "rill/sink/kafka_sink.h"

#include <librdkafka/rdkafka.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <unordered_set>

#include <arrow/type.h>
#include <spdlog/spdlog.h>

#include "rill/connector/kafka_client.h"
#include "rill/sink/kafka_sink_internal.h"

namespace rill {

namespace {

constexpr int64_t kMaxPendingCommits = 4;

using kafka_sink_internal::EncodedMessage;
using kafka_sink_internal::MessageEncoder;

struct ErrorDeleter {
  void operator()(rd_kafka_error_t* e) const { rd_kafka_error_destroy(e); }
};
using ErrorPtr = std::unique_ptr<rd_kafka_error_t, ErrorDeleter>;

struct ListDeleter {
  void operator()(rd_kafka_topic_partition_list_t* l) const {
    rd_kafka_topic_partition_list_destroy(l);
  }
};
using ListPtr = std::unique_ptr<rd_kafka_topic_partition_list_t, ListDeleter>;

struct GroupMetadataDeleter {
  void operator()(rd_kafka_consumer_group_metadata_t* m) const {
    rd_kafka_consumer_group_metadata_destroy(m);
  }
};
using GroupMetadataPtr =
    std::unique_ptr<rd_kafka_consumer_group_metadata_t, GroupMetadataDeleter>;

/// Producer-only properties: left out of the progress consumer's configuration
/// (librdkafka would warn about each).
bool IsProducerProperty(const std::string& key) {
  static const char* kKeys[] = {
      "transactional.id", "transaction.timeout.ms", "enable.idempotence", "acks",
      "request.required.acks", "linger.ms", "queue.buffering.max.ms", "batch.num.messages",
      "batch.size", "compression.type", "compression.codec", "compression.level",
      "message.timeout.ms", "delivery.timeout.ms", "retries", "message.send.max.retries",
      "queue.buffering.max.messages", "queue.buffering.max.kbytes", "partitioner",
      "enable.gapless.guarantee", "max.in.flight.requests.per.connection", "max.in.flight",
      "sticky.partitioning.linger.ms", "retry.backoff.ms", "request.timeout.ms",
  };
  return std::any_of(std::begin(kKeys), std::end(kKeys),
                     [&](const char* k) { return key == k; });
}

/// librdkafka's fatal errors that mean another producer took our
/// transactional.id.
bool IsFenced(rd_kafka_resp_err_t err) {
  return err == RD_KAFKA_RESP_ERR__FENCED || err == RD_KAFKA_RESP_ERR_PRODUCER_FENCED ||
         err == RD_KAFKA_RESP_ERR_INVALID_PRODUCER_EPOCH;
}

void OnLog(const rd_kafka_t* rk, int level, const char* facility, const char* message) {
  const char* name = rd_kafka_name(rk);
  if (level <= 3) {
    spdlog::error("librdkafka {} {}: {}", name, facility, message);
  } else if (level == 4) {
    spdlog::warn("librdkafka {} {}: {}", name, facility, message);
  } else {
    spdlog::debug("librdkafka {} {}: {}", name, facility, message);
  }
}

class KafkaSinkWriter final : public SinkWriter {
 public:
  KafkaSinkWriter(KafkaSinkOptions options, std::string transactional_id,
                  std::string progress_group)
      : options_(std::move(options)),
        transactional_id_(std::move(transactional_id)),
        progress_group_(std::move(progress_group)) {}
  ~KafkaSinkWriter() override { Close(); }

  Status Open(const std::shared_ptr<arrow::Schema>& table_schema,
              const std::vector<std::string>& primary_key) override;
  Result<std::optional<SinkProgress>> LoadProgress() override;
  Status Write(const ChangeSet& changes, SinkMode mode) override;
  Status Commit(const CommitPoint& point) override;
  void Abort() override;
  void Close() override;
  int64_t bytes_written() const override {
    return bytes_.load(std::memory_order_relaxed);  // a counter: no ordering needed
  }
  const char* type() const override { return "kafka"; }
  std::string external_transaction_cluster() const override {
    auto it = options_.kafka_config.find("bootstrap.servers");
    return it != options_.kafka_config.end() ? it->second : "";
  }
  Status OpenExternal(const std::shared_ptr<arrow::Schema>& table_schema,
                      const std::vector<std::string>& primary_key) override {
    return PrepareEncoder(table_schema, primary_key);
  }
  Status WriteInto(void* producer, const ChangeSet& changes, SinkMode mode) override;

 private:
  /// "KafkaSink topic 't': " (every error starts with it).
  std::string Prefix() const { return "KafkaSink topic '" + options_.topic + "': "; }
  Status NotOpen() const { return Status::Invalid(Prefix(), "the writer is not open"); }
  /// The Status of a failed librdkafka call `what`; remembers a fenced producer.
  Status Failed(const char* what, ErrorPtr error);
  /// IOError when the producer hit a fatal error (remembered when fenced).
  Status CheckFatal();
  Status CheckDeliveries();
  Status BeginIfNeeded();
  Status Produce(const EncodedMessage& message);
  /// Produce `message` with `rk` to `rkt`, serving delivery reports while its
  /// queue is full and every 1000 messages (`*unpolled` counts them).
  Status ProduceTo(rd_kafka_t* rk, rd_kafka_topic_t* rkt, const EncodedMessage& message,
                   int64_t* unpolled);
  /// The keys whose last message in the topic (as read_committed consumers
  /// see it) is not a tombstone.
  Result<std::unordered_set<std::string>> ReadLiveKeys();
  /// Write a snapshot in upsert mode: its rows, then a tombstone for every key
  /// the topic holds and the snapshot does not.
  Status WriteUpsertSnapshot(const ChangeSet& changes);
  /// The progress as one partition's offset (and metadata) of the progress group.
  ListPtr ProgressOffsets(const CommitPoint& point) const;
  Status SendOffsets(rd_kafka_topic_partition_list_t* offsets, const std::string& group);
  Status CommitTransaction(const CommitPoint& point);
  Status CommitIdempotent(const CommitPoint& point);
  /// Serve the results of the progress commits sent so far, waiting up to
  /// `timeout_ms` for all of them; the first failure since the last call.
  Status WaitForProgressCommits(int64_t timeout_ms);
  Result<rd_kafka_conf_t*> MakeConf(bool producer);
  /// The encoder of the table's rows (key columns checked; the schema
  /// registry client made for format="avro").
  Status PrepareEncoder(const std::shared_ptr<arrow::Schema>& table_schema,
                        const std::vector<std::string>& primary_key);

  static void OnDelivery(rd_kafka_t*, const rd_kafka_message_t* m, void* opaque) {
    auto* self = static_cast<KafkaSinkWriter*>(opaque);
    if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
      self->bytes_.fetch_add(static_cast<int64_t>(m->len + m->key_len),
                             std::memory_order_relaxed);
      return;
    }
    if (self->failed_deliveries_++ == 0) self->first_delivery_error_ = rd_kafka_err2str(m->err);
  }
  static void OnCommitted(rd_kafka_t*, rd_kafka_resp_err_t err,
                          rd_kafka_topic_partition_list_t* offsets, void* opaque) {
    auto* self = static_cast<KafkaSinkWriter*>(opaque);
    --self->pending_commits_;
    if (err == RD_KAFKA_RESP_ERR_NO_ERROR && offsets && offsets->cnt > 0) err = offsets->elems[0].err;
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR && self->commit_error_.empty()) {
      self->commit_error_ = self->Prefix() + "committing the progress to group '" +
                            self->progress_group_ + "': " + rd_kafka_err2name(err) + ": " +
                            rd_kafka_err2str(err);
    }
  }
  static void OnError(rd_kafka_t*, int err, const char* reason, void* opaque) {
    auto* self = static_cast<KafkaSinkWriter*>(opaque);
    self->last_error_ = std::string(rd_kafka_err2name(static_cast<rd_kafka_resp_err_t>(err))) +
                        ": " + reason;
  }

  KafkaSinkOptions options_;
  std::string transactional_id_;
  std::string progress_group_;
  std::unique_ptr<MessageEncoder> encoder_;
  std::shared_ptr<SchemaRegistryClient> registry_;  // format="avro": made by the first Open
  rd_kafka_t* producer_ = nullptr;
  rd_kafka_topic_t* topic_ = nullptr;
  rd_kafka_t* consumer_ = nullptr;  // reads and (without exactly_once) commits the progress
  // Without exactly_once the progress is committed asynchronously (the next
  // Commit, LoadProgress and Close collect the results): a lagging progress
  // only means writing a batch again after a crash, which at-least-once allows.
  rd_kafka_queue_t* commit_queue_ = nullptr;
  int64_t pending_commits_ = 0;
  std::string commit_error_;
  bool in_transaction_ = false;
  std::string fenced_;  // sticky: why this writer may not open again
  // Delivery reports since the last Commit/Abort (served on the sink's thread
  // by rd_kafka_poll / flush, like the error callback).
  int64_t failed_deliveries_ = 0;
  std::string first_delivery_error_;
  std::string last_error_;
  int64_t unpolled_ = 0;
  std::atomic<int64_t> bytes_{0};
};

Result<rd_kafka_conf_t*> KafkaSinkWriter::MakeConf(bool producer) {
  auto config = options_.kafka_config;
  if (producer) {
    config.emplace("enable.idempotence", "true");
    if (options_.exactly_once) {
      config["transactional.id"] = transactional_id_;
    } else {
      config.erase("transactional.id");  // only names the progress group
    }
  } else {
    for (auto it = config.begin(); it != config.end();) {
      it = IsProducerProperty(it->first) ? config.erase(it) : std::next(it);
    }
    config["group.id"] = progress_group_;
    config["enable.auto.commit"] = "false";
    config["isolation.level"] = "read_committed";
  }
  RILL_ASSIGN_OR_RAISE(rd_kafka_conf_t* conf,
                       MakeKafkaConf(config, "KafkaSink topic '" + options_.topic + "'"));
  rd_kafka_conf_set_log_cb(conf, &OnLog);
  if (producer) {
    rd_kafka_conf_set_opaque(conf, this);
    rd_kafka_conf_set_dr_msg_cb(conf, &OnDelivery);
    rd_kafka_conf_set_error_cb(conf, &OnError);
  }
  return conf;
}

Status KafkaSinkWriter::Open(const std::shared_ptr<arrow::Schema>& table_schema,
                             const std::vector<std::string>& primary_key) {
  Close();  // after a failure: start over with a new producer
  if (!fenced_.empty()) return Status::IOError(fenced_);
  RILL_RETURN_NOT_OK(PrepareEncoder(table_schema, primary_key));

  char errstr[512];
  RILL_ASSIGN_OR_RAISE(rd_kafka_conf_t * conf, MakeConf(/*producer=*/true));
  producer_ = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
  if (!producer_) {
    rd_kafka_conf_destroy(conf);  // not taken over on failure
    return Status::Invalid(Prefix(), "producer: ", errstr);
  }
  topic_ = rd_kafka_topic_new(producer_, options_.topic.c_str(), nullptr);
  if (!topic_) {
    return Status::IOError(Prefix(), "topic handle: ", rd_kafka_err2str(rd_kafka_last_error()));
  }
  RILL_ASSIGN_OR_RAISE(conf, MakeConf(/*producer=*/false));
  consumer_ = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof(errstr));
  if (!consumer_) {
    rd_kafka_conf_destroy(conf);
    return Status::Invalid(Prefix(), "progress consumer: ", errstr);
  }
  commit_queue_ = rd_kafka_queue_new(consumer_);
  if (options_.exactly_once) {
    // Fences an older producer of this transactional.id and aborts its open
    // transaction (a crash's leftovers), so LoadProgress reads a settled group.
    ErrorPtr error(rd_kafka_init_transactions(producer_, static_cast<int>(options_.timeout_ms)));
    if (error) {
      Status st = Failed("init_transactions", std::move(error));
      Close();  // not open: Write and Commit say so until an Open succeeds
      return st;
    }
  }
  return Status::OK();
}

Status KafkaSinkWriter::WriteInto(void* producer, const ChangeSet& changes, SinkMode mode) {
  if (!encoder_) return NotOpen();
  auto* rk = static_cast<rd_kafka_t*>(producer);
  // A handle of this call only: the producer is the instance's, and may go
  // before this writer does.
  std::unique_ptr<rd_kafka_topic_t, void (*)(rd_kafka_topic_t*)> rkt(
      rd_kafka_topic_new(rk, options_.topic.c_str(), nullptr), rd_kafka_topic_destroy);
  if (!rkt) {
    return Status::IOError(Prefix(), "topic handle: ", rd_kafka_err2str(rd_kafka_last_error()));
  }
  int64_t unpolled = 0;
  for (const auto& batch : changes.batches) {
    // A snapshot in upsert mode writes its rows (values); the keys the topic
    // held and the snapshot lacks are not tombstoned here.
    RILL_RETURN_NOT_OK(encoder_->Encode(*batch, mode, [&](const EncodedMessage& m) {
      bytes_.fetch_add(static_cast<int64_t>((m.value ? m.value->size() : 0) +
                                            (m.key ? m.key->size() : 0)),
                       std::memory_order_relaxed);
      return ProduceTo(rk, rkt.get(), m, &unpolled);
    }));
  }
  rd_kafka_poll(rk, 0);
  return Status::OK();
}

Status KafkaSinkWriter::PrepareEncoder(const std::shared_ptr<arrow::Schema>& table_schema,
                                       const std::vector<std::string>& primary_key) {
  std::vector<std::string> keys =
      options_.key_columns.empty() ? primary_key : options_.key_columns;
  for (const auto& key : keys) {
    if (table_schema->GetFieldIndex(key) < 0) {
      return Status::KeyError(Prefix(), "key column '", key, "' is not a column of the table");
    }
  }
  const bool key_as_string = options_.key_format == "string";
  if (key_as_string && keys.size() != 1) {
    return Status::Invalid(Prefix(), "key_format=\"string\" needs exactly one key column, the ",
                           "table has ", keys.size(), " (set key_columns)");
  }
  encoder_ = std::make_unique<MessageEncoder>(std::move(keys), key_as_string);
  encoder_->SetPartitionColumn(options_.partition_column);
  if (options_.format == "avro") {
    if (!registry_) {
      SchemaRegistryOptions registry;
      registry.url = options_.schema_registry_url;
      registry.user = options_.schema_registry_user;
      registry.password = options_.schema_registry_password;
      registry.timeout_ms = options_.timeout_ms;
      auto made = SchemaRegistryClient::Make(std::move(registry));
      if (!made.ok()) return made.status().WithMessage(Prefix(), made.status().message());
      registry_ = *made;
    }
    encoder_->SetAvro(registry_, options_.topic + "-value", options_.topic);
  }
  return Status::OK();
}

Status KafkaSinkWriter::Failed(const char* what, ErrorPtr error) {
  const rd_kafka_resp_err_t code = rd_kafka_error_code(error.get());
  std::string message = Prefix() + what + " failed (transactional.id '" + transactional_id_ +
                        "'): " + rd_kafka_error_name(error.get()) + ": " +
                        rd_kafka_error_string(error.get());
  if (rd_kafka_error_is_fatal(error.get())) {
    // The cause of a fatal error is the producer's fatal error.
    char reason[512];
    const rd_kafka_resp_err_t fatal =
        producer_ ? rd_kafka_fatal_error(producer_, reason, sizeof(reason))
                  : RD_KAFKA_RESP_ERR_NO_ERROR;
    if (IsFenced(code) || IsFenced(fatal)) {
      fenced_ = message + " (fenced: another producer uses this transactional.id; this "
                          "writer stays closed)";
      return Status::IOError(fenced_);
    }
    message += " (fatal: the producer is recreated by the next Open)";
  } else if (rd_kafka_error_txn_requires_abort(error.get())) {
    message += " (the transaction must be aborted)";
  }
  return Status::IOError(message);
}

Status KafkaSinkWriter::CheckFatal() {
  char reason[512];
  const rd_kafka_resp_err_t err = rd_kafka_fatal_error(producer_, reason, sizeof(reason));
  if (err == RD_KAFKA_RESP_ERR_NO_ERROR) return Status::OK();
  std::string message = Prefix() + "fatal producer error (transactional.id '" +
                        transactional_id_ + "'): " + rd_kafka_err2name(err) + ": " + reason;
  if (IsFenced(err)) {
    fenced_ = message + " (fenced: another producer uses this transactional.id; this writer "
                        "stays closed)";
    return Status::IOError(fenced_);
  }
  return Status::IOError(message, " (the producer is recreated by the next Open)");
}

Status KafkaSinkWriter::CheckDeliveries() {
  if (failed_deliveries_ == 0) return Status::OK();
  return Status::IOError(Prefix(), failed_deliveries_, " message(s) were not delivered: ",
                         first_delivery_error_);
}

Status KafkaSinkWriter::BeginIfNeeded() {
  if (!options_.exactly_once || in_transaction_) return Status::OK();
  ErrorPtr error(rd_kafka_begin_transaction(producer_));
  if (error) return Failed("begin_transaction", std::move(error));
  in_transaction_ = true;
  return Status::OK();
}

Status KafkaSinkWriter::Produce(const EncodedMessage& message) {
  return ProduceTo(producer_, topic_, message, &unpolled_);
}

Status KafkaSinkWriter::ProduceTo(rd_kafka_t* rk, rd_kafka_topic_t* rkt,
                                  const EncodedMessage& message, int64_t* unpolled) {
  void* value = message.value ? const_cast<char*>(message.value->data()) : nullptr;
  const size_t value_size = message.value ? message.value->size() : 0;
  const void* key = message.key ? message.key->data() : nullptr;
  const size_t key_size = message.key ? message.key->size() : 0;
  while (rd_kafka_produce(rkt, message.partition, RD_KAFKA_MSG_F_COPY, value, value_size,
                          key, key_size, nullptr) != 0) {
    const rd_kafka_resp_err_t err = rd_kafka_last_error();
    if (err != RD_KAFKA_RESP_ERR__QUEUE_FULL) {
      return Status::IOError(Prefix(), "produce: ", rd_kafka_err2name(err), ": ",
                             rd_kafka_err2str(err));
    }
    rd_kafka_poll(rk, 10);  // the queue is full: serve delivery reports
  }
  if (++*unpolled >= 1000) {
    *unpolled = 0;
    rd_kafka_poll(rk, 0);
  }
  return Status::OK();
}

Result<std::unordered_set<std::string>> KafkaSinkWriter::ReadLiveKeys() {
  RILL_ASSIGN_OR_RAISE(rd_kafka_conf_t * conf, MakeConf(/*producer=*/false));
  char errstr[512];
  rd_kafka_conf_set(conf, "enable.partition.eof", "true", errstr, sizeof(errstr));
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof(errstr));
  if (!rk) {
    rd_kafka_conf_destroy(conf);
    return Status::Invalid(Prefix(), "snapshot reader: ", errstr);
  }
  std::unique_ptr<rd_kafka_t, void (*)(rd_kafka_t*)> owned(rk, [](rd_kafka_t* r) {
    rd_kafka_destroy_flags(r, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE);
  });
  const int timeout = static_cast<int>(options_.timeout_ms);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout);
  rd_kafka_topic_t* rkt = rd_kafka_topic_new(rk, options_.topic.c_str(), nullptr);
  const rd_kafka_metadata_t* md = nullptr;
  rd_kafka_resp_err_t err = rd_kafka_metadata(rk, 0, rkt, &md, timeout);
  rd_kafka_topic_destroy(rkt);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR || md->topic_cnt != 1 || md->topics[0].err) {
    if (md) rd_kafka_metadata_destroy(md);
    return Status::IOError(Prefix(), "reading the topic's metadata for a snapshot: ",
                           rd_kafka_err2str(err ? err : RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC));
  }
  const int partitions = md->topics[0].partition_cnt;
  rd_kafka_metadata_destroy(md);
  ListPtr assignment(rd_kafka_topic_partition_list_new(partitions));
  for (int p = 0; p < partitions; ++p) {
    int64_t low = 0;
    int64_t high = 0;
    err = rd_kafka_query_watermark_offsets(rk, options_.topic.c_str(), p, &low, &high, timeout);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      return Status::IOError(Prefix(), "watermarks of partition ", p, ": ",
                             rd_kafka_err2str(err));
    }
    if (high > low) {
      rd_kafka_topic_partition_list_add(assignment.get(), options_.topic.c_str(), p)->offset =
          RD_KAFKA_OFFSET_BEGINNING;
    }
  }
  std::unordered_set<std::string> live;
  if (assignment->cnt == 0) return live;
  rd_kafka_assign(rk, assignment.get());
  int ended = 0;
  while (ended < assignment->cnt) {
    if (std::chrono::steady_clock::now() > deadline) {
      return Status::IOError(Prefix(), "reading the topic's keys for a snapshot took longer than ",
                             "timeout_ms=", options_.timeout_ms);
    }
    rd_kafka_message_t* m = rd_kafka_consumer_poll(rk, 100);
    if (!m) continue;
    if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
      ++ended;
    } else if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR && m->key) {
      std::string key(static_cast<const char*>(m->key), m->key_len);
      if (m->payload) {
        live.insert(std::move(key));
      } else {
        live.erase(key);
      }
    }
    rd_kafka_message_destroy(m);
  }
  return live;
}

Status KafkaSinkWriter::WriteUpsertSnapshot(const ChangeSet& changes) {
  // Without a transaction, what earlier Writes produced must be in the topic
  // before it is read (a transaction's own messages are replaced anyway).
  if (!options_.exactly_once) rd_kafka_flush(producer_, static_cast<int>(options_.timeout_ms));
  RILL_ASSIGN_OR_RAISE(auto live, ReadLiveKeys());
  for (const auto& batch : changes.batches) {
    RILL_RETURN_NOT_OK(encoder_->Encode(*batch, SinkMode::kUpsert, [&](const EncodedMessage& m) {
      if (m.key) live.erase(std::string(*m.key));
      return Produce(m);
    }));
  }
  for (const auto& key : live) RILL_RETURN_NOT_OK(Produce({std::string_view(key), std::nullopt}));
  return Status::OK();
}

Status KafkaSinkWriter::Write(const ChangeSet& changes, SinkMode mode) {
  if (!producer_) return NotOpen();
  RILL_RETURN_NOT_OK(CheckFatal());
  RILL_RETURN_NOT_OK(BeginIfNeeded());
  if (changes.snapshot && mode == SinkMode::kUpsert && encoder_->has_key()) {
    RILL_RETURN_NOT_OK(WriteUpsertSnapshot(changes));
    rd_kafka_poll(producer_, 0);
    return CheckDeliveries();
  }
  for (const auto& batch : changes.batches) {
    RILL_RETURN_NOT_OK(encoder_->Encode(
        *batch, mode, [this](const EncodedMessage& m) { return Produce(m); }));
  }
  rd_kafka_poll(producer_, 0);
  return CheckDeliveries();  // fail early: the unit is lost anyway
}

ListPtr KafkaSinkWriter::ProgressOffsets(const CommitPoint& point) const {
  ListPtr list(rd_kafka_topic_partition_list_new(1));
  auto* p = rd_kafka_topic_partition_list_add(list.get(), options_.topic.c_str(), 0);
  p->offset = static_cast<int64_t>(point.version);
  const std::string metadata = kafka_sink_internal::FormatProgress({point.version, point.epoch});
  p->metadata = std::malloc(metadata.size());  // freed by the list
  std::memcpy(p->metadata, metadata.data(), metadata.size());
  p->metadata_size = metadata.size();
  return list;
}

// A group metadata without a member (generation -1): the broker takes such a
// transactional offset commit even while consumers are joined to the group (old
// clients' TxnOffsetCommit carries no member), so the KafkaConnector's own
// group works; it is fenced by transactional.id only.
Status KafkaSinkWriter::SendOffsets(rd_kafka_topic_partition_list_t* offsets,
                                    const std::string& group) {
  GroupMetadataPtr metadata(rd_kafka_consumer_group_metadata_new(group.c_str()));
  ErrorPtr error(rd_kafka_send_offsets_to_transaction(producer_, offsets, metadata.get(),
                                                      static_cast<int>(options_.timeout_ms)));
  if (!error) return Status::OK();
  const std::string what = "send_offsets_to_transaction (group '" + group + "')";
  return Failed(what.c_str(), std::move(error));
}

Status KafkaSinkWriter::CommitTransaction(const CommitPoint& point) {
  RILL_RETURN_NOT_OK(BeginIfNeeded());  // a commit without rows still stores its progress
  ListPtr progress = ProgressOffsets(point);
  RILL_RETURN_NOT_OK(SendOffsets(progress.get(), progress_group_));
  if (!point.source_group.empty() && !point.source_offsets.empty()) {
    ListPtr source(rd_kafka_topic_partition_list_new(0));
    for (const auto& [topic, partitions] : point.source_offsets) {
      for (const auto& [partition, offset] : partitions) {
        rd_kafka_topic_partition_list_add(source.get(), topic.c_str(), partition)->offset =
            offset;
      }
    }
    RILL_RETURN_NOT_OK(SendOffsets(source.get(), point.source_group));
  }
  for (int attempt = 0;; ++attempt) {
    ErrorPtr error(rd_kafka_commit_transaction(producer_, static_cast<int>(options_.timeout_ms)));
    if (!error) break;
    // Retriable (e.g. a timeout): the outcome is unknown, and asking again is
    // what librdkafka documents; it returns once the commit is known.
    if (rd_kafka_error_is_retriable(error.get()) && attempt < 3) continue;
    return Failed("commit_transaction", std::move(error));
  }
  in_transaction_ = false;
  return CheckDeliveries();
}

Status KafkaSinkWriter::CommitIdempotent(const CommitPoint& point) {
  if (rd_kafka_flush(producer_, static_cast<int>(options_.timeout_ms)) !=
      RD_KAFKA_RESP_ERR_NO_ERROR) {
    return Status::IOError(Prefix(), rd_kafka_outq_len(producer_),
                           " message(s) not delivered within timeout_ms=", options_.timeout_ms,
                           last_error_.empty() ? "" : " (last error: " + last_error_ + ")");
  }
  RILL_RETURN_NOT_OK(CheckFatal());
  RILL_RETURN_NOT_OK(CheckDeliveries());
  // At most a few progress commits in flight; a failed earlier one fails this
  // Commit (the runtime retries; the progress is sent again).
  RILL_RETURN_NOT_OK(WaitForProgressCommits(pending_commits_ >= kMaxPendingCommits
                                                ? options_.timeout_ms
                                                : 0));
  ListPtr progress = ProgressOffsets(point);
  const rd_kafka_resp_err_t err =
      rd_kafka_commit_queue(consumer_, progress.get(), commit_queue_, &OnCommitted, this);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return Status::IOError(Prefix(), "committing the progress to group '", progress_group_,
                           "': ", rd_kafka_err2name(err), ": ", rd_kafka_err2str(err));
  }
  ++pending_commits_;
  return Status::OK();
}

Status KafkaSinkWriter::WaitForProgressCommits(int64_t timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  rd_kafka_queue_poll_callback(commit_queue_, 0);
  while (pending_commits_ > 0 && std::chrono::steady_clock::now() < deadline) {
    rd_kafka_queue_poll_callback(commit_queue_, 100);
  }
  if (!commit_error_.empty()) {
    std::string error = std::move(commit_error_);
    commit_error_.clear();
    return Status::IOError(error);
  }
  if (pending_commits_ > 0 && timeout_ms > 0) {
    return Status::IOError(Prefix(), pending_commits_, " progress commit(s) to group '",
                           progress_group_, "' unanswered within ", timeout_ms, " ms");
  }
  return Status::OK();
}

Status KafkaSinkWriter::Commit(const CommitPoint& point) {
  if (!producer_) return NotOpen();
  RILL_RETURN_NOT_OK(CheckFatal());
  return options_.exactly_once ? CommitTransaction(point) : CommitIdempotent(point);
}

void KafkaSinkWriter::Abort() {
  if (!producer_) return;
  if (options_.exactly_once) {
    if (in_transaction_) {
      ErrorPtr error(
          rd_kafka_abort_transaction(producer_, static_cast<int>(options_.timeout_ms)));
      if (error) {
        // The next Open starts over (init_transactions aborts what is left).
        spdlog::warn("{}", Failed("abort_transaction", std::move(error)).ToString());
      }
    }
    in_transaction_ = false;
  } else {
    // What is still queued is dropped (the runtime writes it again); what is in
    // flight settles, at-least-once.
    rd_kafka_purge(producer_, RD_KAFKA_PURGE_F_QUEUE);
    rd_kafka_flush(producer_, static_cast<int>(std::min<int64_t>(options_.timeout_ms, 5000)));
  }
  failed_deliveries_ = 0;
  first_delivery_error_.clear();
}

Result<std::optional<SinkProgress>> KafkaSinkWriter::LoadProgress() {
  if (!consumer_) return NotOpen();
  if (pending_commits_ > 0) RILL_RETURN_NOT_OK(WaitForProgressCommits(options_.timeout_ms));
  ListPtr list(rd_kafka_topic_partition_list_new(1));
  rd_kafka_topic_partition_list_add(list.get(), options_.topic.c_str(), 0);
  rd_kafka_resp_err_t err =
      rd_kafka_committed(consumer_, list.get(), static_cast<int>(options_.timeout_ms));
  const auto& p = list->elems[0];
  if (err == RD_KAFKA_RESP_ERR_NO_ERROR) err = p.err;
  if (err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART) return std::nullopt;  // nothing yet
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return Status::IOError(Prefix(), "reading the progress of group '", progress_group_,
                           "': ", rd_kafka_err2name(err), ": ", rd_kafka_err2str(err));
  }
  if (p.offset < 0) return std::nullopt;
  std::string_view metadata(static_cast<const char*>(p.metadata), p.metadata_size);
  auto progress = kafka_sink_internal::ParseProgress(metadata);
  if (!progress.ok()) {
    return Status::Invalid(Prefix(), "group '", progress_group_, "' holds offset ", p.offset,
                           " for partition 0, but its ", progress.status().message(),
                           ": is the group used by something else?");
  }
  return std::optional<SinkProgress>(*progress);
}

void KafkaSinkWriter::Close() {
  if (producer_) {
    if (in_transaction_ && !rd_kafka_fatal_error(producer_, nullptr, 0)) {
      // Ends it now rather than at transaction.timeout.ms: read_committed
      // consumers wait for it.
      ErrorPtr error(rd_kafka_abort_transaction(
          producer_, static_cast<int>(std::min<int64_t>(options_.timeout_ms, 5000))));
    }
    rd_kafka_purge(producer_, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
    rd_kafka_poll(producer_, 0);
    if (topic_) rd_kafka_topic_destroy(topic_);
    rd_kafka_destroy(producer_);
  }
  if (commit_queue_) {
    if (pending_commits_ > 0) {  // a clean stop keeps its last progress
      Status st = WaitForProgressCommits(std::min<int64_t>(options_.timeout_ms, 5000));
      if (!st.ok()) spdlog::warn("{}", st.ToString());
    }
    rd_kafka_queue_destroy(commit_queue_);
  }
  if (consumer_) rd_kafka_destroy_flags(consumer_, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE);
  commit_queue_ = nullptr;
  pending_commits_ = 0;
  commit_error_.clear();
  producer_ = nullptr;
  topic_ = nullptr;
  consumer_ = nullptr;
  in_transaction_ = false;
  failed_deliveries_ = 0;
  first_delivery_error_.clear();
}

}  // namespace

Result<std::unique_ptr<SinkWriter>> MakeKafkaSinkWriter(KafkaSinkOptions options) {
  if (options.topic.empty()) return Status::Invalid("KafkaSink: topic is empty");
  if (options.format == "avro" && options.schema_registry_url.empty()) {
    return Status::Invalid("KafkaSink topic '", options.topic,
                           "': format=\"avro\" needs schema_registry_url (the schema is "
                           "registered there and its id written in each message)");
  }
  if (options.format == "avro") {
    SchemaRegistryOptions registry;
    registry.url = options.schema_registry_url;
    auto checked = SchemaRegistryClient::Make(std::move(registry));
    if (!checked.ok()) {
      return Status::Invalid("KafkaSink topic '", options.topic, "': ", checked.status().message());
    }
  }
  if (options.format != "json" && options.format != "avro") {
    return Status::Invalid("KafkaSink topic '", options.topic, "': unknown format '",
                           options.format, "' (expected json or avro)");
  }
  if (options.key_format != "json" && options.key_format != "string") {
    return Status::Invalid("KafkaSink topic '", options.topic, "': unknown key_format '",
                           options.key_format, "' (expected json or string)");
  }
  if (options.key_format == "string" && options.key_columns.size() > 1) {
    return Status::Invalid("KafkaSink topic '", options.topic,
                           "': key_format=\"string\" needs one key column, key_columns has ",
                           options.key_columns.size());
  }
  if (options.timeout_ms <= 0) {
    return Status::Invalid("KafkaSink topic '", options.topic, "': timeout_ms must be > 0");
  }
  auto configured = options.kafka_config.find("transactional.id");
  std::string id = configured != options.kafka_config.end() ? configured->second
                                                            : options.transactional_id;
  if (options.exactly_once && id.empty()) {
    return Status::Invalid("KafkaSink topic '", options.topic,
                           "': exactly_once needs a transactional id (transactional_id or "
                           "kafka_config[\"transactional.id\"])");
  }
  std::string group = options.progress_group;
  if (group.empty()) group = (id.empty() ? "rill-sink-" + options.topic : id) + "-progress";
  // Refuse a bad property now rather than at the first Open.
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  char errstr[512];
  for (const auto& [key, value] : options.kafka_config) {
    if (rd_kafka_conf_set(conf, key.c_str(), value.c_str(), errstr, sizeof(errstr)) !=
        RD_KAFKA_CONF_OK) {
      rd_kafka_conf_destroy(conf);
      return Status::Invalid("KafkaSink topic '", options.topic, "': kafka_config '", key,
                             "': ", errstr);
    }
  }
  rd_kafka_conf_destroy(conf);
  return std::make_unique<KafkaSinkWriter>(std::move(options), std::move(id), std::move(group));
}

}  // namespace rill
