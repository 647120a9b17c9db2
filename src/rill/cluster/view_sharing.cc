#include "rill/cluster/view_sharing.h"

#include <chrono>

#include <librdkafka/rdkafka.h>

#include "rill/cluster/application.h"
#include "rill/connector/kafka_client.h"
#include "rill/engine/engine.h"
#include "rill/engine/event.h"
#include "rill/pipeline/catalog.h"

namespace rill::cluster {

namespace {

constexpr int kTimeoutMs = 10000;
/// Set while this thread declares or drops a view the topic holds.
thread_local bool g_applying = false;

}  // namespace

std::string ViewsTopic(const std::string& app_id) { return app_id + "-views"; }

ViewSharing::ViewSharing(Engine* engine, std::string app_id,
                         std::map<std::string, std::string> config, std::function<bool()> ready)
    : engine_(engine),
      app_id_(std::move(app_id)),
      config_(std::move(config)),
      ready_(std::move(ready)) {
  thread_ = std::thread([this] { Run(); });
}

ViewSharing::~ViewSharing() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  if (producer_) {
    auto* rk = static_cast<rd_kafka_t*>(producer_);
    rd_kafka_flush(rk, kTimeoutMs);
    rd_kafka_destroy(rk);
  }
}

void ViewSharing::Publish(const std::string& name, const std::string* statement) {
  if (g_applying) return;
  std::lock_guard<std::mutex> lock(publish_mu_);
  auto fail = [&](const std::string& why) {
    engine_->RecordEvent(EngineEvent::Engine(
        Severity::kWarning, name,
        "The global view could not be shared with the application's other instances "
        "(declare it on each of them)",
        why, engine_->Now()));
  };
  if (!producer_) {
    auto made = MakeKafkaClient(RD_KAFKA_PRODUCER, config_, "global views");
    if (!made.ok()) return fail(made.status().ToString());
    Status st = EnsureCompactedTopic(*made, ViewsTopic(app_id_), 1, kTimeoutMs);
    if (!st.ok()) {
      rd_kafka_destroy(*made);
      return fail(st.ToString());
    }
    producer_ = *made;
  }
  auto* rk = static_cast<rd_kafka_t*>(producer_);
  const std::string topic = ViewsTopic(app_id_);
  rd_kafka_resp_err_t err = rd_kafka_producev(
      rk, RD_KAFKA_V_TOPIC(topic.c_str()), RD_KAFKA_V_PARTITION(0),
      RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
      RD_KAFKA_V_KEY(name.data(), name.size()),
      RD_KAFKA_V_VALUE(statement ? const_cast<char*>(statement->data()) : nullptr,
                       statement ? statement->size() : 0),
      RD_KAFKA_V_END);
  if (err) return fail(rd_kafka_err2str(err));
  err = rd_kafka_flush(rk, kTimeoutMs);
  if (err) fail(std::string("not delivered within 10 s: ") + rd_kafka_err2str(err));
}

void ViewSharing::Run() {
  // The instance's own declarations (its pipeline file) come first.
  while (!stop_ && !ready_()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  if (stop_) return;
  {
    // The topic exists once an instance published to it; made (empty) here
    // so that the reader sees the first view published. When it cannot be
    // made (a cluster that refuses, ACLs), the reader waits for it to exist.
    auto made = MakeKafkaClient(RD_KAFKA_PRODUCER, config_, "global views");
    if (made.ok()) {
      (void)EnsureCompactedTopic(*made, ViewsTopic(app_id_), 1, kTimeoutMs);
      rd_kafka_destroy(*made);
    }
  }
  rd_kafka_t* rk = nullptr;
  while (!stop_ && !rk) {
    std::map<std::string, std::string> config = config_;
    config["group.id"] = ViewsTopic(app_id_) + "-reader";
    config["enable.auto.commit"] = "false";
    config["fetch.wait.max.ms"] = "100";
    auto consumer = MakeKafkaClient(RD_KAFKA_CONSUMER, config, "global views");
    if (!consumer.ok()) {
      engine_->RecordEvent(EngineEvent::Engine(
          Severity::kWarning, ViewsTopic(app_id_),
          "The application's shared global views cannot be read (retrying in 5 s)",
          consumer.status().ToString(), engine_->Now()));
      for (int i = 0; i < 100 && !stop_; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      continue;
    }
    rk = *consumer;
  }
  if (!rk) return;
  rd_kafka_poll_set_consumer(rk);
  rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(1);
  rd_kafka_topic_partition_list_add(list, ViewsTopic(app_id_).c_str(), 0)->offset =
      RD_KAFKA_OFFSET_BEGINNING;
  rd_kafka_assign(rk, list);
  rd_kafka_topic_partition_list_destroy(list);
  while (!stop_) {
    rd_kafka_message_t* m = rd_kafka_consumer_poll(rk, 100);
    if (!m) continue;
    if (!m->err && m->key) {
      const std::string name(static_cast<const char*>(m->key), m->key_len);
      if (m->payload) {
        const std::string statement(static_cast<const char*>(m->payload), m->len);
        Apply(name, &statement);
      } else {
        Apply(name, nullptr);
      }
    }
    rd_kafka_message_destroy(m);
  }
  rd_kafka_consumer_close(rk);
  rd_kafka_destroy(rk);
}

void ViewSharing::Apply(const std::string& name, const std::string* statement) {
  pipeline::Catalog& catalog = pipeline::Catalog::For(engine_);
  bool declared = false;
  for (const auto& e : catalog.Entries()) {
    if (e.kind == pipeline::DdlObject::kMaterializedView && e.name == name) declared = true;
  }
  if (declared == (statement != nullptr)) return;  // as the topic says already
  g_applying = true;
  auto done = statement ? catalog.Execute(*statement)
                        : catalog.Execute("DROP MATERIALIZED VIEW \"" + name + "\"");
  g_applying = false;
  if (!done.ok()) {
    engine_->RecordEvent(EngineEvent::Engine(
        Severity::kError, name,
        statement ? "A global view declared on another instance could not be declared here"
                  : "A global view dropped on another instance could not be dropped here",
        done.status().ToString(), engine_->Now()));
  }
}

}  // namespace rill::cluster
