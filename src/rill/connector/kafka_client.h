// MakeKafkaClient: a librdkafka handle from a configuration map, for the Kafka
// consumers here (KafkaConnector, KafkaSharedConsumer) and the producers of
// sink/ and cluster/.
#pragma once

#include <librdkafka/rdkafka.h>

#include <map>
#include <string>

#include "rill/common/status.h"

namespace rill {

/// Callbacks of a client; all optional.
struct KafkaClientCallbacks {
  void* opaque = nullptr;
  void (*error)(rd_kafka_t*, int err, const char* reason, void* opaque) = nullptr;
  void (*rebalance)(rd_kafka_t*, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t*,
                    void* opaque) = nullptr;
};

/// A librdkafka configuration of `config`. Invalid "<what>: kafka_config
/// '<key>': <librdkafka's reason>" for a key it refuses. The caller owns it
/// (rd_kafka_new takes it over).
Result<rd_kafka_conf_t*> MakeKafkaConf(const std::map<std::string, std::string>& config,
                                       const std::string& what);

/// Make a producer or consumer (a consumer's main queue then serves the
/// consumer: rd_kafka_poll_set_consumer). Invalid naming `what` and the key
/// librdkafka refused, or its reason. The caller owns the handle.
Result<rd_kafka_t*> MakeKafkaClient(rd_kafka_type_t type,
                                    const std::map<std::string, std::string>& config,
                                    const std::string& what,
                                    const KafkaClientCallbacks& callbacks = {});

/// The connection settings of `config` that every client of one cluster
/// shares (security.*, sasl.*, ssl.*): what another client made for the same
/// cluster takes from a consumer's or producer's kafka_config.
std::map<std::string, std::string> KafkaSecurityConfig(
    const std::map<std::string, std::string>& config);

}  // namespace rill
