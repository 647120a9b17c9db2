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
#include "rill/connector/kafka_client.h"
#include "rill/connector/kafka_consumer_internal.h"

namespace rill {

namespace {

constexpr int64_t kMaxPendingRejects = 10000;
/// How long a consumer's close may wait for the group coordinator.
constexpr int kCloseSeconds = 5;

using kafka_internal::ListPtr;
using kafka_internal::Offsets;
using kafka_internal::ToList;

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

  if (options.consumer) {  // the shared consumer's group and configuration
    impl.rk = options.consumer->impl()->rk;
    return c;
  }
  auto config = options.config;
  config.emplace("group.id", "rill-" + c->name());
  config.emplace("auto.offset.reset",
                 options.start == KafkaStart::kLatest ? "latest" : "earliest");
  config["enable.auto.commit"] = "false";
  config["enable.partition.eof"] = "true";
  RILL_ASSIGN_OR_RAISE(impl.rk, MakeKafkaClient(RD_KAFKA_CONSUMER, config, "KafkaConnector",
                                                {&impl, &Impl::OnError, &Impl::OnRebalance}));
  return c;
}

KafkaConnector::KafkaConnector(std::string target_table, KafkaOptions options)
    : Connector(options.name, std::move(target_table), options.decode.schema),
      impl_(std::make_unique<Impl>(std::move(options))) {}

KafkaConnector::~KafkaConnector() {
  Stop();
  if (impl_->rk && !impl_->options.consumer) kafka_internal::CloseAndDestroy(impl_->rk, kCloseSeconds);
}

std::string KafkaConnector::bootstrap_servers() const {
  auto it = impl_->options.config.find("bootstrap.servers");
  return it != impl_->options.config.end() ? it->second : std::string();
}

Status KafkaConnector::JoinGroup(std::shared_ptr<KafkaSharedConsumer> consumer) {
  Impl& impl = *impl_;
  if (!consumer || impl.options.consumer == consumer) return Status::OK();
  if (!impl.options.application_group) return Status::OK();  // a consumer of its own
  if (impl.thread.joinable() || impl.attached || impl.subscribed) {
    return Status::Invalid("KafkaConnector '", name(), "': JoinGroup after Start");
  }
  auto own = impl.options.config.find("bootstrap.servers");
  if (own != impl.options.config.end() && !own->second.empty() &&
      own->second != consumer->bootstrap_servers()) {
    return Status::OK();  // another cluster: not part of the application's group
  }
  if (impl.options.consumer) {
    return Status::Invalid("KafkaConnector '", name(), "' already reads through consumer group '",
                           impl.options.consumer->group_id(), "'");
  }
  if (impl.rk) kafka_internal::CloseAndDestroy(impl.rk, kCloseSeconds);  // never subscribed
  // An application's source never drops input: over its limits the reader
  // waits for room (the topic keeps the data), whatever on_overflow says;
  // a dropped row's offset would be committed with the rest (issue 28).
  if (impl.options.limits.on_overflow != OverflowPolicy::kError) {
    impl.options.limits.on_overflow = OverflowPolicy::kError;
    std::lock_guard<std::mutex> deliver(impl.deliver_mu);
    impl.buffer.SetOverflowPolicy(OverflowPolicy::kError);
  }
  impl.options.consumer = std::move(consumer);
  impl.rk = impl.options.consumer->impl()->rk;
  return Status::OK();
}

Status KafkaConnector::Start() {
  if (impl_->thread.joinable() || impl_->attached) return Status::OK();
  if (!impl_->rk && !impl_->options.consumer) {
    return Status::Invalid("KafkaConnector '", name(),
                           "': it read through an application's consumer, which it left when "
                           "it stopped; add it to an application's engine, or make a new one");
  }
  if (impl_->options.consumer) {
    Offsets resume;
    {
      std::lock_guard<std::mutex> lock(impl_->mu);
      resume = std::move(impl_->resume_at);
      impl_->resume_at.clear();
      impl_->stopped = false;
    }
    impl_->stop = false;
    RILL_RETURN_NOT_OK(impl_->options.consumer->Attach(impl_.get()));
    impl_->attached = true;
    // Messages the last run took but never buffered are read again (the
    // partitions are assigned anew after the subscription changed; positions
    // held win there).
    std::lock_guard<std::mutex> lock(impl_->mu);
    for (const auto& [tp, offset] : resume) impl_->positions.emplace(tp, offset);
    return Status::OK();
  }
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
  impl_->applied_cv.notify_all();
  if (impl_->attached) {
    impl_->options.consumer->Detach(impl_.get());
    impl_->attached = false;
  } else if (impl_->thread.joinable()) {
    impl_->thread.join();
  } else {
    return;
  }
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stopped = true;
  }
  // Only what the engine allowed: rows still buffered are not committed (a
  // later run reads them again; at-least-once).
  impl_->SendCommit(/*now=*/true);
  if (impl_->options.consumer) {
    // An application's consumer lives as long as its application: a stopped
    // member (still referenced, e.g. by a Python wrapper) does not keep it,
    // and its group membership, alive. JoinGroup attaches it again when the
    // connector is added to an application's engine again.
    impl_->options.consumer.reset();
    impl_->rk = nullptr;
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
    // A Poll also means the caller is done with the rows of the one before.
    impl_->unapplied = !out.empty();
    impl_->buffered_from.clear();
    impl_->polled = impl_->positions;
    CollectRejects(name(), std::move(impl_->rejects), kMaxPendingRejects,
                   &impl_->polled_rejects, &impl_->counters.dropped_records);
    impl_->rejects.clear();
  }
  impl_->room_cv.notify_all();
  impl_->applied_cv.notify_all();
  return out;
}

std::vector<RejectedRecord> KafkaConnector::TakeRejects() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  std::vector<RejectedRecord> out = std::move(impl_->polled_rejects);
  impl_->polled_rejects.clear();
  return out;
}

void KafkaConnector::Applied() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->unapplied = false;
  }
  impl_->applied_cv.notify_all();
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

bool KafkaConnector::CommitsFollowTicks() const { return impl_->options.consumer != nullptr; }

bool KafkaConnector::RestoresTableFromCheckpoint() const {
  if (!impl_->options.consumer) return true;
  auto hook = impl_->options.consumer->impl()->ShardHook();
  return impl_->options.metadata_columns && hook && hook->Sharded(target_table());
}

void KafkaConnector::CommitCheckpointed(std::string_view position) {
  if (impl_->options.consumer || !impl_->rk) return;  // committed with the ticks
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

std::vector<KafkaConnector::TopicPartition> KafkaConnector::assigned() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return {impl_->assigned.begin(), impl_->assigned.end()};
}

KafkaGroupStats KafkaConnector::group_stats() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->group;
}

// Checkpoints -----------------------------------------------------------------------

std::string KafkaConnector::source_group() const {
  if (impl_->options.consumer) return impl_->options.consumer->group_id();
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
  if (impl.options.consumer) {
    // An application's source: the group's committed offsets say where it
    // reads on; the first assign compares them with the checkpoint's
    // (Impl::RestoreShards).
    std::lock_guard<std::mutex> lock(impl.mu);
    if (!impl.assigned.empty() || !impl.positions.empty()) {
      return Status::Invalid("KafkaConnector '", name(),
                             "': an application's checkpoint is restored before its partitions "
                             "are assigned (before the engine's first tick)");
    }
    impl.checkpointed = std::move(restored);
    impl.checkpoint_pending = true;
    return Status::OK();
  }
  // A shared consumer's reader holds members_mu while it hands messages out:
  // holding it keeps the reader away from this connector meanwhile.
  std::unique_lock<std::mutex> shared_reader;
  if (impl.options.consumer) {
    shared_reader = std::unique_lock<std::mutex>(impl.options.consumer->impl()->members_mu);
  }
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
    impl.handed_back.clear();
    impl.handed_back_held.clear();
    for (const auto& [tp, offset] : restored) impl.check_start[tp] = false;
  }
  // Partitions already assigned move to the restored offsets now (the others
  // get them from the rebalance callback); those the checkpoint does not know
  // start over from the configured start (kCommitted: the beginning).
  rd_kafka_topic_partition_list_t* assigned = nullptr;
  if (rd_kafka_assignment(impl.rk, &assigned) == RD_KAFKA_RESP_ERR_NO_ERROR && assigned) {
    ListPtr owned(assigned);
    ListPtr ours(rd_kafka_topic_partition_list_new(0));  // a shared consumer has others too
    for (int i = 0; i < assigned->cnt; ++i) {
      if (impl.Reads(assigned->elems[i].topic)) {
        rd_kafka_topic_partition_list_add(ours.get(), assigned->elems[i].topic,
                                          assigned->elems[i].partition);
      }
    }
    impl.SetStartOffsets(ours.get());  // restored: never RD_KAFKA_OFFSET_INVALID
    Status st = impl.Seek(ours.get());
    if (!st.ok()) return Status::IOError(st.message(), " (to the checkpoint)");
  }
  // A checkpoint holds these rows: asynchronous, so a restore never waits for
  // the group coordinator (a synchronous commit before the group is joined
  // takes seconds).
  impl.SendCommit(/*now=*/false);
  impl.stop = false;
  if (was_running) impl.thread = std::thread([this] { impl_->Run(); });
  return Status::OK();
}

}  // namespace rill
