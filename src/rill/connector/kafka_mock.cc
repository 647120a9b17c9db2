// KafkaMockCluster: librdkafka's in-process mock cluster plus a producer.
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include <atomic>
#include <vector>

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

Result<std::vector<int64_t>> KafkaMockCluster::CommittedOffsets(const std::string& group,
                                                                 const std::string& topic,
                                                                 int partitions) {
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  char errstr[512];
  rd_kafka_conf_set(conf, "bootstrap.servers", bootstrap_servers().c_str(), errstr,
                    sizeof(errstr));
  rd_kafka_conf_set(conf, "group.id", group.c_str(), errstr, sizeof(errstr));
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof(errstr));
  if (!rk) {
    rd_kafka_conf_destroy(conf);
    return Status::IOError("committed offsets: ", errstr);
  }
  rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(partitions);
  for (int p = 0; p < partitions; ++p) rd_kafka_topic_partition_list_add(list, topic.c_str(), p);
  rd_kafka_resp_err_t err = rd_kafka_committed(rk, list, 10000);
  std::vector<int64_t> out;
  for (int p = 0; p < partitions; ++p) out.push_back(list->elems[p].offset);
  rd_kafka_topic_partition_list_destroy(list);
  rd_kafka_destroy_flags(rk, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE);
  if (err) return Status::IOError("committed offsets: ", rd_kafka_err2str(err));
  return out;
}

Status KafkaMockCluster::SetBrokerDown(int broker_id, bool down) {
  rd_kafka_resp_err_t err = down ? rd_kafka_mock_broker_set_down(impl_->cluster, broker_id)
                                 : rd_kafka_mock_broker_set_up(impl_->cluster, broker_id);
  if (err) return Status::IOError("broker ", broker_id, ": ", rd_kafka_err2str(err));
  return Status::OK();
}

}  // namespace rill
