#include "rill/cluster/global_view.h"

#include <algorithm>
#include <set>

#include <arrow/type.h>
#include <librdkafka/rdkafka.h>

#include "rill/cluster/application.h"
#include "rill/connector/kafka_client.h"
#include "rill/engine/engine.h"
#include "rill/engine/task.h"
#include "rill/pipeline/global_reader.h"
#include "rill/sink/sink_set.h"
#include "rill/sql/global_plan.h"
#include "rill/table/schema.h"

namespace rill::cluster {

namespace {

using pipeline::DeclError;
using pipeline::OptionValue;

struct Names {
  std::string view, partial, partials;
  explicit Names(const std::string& v)
      : view(v), partial(v + "__partial"), partials(v + "__partials") {}
};

class GlobalViews final : public pipeline::GlobalViewMaker {
 public:
  GlobalViews(Engine* engine, Application* app)
      : engine_(engine), app_(app) {}

  Result<std::vector<std::string>> Create(const pipeline::MaterializedViewDecl& decl) override {
    const Names n(decl.name);
    RILL_ASSIGN_OR_RAISE(const GlobalPlan plan, pipeline::PlanGlobalView(engine_, decl));
    auto consumer = app_->consumer();
    if (!consumer) {
      return DeclError(pipeline::kSqlStateBadValue,
                       "\"" + n.view + "\": application '" + app_->options().app_id +
                           "' has no Kafka consumer yet: create its Kafka source first (or "
                           "give the cluster's bootstrap_servers)");
    }
    for (const std::string& taken : {n.partial, n.partials}) {
      if (engine_->GetTable(taken).ok()) {
        return DeclError(pipeline::kSqlStateDuplicate,
                         "\"" + n.view + "\": its part \"" + taken + "\" exists already");
      }
    }
    const std::string servers = consumer->bootstrap_servers();
    const std::string topic = PartialsTopic(app_->options().app_id, n.view);
    RILL_RETURN_NOT_OK(EnsureTopic(servers, topic, *consumer));
    Status made = MakeParts(decl, n, plan, servers, topic);
    if (!made.ok()) {
      RemoveParts(n.view);
      return made;
    }
    return std::vector<std::string>{n.view, n.partial, n.partials};
  }

  Status Drop(const std::string& name) override {
    RemoveParts(name);
    app_->ShareView(name, nullptr);  // dropped on every instance
    return Status::OK();
  }

  void Declared(const std::string& name, const std::string& statement) override {
    app_->ShareView(name, &statement);  // declared on every instance
  }

 private:
  void RemoveParts(const std::string& name) {
    const Names n(name);
    pipeline::DropGlobalReader(engine_, n.view);
    SinkSet::For(engine_).Remove(n.partial);
    (void)engine_->RemoveSqlTask(n.partial);
    (void)engine_->DropTable(n.partial);
  }

  /// Kafka options of the sink and the source: the application's cluster and
  /// security settings, as the dotted names the option tables gather.
  pipeline::Options KafkaOptions(const std::string& servers) const {
    pipeline::Options o;
    for (const auto& [k, v] : KafkaSecurityConfig(app_->options().kafka_config)) {
      o.emplace_back(k, OptionValue::Scalar(v));
    }
    o.emplace_back("bootstrap.servers", OptionValue::Scalar(servers));
    return o;
  }

  Status MakeParts(const pipeline::MaterializedViewDecl& decl, const Names& n,
                   const GlobalPlan& plan, const std::string& servers, const std::string& topic) {
    const std::string where = "view \"" + n.view + "\"";
    // The partials of the instance's own partitions.
    pipeline::MaterializedViewDecl partial;
    partial.name = partial.output = n.partial;
    partial.sql = plan.partial_sql;
    partial.primary_key = plan.partial_key;
    // Every tick: at each tick boundary (where the instance's transactions
    // take their cut) the partials then hold exactly the rows applied, so the
    // committed partials and input offsets agree.
    partial.interval_seconds = 1e-6;
    partial.incremental = decl.incremental;
    RILL_RETURN_NOT_OK(pipeline::AddAndRunView(engine_, partial));
    RILL_ASSIGN_OR_RAISE(auto partial_table, engine_->GetTable(n.partial));

    // ... upserted to the compacted topic (in the instance's transactions).
    pipeline::Options sink = KafkaOptions(servers);
    sink.emplace_back("topic", OptionValue::Scalar(topic));
    sink.emplace_back("mode", OptionValue::Scalar("upsert"));
    sink.emplace_back("key_columns", OptionValue::List(plan.partial_key));
    RILL_ASSIGN_OR_RAISE(pipeline::SinkDecl sink_decl,
                         pipeline::ReadSink("kafka", sink, where, n.partial, n.partial));
    RILL_RETURN_NOT_OK(pipeline::StartSink(sink_decl, engine_).status());
    // A partition's shard (keyed or append) moves whole between instances:
    // its partials come from its owner alone (the one that dropped it writes
    // nothing for it, the one that restored it writes its whole state).
    RILL_RETURN_NOT_OK(app_->WriteOwnedPartitionsOnly(n.partial, "_partition"));

    // Every instance's partials, read back, and the application-wide answer.
    pipeline::GlobalReaderSpec reader;
    reader.decl = decl;
    reader.plan = plan;
    reader.partial_schema = partial_table->user_schema();
    reader.topic = topic;
    reader.kafka = KafkaOptions(servers);
    reader.group_id = app_->options().app_id + "-" + app_->options().instance_id + "-" + n.view +
                      "-partials";
    return pipeline::MakeGlobalReader(engine_, reader);
  }

  /// The compacted topic, with partitions_per_table partitions (0: as many as
  /// the most of the instance's input topics).
  Status EnsureTopic(const std::string& servers, const std::string& topic,
                     const KafkaSharedConsumer& consumer) {
    std::map<std::string, std::string> config = KafkaSecurityConfig(app_->options().kafka_config);
    config["bootstrap.servers"] = servers;
    RILL_ASSIGN_OR_RAISE(rd_kafka_t * rk,
                         MakeKafkaClient(RD_KAFKA_PRODUCER, config, "global view admin"));
    std::unique_ptr<rd_kafka_t, void (*)(rd_kafka_t*)> owned(rk, rd_kafka_destroy);
    int partitions = app_->options().partitions_per_table;
    if (partitions <= 0) {
      std::set<std::string> inputs;
      for (const auto& tp : consumer.assignment()) inputs.insert(tp.first);
      const rd_kafka_metadata_t* md = nullptr;
      if (!inputs.empty() && rd_kafka_metadata(rk, 1, nullptr, &md, 10000) ==
                                 RD_KAFKA_RESP_ERR_NO_ERROR) {
        for (int i = 0; i < md->topic_cnt; ++i) {
          if (inputs.count(md->topics[i].topic)) {
            partitions = std::max(partitions, md->topics[i].partition_cnt);
          }
        }
        rd_kafka_metadata_destroy(md);
      }
      partitions = std::max(partitions, 1);
    }
    return EnsureCompactedTopic(rk, topic, partitions, 10000);
  }

  Engine* engine_;
  Application* app_;
  /// This life of this instance: "<instance_id>@<start time, unix ms>".
};

}  // namespace

std::string PartialsTopic(const std::string& app_id, const std::string& view) {
  return pipeline::GlobalPartialsTopic(app_id, view);
}

std::shared_ptr<pipeline::GlobalViewMaker> MakeGlobalViews(Engine* engine, Application* app) {
  return std::make_shared<GlobalViews>(engine, app);
}

}  // namespace rill::cluster
