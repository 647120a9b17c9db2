#include "rill/connector/kafka_client.h"

namespace rill {

Result<rd_kafka_conf_t*> MakeKafkaConf(const std::map<std::string, std::string>& config,
                                       const std::string& what) {
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  char errstr[512];
  for (const auto& [key, value] : config) {
    if (rd_kafka_conf_set(conf, key.c_str(), value.c_str(), errstr, sizeof(errstr)) !=
        RD_KAFKA_CONF_OK) {
      rd_kafka_conf_destroy(conf);
      return Status::Invalid(what, ": kafka_config '", key, "': ", errstr);
    }
  }
  return conf;
}

Result<rd_kafka_t*> MakeKafkaClient(rd_kafka_type_t type,
                                    const std::map<std::string, std::string>& config,
                                    const std::string& what,
                                    const KafkaClientCallbacks& callbacks) {
  RILL_ASSIGN_OR_RAISE(rd_kafka_conf_t* conf, MakeKafkaConf(config, what));
  char errstr[512];
  if (callbacks.opaque) rd_kafka_conf_set_opaque(conf, callbacks.opaque);
  if (callbacks.error) rd_kafka_conf_set_error_cb(conf, callbacks.error);
  if (callbacks.rebalance) rd_kafka_conf_set_rebalance_cb(conf, callbacks.rebalance);
  rd_kafka_t* rk = rd_kafka_new(type, conf, errstr, sizeof(errstr));
  if (!rk) {
    rd_kafka_conf_destroy(conf);  // not taken over on failure
    return Status::Invalid(what, ": ", errstr);
  }
  if (type == RD_KAFKA_CONSUMER) rd_kafka_poll_set_consumer(rk);
  return rk;
}

std::map<std::string, std::string> KafkaSecurityConfig(
    const std::map<std::string, std::string>& config) {
  std::map<std::string, std::string> out;
  for (const auto& [key, value] : config) {
    if (key.rfind("security.", 0) == 0 || key.rfind("sasl.", 0) == 0 ||
        key.rfind("ssl.", 0) == 0) {
      out[key] = value;
    }
  }
  return out;
}

}  // namespace rill
