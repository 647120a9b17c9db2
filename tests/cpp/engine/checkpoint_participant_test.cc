// Checkpoint participants (engine/checkpoint_participant.h): their files are
// part of the checkpoint, they hear of its completion and of its restore.
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <arrow/api.h>
#include <gtest/gtest.h>

#include "rill/engine/checkpoint.h"
#include "rill/engine/engine.h"

namespace rill {
namespace {

namespace fs = std::filesystem;

class Recorder : public CheckpointParticipant {
 public:
  Result<CheckpointFileWriter> Capture(
      uint64_t id, const std::map<std::string, uint64_t>& versions) override {
    captured_versions = versions;
    if (fail) {
      return CheckpointFileWriter(
          [](const std::string&, bool) -> Result<int64_t> { return Status::IOError("disk"); });
    }
    return CheckpointFileWriter([id](const std::string& dir, bool) -> Result<int64_t> {
      std::ofstream(dir + "/participant.txt") << "checkpoint " << id;
      return 12;
    });
  }
  void OnComplete(const CompletedCheckpoint& done) override { completed.push_back(done); }
  Status Restore(const RestoredCheckpoint& r) override {
    restored = r;
    return Status::OK();
  }

  bool fail = false;
  std::map<std::string, uint64_t> captured_versions;
  std::vector<CompletedCheckpoint> completed;
  std::optional<RestoredCheckpoint> restored;
};

class CheckpointParticipantTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("rill_ckpt_part_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  CheckpointOptions Options() {
    CheckpointOptions o;
    o.dir = dir_.string();
    o.sync = false;
    return o;
  }
  static std::shared_ptr<arrow::RecordBatch> Rows(int64_t n) {
    arrow::Int64Builder b;
    for (int64_t i = 0; i < n; ++i) EXPECT_TRUE(b.Append(i).ok());
    auto schema = arrow::schema({arrow::field("id", arrow::int64())});
    return arrow::RecordBatch::Make(schema, n, {b.Finish().ValueOrDie()});
  }
  fs::path dir_;
};

TEST_F(CheckpointParticipantTest, ItsFilesAreInTheCheckpointAndItHearsOfCompletion) {
  auto engine = Engine::Make().ValueOrDie();
  auto t = engine->RegisterTable("t", Rows(1)->schema()).ValueOrDie();
  ASSERT_TRUE(t->Write(Rows(3)).ok());
  ASSERT_TRUE(t->Write(Rows(2)).ok());
  auto recorder = std::make_shared<Recorder>();
  engine->AddCheckpointParticipant("rec", recorder);
  auto ck = Checkpointer::Make(engine.get(), Options()).ValueOrDie();
  auto info = ck->Save().ValueOrDie();
  EXPECT_EQ(recorder->captured_versions, (std::map<std::string, uint64_t>{{"t", 2}}));
  EXPECT_TRUE(fs::exists(fs::path(info.path) / "participant.txt"));
  ASSERT_EQ(recorder->completed.size(), 1u);
  EXPECT_EQ(recorder->completed[0].id, info.id);
  EXPECT_EQ(recorder->completed[0].table_versions.at("t"), 2u);
  EXPECT_EQ(recorder->completed[0].path, info.path);
}

TEST_F(CheckpointParticipantTest, AFailingFileWriterFailsTheCheckpointAndNothingCompletes) {
  auto engine = Engine::Make().ValueOrDie();
  auto recorder = std::make_shared<Recorder>();
  recorder->fail = true;
  engine->AddCheckpointParticipant("rec", recorder);
  auto ck = Checkpointer::Make(engine.get(), Options()).ValueOrDie();
  EXPECT_FALSE(ck->Save().ok());
  EXPECT_TRUE(recorder->completed.empty());
  EXPECT_TRUE(ck->List().ValueOrDie().empty());
}

TEST_F(CheckpointParticipantTest, RestoreSaysWhichVersionsTheTablesHadAndHaveNow) {
  {
    auto engine = Engine::Make().ValueOrDie();
    auto t = engine->RegisterTable("t", Rows(1)->schema()).ValueOrDie();
    for (int i = 0; i < 4; ++i) ASSERT_TRUE(t->Write(Rows(1)).ok());
    auto ck = Checkpointer::Make(engine.get(), Options()).ValueOrDie();
    ASSERT_TRUE(ck->Save().ok());
  }
  auto engine = Engine::Make().ValueOrDie();
  auto recorder = std::make_shared<Recorder>();
  engine->AddCheckpointParticipant("rec", recorder);
  auto ck = Checkpointer::Make(engine.get(), Options()).ValueOrDie();
  ASSERT_TRUE(ck->Restore().ValueOrDie().has_value());
  ASSERT_TRUE(recorder->restored.has_value());
  EXPECT_EQ(recorder->restored->table_versions.at("t"), 4u);
  const uint64_t now = engine->GetTable("t").ValueOrDie()->snapshot()->version();
  EXPECT_EQ(recorder->restored->restored_versions.at("t"), now);
  ASSERT_TRUE(engine->last_restored_checkpoint().has_value());
  EXPECT_EQ(engine->last_restored_checkpoint()->id, recorder->restored->id);
}

}  // namespace
}  // namespace rill
