// Checkpoint writes that fail (issue 23): a checkpoint directory on a small
// tmpfs that fills up (ENOSPC) and one remounted read-only. The engine keeps
// ticking and answering queries, the failure is counted (checkpoint_failures
// in GetMetrics and rill_metrics) and recorded as an error event (the metrics
// store turns it into a rill_alerts row), the earlier checkpoints stay
// restorable, and once the disk is writable again the next checkpoint is
// complete. A partially written checkpoint is never picked at restore.
//
// The tmpfs tests need mount(2) (they run as root); without it they skip, or
// fail when CI=true.
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include <arrow/api.h>
#include <gtest/gtest.h>

#include "rill/engine/checkpoint.h"
#include "rill/engine/checkpoint_internal.h"
#include "rill/engine/engine.h"

namespace rill {
namespace {

namespace fs = std::filesystem;

std::shared_ptr<arrow::Schema> Schema() {
  return arrow::schema({arrow::field("id", arrow::int64()), arrow::field("v", arrow::utf8())});
}

/// Rows ids [from, to) with a value of `width` bytes made of `fill`.
std::shared_ptr<arrow::RecordBatch> Rows(int64_t from, int64_t to, char fill, int width) {
  arrow::Int64Builder ib;
  arrow::StringBuilder sb;
  for (int64_t id = from; id < to; ++id) {
    EXPECT_TRUE(ib.Append(id).ok());
    EXPECT_TRUE(sb.Append(std::string(static_cast<size_t>(width), fill)).ok());
  }
  return arrow::RecordBatch::Make(Schema(), to - from,
                                  {ib.Finish().ValueOrDie(), sb.Finish().ValueOrDie()});
}

class CheckpointFailureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("rill_ckpt_fail_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    EngineOptions options;
    options.clock = [this] { return now_; };
    engine_ = Engine::Make(options).ValueOrDie();
    TableOptions keyed;
    keyed.primary_key = {"id"};
    table_ = engine_->RegisterTable("t", Schema(), keyed).ValueOrDie();
  }
  void TearDown() override {
    checkpointer_.reset();
    engine_.reset();
    if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
    fs::remove_all(dir_);
  }

  /// Mount a tmpfs of `size` (e.g. "1m") on the checkpoint directory. False
  /// (and the test skipped, or failed under CI=true) without mount(2).
  bool MountTmpfs(const char* size) {
    const std::string data = std::string("size=") + size;
    if (::mount("tmpfs", dir_.c_str(), "tmpfs", 0, data.c_str()) != 0) {
      const std::string why = std::strerror(errno);
      const char* ci = std::getenv("CI");
      if (ci && std::string(ci) == "true") {
        ADD_FAILURE() << "mount -t tmpfs on " << dir_ << " failed (" << why
                      << "); CI must run this test as root";
      }
      return false;
    }
    mounted_ = true;
    return true;
  }
  void Remount(bool read_only) {
    const unsigned long flags = MS_REMOUNT | (read_only ? MS_RDONLY : 0);
    ASSERT_EQ(::mount(nullptr, dir_.c_str(), nullptr, flags, nullptr), 0)
        << std::strerror(errno);
  }
  /// Fill the file system with one file until ENOSPC; return its path.
  fs::path FillDisk() {
    const fs::path filler = dir_ / "filler";
    std::FILE* f = std::fopen(filler.c_str(), "wb");
    EXPECT_NE(f, nullptr);
    const std::string block(64 * 1024, 'x');
    while (f && std::fwrite(block.data(), 1, block.size(), f) == block.size()) {
    }
    // Byte by byte: the last partial block.
    while (f && std::fputc('x', f) != EOF && std::fflush(f) == 0) {
    }
    if (f) std::fclose(f);
    return filler;
  }
  CheckpointOptions Options() const {
    CheckpointOptions o;
    o.dir = dir_.string();
    o.format = CheckpointFormat::kArrowIpc;
    o.keep = 2;
    o.interval_seconds = 10;
    return o;
  }
  /// Restore the newest checkpoint into a fresh engine; return its table "t".
  std::shared_ptr<arrow::Table> RestoreFresh(uint64_t* id) {
    auto fresh = Engine::Make().ValueOrDie();
    auto ck = Checkpointer::Make(fresh.get(), Options()).ValueOrDie();
    auto restored = ck->Restore();
    EXPECT_TRUE(restored.ok()) << restored.status().ToString();
    if (!restored.ok() || !restored->has_value()) return nullptr;
    *id = (*restored)->id;
    auto t = fresh->GetTable("t").ValueOrDie();
    return t->snapshot()->ToTable().ValueOrDie();
  }
  std::shared_ptr<arrow::Table> Current() { return table_->snapshot()->ToTable().ValueOrDie(); }
  int64_t CountRows() {
    auto result = engine_->Query("SELECT count(*) AS n FROM t");
    EXPECT_TRUE(result.ok()) << result.status().ToString();
    if (!result.ok()) return -1;
    return std::static_pointer_cast<arrow::Int64Array>((*result)->column(0)->chunk(0))->Value(0);
  }
  int64_t FailuresInRillMetrics() {
    auto result = engine_->Query("SELECT checkpoint_failures FROM rill_metrics");
    EXPECT_TRUE(result.ok()) << result.status().ToString();
    if (!result.ok()) return -1;
    return std::static_pointer_cast<arrow::Int64Array>((*result)->column(0)->chunk(0))->Value(0);
  }
  int CheckpointErrorEvents() {
    int n = 0;
    for (const auto& e : engine_->RecentEvents()) {
      if (e.component == "checkpoint" && e.severity == Severity::kError) ++n;
    }
    return n;
  }
  bool HasTemporaries() const {
    for (const auto& entry : fs::directory_iterator(dir_)) {
      if (entry.path().filename().string().rfind(".tmp-ckpt-", 0) == 0) return true;
    }
    return false;
  }

  fs::path dir_;
  bool mounted_ = false;
  double now_ = 1000.0;
  std::unique_ptr<Engine> engine_;
  std::shared_ptr<LiveTable> table_;
  std::unique_ptr<Checkpointer> checkpointer_;
};

TEST_F(CheckpointFailureTest, AFullDiskFailsTheCheckpointKeepsTheEarlierOneAndTheNextIsComplete) {
  if (!MountTmpfs("1m")) GTEST_SKIP() << "mount(2) is not permitted (run as root)";
  checkpointer_ = Checkpointer::Make(engine_.get(), Options()).ValueOrDie();
  ASSERT_TRUE(table_->Write(Rows(0, 100, 'a', 100)).ok());
  const auto first = Current();
  ASSERT_TRUE(checkpointer_->Save().ok());

  const fs::path filler = FillDisk();
  ASSERT_TRUE(table_->Write(Rows(50, 2000, 'b', 100)).ok());
  auto failed = checkpointer_->Save();
  ASSERT_FALSE(failed.ok());
  EXPECT_TRUE(failed.status().IsIOError()) << failed.status().ToString();
  EXPECT_NE(failed.status().message().find("No space left"), std::string::npos)
      << failed.status().ToString();

  // The engine goes on: ticks run, queries answer, the failure is counted and alerted.
  now_ += 1;
  ASSERT_TRUE(engine_->Step().ok());
  EXPECT_EQ(CountRows(), 2000);
  EXPECT_EQ(engine_->GetMetrics().checkpoint_failures, 1);
  EXPECT_EQ(FailuresInRillMetrics(), 1);
  EXPECT_EQ(CheckpointErrorEvents(), 1);
  EXPECT_EQ(checkpointer_->stats().failed, 1);
  EXPECT_FALSE(HasTemporaries());  // the failed write cleaned up after itself

  // The earlier checkpoint is the one a restore finds, whole.
  uint64_t id = 0;
  auto restored = RestoreFresh(&id);
  ASSERT_NE(restored, nullptr);
  EXPECT_EQ(id, 1u);
  EXPECT_TRUE(restored->Equals(*first));

  // Room again: the next checkpoint is complete and restores the newest state.
  fs::remove(filler);
  ASSERT_TRUE(table_->Write(Rows(2000, 2100, 'c', 100)).ok());
  const auto newest = Current();
  auto written = checkpointer_->Save();
  ASSERT_TRUE(written.ok()) << written.status().ToString();
  restored = RestoreFresh(&id);
  ASSERT_NE(restored, nullptr);
  EXPECT_EQ(id, written->id);
  EXPECT_TRUE(restored->Equals(*newest));
  EXPECT_EQ(restored->num_rows(), 2100);
}

TEST_F(CheckpointFailureTest, AReadOnlyDirectoryFailsPeriodicCheckpointsWhileTicksGoOn) {
  if (!MountTmpfs("4m")) GTEST_SKIP() << "mount(2) is not permitted (run as root)";
  checkpointer_ = Checkpointer::Make(engine_.get(), Options()).ValueOrDie();
  ASSERT_TRUE(table_->Write(Rows(0, 10, 'a', 10)).ok());
  const auto first = Current();
  ASSERT_TRUE(checkpointer_->Save().ok());
  ASSERT_TRUE(checkpointer_->Start().ok());

  Remount(/*read_only=*/true);
  ASSERT_TRUE(table_->Write(Rows(10, 20, 'b', 10)).ok());
  now_ += 11;  // a periodic checkpoint is due at the end of this tick
  ASSERT_TRUE(engine_->Step().ok());
  const Status flushed = checkpointer_->Flush();
  EXPECT_TRUE(flushed.IsIOError()) << flushed.ToString();
  EXPECT_NE(flushed.message().find("Read-only"), std::string::npos) << flushed.ToString();
  now_ += 1;
  ASSERT_TRUE(engine_->Step().ok());
  EXPECT_EQ(CountRows(), 20);
  EXPECT_EQ(engine_->GetMetrics().checkpoint_failures, 1);
  EXPECT_EQ(FailuresInRillMetrics(), 1);
  EXPECT_EQ(CheckpointErrorEvents(), 1);

  uint64_t id = 0;
  auto restored = RestoreFresh(&id);
  ASSERT_NE(restored, nullptr);
  EXPECT_EQ(id, 1u);
  EXPECT_TRUE(restored->Equals(*first));

  Remount(/*read_only=*/false);
  ASSERT_TRUE(table_->Write(Rows(20, 30, 'c', 10)).ok());
  const auto newest = Current();
  now_ += 11;
  ASSERT_TRUE(engine_->Step().ok());
  ASSERT_TRUE(checkpointer_->Flush().ok());
  checkpointer_->Stop();
  restored = RestoreFresh(&id);
  ASSERT_NE(restored, nullptr);
  EXPECT_GT(id, 1u);
  EXPECT_TRUE(restored->Equals(*newest));
  EXPECT_EQ(engine_->GetMetrics().checkpoint_failures, 1);
}

TEST_F(CheckpointFailureTest, APartiallyWrittenCheckpointIsNeverPickedAtRestore) {
  checkpointer_ = Checkpointer::Make(engine_.get(), Options()).ValueOrDie();
  ASSERT_TRUE(table_->Write(Rows(0, 10, 'a', 10)).ok());
  const auto first = Current();
  ASSERT_TRUE(checkpointer_->Save().ok());
  ASSERT_TRUE(table_->Write(Rows(10, 20, 'b', 10)).ok());
  ASSERT_TRUE(checkpointer_->Save().ok());
  const fs::path second = dir_ / checkpoint_internal::CheckpointDirName(2);
  // What a write interrupted at each step would leave, as newer checkpoints:
  // files without a manifest (3), a manifest with a truncated table file (4),
  // a complete copy still under its temporary name (5).
  fs::create_directories(dir_ / checkpoint_internal::CheckpointDirName(3));
  fs::copy_file(second / "t.arrow", dir_ / checkpoint_internal::CheckpointDirName(3) / "t.arrow");
  fs::copy(second, dir_ / checkpoint_internal::CheckpointDirName(4));
  fs::resize_file(dir_ / checkpoint_internal::CheckpointDirName(4) / "t.arrow", 100);
  fs::copy(second, dir_ / ".tmp-ckpt-00000005");
  // The newest complete one (2) is damaged too: restore falls back to 1.
  fs::resize_file(second / "t.arrow", 64);
  uint64_t id = 0;
  auto restored = RestoreFresh(&id);
  ASSERT_NE(restored, nullptr);
  EXPECT_EQ(id, 1u);
  EXPECT_TRUE(restored->Equals(*first));
}

}  // namespace
}  // namespace rill
