// FileSinkWriter driven directly with hand-built ChangeSets (no engine):
// formats read back by Arrow's readers, Hive partitions read back by DuckDB,
// crashes (a writer destroyed without Commit, a commit stopped after its
// record), progress and file names across restarts.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <arrow/api.h>
#include <arrow/compute/cast.h>
#include <arrow/csv/api.h>
#include <arrow/io/file.h>
#include <arrow/ipc/reader.h>
#include <arrow/json/api.h>
#include <arrow/json/from_string.h>
#include <gtest/gtest.h>
#include <parquet/arrow/reader.h>

#include "duckdb.hpp"
#include "rill/sink/file_sink.h"
#include "rill/sink/file_sink_internal.h"

namespace rill {
namespace {

namespace fs = std::filesystem;
using file_sink_internal::ParseDataFileName;

std::shared_ptr<arrow::Schema> TableSchema() {
  return arrow::schema({arrow::field("id", arrow::int64(), false),
                        arrow::field("name", arrow::utf8()),
                        arrow::field("price", arrow::float64()),
                        arrow::field("day", arrow::date32()),
                        arrow::field("ts", arrow::timestamp(arrow::TimeUnit::MICRO)),
                        arrow::field("z_insert_ts", arrow::float64()),
                        arrow::field("z_update_ts", arrow::float64())});
}

// A ChangeSchema batch from JSON rows, e.g.
// {"id":1,"name":"a","price":1.5,"day":20788,"ts":0,"_op":"insert","_version":3}.
std::shared_ptr<arrow::RecordBatch> Changes(const std::string& json_rows) {
  auto schema = ChangeSchema(TableSchema());
  auto array = arrow::json::ArrayFromJSONString(arrow::struct_(schema->fields()), json_rows);
  EXPECT_TRUE(array.ok()) << array.status().ToString();
  auto batch = arrow::RecordBatch::FromStructArray(*array);
  EXPECT_TRUE(batch.ok()) << batch.status().ToString();
  return *batch;
}

// Rows with ids [first, first + n) written by `version`; names cycle through
// values that need escaping in a JSON or CSV file and in a Hive path.
std::shared_ptr<arrow::RecordBatch> Inserts(int64_t first, int64_t n, uint64_t version,
                                            const std::string& op = "insert") {
  static const char* kNames[] = {"\"eu\"", "\"us/east\"", "null", "\"a,b \\\"q\\\"\"",
                                 "\"\""};
  std::string json = "[";
  for (int64_t i = first; i < first + n; ++i) {
    if (i > first) json += ",";
    json += "{\"id\":" + std::to_string(i) + ",\"name\":" + kNames[i % 5] +
            ",\"price\":" + std::to_string(i) + ".25,\"day\":" + std::to_string(20788 + i % 3) +
            ",\"ts\":" + std::to_string(i * 1000001) + ",\"z_insert_ts\":1.5," +
            "\"z_update_ts\":2.5,\"_op\":\"" + op + "\",\"_version\":" +
            std::to_string(version) + "}";
  }
  return Changes(json + "]");
}

ChangeSet Set(uint64_t from, uint64_t to, std::vector<std::shared_ptr<arrow::RecordBatch>> b,
              bool snapshot = false) {
  ChangeSet set;
  set.from_version = from;
  set.to_version = to;
  set.snapshot = snapshot;
  for (const auto& batch : b) set.num_rows += batch->num_rows();
  set.batches = std::move(b);
  return set;
}

std::shared_ptr<arrow::Table> ReadFile(const std::string& format, const fs::path& path,
                                       const std::shared_ptr<arrow::Schema>& schema) {
  auto file = arrow::io::ReadableFile::Open(path.string());
  EXPECT_TRUE(file.ok()) << file.status().ToString();
  arrow::Result<std::shared_ptr<arrow::Table>> table;
  if (format == "parquet") {
    auto reader = parquet::arrow::OpenFile(*file, arrow::default_memory_pool());
    EXPECT_TRUE(reader.ok()) << reader.status().ToString();
    table = (*reader)->ReadTable();
  } else if (format == "arrow") {
    auto reader = arrow::ipc::RecordBatchFileReader::Open(*file);
    EXPECT_TRUE(reader.ok()) << reader.status().ToString();
    table = (*reader)->ToTable();
  } else if (format == "csv") {
    auto convert = arrow::csv::ConvertOptions::Defaults();
    for (const auto& field : schema->fields()) convert.column_types[field->name()] = field->type();
    convert.strings_can_be_null = true;
    auto reader = arrow::csv::TableReader::Make(arrow::io::default_io_context(), *file,
                                                arrow::csv::ReadOptions::Defaults(),
                                                arrow::csv::ParseOptions::Defaults(), convert);
    EXPECT_TRUE(reader.ok()) << reader.status().ToString();
    table = (*reader)->Read();
  } else {
    // Arrow's JSON reader converts no string to a date: read dates as text
    // and cast them after.
    arrow::FieldVector fields = schema->fields();
    for (auto& field : fields) {
      if (field->type()->id() == arrow::Type::DATE32) field = field->WithType(arrow::utf8());
    }
    auto parse = arrow::json::ParseOptions::Defaults();
    parse.explicit_schema = arrow::schema(fields);
    parse.unexpected_field_behavior = arrow::json::UnexpectedFieldBehavior::Error;
    auto reader = arrow::json::TableReader::Make(arrow::default_memory_pool(), *file,
                                                 arrow::json::ReadOptions::Defaults(), parse);
    EXPECT_TRUE(reader.ok()) << reader.status().ToString();
    table = (*reader)->Read();
    for (int i = 0; table.ok() && i < schema->num_fields(); ++i) {
      if (schema->field(i)->type()->id() != arrow::Type::DATE32) continue;
      auto dates = arrow::compute::Cast((*table)->column(i), arrow::date32());
      EXPECT_TRUE(dates.ok()) << dates.status().ToString();
      table = (*table)->SetColumn(i, schema->field(i), dates->chunked_array());
    }
  }
  EXPECT_TRUE(table.ok()) << table.status().ToString();
  return *table;
}

// Every regular file under `dir`, relative, sorted.
std::vector<std::string> ListFiles(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (entry.is_regular_file()) out.push_back(fs::relative(entry.path(), dir).string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The committed data files (visible names) under `dir`.
std::vector<std::string> DataFiles(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& f : ListFiles(dir)) {
    if (ParseDataFileName(fs::path(f).filename().string())) out.push_back(f);
  }
  return out;
}

bool AnyTemporary(const fs::path& dir) {
  for (const auto& f : ListFiles(dir)) {
    if (fs::path(f).filename().string().rfind(".tmp-", 0) == 0) return true;
  }
  return false;
}

class FileSinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("rill_file_sink_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::unique_ptr<SinkWriter> OpenWriter(FileSinkOptions options = {},
                                         file_sink_internal::FileSinkFaults faults = {}) {
    options.path = dir_.string();
    auto writer = file_sink_internal::MakeFileSinkWriterWithFaults(options, faults);
    EXPECT_TRUE(writer.ok()) << writer.status().ToString();
    Status st = (*writer)->Open(TableSchema(), {"id"});
    EXPECT_TRUE(st.ok()) << st.ToString();
    return *std::move(writer);
  }

  fs::path dir_;
};

class FileSinkFormatTest : public FileSinkTest,
                           public ::testing::WithParamInterface<std::string> {};

TEST_P(FileSinkFormatTest, ChangelogRoundTripsThroughArrowsReader) {
  FileSinkOptions options;
  options.format = GetParam();
  auto writer = OpenWriter(options);
  auto first = Inserts(0, 7, 1);
  auto second = Changes(R"([{"id":3,"name":"x","price":9.5,"day":20790,"ts":5,"_op":"update","_version":2},
                            {"id":4,"_op":"delete","_version":2}])");
  ASSERT_TRUE(writer->Write(Set(0, 1, {first}), SinkMode::kChangelog).ok());
  ASSERT_TRUE(writer->Write(Set(1, 2, {second}), SinkMode::kChangelog).ok());
  ASSERT_TRUE(writer->Commit({.version = 2}).ok());

  auto files = DataFiles(dir_);
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0], "part-000000000001-000000000002-000000." + GetParam());
  auto schema = ChangeSchema(TableSchema());
  auto table = ReadFile(GetParam(), dir_ / files[0], schema);
  auto expected = arrow::Table::FromRecordBatches(schema, {first, second});
  ASSERT_TRUE(expected.ok());
  if (GetParam() == "csv" || GetParam() == "ndjson") {
    // Text files carry no nullability: same names and types, then the schema.
    ASSERT_EQ(table->num_columns(), schema->num_fields());
    for (int i = 0; i < schema->num_fields(); ++i) {
      EXPECT_EQ(table->field(i)->name(), schema->field(i)->name());
      EXPECT_TRUE(table->field(i)->type()->Equals(schema->field(i)->type()))
          << table->field(i)->ToString();
    }
    table = arrow::Table::Make(schema, table->columns());
  }
  ASSERT_TRUE(table->schema()->Equals(*schema, /*check_metadata=*/false))
      << table->schema()->ToString();
  auto combined = table->CombineChunks();
  ASSERT_TRUE(combined.ok());
  // CSV cannot tell an empty string from a null: compare the rest exactly.
  if (GetParam() == "csv") {
    auto names = (*combined)->GetColumnByName("name");
    EXPECT_EQ(names->null_count(), 3);  // id 2 (null), id 4 ("" reads as null), the delete
    combined = (*combined)->RemoveColumn(1);
    expected = (*expected)->RemoveColumn(1);
  }
  EXPECT_TRUE((*combined)->Equals(**expected, /*check_metadata=*/false))
      << (*combined)->ToString() << "\nexpected\n" << (*expected)->ToString();
  EXPECT_GT(writer->bytes_written(), 0);
  EXPECT_STREQ(writer->type(), "file");
}

INSTANTIATE_TEST_SUITE_P(EveryFormat, FileSinkFormatTest,
                         ::testing::Values("parquet", "ndjson", "csv", "arrow"),
                         [](const auto& info) { return info.param; });

TEST_F(FileSinkTest, AppendModeWritesInsertedRowsWithoutOpAndVersion) {
  auto writer = OpenWriter();
  auto inserts = Inserts(0, 5, 1);
  ASSERT_TRUE(writer->Write(Set(0, 2, {inserts, Inserts(10, 2, 2, "delete")}),
                            SinkMode::kAppend).ok());
  ASSERT_TRUE(writer->Commit({.version = 2}).ok());
  auto files = DataFiles(dir_);
  ASSERT_EQ(files.size(), 1u);
  auto table = ReadFile("parquet", dir_ / files[0], nullptr);
  EXPECT_EQ(table->schema()->GetFieldIndex("_op"), -1);
  EXPECT_EQ(table->schema()->GetFieldIndex("_version"), -1);
  ASSERT_EQ(table->num_rows(), 5);
  auto expected = arrow::Table::FromRecordBatches({inserts});
  auto want = (*expected)->RemoveColumn(8);
  want = (*want)->RemoveColumn(7);
  EXPECT_TRUE(table->Equals(**want, /*check_metadata=*/false)) << table->ToString();
}

TEST_F(FileSinkTest, UpsertModeIsRefusedNamingTheMode) {
  auto writer = OpenWriter();
  Status st = writer->Write(Set(0, 1, {Inserts(0, 1, 1)}), SinkMode::kUpsert);
  EXPECT_TRUE(st.IsInvalid());
  EXPECT_NE(st.message().find("'upsert'"), std::string::npos) << st.ToString();
  EXPECT_TRUE(DataFiles(dir_).empty());
}

TEST_F(FileSinkTest, BadOptionsAreRefusedNamingTheOption) {
  auto no_path = MakeFileSinkWriter({});
  EXPECT_TRUE(no_path.status().IsInvalid());
  EXPECT_NE(no_path.status().message().find("path"), std::string::npos);
  auto format = MakeFileSinkWriter({.path = dir_.string(), .format = "xml"});
  EXPECT_TRUE(format.status().IsInvalid());
  EXPECT_NE(format.status().message().find("'xml'"), std::string::npos);
  auto roll = MakeFileSinkWriter({.path = dir_.string(), .roll_rows = 0});
  EXPECT_NE(roll.status().message().find("roll_rows"), std::string::npos);
  auto writer = MakeFileSinkWriter({.path = dir_.string(), .partition_by = {"nope"}});
  ASSERT_TRUE(writer.ok());
  Status st = (*writer)->Open(TableSchema(), {"id"});
  EXPECT_TRUE(st.IsInvalid());
  EXPECT_NE(st.message().find("'nope'"), std::string::npos) << st.ToString();
}

TEST_F(FileSinkTest, HivePartitionValuesAreEscapedAsHiveDoes) {
  using file_sink_internal::EscapeHivePathValue;
  EXPECT_EQ(EscapeHivePathValue("2026-12-01"), "2026-12-01");
  EXPECT_EQ(EscapeHivePathValue("us/east=1"), "us%2Feast%3D1");
  EXPECT_EQ(EscapeHivePathValue("a b,c%"), "a b,c%25");
  EXPECT_EQ(EscapeHivePathValue("10:00\n"), "10%3A00%0A");
  EXPECT_EQ(EscapeHivePathValue(std::nullopt), "__HIVE_DEFAULT_PARTITION__");
  EXPECT_EQ(EscapeHivePathValue(""), "__HIVE_DEFAULT_PARTITION__");
}

TEST_F(FileSinkTest, PartitionedDatasetReadByDuckDbEqualsTheRows) {
  auto writer = OpenWriter({.partition_by = {"day", "name"}});
  ASSERT_TRUE(writer->Write(Set(0, 1, {Inserts(0, 30, 1)}), SinkMode::kChangelog).ok());
  ASSERT_TRUE(writer->Write(Set(1, 3, {Inserts(30, 20, 3)}), SinkMode::kChangelog).ok());
  ASSERT_TRUE(writer->Commit({.version = 3}).ok());
  auto files = DataFiles(dir_);
  EXPECT_EQ(files.size(), 12u);  // 3 days x 4 names (null and "" share Hive's default)
  std::set<std::string> dirs;
  for (const auto& f : files) dirs.insert(fs::path(f).parent_path().string());
  EXPECT_TRUE(dirs.count("day=2026-12-01/name=us%2Feast")) << *dirs.begin();
  EXPECT_TRUE(dirs.count("day=2026-12-02/name=__HIVE_DEFAULT_PARTITION__"));
  EXPECT_TRUE(dirs.count("day=2026-12-03/name=a,b %22q%22"));

  duckdb::DuckDB db(nullptr);
  duckdb::Connection con(db);
  auto result = con.Query(
      "SELECT count(*), sum(id), count(DISTINCT id), "
      "sum(CASE WHEN name = '__HIVE_DEFAULT_PARTITION__' THEN 1 ELSE 0 END), "
      "sum(CASE WHEN name = 'us/east' THEN id ELSE 0 END), "
      "bool_and(day = DATE '2026-12-01' + CAST(id % 3 AS INTEGER)), "
      "bool_and(price = id + 0.25) "
      "FROM read_parquet('" + dir_.string() + "/**/*.parquet', hive_partitioning = true)");
  ASSERT_FALSE(result->HasError()) << result->GetError();
  EXPECT_EQ(result->GetValue(0, 0).GetValue<int64_t>(), 50);
  EXPECT_EQ(result->GetValue(1, 0).GetValue<int64_t>(), 49 * 50 / 2);
  EXPECT_EQ(result->GetValue(2, 0).GetValue<int64_t>(), 50);
  EXPECT_EQ(result->GetValue(3, 0).GetValue<int64_t>(), 20);  // null and "" names
  EXPECT_EQ(result->GetValue(4, 0).GetValue<int64_t>(), 1 + 6 + 11 + 16 + 21 + 26 + 31 + 36 +
                                                           41 + 46);
  EXPECT_TRUE(result->GetValue(5, 0).GetValue<bool>());
  EXPECT_TRUE(result->GetValue(6, 0).GetValue<bool>());
  // The partition columns are in the path only, as Hive writes them.
  auto table = ReadFile("parquet", dir_ / files[0], nullptr);
  EXPECT_EQ(table->schema()->GetFieldIndex("day"), -1);
  EXPECT_EQ(table->schema()->GetFieldIndex("name"), -1);
}

TEST_F(FileSinkTest, DestroyedWithoutCommitLeavesNoVisibleFileAndOpenRemovesIt) {
  {
    auto writer = OpenWriter({.partition_by = {"day"}});
    ASSERT_TRUE(writer->Write(Set(0, 1, {Inserts(0, 9, 1)}), SinkMode::kChangelog).ok());
    ASSERT_TRUE(writer->Commit({.version = 1, .epoch = 7}).ok());
    ASSERT_TRUE(writer->Write(Set(1, 2, {Inserts(9, 9, 2)}), SinkMode::kChangelog).ok());
    // destroyed here, as a crash would leave it: no Commit, no Abort, no Close
  }
  auto files_before = DataFiles(dir_);
  EXPECT_EQ(files_before.size(), 3u);
  EXPECT_TRUE(AnyTemporary(dir_));
  duckdb::DuckDB db(nullptr);
  duckdb::Connection con(db);
  auto result = con.Query("SELECT count(*) FROM read_parquet('" + dir_.string() +
                          "/**/*.parquet', hive_partitioning = true)");
  ASSERT_FALSE(result->HasError()) << result->GetError();
  EXPECT_EQ(result->GetValue(0, 0).GetValue<int64_t>(), 9);

  auto writer = OpenWriter({.partition_by = {"day"}});
  EXPECT_FALSE(AnyTemporary(dir_));
  EXPECT_EQ(DataFiles(dir_), files_before);
  auto progress = writer->LoadProgress();
  ASSERT_TRUE(progress.ok());
  ASSERT_TRUE(progress->has_value());
  EXPECT_EQ((*progress)->version, 1u);
  EXPECT_EQ((*progress)->epoch, 7u);
}

TEST_F(FileSinkTest, CommitStoppedAfterItsRecordIsCompletedByOpen) {
  {
    auto writer = OpenWriter({.partition_by = {"day"}}, {.fail_after_commit_record = true});
    ASSERT_TRUE(writer->Write(Set(0, 4, {Inserts(0, 9, 4)}), SinkMode::kChangelog).ok());
    EXPECT_TRUE(writer->Commit({.version = 4, .epoch = 2}).IsIOError());
    EXPECT_TRUE(DataFiles(dir_).empty());
  }
  auto writer = OpenWriter({.partition_by = {"day"}});
  EXPECT_FALSE(AnyTemporary(dir_));
  auto files = DataFiles(dir_);
  ASSERT_EQ(files.size(), 3u);
  int64_t rows = 0;
  for (const auto& f : files) rows += ReadFile("parquet", dir_ / f, nullptr)->num_rows();
  EXPECT_EQ(rows, 9);
  auto progress = writer->LoadProgress();
  ASSERT_TRUE(progress.ok() && progress->has_value());
  EXPECT_EQ((*progress)->version, 4u);
  EXPECT_EQ((*progress)->epoch, 2u);
}

TEST_F(FileSinkTest, LoadProgressAfterReopenReadsTheDirectory) {
  {
    auto writer = OpenWriter();
    auto empty = writer->LoadProgress();
    ASSERT_TRUE(empty.ok());
    EXPECT_FALSE(empty->has_value());
    ASSERT_TRUE(writer->Write(Set(0, 3, {Inserts(0, 2, 3)}), SinkMode::kChangelog).ok());
    ASSERT_TRUE(writer->Commit({.version = 3, .epoch = 1}).ok());
    ASSERT_TRUE(writer->Write(Set(3, 8, {Inserts(2, 2, 8)}), SinkMode::kChangelog).ok());
    ASSERT_TRUE(writer->Commit({.version = 9, .epoch = 2}).ok());
    writer->Close();
  }
  {
    auto writer = OpenWriter();
    auto progress = writer->LoadProgress();
    ASSERT_TRUE(progress.ok() && progress->has_value());
    EXPECT_EQ((*progress)->version, 9u);
    EXPECT_EQ((*progress)->epoch, 2u);
  }
  // Without the commit record the names alone carry the version.
  fs::remove(dir_ / file_sink_internal::kCommitRecord);
  auto writer = OpenWriter();
  auto progress = writer->LoadProgress();
  ASSERT_TRUE(progress.ok() && progress->has_value());
  EXPECT_EQ((*progress)->version, 9u);
  EXPECT_EQ(DataFiles(dir_).back(), "part-000000000004-000000000009-000001.parquet");
}

TEST_F(FileSinkTest, NoFileNameIsReusedAcrossCommitsAbortsAndRestarts) {
  std::set<std::string> seen;
  uint64_t version = 0;
  for (int restart = 0; restart < 4; ++restart) {
    auto writer = OpenWriter({.partition_by = {"day"}, .roll_rows = 4});
    for (int round = 0; round < 3; ++round) {
      ASSERT_TRUE(writer->Write(Set(version, version + 1, {Inserts(0, 10, version + 1)}),
                                SinkMode::kChangelog).ok());
      if (round == 1) {
        writer->Abort();
        continue;
      }
      ++version;
      ASSERT_TRUE(writer->Commit({.version = version}).ok());
    }
    if (restart % 2 == 0) {
      // an uncommitted unit left behind by a "crash"
      ASSERT_TRUE(writer->Write(Set(version, version + 1, {Inserts(0, 10, version + 1)}),
                                SinkMode::kChangelog).ok());
    }
  }
  auto files = DataFiles(dir_);
  std::set<uint64_t> numbers;
  for (const auto& f : files) {
    EXPECT_TRUE(seen.insert(f).second) << f;
    numbers.insert(ParseDataFileName(fs::path(f).filename().string())->file_number);
  }
  EXPECT_EQ(numbers.size(), files.size());
  // 8 commits of 10 rows over 3 days (4, 3, 3 rows) at 4 rows per file: 3 files each
  EXPECT_EQ(files.size(), 24u);
}

TEST_F(FileSinkTest, RollRowsSplitsAUnitIntoFilesOfThatManyRows) {
  auto writer = OpenWriter({.roll_rows = 4});
  ASSERT_TRUE(writer->Write(Set(0, 1, {Inserts(0, 10, 1)}), SinkMode::kChangelog).ok());
  ASSERT_TRUE(writer->Commit({.version = 1}).ok());
  auto files = DataFiles(dir_);
  ASSERT_EQ(files.size(), 3u);
  std::vector<int64_t> rows;
  for (const auto& f : files) rows.push_back(ReadFile("parquet", dir_ / f, nullptr)->num_rows());
  EXPECT_EQ(rows, (std::vector<int64_t>{4, 4, 2}));
}

TEST_F(FileSinkTest, RollSecondsClosesAFileOpenedLongerAgo) {
  auto writer = OpenWriter({.roll_seconds = 1e-9});
  ASSERT_TRUE(writer->Write(Set(0, 1, {Inserts(0, 3, 1)}), SinkMode::kChangelog).ok());
  ASSERT_TRUE(writer->Write(Set(1, 2, {Inserts(3, 3, 2)}), SinkMode::kChangelog).ok());
  ASSERT_TRUE(writer->Commit({.version = 2}).ok());
  EXPECT_EQ(DataFiles(dir_).size(), 2u);
}

TEST_F(FileSinkTest, SnapshotStartsAGenerationMarkedInTheFileNames) {
  auto writer = OpenWriter();
  ASSERT_TRUE(writer->Write(Set(0, 2, {Inserts(0, 3, 2)}), SinkMode::kChangelog).ok());
  ASSERT_TRUE(writer->Commit({.version = 2}).ok());
  // Changes, then (the reader fell behind) a snapshot, then changes, in one unit.
  ASSERT_TRUE(writer->Write(Set(2, 4, {Inserts(3, 1, 4)}), SinkMode::kChangelog).ok());
  ASSERT_TRUE(writer->Write(Set(2, 10, {Inserts(0, 5, 10)}, /*snapshot=*/true),
                            SinkMode::kChangelog).ok());
  ASSERT_TRUE(writer->Write(Set(10, 12, {Inserts(5, 1, 12)}), SinkMode::kChangelog).ok());
  ASSERT_TRUE(writer->Commit({.version = 12}).ok());
  EXPECT_EQ(DataFiles(dir_), (std::vector<std::string>{
                                 "part-000000000001-000000000002-000000.parquet",
                                 "part-000000000011-000000000012-000003.parquet",
                                 "snapshot-000000000010-000000000010-000002.parquet"}));
  EXPECT_EQ(ReadFile("parquet", dir_ / DataFiles(dir_)[2], nullptr)->num_rows(), 5);
  std::ifstream record(dir_ / file_sink_internal::kCommitRecord);
  std::string text((std::istreambuf_iterator<char>(record)), {});
  EXPECT_NE(text.find("\ngeneration 10\n"), std::string::npos) << text;
  // An empty table's snapshot still marks the generation with an (empty) file.
  ASSERT_TRUE(writer->Write(Set(12, 20, {}, /*snapshot=*/true), SinkMode::kChangelog).ok());
  ASSERT_TRUE(writer->Commit({.version = 20}).ok());
  EXPECT_EQ(DataFiles(dir_).back(), "snapshot-000000000020-000000000020-000004.parquet");
  EXPECT_EQ(ReadFile("parquet", dir_ / DataFiles(dir_).back(), nullptr)->num_rows(), 0);
}

TEST_F(FileSinkTest, AbortRemovesTheUnitsTemporaryFiles) {
  auto writer = OpenWriter({.partition_by = {"day"}});
  ASSERT_TRUE(writer->Write(Set(0, 1, {Inserts(0, 9, 1)}), SinkMode::kChangelog).ok());
  EXPECT_TRUE(AnyTemporary(dir_));
  writer->Abort();
  EXPECT_FALSE(AnyTemporary(dir_));
  ASSERT_TRUE(writer->Write(Set(0, 1, {Inserts(0, 9, 1)}), SinkMode::kChangelog).ok());
  ASSERT_TRUE(writer->Commit({.version = 1}).ok());
  EXPECT_EQ(DataFiles(dir_).size(), 3u);
  EXPECT_FALSE(AnyTemporary(dir_));
}

TEST_F(FileSinkTest, NdjsonEscapesStringsAndWritesNullsAndNumbers) {
  auto batch = Changes(R"([{"id":1,"name":"q\"\\\n\u0001","price":null,"day":0,"ts":0,"_op":"insert","_version":1}])");
  std::string out;
  ASSERT_TRUE(file_sink_internal::AppendNdjson(*batch, &out).ok());
  EXPECT_EQ(out,
            "{\"id\":1,\"name\":\"q\\\"\\\\\\n\\u0001\",\"price\":null,\"day\":\"1970-01-01\","
            "\"ts\":\"1970-01-01 00:00:00.000000\",\"z_insert_ts\":null,\"z_update_ts\":null,"
            "\"_op\":\"insert\",\"_version\":1}\n");
}

}  // namespace
}  // namespace rill

namespace rill {
namespace {

// Random writes, commits, aborts, crashes (a writer destroyed mid-unit) and
// commits stopped after their record, replayable from the seed: after every
// reopen the directory, read by DuckDB, holds exactly the committed rows and
// LoadProgress is the last committed version.
TEST_F(FileSinkTest, RandomCrashesNeverLoseOrDuplicateACommittedRow) {
  std::mt19937_64 rng(20261201);
  std::multiset<int64_t> committed, pending;
  uint64_t version = 0, committed_version = 0;
  int64_t next_id = 0;
  bool fail_next = false;
  int crashes = 0, stopped_commits = 0;
  duckdb::DuckDB db(nullptr);
  duckdb::Connection con(db);
  auto open = [&] {
    return OpenWriter({.partition_by = {"name"}, .roll_rows = 7},
                      {.fail_after_commit_record = fail_next});
  };
  auto check = [&](SinkWriter& writer, const std::string& when) {
    auto progress = writer.LoadProgress();
    ASSERT_TRUE(progress.ok());
    if (committed_version > 0) {
      ASSERT_TRUE(progress->has_value()) << when;
      EXPECT_EQ((*progress)->version, committed_version) << when;
    }
    std::multiset<int64_t> seen;
    if (!DataFiles(dir_).empty()) {
      auto result = con.Query("SELECT id FROM read_parquet('" + dir_.string() +
                              "/**/*.parquet', hive_partitioning = true)");
      ASSERT_FALSE(result->HasError()) << result->GetError();
      for (size_t r = 0; r < result->RowCount(); ++r) {
        seen.insert(result->GetValue(0, r).GetValue<int64_t>());
      }
    }
    EXPECT_EQ(seen, committed) << when;
  };
  auto writer = open();
  for (int step = 0; step < 80; ++step) {
    const int action = static_cast<int>(rng() % 10);
    const std::string when = "step " + std::to_string(step) + " action " + std::to_string(action);
    if (action < 5) {  // write a few new rows
      const int64_t n = 1 + static_cast<int64_t>(rng() % 12);
      ASSERT_TRUE(writer->Write(Set(version, version + 1, {Inserts(next_id, n, version + 1)}),
                                SinkMode::kChangelog).ok()) << when;
      for (int64_t i = 0; i < n; ++i) pending.insert(next_id + i);
      next_id += n;
      ++version;
    } else if (action < 7) {  // commit
      Status st = writer->Commit({.version = version});
      if (fail_next) {
        ASSERT_TRUE(st.IsIOError()) << when;
      } else {
        ASSERT_TRUE(st.ok()) << when << ": " << st.ToString();
      }
      committed.insert(pending.begin(), pending.end());
      pending.clear();
      committed_version = version;
      if (fail_next) {  // the commit is recorded: a reopen completes it
        fail_next = false;
        ++stopped_commits;
        writer = open();
        check(*writer, when + " (reopened after a stopped commit)");
      }
    } else if (action == 7) {  // abort
      writer->Abort();
      pending.clear();
    } else {  // crash: destroy mid-unit, maybe with the next commit stopping after its record
      writer.reset();
      pending.clear();
      fail_next = action == 9;
      ++crashes;
      writer = open();
      EXPECT_FALSE(AnyTemporary(dir_)) << when;
      check(*writer, when + " (reopened after a crash)");
    }
    // Uncommitted rows are never visible.
    for (const auto& f : ListFiles(dir_)) {
      const std::string name = fs::path(f).filename().string();
      EXPECT_TRUE(name.rfind(".tmp-", 0) == 0 || name == file_sink_internal::kCommitRecord ||
                  ParseDataFileName(name)) << f;
    }
  }
  Status last = writer->Commit({.version = version});
  EXPECT_TRUE(fail_next ? last.IsIOError() : last.ok()) << last.ToString();
  committed.insert(pending.begin(), pending.end());
  committed_version = version;
  writer = OpenWriter({.partition_by = {"name"}, .roll_rows = 7});
  check(*writer, "end");
  EXPECT_GT(crashes, 3);
  EXPECT_GT(stopped_commits, 0);
}

}  // namespace
}  // namespace rill
