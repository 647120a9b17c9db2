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

  std::vector<int64_t> ScanIds(FileStreamConnector& c) {
    EXPECT_TRUE(c.ScanOnce().ok());
    return Ids(*c.Poll());
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
