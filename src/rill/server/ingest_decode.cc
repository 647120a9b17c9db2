#include <algorithm>
#include <cctype>

#include <arrow/buffer.h>
#include <arrow/csv/api.h>
#include <arrow/io/memory.h>
#include <arrow/ipc/reader.h>
#include <arrow/record_batch.h>
#include <arrow/table.h>
#include <arrow/util/compression.h>

#include "rill/server/ingest_internal.h"

namespace rill::server {

Result<IngestFormat> IngestFormatOf(std::string_view content_type) {
  std::string type(content_type.substr(0, content_type.find(';')));
  type.erase(std::remove_if(type.begin(), type.end(),
                            [](unsigned char c) { return std::isspace(c); }),
             type.end());
  std::transform(type.begin(), type.end(), type.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  if (type.empty() || type == "application/json" || type == "application/x-ndjson" ||
      type == "application/ndjson" || type == "application/jsonl" ||
      type == "application/x-jsonlines" || type == "application/jsonlines" ||
      type == "text/plain") {
    return IngestFormat::kJson;
  }
  if (type == "application/vnd.apache.arrow.stream" ||
      type == "application/vnd.apache.arrow.file" || type == "application/x-arrow") {
    return IngestFormat::kArrowIpc;
  }
  if (type == "text/csv") return IngestFormat::kCsv;
  return Status::Invalid("unsupported Content-Type '", content_type,
                         "': use application/x-ndjson, application/json, "
                         "application/vnd.apache.arrow.stream or text/csv");
}

Result<std::string> Gunzip(std::string_view data, int64_t max_bytes) {
  RILL_ASSIGN_OR_RAISE(auto codec, arrow::util::Codec::Create(arrow::Compression::GZIP));
  RILL_ASSIGN_OR_RAISE(auto inflater, codec->MakeDecompressor());
  std::string out;
  out.resize(static_cast<size_t>(std::min<int64_t>(
      max_bytes, std::max<int64_t>(64 * 1024, static_cast<int64_t>(data.size()) * 4))));
  int64_t written = 0;
  auto input = reinterpret_cast<const uint8_t*>(data.data());
  int64_t left = static_cast<int64_t>(data.size());
  while (left > 0) {
    if (written == static_cast<int64_t>(out.size())) {
      if (written >= max_bytes) {
        return Status::CapacityError("the gzip body inflates beyond "
                                     "max_ingest_decompressed_bytes (",
                                     max_bytes, " bytes)");
      }
      out.resize(static_cast<size_t>(std::min<int64_t>(max_bytes, written * 2)));
    }
    auto* dest = reinterpret_cast<uint8_t*>(out.data()) + written;
    auto step = inflater->Decompress(left, input, static_cast<int64_t>(out.size()) - written,
                                     dest);
    if (!step.ok()) return Status::Invalid("corrupt gzip body: ", step.status().message());
    input += step->bytes_read;
    left -= step->bytes_read;
    written += step->bytes_written;
    if (inflater->IsFinished() && left > 0) {
      RILL_RETURN_NOT_OK(inflater->Reset());  // the next gzip member
    } else if (step->bytes_read == 0 && step->bytes_written == 0 && !step->need_more_output) {
      break;  // no progress: truncated or trailing garbage (checked below)
    }
  }
  if (!inflater->IsFinished()) return Status::Invalid("corrupt gzip body: truncated");
  out.resize(static_cast<size_t>(written));
  return out;
}

Result<std::vector<std::shared_ptr<arrow::RecordBatch>>> ReadIpcBody(std::string_view data) {
  // The batches point into the buffer (zero-copy), so it owns a copy of the body.
  std::shared_ptr<arrow::Buffer> buffer = arrow::Buffer::FromString(std::string(data));
  auto stream = arrow::ipc::RecordBatchStreamReader::Open(
      std::make_shared<arrow::io::BufferReader>(buffer));
  if (stream.ok()) {
    auto batches = (*stream)->ToRecordBatches();
    if (!batches.ok()) return Status::Invalid("bad Arrow IPC stream: ", batches.status().message());
    return batches;
  }
  auto file = arrow::ipc::RecordBatchFileReader::Open(
      std::make_shared<arrow::io::BufferReader>(buffer));
  if (!file.ok()) {
    return Status::Invalid("the body is not an Arrow IPC stream (",
                           stream.status().message(), ") nor file");
  }
  std::vector<std::shared_ptr<arrow::RecordBatch>> out;
  for (int i = 0; i < (*file)->num_record_batches(); ++i) {
    auto batch = (*file)->ReadRecordBatch(i);
    if (!batch.ok()) return Status::Invalid("bad Arrow IPC file: ", batch.status().message());
    out.push_back(std::move(*batch));
  }
  return out;
}

Result<std::vector<std::shared_ptr<arrow::RecordBatch>>> ReadCsvBody(
    std::string_view data, const std::shared_ptr<arrow::Schema>& schema) {
  auto buffer = std::make_shared<arrow::Buffer>(reinterpret_cast<const uint8_t*>(data.data()),
                                                static_cast<int64_t>(data.size()));
  auto read = arrow::csv::ReadOptions::Defaults();
  read.use_threads = false;
  auto convert = arrow::csv::ConvertOptions::Defaults();
  if (schema) {
    for (const auto& f : schema->fields()) convert.column_types[f->name()] = f->type();
  }
  auto reader = arrow::csv::TableReader::Make(
      arrow::io::default_io_context(), std::make_shared<arrow::io::BufferReader>(buffer), read,
      arrow::csv::ParseOptions::Defaults(), convert);
  if (!reader.ok()) return Status::Invalid("bad CSV body: ", reader.status().message());
  auto table = (*reader)->Read();
  if (!table.ok()) return Status::Invalid("bad CSV body: ", table.status().message());
  RILL_ASSIGN_OR_RAISE(auto combined, (*table)->CombineChunks());
  arrow::TableBatchReader batches(*combined);
  return batches.ToRecordBatches();
}

}  // namespace rill::server
