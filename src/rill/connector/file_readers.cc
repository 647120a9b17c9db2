#include "rill/connector/file_readers_internal.h"

#include <algorithm>
#include <cctype>

#include <arrow/csv/api.h>
#include <arrow/io/file.h>
#include <arrow/ipc/api.h>
#include <arrow/record_batch.h>
#include <arrow/table.h>
#include <parquet/arrow/reader.h>

namespace rill::file_internal {

FileFormat FormatOf(const std::string& name) {
  auto dot = name.rfind('.');
  if (dot == std::string::npos) return FileFormat::kUnknown;
  std::string ext = name.substr(dot + 1);
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (ext == "json" || ext == "ndjson" || ext == "jsonl") return FileFormat::kJson;
  if (ext == "csv") return FileFormat::kCsv;
  if (ext == "parquet" || ext == "pq") return FileFormat::kParquet;
  if (ext == "arrow" || ext == "ipc" || ext == "feather" || ext == "arrows") {
    return FileFormat::kIpc;
  }
  return FileFormat::kUnknown;
}

namespace {

Result<std::vector<std::shared_ptr<arrow::RecordBatch>>> TableBatches(
    const std::shared_ptr<arrow::Table>& table) {
  arrow::TableBatchReader reader(*table);
  return reader.ToRecordBatches();
}

Result<std::vector<std::shared_ptr<arrow::RecordBatch>>> ReadCsv(
    const std::shared_ptr<arrow::io::RandomAccessFile>& file,
    const std::shared_ptr<arrow::Schema>& schema) {
  auto read = arrow::csv::ReadOptions::Defaults();
  read.use_threads = false;
  auto convert = arrow::csv::ConvertOptions::Defaults();
  if (schema) {
    for (const auto& f : schema->fields()) convert.column_types[f->name()] = f->type();
  }
  RILL_ASSIGN_OR_RAISE(auto reader,
                       arrow::csv::TableReader::Make(arrow::io::default_io_context(), file, read,
                                                     arrow::csv::ParseOptions::Defaults(),
                                                     convert));
  RILL_ASSIGN_OR_RAISE(auto table, reader->Read());
  return TableBatches(table);
}

Result<std::vector<std::shared_ptr<arrow::RecordBatch>>> ReadParquet(
    const std::shared_ptr<arrow::io::RandomAccessFile>& file) {
  RILL_ASSIGN_OR_RAISE(auto reader,
                       parquet::arrow::OpenFile(file, arrow::default_memory_pool()));
  RILL_ASSIGN_OR_RAISE(auto table, reader->ReadTable());
  return TableBatches(table);
}

Result<std::vector<std::shared_ptr<arrow::RecordBatch>>> ReadIpc(
    const std::shared_ptr<arrow::io::RandomAccessFile>& file) {
  auto as_file = arrow::ipc::RecordBatchFileReader::Open(file);
  if (as_file.ok()) {
    std::vector<std::shared_ptr<arrow::RecordBatch>> out;
    for (int i = 0; i < (*as_file)->num_record_batches(); ++i) {
      RILL_ASSIGN_OR_RAISE(auto batch, (*as_file)->ReadRecordBatch(i));
      out.push_back(std::move(batch));
    }
    return out;
  }
  // Not the file format: the stream format, from the start.
  RILL_RETURN_NOT_OK(file->Seek(0));
  auto as_stream = arrow::ipc::RecordBatchStreamReader::Open(file);
  if (!as_stream.ok()) {
    return Status::Invalid("not an Arrow IPC file or stream: ", as_file.status().message(),
                           "; ", as_stream.status().message());
  }
  return (*as_stream)->ToRecordBatches();
}

}  // namespace

Result<std::vector<std::shared_ptr<arrow::RecordBatch>>> ReadBatches(
    const std::string& path, FileFormat format, const std::shared_ptr<arrow::Schema>& schema) {
  RILL_ASSIGN_OR_RAISE(auto file, arrow::io::ReadableFile::Open(path));
  switch (format) {
    case FileFormat::kCsv: return ReadCsv(file, schema);
    case FileFormat::kParquet: return ReadParquet(file);
    case FileFormat::kIpc: return ReadIpc(file);
    default: return Status::Invalid("unsupported file type (expected .json, .ndjson, .jsonl, "
                                    ".csv, .parquet, .arrow, .ipc or .feather)");
  }
}

}  // namespace rill::file_internal
