// KafkaMockCluster: librdkafka's in-process mock cluster plus a producer.
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include <atomic>

#include "rill/connector/kafka_connector.h"

namespace rill {

struct KafkaMockCluster::Impl {
  rd_kafka_t* rk = nullptr;  // producer that hosts the cluster
  rd_kafka_mock_cluster_t* cluster = nullptr;
  std::atomic<int64_t> failed{0};

  static void OnDelivery(rd_kafka_t*, const rd_kafka_message_t* m, void* opaque) {
    if (m->err) static_cast<Impl*>(opaque)->failed++;
  }

  ~Impl() {
    if (cluster) rd_kafka_mock_cluster_destroy(cluster);
    if (rk) rd_kafka_destroy(rk);
  }

  Status Flush() {
    rd_kafka_flush(rk, 30000);
    int64_t failures = failed.exchange(0);
    if (failures > 0) return Status::IOError(failures, " messages were not delivered");
    return Status::OK();
  }
};

Result<std::unique_ptr<KafkaMockCluster>> KafkaMockCluster::Make(int brokers) {
  auto impl = std::make_unique<Impl>();
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  char errstr[512];
  rd_kafka_conf_set(conf, "linger.ms", "5", errstr, sizeof(errstr));
  rd_kafka_conf_set_opaque(conf, impl.get());
  rd_kafka_conf_set_dr_msg_cb(conf, &Impl::OnDelivery);
  impl->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
  if (!impl->rk) {
    rd_kafka_conf_destroy(conf);
    return Status::IOError("mock cluster producer: ", errstr);
  }
  impl->cluster = rd_kafka_mock_cluster_new(impl->rk, brokers);
  if (!impl->cluster) return Status::IOError("rd_kafka_mock_cluster_new failed");
  rd_kafka_brokers_add(impl->rk, rd_kafka_mock_cluster_bootstraps(impl->cluster));
  return std::unique_ptr<KafkaMockCluster>(new KafkaMockCluster(std::move(impl)));
}

KafkaMockCluster::KafkaMockCluster(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
KafkaMockCluster::~KafkaMockCluster() = default;

std::string KafkaMockCluster::bootstrap_servers() const {
  return rd_kafka_mock_cluster_bootstraps(impl_->cluster);
}

Status KafkaMockCluster::CreateTopic(const std::string& topic, int partitions) {
  rd_kafka_resp_err_t err =
      rd_kafka_mock_topic_create(impl_->cluster, topic.c_str(), partitions, /*replication=*/1);
  if (err) return Status::IOError("create topic '", topic, "': ", rd_kafka_err2str(err));
  return Status::OK();
}

Status KafkaMockCluster::Produce(const std::string& topic, int32_t partition,
                                 std::string_view value, std::string_view key,
                                 int64_t timestamp_ms) {
  rd_kafka_resp_err_t err = rd_kafka_producev(
      impl_->rk, RD_KAFKA_V_TOPIC(topic.c_str()),
      RD_KAFKA_V_PARTITION(partition < 0 ? RD_KAFKA_PARTITION_UA : partition),
      RD_KAFKA_V_VALUE(const_cast<char*>(value.data()), value.size()),
      RD_KAFKA_V_KEY(key.empty() ? nullptr : key.data(), key.size()),
      RD_KAFKA_V_TIMESTAMP(timestamp_ms), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
      RD_KAFKA_V_END);
  if (err) return Status::IOError("produce: ", rd_kafka_err2str(err));
  return impl_->Flush();
}

Status KafkaMockCluster::ProduceMany(const std::string& topic,
                                     const std::vector<std::string>& values) {
  for (const auto& v : values) {
    for (;;) {
      rd_kafka_resp_err_t err = rd_kafka_producev(
          impl_->rk, RD_KAFKA_V_TOPIC(topic.c_str()),
          RD_KAFKA_V_VALUE(const_cast<char*>(v.data()), v.size()),
          RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
      if (err == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
        rd_kafka_poll(impl_->rk, 50);
        continue;
      }
      if (err) return Status::IOError("produce: ", rd_kafka_err2str(err));
      break;
    }
  }
  return impl_->Flush();
}

Status KafkaMockCluster::SetBrokerDown(int broker_id, bool down) {
  rd_kafka_resp_err_t err = down ? rd_kafka_mock_broker_set_down(impl_->cluster, broker_id)
                                 : rd_kafka_mock_broker_set_up(impl_->cluster, broker_id);
  if (err) return Status::IOError("broker ", broker_id, ": ", rd_kafka_err2str(err));
  return Status::OK();
}

}  // namespace rill
