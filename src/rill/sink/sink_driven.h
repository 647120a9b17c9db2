// The SinkSet's DrivenSinks (sink_set.h): the Kafka sinks an application
// instance commits in its transactions.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "rill/sink/sink_internal.h"
#include "rill/sink/sink_set.h"

namespace rill::sink_internal {

class DrivenSinksImpl : public DrivenSinks {
 public:
  explicit DrivenSinksImpl(std::string kafka_cluster) : kafka_cluster_(std::move(kafka_cluster)) {}
  const std::string& kafka_cluster() const { return kafka_cluster_; }
  void Add(std::shared_ptr<SinkRunner> sink);
  void Remove(const SinkRunner* sink);

  Cut Capture() override;
  bool HasChanges(const Cut& cut) const override;
  Status Write(const Cut& cut, void* producer) override;
  void Committed(const Cut& cut) override;
  void Aborted(const Cut& cut, const Status& why) override;
  void Discard(const Cut& cut, const Status& why) override;
  void Skip(const std::string& table) override;
  bool SkipSink(const std::string& sink_name) override;
  bool SetRowFilter(const std::string& sink_name, RowFilter filter) override;

 private:
  const std::string kafka_cluster_;
  std::mutex mu_;
  std::vector<std::shared_ptr<SinkRunner>> sinks_;
};

}  // namespace rill::sink_internal
