// The file sink's writer alone, for bench/file_sink_bench.py: read an Arrow IPC
// file, turn its batches into change batches (every row an insert of version
// 1), then, for each output directory read from stdin, time Open + Write + Commit of them through a FileSinkWriter (append mode,
// so the files hold exactly the input's columns) and print
// {"seconds": ..., "bytes": ..., "rows": ...}.
//
//     file_sink_bench --input rows.arrow [--format parquet] [--roll-rows N]
//     (then one output directory per line on stdin, one JSON line back for each)
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include <arrow/api.h>
#include <arrow/io/file.h>
#include <arrow/ipc/reader.h>

#include "rill/sink/file_sink.h"

namespace {

arrow::Status WriteOnce(const std::shared_ptr<arrow::Schema>& schema,
                        const rill::ChangeSet& changes, const std::string& out,
                        const std::string& format, int64_t roll_rows);

arrow::Status Run(int argc, char** argv) {
  std::string input, format = "parquet", out;
  int64_t roll_rows = 1LL << 40;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--input")) input = argv[i + 1];
    if (!std::strcmp(argv[i], "--out")) out = argv[i + 1];
    if (!std::strcmp(argv[i], "--format")) format = argv[i + 1];
    if (!std::strcmp(argv[i], "--roll-rows")) roll_rows = std::stoll(argv[i + 1]);
  }
  if (input.empty()) return arrow::Status::Invalid("--input is needed");
  ARROW_ASSIGN_OR_RAISE(auto file, arrow::io::ReadableFile::Open(input));
  ARROW_ASSIGN_OR_RAISE(auto reader, arrow::ipc::RecordBatchFileReader::Open(file));
  auto schema = reader->schema();
  auto change_schema = rill::ChangeSchema(schema);
  rill::ChangeSet changes;
  changes.from_version = 0;
  changes.to_version = 1;
  for (int i = 0; i < reader->num_record_batches(); ++i) {
    ARROW_ASSIGN_OR_RAISE(auto batch, reader->ReadRecordBatch(i));
    const int64_t n = batch->num_rows();
    arrow::StringBuilder ops;
    arrow::UInt64Builder versions;
    ARROW_RETURN_NOT_OK(ops.Reserve(n));
    ARROW_RETURN_NOT_OK(ops.ReserveData(n * 6));
    ARROW_RETURN_NOT_OK(versions.Reserve(n));
    for (int64_t r = 0; r < n; ++r) {
      ops.UnsafeAppend("insert", 6);
      versions.UnsafeAppend(1);
    }
    auto columns = batch->columns();
    ARROW_ASSIGN_OR_RAISE(auto op_array, ops.Finish());
    ARROW_ASSIGN_OR_RAISE(auto version_array, versions.Finish());
    columns.push_back(op_array);
    columns.push_back(version_array);
    changes.batches.push_back(arrow::RecordBatch::Make(change_schema, n, columns));
    changes.num_rows += n;
  }
  // One write per line on stdin (the output directory, which must not exist),
  // so that repetitions run in a warm process, as pyarrow's do.
  char line[4096];
  while (std::fgets(line, sizeof(line), stdin)) {
    out = line;
    while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
    if (out.empty()) break;
    ARROW_RETURN_NOT_OK(WriteOnce(schema, changes, out, format, roll_rows));
  }
  return arrow::Status::OK();
}

arrow::Status WriteOnce(const std::shared_ptr<arrow::Schema>& schema,
                        const rill::ChangeSet& changes, const std::string& out,
                        const std::string& format, int64_t roll_rows) {
  rill::FileSinkOptions options;
  options.path = out;
  options.format = format;
  options.roll_rows = roll_rows;
  options.roll_seconds = 1e9;
  ARROW_ASSIGN_OR_RAISE(auto writer, rill::MakeFileSinkWriter(options));
  auto start = std::chrono::steady_clock::now();
  ARROW_RETURN_NOT_OK(writer->Open(schema, {}));
  ARROW_RETURN_NOT_OK(writer->Write(changes, rill::SinkMode::kAppend));
  ARROW_RETURN_NOT_OK(writer->Commit({.version = 1}));
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("{\"seconds\": %.6f, \"bytes\": %lld, \"rows\": %lld}\n", seconds,
              static_cast<long long>(writer->bytes_written()),
              static_cast<long long>(changes.num_rows));
  std::fflush(stdout);
  writer->Close();
  return arrow::Status::OK();
}

}  // namespace

int main(int argc, char** argv) {
  arrow::Status st = Run(argc, argv);
  if (!st.ok()) {
    std::fprintf(stderr, "file_sink_bench: %s\n", st.ToString().c_str());
    return 1;
  }
  return 0;
}
