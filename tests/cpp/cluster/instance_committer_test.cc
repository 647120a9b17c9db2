// InstanceCommitter (issue 28) on a real broker (transactions: librdkafka's
// mock cluster accepts them but keeps no transactional offsets and fences
// nobody): a transaction commits the offsets for the application's group, and
// a second producer with the same transactional id (a restarted instance)
// fences the first (a zombie), whose commits then fail for good.
// tests/python/test_cluster_broker.py runs these with RILL_TEST_KAFKA_BOOTSTRAP
// and RILL_TEST_KAFKA_TOPIC (a topic of 2 partitions) set; they skip otherwise.
#include <librdkafka/rdkafka.h>

#include <cstdlib>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "rill/cluster/instance_committer.h"
#include "rill/connector/kafka_connector.h"
#include "table/test_util.h"

namespace rill::cluster {
namespace {

class InstanceCommitterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* servers = std::getenv("RILL_TEST_KAFKA_BOOTSTRAP");
    const char* topic = std::getenv("RILL_TEST_KAFKA_TOPIC");
    if (!servers || !*servers || !topic || !*topic) {
      GTEST_SKIP() << "RILL_TEST_KAFKA_BOOTSTRAP / RILL_TEST_KAFKA_TOPIC are not set "
                      "(tests/python/test_cluster_broker.py sets them)";
    }
    servers_ = servers;
    topic_ = topic;
    group_ = topic_ + "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name();
  }

  std::shared_ptr<KafkaSharedConsumer> Consumer() {
    KafkaSharedConsumerOptions o;
    o.config = {{"bootstrap.servers", servers_}, {"group.id", group_}};
    return KafkaSharedConsumer::Make(o).ValueOrDie();
  }

  /// The group's committed offsets of partitions 0 and 1 (read_committed).
  std::vector<int64_t> Committed() {
    char err[512];
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "bootstrap.servers", servers_.c_str(), err, sizeof(err));
    rd_kafka_conf_set(conf, "group.id", group_.c_str(), err, sizeof(err));
    rd_kafka_conf_set(conf, "isolation.level", "read_committed", err, sizeof(err));
    rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof(err));
    rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(2);
    rd_kafka_topic_partition_list_add(list, topic_.c_str(), 0);
    rd_kafka_topic_partition_list_add(list, topic_.c_str(), 1);
    std::vector<int64_t> out;
    if (rd_kafka_committed(rk, list, 20000) == RD_KAFKA_RESP_ERR_NO_ERROR) {
      for (int i = 0; i < list->cnt; ++i) out.push_back(list->elems[i].offset);
    }
    rd_kafka_topic_partition_list_destroy(list);
    rd_kafka_destroy_flags(rk, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE);
    return out;
  }

  std::string servers_;
  std::string topic_;
  std::string group_;
};

TEST_F(InstanceCommitterTest, CommitsTheOffsetsInATransaction) {
  auto consumer = Consumer();
  RILL_ASSERT_OK_AND_ASSIGN(
      auto committer, InstanceCommitter::Make(group_ + "-node-1", servers_, {}, consumer, 20000));
  RILL_ASSERT_OK(committer->Commit({{{topic_, 0}, 5}, {{topic_, 1}, 7}}));
  RILL_ASSERT_OK(committer->Commit({{{topic_, 0}, 9}}));
  RILL_ASSERT_OK(committer->Commit({}));  // nothing to commit: no transaction
  EXPECT_EQ(Committed(), (std::vector<int64_t>{9, 7}));
  const CommitterStats s = committer->stats();
  EXPECT_EQ(s.commits, 2);
  EXPECT_FALSE(s.fenced);
  EXPECT_GT(s.max_commit_ms, 0);
}

TEST_F(InstanceCommitterTest, ARestartedInstanceFencesItsZombie) {
  auto consumer = Consumer();
  RILL_ASSERT_OK_AND_ASSIGN(
      auto zombie, InstanceCommitter::Make(group_ + "-node-1", servers_, {}, consumer, 20000));
  RILL_ASSERT_OK(zombie->Commit({{{topic_, 0}, 3}}));
  RILL_ASSERT_OK_AND_ASSIGN(
      auto restarted, InstanceCommitter::Make(group_ + "-node-1", servers_, {}, consumer, 20000));
  RILL_ASSERT_OK(restarted->Commit({{{topic_, 0}, 4}}));
  // The zombie's late commit is refused, and stays refused.
  EXPECT_FALSE(zombie->Commit({{{topic_, 0}, 100}}).ok());
  EXPECT_TRUE(zombie->stats().fenced) << zombie->stats().last_error;
  EXPECT_FALSE(zombie->Commit({{{topic_, 0}, 101}}).ok());
  EXPECT_EQ(Committed(), (std::vector<int64_t>{4, -1001}));
}

}  // namespace
}  // namespace rill::cluster
