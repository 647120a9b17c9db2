// Checkpointer: atomic checkpoint directories, restore, pruning, interrupted
// writes, and connector positions as of the last Poll.
#include "rill/engine/checkpoint.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include <arrow/api.h>
#include <gtest/gtest.h>

#include "rill/connector/file_stream_connector.h"
#include "rill/engine/checkpoint_internal.h"
#include "rill/engine/engine.h"

namespace rill {
namespace {

namespace fs = std::filesystem;

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("rill_ckpt_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  static std::shared_ptr<arrow::Schema> Schema() {
    return arrow::schema({arrow::field("id", arrow::int64()), arrow::field("v", arrow::utf8())});
  }
  static std::shared_ptr<arrow::RecordBatch> Rows(std::vector<int64_t> ids, std::string v) {
    arrow::Int64Builder ib;
    arrow::StringBuilder sb;
    for (auto id : ids) {
      EXPECT_TRUE(ib.Append(id).ok());
      EXPECT_TRUE(sb.Append(v).ok());
    }
    return arrow::RecordBatch::Make(Schema(), static_cast<int64_t>(ids.size()),
                                    {ib.Finish().ValueOrDie(), sb.Finish().ValueOrDie()});
  }
  CheckpointOptions Options(CheckpointFormat format = CheckpointFormat::kParquet) {
    CheckpointOptions o;
    o.dir = dir_.string();
    o.format = format;
    o.keep = 2;
    o.sync = false;
    return o;
  }
  fs::path dir_;
};

TEST_F(CheckpointTest, RestoresTablesWithKeyModeAndSystemColumns) {
  for (auto format : {CheckpointFormat::kParquet, CheckpointFormat::kArrowIpc}) {
    fs::remove_all(dir_);
    auto engine = Engine::Make().ValueOrDie();
    TableOptions opts;
    opts.primary_key = {"id"};
    auto t = engine->RegisterTable("t one/ü", Schema(), opts).ValueOrDie();
    ASSERT_TRUE(t->Write(Rows({1, 2, 3}, "a")).ok());
    ASSERT_TRUE(t->Write(Rows({2}, "b")).ok());
    auto before = t->snapshot()->ToTable().ValueOrDie();
    auto ck = Checkpointer::Make(engine.get(), Options(format)).ValueOrDie();
    auto info = ck->Save().ValueOrDie();
    EXPECT_EQ(info.rows, 3);
    EXPECT_TRUE(fs::exists(dir_ / "ckpt-00000001" / "manifest.json"));

    auto fresh = Engine::Make().ValueOrDie();
    auto ck2 = Checkpointer::Make(fresh.get(), Options()).ValueOrDie();
    auto restored = ck2->Restore().ValueOrDie();
    ASSERT_TRUE(restored.has_value());
    auto back = fresh->GetTable("t one/ü").ValueOrDie();
    EXPECT_TRUE(back->snapshot()->ToTable().ValueOrDie()->Equals(*before));
    EXPECT_EQ(back->primary_key(), std::vector<std::string>{"id"});
    ASSERT_TRUE(back->Write(Rows({1}, "z")).ok());  // still keyed
    EXPECT_EQ(back->num_rows(), 3);
  }
}

TEST_F(CheckpointTest, KeepsTheNewestAndIgnoresInterruptedWrites) {
  auto engine = Engine::Make().ValueOrDie();
  auto t = engine->RegisterTable("t", Schema()).ValueOrDie();
  auto ck = Checkpointer::Make(engine.get(), Options()).ValueOrDie();
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(t->Write(Rows({i}, "x")).ok());
    ASSERT_TRUE(ck->Save().ok());
  }
  auto ids = checkpoint_internal::ListIds(dir_.string()).ValueOrDie();
  EXPECT_EQ(ids, (std::vector<uint64_t>{3, 4}));
  // A crash mid-write leaves a .tmp- directory and maybe a ckpt- without manifest.
  fs::create_directories(dir_ / ".tmp-ckpt-00000005");
  std::ofstream(dir_ / ".tmp-ckpt-00000005" / "t.parquet") << "PAR1";
  fs::create_directories(dir_ / "ckpt-00000009");
  auto fresh = Engine::Make().ValueOrDie();
  auto ck2 = Checkpointer::Make(fresh.get(), Options()).ValueOrDie();
  EXPECT_FALSE(fs::exists(dir_ / ".tmp-ckpt-00000005"));
  auto restored = ck2->Restore().ValueOrDie();
  ASSERT_TRUE(restored.has_value());
  EXPECT_EQ(restored->id, 4u);
  EXPECT_EQ(fresh->GetTable("t").ValueOrDie()->num_rows(), 4);
}

TEST_F(CheckpointTest, FallsBackWhenTheNewestIsDamaged) {
  auto engine = Engine::Make().ValueOrDie();
  auto t = engine->RegisterTable("t", Schema()).ValueOrDie();
  auto ck = Checkpointer::Make(engine.get(), Options()).ValueOrDie();
  ASSERT_TRUE(t->Write(Rows({1}, "x")).ok());
  ASSERT_TRUE(ck->Save().ok());
  ASSERT_TRUE(t->Write(Rows({2}, "x")).ok());
  ASSERT_TRUE(ck->Save().ok());
  std::ofstream(dir_ / "ckpt-00000002" / "t.parquet", std::ios::trunc) << "garbage";
  auto fresh = Engine::Make().ValueOrDie();
  auto restored = Checkpointer::Make(fresh.get(), Options()).ValueOrDie()->Restore();
  ASSERT_TRUE(restored.ok()) << restored.status().ToString();
  EXPECT_EQ((*restored)->id, 1u);
  EXPECT_EQ(fresh->GetTable("t").ValueOrDie()->num_rows(), 1);
}

TEST_F(CheckpointTest, PeriodicCheckpointsRunOnTheWriterThread) {
  auto engine = Engine::Make().ValueOrDie();
  auto t = engine->RegisterTable("t", Schema()).ValueOrDie();
  auto o = Options();
  o.interval_seconds = 0.001;
  auto ck = Checkpointer::Make(engine.get(), o).ValueOrDie();
  ASSERT_TRUE(ck->Start().ok());
  for (int i = 0; i < 50 && ck->stats().written < 3; ++i) {
    ASSERT_TRUE(t->Write(Rows({i}, "x")).ok());
    ASSERT_TRUE(engine->Step().ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(ck->Flush().ok());
  ck->Stop();
  EXPECT_GE(ck->stats().written, 3);
  EXPECT_GT(ck->last_checkpoint_time(), 0);
}

TEST_F(CheckpointTest, FilePositionMatchesExactlyThePolledRows) {
  fs::path in = dir_ / "in";
  fs::create_directories(in);
  std::ofstream(in / "a.ndjson") << "{\"id\":1,\"v\":\"a\"}\n";
  std::ofstream(in / "b.ndjson") << "{\"id\":2,\"v\":\"b\"}\n";
  FileStreamOptions fo;
  fo.watch_path = in.string();
  fo.file_pattern = "*.ndjson";
  fo.stable_ms = 0;
  fo.decode.schema = Schema();
  auto c = FileStreamConnector::Make("t", fo).ValueOrDie();
  ASSERT_TRUE(c->ScanOnce().ok());
  // Read, not yet polled: the position still names nothing.
  EXPECT_EQ(c->SavePosition().ValueOrDie(), "{\"files\":[]}");
  auto polled = c->Poll().ValueOrDie();
  ASSERT_EQ(polled.size(), 2u);
  std::string pos = c->SavePosition().ValueOrDie();
  EXPECT_NE(pos.find("a.ndjson"), std::string::npos);
  EXPECT_NE(pos.find("b.ndjson"), std::string::npos);
  // Restoring a position that names only a.ndjson reads b.ndjson again.
  std::string only_a = pos.substr(0, pos.find(",{\"name\":\"b.ndjson\"")) + "]}";
  ASSERT_TRUE(c->RestorePosition(only_a).ok());
  ASSERT_TRUE(c->ScanOnce().ok());
  auto again = c->Poll().ValueOrDie();
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0]->num_rows(), 1);
  EXPECT_FALSE(c->RestorePosition("{\"nope\":1}").ok());
}

TEST_F(CheckpointTest, RejectsBadOptions) {
  auto engine = Engine::Make().ValueOrDie();
  auto o = Options();
  o.interval_seconds = 0;
  EXPECT_TRUE(Checkpointer::Make(engine.get(), o).status().IsInvalid());
  o = Options();
  o.keep = 0;
  EXPECT_TRUE(Checkpointer::Make(engine.get(), o).status().IsInvalid());
  EXPECT_TRUE(ParseCheckpointFormat("csv").status().IsInvalid());
}

}  // namespace
}  // namespace rill
