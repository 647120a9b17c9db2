#include <algorithm>
#include <cctype>

#include <arrow/buffer.h>
#include <arrow/csv/api.h>
#include <arrow/io/memory.h>
#include <arrow/ipc/reader.h>
#include <arrow/memory_pool.h>
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
  // application/vnd.apache.avro, …+binary, …+avro, application/avro, avro/binary.
  if (type.rfind("application/vnd.apache.avro", 0) == 0 || type == "application/avro" ||
      type == "avro/binary") {
    return IngestFormat::kAvro;
  }
  return Status::Invalid("unsupported Content-Type '", content_type,
                         "': use application/x-ndjson, application/json, "
                         "application/vnd.apache.arrow.stream, text/csv or "
                         "application/vnd.apache.avro");
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

namespace {

/// The allocation budget of the IPC read running on this thread (null: none).
thread_local int64_t* ipc_budget = nullptr;

/// A pool over the default one that refuses allocations beyond the budget of
/// the read running on the calling thread. It lives for the whole process
/// (buffers it allocated end up in tables and are freed much later), and a
/// Free never consults the budget.
class BudgetPool final : public arrow::MemoryPool {
 public:
  static BudgetPool* Get() {
    static BudgetPool* pool = new BudgetPool();  // never destroyed: see above
    return pool;
  }
  arrow::Status Allocate(int64_t size, int64_t alignment, uint8_t** out) override {
    RILL_RETURN_NOT_OK(Charge(size));
    return base_->Allocate(size, alignment, out);
  }
  arrow::Status Reallocate(int64_t old_size, int64_t new_size, int64_t alignment,
                           uint8_t** ptr) override {
    if (new_size > old_size) RILL_RETURN_NOT_OK(Charge(new_size - old_size));
    return base_->Reallocate(old_size, new_size, alignment, ptr);
  }
  void Free(uint8_t* buffer, int64_t size, int64_t alignment) override {
    base_->Free(buffer, size, alignment);
  }
  int64_t bytes_allocated() const override { return base_->bytes_allocated(); }
  int64_t max_memory() const override { return base_->max_memory(); }
  int64_t total_bytes_allocated() const override { return base_->total_bytes_allocated(); }
  int64_t num_allocations() const override { return base_->num_allocations(); }
  std::string backend_name() const override { return base_->backend_name(); }

 private:
  BudgetPool() : base_(arrow::default_memory_pool()) {}
  static arrow::Status Charge(int64_t size) {
    if (ipc_budget == nullptr) return arrow::Status::OK();
    if (size > *ipc_budget) {
      return arrow::Status::CapacityError(
          "the Arrow IPC body decompresses beyond max_ingest_decompressed_bytes");
    }
    *ipc_budget -= size;
    return arrow::Status::OK();
  }
  arrow::MemoryPool* base_;
};

/// Sets the calling thread's IPC budget for its lifetime.
class BudgetScope {
 public:
  explicit BudgetScope(int64_t bytes) : bytes_(bytes) { ipc_budget = &bytes_; }
  ~BudgetScope() { ipc_budget = nullptr; }
  BudgetScope(const BudgetScope&) = delete;
  BudgetScope& operator=(const BudgetScope&) = delete;

 private:
  int64_t bytes_;
};

/// The error of a failed read: CapacityError (413) over the budget, else
/// Invalid (400) naming `what`.
Status ReadError(const Status& status, std::string_view what, int64_t max_bytes) {
  if (status.IsCapacityError() || status.IsOutOfMemory()) {
    return Status::CapacityError("the Arrow IPC body decompresses beyond "
                                 "max_ingest_decompressed_bytes (",
                                 max_bytes, " bytes)");
  }
  return Status::Invalid(what, status.message());
}

Status CheckBatch(const arrow::RecordBatch& batch, size_t index) {
  Status valid = batch.ValidateFull();
  if (!valid.ok()) {
    return Status::Invalid("bad Arrow IPC body: batch ", index, " is invalid: ",
                           valid.message());
  }
  return Status::OK();
}

}  // namespace

Result<std::vector<std::shared_ptr<arrow::RecordBatch>>> ReadIpcBody(
    std::string_view data, int64_t max_decompressed_bytes) {
  // The batches point into the buffer (zero-copy), so it owns a copy of the body.
  std::shared_ptr<arrow::Buffer> buffer = arrow::Buffer::FromString(std::string(data));
  // Compressed buffers (LZ4_FRAME, ZSTD) are inflated into allocations of the
  // size their 8-byte prefix claims: the budget pool refuses them beyond the
  // bound, before anything is inflated. One thread, so the budget holds.
  BudgetScope budget(max_decompressed_bytes);
  auto options = arrow::ipc::IpcReadOptions::Defaults();
  options.memory_pool = BudgetPool::Get();
  options.use_threads = false;
  std::vector<std::shared_ptr<arrow::RecordBatch>> out;
  auto stream = arrow::ipc::RecordBatchStreamReader::Open(
      std::make_shared<arrow::io::BufferReader>(buffer), options);
  if (stream.ok()) {
    while (true) {
      std::shared_ptr<arrow::RecordBatch> batch;
      Status read = (*stream)->ReadNext(&batch);
      if (!read.ok()) return ReadError(read, "bad Arrow IPC stream: ", max_decompressed_bytes);
      if (batch == nullptr) break;
      RILL_RETURN_NOT_OK(CheckBatch(*batch, out.size()));
      out.push_back(std::move(batch));
    }
    return out;
  }
  if (stream.status().IsCapacityError()) {
    return ReadError(stream.status(), "", max_decompressed_bytes);
  }
  auto file = arrow::ipc::RecordBatchFileReader::Open(
      std::make_shared<arrow::io::BufferReader>(buffer), options);
  if (!file.ok()) {
    if (file.status().IsCapacityError()) {
      return ReadError(file.status(), "", max_decompressed_bytes);
    }
    return Status::Invalid("the body is not an Arrow IPC stream (",
                           stream.status().message(), ") nor file");
  }
  for (int i = 0; i < (*file)->num_record_batches(); ++i) {
    auto batch = (*file)->ReadRecordBatch(i);
    if (!batch.ok()) {
      return ReadError(batch.status(), "bad Arrow IPC file: ", max_decompressed_bytes);
    }
    RILL_RETURN_NOT_OK(CheckBatch(**batch, out.size()));
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
