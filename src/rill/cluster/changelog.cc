#include "rill/cluster/changelog.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <set>
#include <unordered_map>

#include <arrow/record_batch.h>
#include <arrow/type.h>
#include <librdkafka/rdkafka.h>

#include "rill/cluster/application.h"
#include "rill/connector/json_decoder.h"
#include "rill/connector/kafka_client.h"
#include "rill/engine/engine.h"
#include "rill/engine/event.h"
#include "rill/pipeline/sinks.h"
#include "rill/sink/sink_set.h"
#include "rill/table/live_table.h"

namespace rill::cluster {

namespace {

constexpr int kAdminTimeoutMs = 10000;
/// Rows decoded and upserted together while restoring.
constexpr size_t kRestoreChunkRows = 65536;
/// A restore that reads nothing new for this long gives up.
constexpr double kRestoreStallSeconds = 60;

using ClientPtr = std::unique_ptr<rd_kafka_t, void (*)(rd_kafka_t*)>;

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// The largest partition count of `topics` (0 when none is known).
int PartitionCount(rd_kafka_t* rk, const std::vector<std::string>& topics) {
  const rd_kafka_metadata_t* md = nullptr;
  if (rd_kafka_metadata(rk, 1, nullptr, &md, kAdminTimeoutMs) != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return 0;
  }
  int most = 0;
  const std::set<std::string> wanted(topics.begin(), topics.end());
  for (int i = 0; i < md->topic_cnt; ++i) {
    if (wanted.count(md->topics[i].topic)) most = std::max(most, md->topics[i].partition_cnt);
  }
  rd_kafka_metadata_destroy(md);
  return most;
}

}  // namespace

std::string ChangelogTopic(const std::string& app_id, const std::string& table) {
  return app_id + "-" + table + "-changelog";
}

Result<bool> TopicsCompacted(void* handle, const std::vector<std::string>& topics) {
  if (topics.empty()) return true;
  auto* rk = static_cast<rd_kafka_t*>(handle);
  std::vector<rd_kafka_ConfigResource_t*> resources;
  for (const auto& t : topics) {
    resources.push_back(rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_TOPIC, t.c_str()));
  }
  rd_kafka_queue_t* queue = rd_kafka_queue_new(rk);
  rd_kafka_DescribeConfigs(rk, resources.data(), resources.size(), nullptr, queue);
  rd_kafka_event_t* event = rd_kafka_queue_poll(queue, kAdminTimeoutMs + 2000);
  Result<bool> out = Status::IOError("describing the configs of the input topics: no answer within ",
                                     kAdminTimeoutMs, " ms");
  if (event) {
    const rd_kafka_DescribeConfigs_result_t* result = rd_kafka_event_DescribeConfigs_result(event);
    size_t n = 0;
    const rd_kafka_ConfigResource_t** described =
        result ? rd_kafka_DescribeConfigs_result_resources(result, &n) : nullptr;
    if (!result || rd_kafka_event_error(event)) {
      out = Status::IOError("describing the configs of the input topics: ",
                            rd_kafka_event_error_string(event));
    } else {
      bool all = n == topics.size();
      for (size_t i = 0; i < n && all; ++i) {
        if (rd_kafka_ConfigResource_error(described[i])) {
          all = false;
          break;
        }
        size_t entries = 0;
        const rd_kafka_ConfigEntry_t** e = rd_kafka_ConfigResource_configs(described[i], &entries);
        bool compacted = false;
        for (size_t j = 0; j < entries; ++j) {
          const char* value = rd_kafka_ConfigEntry_value(e[j]);
          if (std::string_view(rd_kafka_ConfigEntry_name(e[j])) == "cleanup.policy" && value) {
            compacted = std::string_view(value).find("compact") != std::string_view::npos;
          }
        }
        all = compacted;
      }
      out = all;
    }
    rd_kafka_event_destroy(event);
  }
  for (auto* r : resources) rd_kafka_ConfigResource_destroy(r);
  rd_kafka_queue_destroy(queue);
  return out;
}

Changelogs::Changelogs(Engine* engine, std::string app_id,
                       std::map<std::string, std::string> config,
                       std::shared_ptr<DrivenSinks> driven,
                       std::function<Status(const std::string&, const std::string&)> own)
    : engine_(engine),
      app_id_(std::move(app_id)),
      config_(std::move(config)),
      driven_(std::move(driven)),
      own_partitions_only_(std::move(own)) {}

std::string Changelogs::For(const std::string& table, const std::vector<std::string>& topics) {
  return Get(table, topics, /*state=*/false, /*skip_existing=*/true);
}

std::string Changelogs::ForState(const std::string& table,
                                 const std::vector<std::string>& topics, bool skip_existing) {
  return Get(table, topics, /*state=*/true, skip_existing);
}

std::string Changelogs::Get(const std::string& table, const std::vector<std::string>& topics,
                            bool state, bool skip_existing) {
  std::lock_guard<std::mutex> lock(mu_);
  auto known = topics_.find(table);
  if (known != topics_.end()) return known->second;
  auto made = Make(table, topics, state, skip_existing);
  if (!made.ok()) {
    engine_->RecordEvent(EngineEvent::Engine(
        Severity::kError, table,
        "The changelog of the partition shards could not be made; they are restored from the "
        "input topic, which may have lost records to retention",
        made.status().ToString(), engine_->Now()));
    return std::string();  // asked again at the next assign
  }
  topics_[table] = *made;
  return *made;
}

Result<std::string> Changelogs::Make(const std::string& table,
                                     const std::vector<std::string>& topics, bool state,
                                     bool skip_existing) {
  const std::string topic = ChangelogTopic(app_id_, table);
  {
    RILL_ASSIGN_OR_RAISE(rd_kafka_t * made,
                         MakeKafkaClient(RD_KAFKA_PRODUCER, config_, "changelog admin"));
    ClientPtr rk(made, rd_kafka_destroy);
    if (!state) {
      RILL_ASSIGN_OR_RAISE(bool compacted, TopicsCompacted(rk.get(), topics));
      if (compacted) return std::string();
    }
    const int partitions = std::max(1, PartitionCount(rk.get(), topics));
    RILL_RETURN_NOT_OK(EnsureCompactedTopic(rk.get(), topic, partitions, kAdminTimeoutMs));
  }
  const std::string sink = table + "__changelog";
  pipeline::Options options;
  for (const auto& [k, v] : config_) options.emplace_back(k, pipeline::OptionValue::Scalar(v));
  options.emplace_back("topic", pipeline::OptionValue::Scalar(topic));
  options.emplace_back("mode", pipeline::OptionValue::Scalar("upsert"));
  RILL_ASSIGN_OR_RAISE(pipeline::SinkDecl decl,
                       pipeline::ReadSink("kafka", options, "changelog of \"" + table + "\"",
                                          sink, table));
  decl.kafka.partition_column = "_partition";
  RILL_RETURN_NOT_OK(pipeline::StartSink(decl, engine_).status());
  if (skip_existing) {
    // The rows in the table now (a checkpoint's) are in the changelog already.
    RILL_RETURN_NOT_OK(engine_->AtTickBoundary([&] {
      driven_->SkipSink(sink);
      return Status::OK();
    }));
  }
  RILL_RETURN_NOT_OK(own_partitions_only_(sink, "_partition"));
  return topic;
}

Status Changelogs::Restore(const std::string& table, const std::string& topic,
                           const std::vector<int32_t>& partitions, int64_t* records,
                           int64_t* bytes) {
  if (partitions.empty()) return Status::OK();
  RILL_ASSIGN_OR_RAISE(auto target, engine_->GetTable(table));
  std::map<std::string, std::string> config = config_;
  config["group.id"] = ChangelogTopic(app_id_, table) + "-restore";
  config["enable.auto.commit"] = "false";
  config["enable.partition.eof"] = "true";
  config["isolation.level"] = "read_committed";
  config["fetch.wait.max.ms"] = "10";
  RILL_ASSIGN_OR_RAISE(rd_kafka_t * made,
                       MakeKafkaClient(RD_KAFKA_CONSUMER, config, "changelog restore"));
  ClientPtr rk(made, rd_kafka_destroy);
  rd_kafka_poll_set_consumer(rk.get());
  rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(
      static_cast<int>(partitions.size()));
  for (int32_t p : partitions) {
    rd_kafka_topic_partition_list_add(list, topic.c_str(), p)->offset = RD_KAFKA_OFFSET_BEGINNING;
  }
  rd_kafka_assign(rk.get(), list);
  rd_kafka_topic_partition_list_destroy(list);

  // Each key's last value (nullopt: a tombstone), in first-seen order.
  std::unordered_map<std::string, size_t> index;
  std::vector<std::optional<std::string>> values;
  std::set<int32_t> remaining(partitions.begin(), partitions.end());
  Status failed;
  double progress_at = Now();
  while (!remaining.empty() && failed.ok()) {
    rd_kafka_message_t* m = rd_kafka_consumer_poll(rk.get(), 100);
    if (!m) {
      if (Now() - progress_at > kRestoreStallSeconds) {
        failed = Status::IOError("changelog ", topic, ": nothing read for ", kRestoreStallSeconds,
                                 " s; ", remaining.size(), " partitions not read to their end");
      }
      continue;
    }
    progress_at = Now();
    if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
      remaining.erase(m->partition);
    } else if (m->err) {
      failed = Status::IOError("changelog ", topic, ": ", rd_kafka_message_errstr(m));
    } else {
      ++*records;
      *bytes += static_cast<int64_t>(m->len + m->key_len);
      std::string key(static_cast<const char*>(m->key), m->key_len);
      std::optional<std::string> value;
      if (m->payload) value.emplace(static_cast<const char*>(m->payload), m->len);
      auto [it, added] = index.emplace(std::move(key), values.size());
      if (added) {
        values.push_back(std::move(value));
      } else {
        values[it->second] = std::move(value);
      }
    }
    rd_kafka_message_destroy(m);
  }
  rd_kafka_consumer_close(rk.get());
  RILL_RETURN_NOT_OK(failed);

  JsonDecodeOptions decode;
  decode.schema = target->user_schema();
  RILL_ASSIGN_OR_RAISE(auto decoder, JsonDecoder::Make(decode));
  std::string lines;
  size_t rows = 0;
  auto flush = [&]() -> Status {
    if (rows == 0) return Status::OK();
    RILL_ASSIGN_OR_RAISE(DecodeResult decoded, decoder->Decode(lines));
    lines.clear();
    rows = 0;
    if (!decoded.rejects.empty()) {
      return Status::Invalid("changelog ", topic, ": a record does not fit table '", table,
                             "': ", decoded.rejects.front().error);
    }
    if (!decoded.batch) return Status::OK();
    return engine_->AtTickBoundary([&] { return target->Write(decoded.batch).status(); });
  };
  for (const auto& value : values) {
    if (!value) continue;  // deleted: the dropped shard does not hold it
    lines.append(*value);
    lines.push_back('\n');
    if (++rows >= kRestoreChunkRows) RILL_RETURN_NOT_OK(flush());
  }
  return flush();
}

}  // namespace rill::cluster
