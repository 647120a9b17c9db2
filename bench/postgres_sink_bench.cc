// postgres_sink_bench: Rill's half of sink_postgres_rows_per_s (bench/postgres_sink_bench.py
// drives it, starts the server and runs the psycopg baseline on the same rows).
//
// Reads the rows from an Arrow IPC file, then writes them through
// PostgresSinkWriter into an existing table in batches of --batch rows (one
// Write + Commit per batch, as the Sink does), and prints one JSON line:
//   {"rows": N, "seconds": S, "bytes": B}
// Usage: postgres_sink_bench --dsn DSN --table T --ipc FILE --key id
//                            [--mode upsert|append|changelog] [--batch 100000]
//                            [--op insert|update]
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <arrow/api.h>
#include <arrow/io/file.h>
#include <arrow/ipc/reader.h>

#include "rill/sink/postgres_sink.h"

namespace {

arrow::Status Run(int argc, char** argv) {
  std::string dsn, table, ipc, key = "id", mode_name = "upsert", op = "insert";
  int64_t batch_rows = 100000;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string arg = argv[i];
    std::string value = argv[i + 1];
    if (arg == "--dsn") dsn = value;
    else if (arg == "--table") table = value;
    else if (arg == "--ipc") ipc = value;
    else if (arg == "--key") key = value;
    else if (arg == "--mode") mode_name = value;
    else if (arg == "--batch") batch_rows = std::stoll(value);
    else if (arg == "--op") op = value;
    else return arrow::Status::Invalid("unknown argument ", arg);
  }
  ARROW_ASSIGN_OR_RAISE(rill::SinkMode mode, rill::ParseSinkMode(mode_name));
  ARROW_ASSIGN_OR_RAISE(auto file, arrow::io::ReadableFile::Open(ipc));
  ARROW_ASSIGN_OR_RAISE(auto reader, arrow::ipc::RecordBatchFileReader::Open(file));
  std::vector<std::shared_ptr<arrow::RecordBatch>> input;
  for (int i = 0; i < reader->num_record_batches(); ++i) {
    ARROW_ASSIGN_OR_RAISE(auto batch, reader->ReadRecordBatch(i));
    input.push_back(batch);
  }
  ARROW_ASSIGN_OR_RAISE(auto all, arrow::Table::FromRecordBatches(reader->schema(), input));
  ARROW_ASSIGN_OR_RAISE(all, all->CombineChunks());
  auto schema = reader->schema();
  auto change_schema = rill::ChangeSchema(schema);

  // The change sets, built before the clock starts: every row an --op (insert).
  std::vector<rill::ChangeSet> sets;
  for (int64_t begin = 0; begin < all->num_rows(); begin += batch_rows) {
    int64_t length = std::min(batch_rows, all->num_rows() - begin);
    auto slice = all->Slice(begin, length);
    ARROW_ASSIGN_OR_RAISE(auto combined, slice->CombineChunksToBatch());
    arrow::StringBuilder ops;
    arrow::UInt64Builder versions;
    uint64_t version = sets.size() + 1;
    for (int64_t i = 0; i < length; ++i) {
      ARROW_RETURN_NOT_OK(ops.Append(op));
      ARROW_RETURN_NOT_OK(versions.Append(version));
    }
    std::vector<std::shared_ptr<arrow::Array>> columns = combined->columns();
    ARROW_ASSIGN_OR_RAISE(auto op_array, ops.Finish());
    ARROW_ASSIGN_OR_RAISE(auto version_array, versions.Finish());
    columns.push_back(op_array);
    columns.push_back(version_array);
    rill::ChangeSet set;
    set.from_version = version - 1;
    set.to_version = version;
    set.batches.push_back(arrow::RecordBatch::Make(change_schema, length, columns));
    set.num_rows = length;
    sets.push_back(std::move(set));
  }

  rill::PostgresSinkOptions options;
  options.dsn = dsn;
  options.target_table = table;
  options.sink_name = "bench_" + table;
  options.mode = mode;
  ARROW_ASSIGN_OR_RAISE(auto writer, rill::MakePostgresSinkWriter(options));
  std::vector<std::string> keys;
  if (mode == rill::SinkMode::kUpsert) keys.push_back(key);
  ARROW_RETURN_NOT_OK(writer->Open(schema, keys));

  auto start = std::chrono::steady_clock::now();
  for (const auto& set : sets) {
    ARROW_RETURN_NOT_OK(writer->Write(set, mode));
    ARROW_RETURN_NOT_OK(writer->Commit({set.to_version}));
  }
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  writer->Close();
  std::printf("{\"rows\": %lld, \"seconds\": %.6f, \"bytes\": %lld}\n",
              static_cast<long long>(all->num_rows()), seconds,
              static_cast<long long>(writer->bytes_written()));
  return arrow::Status::OK();
}

}  // namespace

int main(int argc, char** argv) {
  arrow::Status status = Run(argc, argv);
  if (!status.ok()) {
    std::fprintf(stderr, "postgres_sink_bench: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
