#include "nexmark/kafka_sink.h"

#include <librdkafka/rdkafka.h>

#include <string_view>

namespace rill::nexmark {

struct KafkaSink::Impl {
  rd_kafka_t* rk = nullptr;
  int64_t delivered = 0;
  std::string first_error;  // the first failed delivery

  ~Impl() {
    if (rk) rd_kafka_destroy(rk);
  }

  static void OnDelivery(rd_kafka_t*, const rd_kafka_message_t* m, void* opaque) {
    auto* self = static_cast<Impl*>(opaque);
    if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
      ++self->delivered;
    } else if (self->first_error.empty()) {
      self->first_error = rd_kafka_err2str(m->err);
    }
  }

  arrow::Status Send(const std::string& topic, std::string_view value) {
    while (true) {
      const rd_kafka_resp_err_t err = rd_kafka_producev(
          rk, RD_KAFKA_V_TOPIC(topic.c_str()),
          RD_KAFKA_V_VALUE(const_cast<char*>(value.data()), value.size()),
          RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
      if (err == RD_KAFKA_RESP_ERR_NO_ERROR) return arrow::Status::OK();
      if (err != RD_KAFKA_RESP_ERR__QUEUE_FULL) {
        return arrow::Status::IOError("nexmark kafka sink: producing to '", topic,
                                      "' failed: ", rd_kafka_err2str(err));
      }
      rd_kafka_poll(rk, 50);  // full: serve delivery reports, then try again
    }
  }
};

KafkaSink::KafkaSink(std::unique_ptr<Impl> impl, std::string prefix)
    : impl_(std::move(impl)), prefix_(std::move(prefix)) {}

KafkaSink::~KafkaSink() = default;

arrow::Result<std::unique_ptr<KafkaSink>> KafkaSink::Make(const std::string& bootstrap_servers,
                                                          std::string topic_prefix,
                                                          const std::string& compression) {
  auto impl = std::make_unique<Impl>();
  char err[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  const std::pair<const char*, const char*> settings[] = {
      {"bootstrap.servers", bootstrap_servers.c_str()},
      {"linger.ms", "5"},
      {"batch.num.messages", "10000"},
      {"queue.buffering.max.messages", "500000"},
      {"compression.type", compression.c_str()},
  };
  for (const auto& [key, value] : settings) {
    if (rd_kafka_conf_set(conf, key, value, err, sizeof(err)) != RD_KAFKA_CONF_OK) {
      rd_kafka_conf_destroy(conf);
      return arrow::Status::Invalid("nexmark kafka sink: ", key, ": ", err);
    }
  }
  rd_kafka_conf_set_dr_msg_cb(conf, &Impl::OnDelivery);
  rd_kafka_conf_set_opaque(conf, impl.get());
  impl->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
  if (!impl->rk) {
    rd_kafka_conf_destroy(conf);
    return arrow::Status::Invalid("nexmark kafka sink: ", err);
  }
  return std::unique_ptr<KafkaSink>(new KafkaSink(std::move(impl), std::move(topic_prefix)));
}

arrow::Status KafkaSink::Produce(const EventBatch& batch) {
  const std::pair<const char*, const arrow::RecordBatch*> kinds[] = {
      {"person", batch.person.get()}, {"auction", batch.auction.get()}, {"bid", batch.bid.get()}};
  std::string lines;
  for (const auto& [kind, rows] : kinds) {
    lines.clear();
    AppendNdjsonRows(lines, kind, *rows);
    const std::string topic_name = topic(kind);
    std::string_view rest = lines;
    while (!rest.empty()) {
      const size_t end = rest.find('\n');
      ARROW_RETURN_NOT_OK(impl_->Send(topic_name, rest.substr(0, end)));
      rest.remove_prefix(end == std::string_view::npos ? rest.size() : end + 1);
    }
    rd_kafka_poll(impl_->rk, 0);
  }
  if (!impl_->first_error.empty()) {
    return arrow::Status::IOError("nexmark kafka sink: delivery failed: ", impl_->first_error);
  }
  return arrow::Status::OK();
}

arrow::Status KafkaSink::Flush(int timeout_ms) {
  const rd_kafka_resp_err_t err = rd_kafka_flush(impl_->rk, timeout_ms);
  if (!impl_->first_error.empty()) {
    return arrow::Status::IOError("nexmark kafka sink: delivery failed: ", impl_->first_error);
  }
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return arrow::Status::IOError("nexmark kafka sink: ", rd_kafka_outq_len(impl_->rk),
                                  " messages not delivered after ", timeout_ms,
                                  " ms: ", rd_kafka_err2str(err));
  }
  return arrow::Status::OK();
}

int64_t KafkaSink::delivered() const { return impl_->delivered; }

arrow::Result<std::vector<std::pair<int64_t, int64_t>>> KafkaSink::Watermarks(
    const std::string& kind, int timeout_ms) {
  const std::string name = topic(kind);
  rd_kafka_topic_t* rkt = rd_kafka_topic_new(impl_->rk, name.c_str(), nullptr);
  const rd_kafka_metadata_t* md = nullptr;
  rd_kafka_resp_err_t err = rd_kafka_metadata(impl_->rk, 0, rkt, &md, timeout_ms);
  rd_kafka_topic_destroy(rkt);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR || md->topic_cnt != 1 || md->topics[0].err) {
    const std::string why = err ? rd_kafka_err2str(err)
                                : md->topic_cnt != 1 ? "no such topic"
                                                     : rd_kafka_err2str(md->topics[0].err);
    if (md) rd_kafka_metadata_destroy(md);
    return arrow::Status::IOError("nexmark kafka sink: metadata of '", name, "': ", why);
  }
  std::vector<std::pair<int64_t, int64_t>> out(md->topics[0].partition_cnt, {-1, -1});
  rd_kafka_metadata_destroy(md);
  for (size_t p = 0; p < out.size(); ++p) {
    err = rd_kafka_query_watermark_offsets(impl_->rk, name.c_str(), static_cast<int32_t>(p),
                                           &out[p].first, &out[p].second, timeout_ms);
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      return arrow::Status::IOError("nexmark kafka sink: watermarks of '", name, "' [", p,
                                    "]: ", rd_kafka_err2str(err));
    }
  }
  return out;
}

}  // namespace rill::nexmark
