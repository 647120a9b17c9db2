// `rill query --app`: an aggregate over a scaled-out application's table,
// answered by fan-out to its members (query.h, RunAppQuery).
#include <librdkafka/rdkafka.h>

#include <chrono>
#include <map>
#include <set>
#include <thread>

#include <arrow/api.h>
#include <arrow/csv/writer.h>
#include <arrow/io/memory.h>
#include <arrow/ipc/reader.h>
#include <simdjson.h>

#include "query.h"
#include "rill/cluster/application.h"
#include "rill/connector/kafka_client.h"
#include "rill/connector/kafka_connector.h"
#include "rill/server/json_writer.h"  // TableToJson
#include "rill/server/webhook.h"      // JsonQuote
#include "rill/sql/global_plan.h"
#include "rill/sql/sql_engine.h"

namespace rill::app {
namespace {

constexpr int kKafkaTimeoutMs = 10000;
constexpr int kAttempts = 5;

using Assignment = std::map<std::string, std::set<std::pair<std::string, int32_t>>>;

struct KafkaDeleter {
  void operator()(rd_kafka_t* rk) const { rd_kafka_destroy(rk); }
};
using KafkaPtr = std::unique_ptr<rd_kafka_t, KafkaDeleter>;

/// The instances' server URLs from "<app>-members" (the last value per key).
Result<std::map<std::string, std::string>> ReadMembers(rd_kafka_t* rk, const std::string& topic) {
  int64_t low = 0, high = 0;
  rd_kafka_resp_err_t err =
      rd_kafka_query_watermark_offsets(rk, topic.c_str(), 0, &low, &high, kKafkaTimeoutMs);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return Status::IOError("reading ", topic, " (where `rill serve` instances announce their "
                           "servers): ", rd_kafka_err2str(err));
  }
  std::map<std::string, std::string> urls;
  if (high <= low) return urls;
  std::unique_ptr<rd_kafka_topic_partition_list_t, void (*)(rd_kafka_topic_partition_list_t*)>
      list(rd_kafka_topic_partition_list_new(1), rd_kafka_topic_partition_list_destroy);
  rd_kafka_topic_partition_list_add(list.get(), topic.c_str(), 0)->offset = low;
  if ((err = rd_kafka_assign(rk, list.get())) != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return Status::IOError("reading ", topic, ": ", rd_kafka_err2str(err));
  }
  simdjson::dom::parser parser;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  int64_t next = low;
  while (next < high && std::chrono::steady_clock::now() < deadline) {
    rd_kafka_message_t* m = rd_kafka_consumer_poll(rk, 500);
    if (!m) continue;
    if (!m->err && m->key) {
      next = m->offset + 1;
      const std::string key(static_cast<const char*>(m->key), m->key_len);
      simdjson::dom::element doc;
      std::string_view url;
      if (m->payload && !parser.parse(static_cast<const char*>(m->payload), m->len).get(doc) &&
          !doc["url"].get_string().get(url)) {
        urls[key] = std::string(url);
      } else if (!m->payload) {
        urls.erase(key);
      }
    } else if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
      next = high;
    }
    rd_kafka_message_destroy(m);
  }
  rd_kafka_assign(rk, nullptr);
  return urls;
}

/// Each member's partitions, keyed by instance id ("<app>-<instance>" client ids).
Result<Assignment> Describe(rd_kafka_t* rk, const std::string& app, std::string* state) {
  RILL_ASSIGN_OR_RAISE(auto d, DescribeKafkaGroup(rk, app, kKafkaTimeoutMs));
  *state = d.state;
  Assignment out;
  const std::string prefix = app + "-";
  for (const auto& m : d.members) {
    const std::string instance =
        m.client_id.rfind(prefix, 0) == 0 ? m.client_id.substr(prefix.size()) : m.client_id;
    auto& parts = out[instance];
    for (const auto& p : m.partitions) parts.insert(p);
  }
  return out;
}

Result<std::shared_ptr<arrow::Table>> ReadArrow(const std::string& body) {
  auto input = std::make_shared<arrow::io::BufferReader>(arrow::Buffer::FromString(body));
  RILL_ASSIGN_OR_RAISE(auto reader, arrow::ipc::RecordBatchStreamReader::Open(input));
  RILL_ASSIGN_OR_RAISE(auto table, reader->ToTable());
  return table;
}

/// What a member's tables hold of a partition, from its
/// /api/v1/telemetry/cluster.
struct HeldPartition {
  int64_t first = -1;     ///< the offset of its first row applied since the assign
  bool rewound = false;   ///< a rewind since may have applied rows twice
  bool restored = false;  ///< its shard was restored whole on assign
};

Result<std::map<std::pair<std::string, int32_t>, HeldPartition>> PartitionStates(
    const std::string& body) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  simdjson::dom::array states;
  if (parser.parse(body).get(doc) || doc["partition_states"].get_array().get(states)) {
    return Status::Invalid("a member's /api/v1/telemetry/cluster has no partition_states");
  }
  std::map<std::pair<std::string, int32_t>, HeldPartition> out;
  for (simdjson::dom::element s : states) {
    std::string_view topic;
    int64_t partition = 0;
    HeldPartition held;
    if (s["topic"].get_string().get(topic) || s["partition"].get_int64().get(partition) ||
        s["first_offset"].get_int64().get(held.first) ||
        s["rewound"].get_bool().get(held.rewound)) {
      return Status::Invalid("a member's partition_states entry is malformed");
    }
    if (s["restored"].get_bool().get(held.restored)) held.restored = false;  // absent: older
    out[{std::string(topic), static_cast<int32_t>(partition)}] = held;
  }
  return out;
}

struct Failure {
  int code;  // 1: refused (an answer would be wrong), 2: unreachable
  std::string message;
};

/// One attempt: Ok(table) or a failure; `retry` set when a rebalance got in
/// the way (the caller tries again).
Result<std::shared_ptr<arrow::Table>> Attempt(const QueryOptions& o, rd_kafka_t* rk,
                                              const GlobalPlan& plan, bool* retry,
                                              Failure* failure) {
  *retry = false;
  auto fail = [&](int code, std::string message) {
    *failure = {code, std::move(message)};
    return Status::Invalid(failure->message);
  };
  RILL_ASSIGN_OR_RAISE(auto urls, ReadMembers(rk, cluster::MembersTopic(o.app)));
  std::string state;
  RILL_ASSIGN_OR_RAISE(Assignment before, Describe(rk, o.app, &state));
  if (before.empty()) return fail(1, "application '" + o.app + "' has no members");
  if (state != "Stable") {
    *retry = true;
    return fail(1, "application '" + o.app + "' is rebalancing (group " + state + ")");
  }
  // Coverage: every partition of every input topic exactly once.
  std::map<std::string, std::set<int32_t>> owned;
  for (const auto& [instance, parts] : before) {
    for (const auto& [topic, partition] : parts) {
      if (!owned[topic].insert(partition).second) {
        *retry = true;
        return fail(1, topic + "[" + std::to_string(partition) + "] is owned twice");
      }
    }
  }
  for (const auto& [topic, partitions] : owned) {
    const rd_kafka_metadata_t* md = nullptr;
    rd_kafka_topic_t* handle = rd_kafka_topic_new(rk, topic.c_str(), nullptr);
    rd_kafka_resp_err_t err = rd_kafka_metadata(rk, 0, handle, &md, kKafkaTimeoutMs);
    int count = err == RD_KAFKA_RESP_ERR_NO_ERROR && md->topic_cnt == 1 ? md->topics[0].partition_cnt
                                                                       : -1;
    if (md) rd_kafka_metadata_destroy(md);
    rd_kafka_topic_destroy(handle);
    if (count < 0) return fail(2, "cannot read the metadata of topic " + topic);
    if (static_cast<int>(partitions.size()) != count) {
      *retry = true;
      return fail(1, topic + ": " + std::to_string(count - static_cast<int>(partitions.size())) +
                         " of " + std::to_string(count) + " partitions have no owner");
    }
  }
  // The group's committed offsets and the partitions' first offsets.
  std::unique_ptr<rd_kafka_topic_partition_list_t, void (*)(rd_kafka_topic_partition_list_t*)>
      committed(rd_kafka_topic_partition_list_new(0), rd_kafka_topic_partition_list_destroy);
  for (const auto& [topic, partitions] : owned) {
    for (int32_t p : partitions) rd_kafka_topic_partition_list_add(committed.get(), topic.c_str(), p);
  }
  if (rd_kafka_committed(rk, committed.get(), kKafkaTimeoutMs) != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return fail(2, "cannot read the committed offsets of group " + o.app);
  }

  std::vector<std::shared_ptr<arrow::Table>> partials;
  for (const auto& [instance, parts] : before) {
    if (parts.empty()) continue;
    auto url = urls.find(instance);
    if (url == urls.end()) {
      return fail(1, "member '" + instance + "' owns partitions but has not announced its "
                     "server on " + cluster::MembersTopic(o.app) + " (start it with rill serve)");
    }
    const std::string server = url->second;
    std::string body, error;
    if (int rc = HttpExchange(server, server + "/api/v1/telemetry/cluster", o.token, nullptr,
                              o.timeout_seconds, &body, &error);
        rc != 0) {
      return fail(rc, "member '" + instance + "': " + error);
    }
    auto states = PartitionStates(body);
    if (!states.ok()) return fail(2, "member '" + instance + "': " + states.status().message());
    std::set<int32_t> numbers;
    for (const auto& [topic, partition] : parts) {
      numbers.insert(partition);
      auto st = states->find({topic, partition});
      if (st == states->end()) {
        *retry = true;
        return fail(1, "member '" + instance + "' does not own " + topic + "[" +
                           std::to_string(partition) + "] yet");
      }
      const auto [first, rewound, restored] = st->second;
      int64_t low = 0, high = 0;
      rd_kafka_query_watermark_offsets(rk, topic.c_str(), partition, &low, &high, kKafkaTimeoutMs);
      const auto* c = rd_kafka_topic_partition_list_find(committed.get(), topic.c_str(), partition);
      const int64_t group_offset = c && !c->err ? c->offset : -1;
      const bool whole =
          !rewound && (restored || first == low || (first < 0 && group_offset <= low));
      if (!whole) {
        return fail(1, "member '" + instance + "' does not hold " + topic + "[" +
                           std::to_string(partition) + "] whole (its rows start at offset " +
                           std::to_string(first) + ", the partition at " + std::to_string(low) +
                           (rewound ? "; rewound after a failed commit" : "") +
                           "): it restarted or took the partition over, and partition shards "
                           "are not restored yet; the answer would be wrong");
      }
    }
    std::string list;
    for (int32_t p : numbers) list += (list.empty() ? "" : ",") + std::to_string(p);
    std::string sql = plan.partial_sql_for_partitions;
    sql.replace(sql.find("{partitions}"), std::string("{partitions}").size(), list);
    const std::string request =
        "{\"sql\":" + server::JsonQuote(sql) + ",\"format\":\"arrow\"}";
    body.clear();
    if (int rc = HttpExchange(server, server + "/api/v1/query", o.token, &request,
                              o.timeout_seconds, &body, &error);
        rc != 0) {
      return fail(rc, "member '" + instance + "': " + error);
    }
    auto table = ReadArrow(body);
    if (!table.ok()) {
      return fail(2, "member '" + instance + "': unreadable Arrow answer: " +
                         table.status().message());
    }
    partials.push_back(*table);
  }
  // Nobody moved meanwhile: the answers cover each partition exactly once.
  Assignment after;
  {
    std::string state_after;
    auto d = Describe(rk, o.app, &state_after);
    if (!d.ok()) return fail(2, d.status().message());
    after = std::move(*d);
  }
  if (after != before) {
    *retry = true;
    return fail(1, "application '" + o.app + "' rebalanced during the query");
  }
  if (partials.empty()) return fail(1, "no member owns a partition");
  auto merged = arrow::ConcatenateTables(partials, arrow::ConcatenateTablesOptions{true});
  if (!merged.ok()) return fail(2, "the members' partials differ: " + merged.status().message());
  return *merged;
}

}  // namespace

QueryTable ToQueryTable(const arrow::Table& table) {
  QueryTable out;
  for (const auto& f : table.schema()->fields()) {
    out.names.push_back(f->name());
    out.types.push_back(f->type()->ToString());
  }
  for (int64_t r = 0; r < table.num_rows(); ++r) {
    std::vector<std::optional<std::string>> row;
    for (int c = 0; c < table.num_columns(); ++c) {
      auto scalar = table.column(c)->GetScalar(r);
      if (!scalar.ok() || !(*scalar)->is_valid) {
        row.push_back(std::nullopt);
      } else {
        row.push_back((*scalar)->ToString());
      }
    }
    out.rows.push_back(std::move(row));
  }
  return out;
}

int RunAppQuery(const QueryOptions& o, std::string* out, std::string* err) {
  auto plan = PlanGlobal(o.sql);
  if (!plan.ok()) {
    *err = "--app: " + plan.status().message();
    return 1;
  }
  std::map<std::string, std::string> config = {
      {"bootstrap.servers", o.bootstrap_servers},
      {"group.id", o.app},  // only to read its committed offsets: never joins
      {"enable.auto.commit", "false"},
      {"enable.partition.eof", "true"},
      {"isolation.level", "read_committed"},
  };
  auto made = MakeKafkaClient(RD_KAFKA_CONSUMER, config, "rill query --app");
  if (!made.ok()) {
    *err = made.status().message();
    return 2;
  }
  KafkaPtr rk(*made);
  Failure failure{2, ""};
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    bool retry = false;
    auto merged = Attempt(o, rk.get(), *plan, &retry, &failure);
    if (!merged.ok()) {
      if (failure.message.empty()) failure = {2, merged.status().message()};
      if (retry && attempt + 1 < kAttempts) {
        std::this_thread::sleep_for(std::chrono::seconds(1));
        continue;
      }
      *err = failure.message;
      return failure.code;
    }
    auto sql = SqlEngine::Make();
    if (!sql.ok()) {
      *err = sql.status().message();
      return 2;
    }
    auto result = (*sql)->QueryWith(FinalSqlOver(*plan, "partials"), {{"partials", *merged}});
    if (!result.ok()) {
      *err = "merging the partials: " + result.status().message();
      return 1;
    }
    if (o.format == "json") {
      auto json = server::TableToJson(**result, 0);
      if (!json.ok()) {
        *err = json.status().message();
        return 2;
      }
      *out = *json + "\n";
    } else if (o.format == "csv") {
      auto sink = arrow::io::BufferOutputStream::Create();
      Status st = sink.ok() ? arrow::csv::WriteCSV(**result, arrow::csv::WriteOptions::Defaults(),
                                                   sink->get())
                            : sink.status();
      auto buffer = st.ok() ? (*sink)->Finish() : Result<std::shared_ptr<arrow::Buffer>>(st);
      if (!buffer.ok()) {
        *err = buffer.status().message();
        return 2;
      }
      *out = (*buffer)->ToString();
    } else {
      *out = FormatTable(ToQueryTable(**result));
    }
    return 0;
  }
  *err = failure.message;
  return failure.code;
}

}  // namespace rill::app
