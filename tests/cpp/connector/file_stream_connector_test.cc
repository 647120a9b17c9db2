// FileStreamConnector: new files of a folder, read once, remembered across restarts.
#include "rill/connector/file_stream_connector.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include <arrow/api.h>
#include <arrow/io/file.h>
#include <arrow/io/memory.h>
#include <arrow/ipc/api.h>
#include <arrow/json/from_string.h>
#include <gtest/gtest.h>

#include "table/test_util.h"

namespace rill {
namespace {

namespace fs = std::filesystem;

class FileStreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("rill_fs_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::shared_ptr<FileStreamConnector> Make(FileStreamOptions o = {}) {
    o.watch_path = dir_.string();
    o.use_inotify = false;
    if (o.stable_ms == 1000) o.stable_ms = 0;
    o.decode.schema = arrow::schema({arrow::field("id", arrow::int64())});
    auto c = FileStreamConnector::Make("t", o);
    EXPECT_TRUE(c.ok()) << c.status();
    return *c;
  }

  void Write(const std::string& name, const std::string& text, bool append = false) {
    std::ofstream f(dir_ / name, append ? std::ios::app : std::ios::trunc);
    f << text;
  }

  static std::vector<int64_t> Ids(const std::vector<std::shared_ptr<arrow::RecordBatch>>& bs) {
    std::vector<int64_t> out;
    for (const auto& b : bs) {
      auto a = std::static_pointer_cast<arrow::Int64Array>(b->GetColumnByName("id"));
      for (int64_t i = 0; i < a->length(); ++i) out.push_back(a->Value(i));
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  /// Scan, poll and commit what was polled, as a tick without checkpoints does.
  std::vector<int64_t> ScanIds(FileStreamConnector& c) {
    EXPECT_TRUE(c.ScanOnce().ok());
    auto ids = Ids(*c.Poll());
    c.CommitApplied();
    return ids;
  }

  fs::path dir_;
};

TEST_F(FileStreamTest, ReadsEachMatchingFileOnceAndRejectsBadLines) {
  auto c = Make();
  Write("a.ndjson", "{\"id\":1}\n{\"id\":\"x\"}\n{\"id\":2}\n");
  Write("b.json", "[{\"id\":3}]");
  Write("notes.txt", "ignored: unknown type");
  EXPECT_EQ(ScanIds(*c), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_TRUE(ScanIds(*c).empty());
  auto rejects = c->TakeRejects();
  ASSERT_EQ(rejects.size(), 2u);
  EXPECT_EQ(rejects[0].position, "file a.ndjson, line 2, byte 9");
  EXPECT_EQ(rejects[1].position, "file notes.txt");
  EXPECT_NE(rejects[1].error.find("unsupported file type"), std::string::npos);
}

TEST_F(FileStreamTest, HonoursThePatternAndRemembersFilesAcrossRestarts) {
  FileStreamOptions o;
  o.file_pattern = "*.ndjson";
  {
    auto c = Make(o);
    Write("a.ndjson", "{\"id\":1}\n");
    Write("skip.json", "{\"id\":9}\n");
    EXPECT_EQ(ScanIds(*c), (std::vector<int64_t>{1}));
  }
  auto again = Make(o);
  Write("b.ndjson", "{\"id\":2}\n");
  EXPECT_EQ(ScanIds(*again), (std::vector<int64_t>{2}));
  EXPECT_EQ(again->processed_files(), (std::vector<std::string>{"a.ndjson", "b.ndjson"}));
}

TEST_F(FileStreamTest, DoesNotReadAFileWhoseSizeIsStillChanging) {
  FileStreamOptions o;
  o.stable_ms = 300;
  auto c = Make(o);
  Write("slow.ndjson", "{\"id\":1}\n{\"id\"");
  EXPECT_TRUE(ScanIds(*c).empty());  // first sight: not yet stable
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  Write("slow.ndjson", ":2}\n", /*append=*/true);
  EXPECT_TRUE(ScanIds(*c).empty());  // changed again
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  EXPECT_EQ(ScanIds(*c), (std::vector<int64_t>{1, 2}));
  EXPECT_TRUE(c->TakeRejects().empty());
}

TEST_F(FileStreamTest, TailsAppendedLinesFromTheLastByteRead) {
  FileStreamOptions o;
  o.tail = true;
  {
    auto c = Make(o);
    Write("log.ndjson", "{\"id\":1}\n{\"id\":2");
    EXPECT_EQ(ScanIds(*c), (std::vector<int64_t>{1}));
    Write("log.ndjson", "}\n{\"id\":3}\n", /*append=*/true);
    EXPECT_EQ(ScanIds(*c), (std::vector<int64_t>{2, 3}));
  }
  auto restarted = Make(o);
  Write("log.ndjson", "{\"id\":4}\n", /*append=*/true);
  EXPECT_EQ(ScanIds(*restarted), (std::vector<int64_t>{4}));
}

TEST_F(FileStreamTest, ReadsCsvAndArrowIpcFileAndStreamFormats) {
  auto c = Make();
  Write("a.csv", "id,other\n5,x\n6,y\n");
  auto batch = arrow::RecordBatch::Make(
      arrow::schema({arrow::field("id", arrow::int64())}), 2,
      {arrow::json::ArrayFromJSONString(arrow::int64(), "[7,8]").ValueOrDie()});
  {
    auto out = arrow::io::FileOutputStream::Open((dir_ / "b.arrow").string()).ValueOrDie();
    auto w = arrow::ipc::MakeFileWriter(out, batch->schema()).ValueOrDie();
    ASSERT_TRUE(w->WriteRecordBatch(*batch).ok());
    ASSERT_TRUE(w->Close().ok());
  }
  {
    auto out = arrow::io::FileOutputStream::Open((dir_ / "c.ipc").string()).ValueOrDie();
    auto w = arrow::ipc::MakeStreamWriter(out, batch->schema()).ValueOrDie();
    ASSERT_TRUE(w->WriteRecordBatch(*batch).ok());
    ASSERT_TRUE(w->Close().ok());
  }
  Write("d.parquet", "not parquet at all");
  EXPECT_EQ(ScanIds(*c), (std::vector<int64_t>{5, 6, 7, 7, 8, 8}));
  auto rejects = c->TakeRejects();
  ASSERT_EQ(rejects.size(), 1u);
  EXPECT_EQ(rejects[0].position, "file d.parquet");
}

TEST_F(FileStreamTest, DeletesProcessedFilesWhenAsked) {
  FileStreamOptions o;
  o.delete_after_process = true;
  auto c = Make(o);
  Write("a.ndjson", "{\"id\":1}\n");
  EXPECT_EQ(ScanIds(*c), (std::vector<int64_t>{1}));
  EXPECT_FALSE(fs::exists(dir_ / "a.ndjson"));
}

TEST_F(FileStreamTest, ARestartReadsAgainAFilePolledButNotApplied) {
  auto c = Make();
  Write("a.ndjson", "{\"id\":1}\n");
  RILL_ASSERT_OK(c->ScanOnce());
  EXPECT_EQ(Ids(*c->Poll()), (std::vector<int64_t>{1}));
  // A crash here (no CommitApplied): the rows were never applied, so the
  // state file must not name the file.
  c.reset();
  auto again = Make();
  EXPECT_EQ(ScanIds(*again), (std::vector<int64_t>{1}));
  // Applied now: a further restart reads nothing twice.
  again.reset();
  EXPECT_TRUE(ScanIds(*Make()).empty());
}

TEST_F(FileStreamTest, DeleteAfterProcessKeepsAFileUntilTheTickAppliedIt) {
  FileStreamOptions o;
  o.delete_after_process = true;
  auto c = Make(o);
  Write("a.ndjson", "{\"id\":1}\n");
  RILL_ASSERT_OK(c->ScanOnce());
  EXPECT_TRUE(fs::exists(dir_ / "a.ndjson"));  // buffered only
  EXPECT_EQ(Ids(*c->Poll()), (std::vector<int64_t>{1}));
  EXPECT_TRUE(fs::exists(dir_ / "a.ndjson"));  // polled, not yet applied
  c->CommitApplied();
  EXPECT_FALSE(fs::exists(dir_ / "a.ndjson"));
}

TEST_F(FileStreamTest, DeleteAfterProcessWithCheckpointsKeepsAFileUntilACheckpointHoldsIt) {
  FileStreamOptions o;
  o.delete_after_process = true;
  auto c = Make(o);
  RILL_ASSERT_OK_AND_ASSIGN(std::string before, c->SavePosition());
  Write("a.ndjson", "{\"id\":1}\n");
  RILL_ASSERT_OK(c->ScanOnce());
  EXPECT_EQ(Ids(*c->Poll()), (std::vector<int64_t>{1}));
  RILL_ASSERT_OK_AND_ASSIGN(std::string holding_a, c->SavePosition());
  // A checkpoint taken before the file was polled completes: the file stays.
  c->CommitCheckpointed(before);
  EXPECT_TRUE(fs::exists(dir_ / "a.ndjson"));
  // A crash now: a restart without a checkpoint holding it reads it again.
  {
    auto restarted = Make(o);
    RILL_ASSERT_OK(restarted->ScanOnce());
    EXPECT_EQ(Ids(*restarted->Poll()), (std::vector<int64_t>{1}));
  }
  EXPECT_TRUE(fs::exists(dir_ / "a.ndjson"));
  // The checkpoint that holds it completes: now it is deleted.
  c->CommitCheckpointed(holding_a);
  EXPECT_FALSE(fs::exists(dir_ / "a.ndjson"));
}

std::string ReadAll(const fs::path& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

TEST_F(FileStreamTest, DeleteAfterProcessMovesAFileThatFailedToReadToFailedAndSaysWhy) {
  FileStreamOptions o;
  o.delete_after_process = true;
  auto c = Make(o);
  Write("a.ndjson", "{\"id\":1}\n");
  // An Arrow IPC stream cut in the middle of its batch: a corrupt file.
  auto batch = arrow::RecordBatch::Make(
      arrow::schema({arrow::field("id", arrow::int64())}), 2,
      {arrow::json::ArrayFromJSONString(arrow::int64(), "[2,3]").ValueOrDie()});
  std::string ipc;
  {
    auto sink = arrow::io::BufferOutputStream::Create().ValueOrDie();
    auto w = arrow::ipc::MakeStreamWriter(sink, batch->schema()).ValueOrDie();
    ASSERT_TRUE(w->WriteRecordBatch(*batch).ok());
    ASSERT_TRUE(w->Close().ok());
    ipc = sink->Finish().ValueOrDie()->ToString();
  }
  const std::string corrupt = ipc.substr(0, ipc.size() - 40);
  Write("b.arrows", corrupt);
  Write("c.ndjson", "{\"id\":4}\n");
  EXPECT_EQ(ScanIds(*c), (std::vector<int64_t>{1, 4}));
  // The good files are processed and deleted; the corrupt one is kept, moved.
  EXPECT_FALSE(fs::exists(dir_ / "a.ndjson"));
  EXPECT_FALSE(fs::exists(dir_ / "c.ndjson"));
  EXPECT_FALSE(fs::exists(dir_ / "b.arrows"));
  ASSERT_TRUE(fs::exists(dir_ / "failed" / "b.arrows"));
  EXPECT_EQ(ReadAll(dir_ / "failed" / "b.arrows"), corrupt);
  auto rejects = c->TakeRejects();
  ASSERT_EQ(rejects.size(), 1u);
  EXPECT_EQ(rejects[0].connector, "t");
  EXPECT_EQ(rejects[0].position, "file b.arrows");
  EXPECT_NE(rejects[0].error.find("moved to 'failed/b.arrows'"), std::string::npos)
      << rejects[0].error;
  EXPECT_EQ(rejects[0].raw_size, static_cast<int64_t>(corrupt.size()));
  EXPECT_EQ(c->stats().errors, 1);
  // failed/ is not watched; a later file of the same name that fails too keeps both.
  EXPECT_TRUE(ScanIds(*c).empty());
  std::remove((dir_ / ".rill-t.state").c_str());  // forget what was read
  auto again = Make(o);
  Write("b.arrows", "not an Arrow stream");
  EXPECT_TRUE(ScanIds(*again).empty());
  EXPECT_EQ(ReadAll(dir_ / "failed" / "b.arrows"), corrupt);
  EXPECT_EQ(ReadAll(dir_ / "failed" / "b.arrows.1"), "not an Arrow stream");
  ASSERT_EQ(again->TakeRejects().size(), 1u);
}

TEST_F(FileStreamTest, AFileThatFailedToReadStaysInPlaceWithoutDeleteAfterProcess) {
  auto c = Make();
  Write("a.parquet", "PAR1 truncated");
  Write("b.ndjson", "{\"id\":1}\n");
  EXPECT_EQ(ScanIds(*c), (std::vector<int64_t>{1}));
  EXPECT_EQ(ReadAll(dir_ / "a.parquet"), "PAR1 truncated");
  EXPECT_FALSE(fs::exists(dir_ / "failed"));
  auto rejects = c->TakeRejects();
  ASSERT_EQ(rejects.size(), 1u);
  EXPECT_EQ(rejects[0].position, "file a.parquet");
  EXPECT_EQ(c->stats().errors, 1);
}

TEST_F(FileStreamTest, TheWatchThreadPicksUpFilesRenamedIntoPlace) {
  FileStreamOptions o;
  o.watch_path = dir_.string();
  o.poll_interval_ms = 20;
  o.stable_ms = 60000;  // only inotify's "moved in" / "closed" makes a file ready
  o.decode.schema = arrow::schema({arrow::field("id", arrow::int64())});
  RILL_ASSERT_OK_AND_ASSIGN(auto c, FileStreamConnector::Make("t", o));
  RILL_ASSERT_OK(c->Start());
  ASSERT_TRUE(c->using_inotify());
  Write(".tmp-x", "{\"id\":1}\n");
  fs::rename(dir_ / ".tmp-x", dir_ / "x.ndjson");
  std::vector<int64_t> got;
  for (int i = 0; i < 200 && got.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    got = Ids(*c->Poll());
  }
  c->Stop();
  EXPECT_EQ(got, (std::vector<int64_t>{1}));
}

}  // namespace
}  // namespace rill
