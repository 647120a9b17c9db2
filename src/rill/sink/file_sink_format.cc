// The file sink's names (data files, Hive partition values) and its four
// format writers over one fsync-able file.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>

#include <arrow/csv/writer.h>
#include <arrow/io/file.h>
#include <arrow/ipc/writer.h>
#include <arrow/record_batch.h>
#include <arrow/type.h>
#include <parquet/arrow/writer.h>
#include <parquet/properties.h>

#include "rill/sink/file_sink_internal.h"

namespace rill::file_sink_internal {

namespace {

Status Errno(const std::string& what, const std::string& path) {
  return Status::IOError("file sink: ", what, " '", path, "': ", std::strerror(errno));
}

bool HiveEscapes(unsigned char c) {
  if (c < 0x20 || c == 0x7F) return true;
  switch (c) {
    case '"':
    case '#':
    case '%':
    case '\'':
    case '*':
    case '/':
    case ':':
    case '=':
    case '?':
    case '\\':
    case '{':
    case '[':
    case ']':
    case '^':
      return true;
    default:
      return false;
  }
}

// Parse the decimal digits of `text` up to `stop` (exclusive) into `*out`.
bool ParseNumber(std::string_view text, uint64_t* out) {
  if (text.empty()) return false;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && end == text.data() + text.size();
}

/// The file under construction: an fd-backed Arrow stream.
class FileOutput {
 public:
  static Result<FileOutput> Create(const std::string& path) {
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) return Errno("cannot create", path);
    auto stream = arrow::io::FileOutputStream::Open(fd);
    if (!stream.ok()) {
      ::close(fd);
      return stream.status();
    }
    return FileOutput(path, fd, *std::move(stream));
  }

  const std::shared_ptr<arrow::io::FileOutputStream>& stream() const { return stream_; }

  /// fsync and close; return the size.
  Result<int64_t> SyncAndClose() {
    RILL_ASSIGN_OR_RAISE(int64_t size, stream_->Tell());
    if (::fsync(fd_) != 0) {
      Status st = Errno("fsync failed on", path_);
      (void)stream_->Close();
      return st;
    }
    RILL_RETURN_NOT_OK(stream_->Close());  // closes fd_
    return size;
  }

 private:
  FileOutput(std::string path, int fd, std::shared_ptr<arrow::io::FileOutputStream> stream)
      : path_(std::move(path)), fd_(fd), stream_(std::move(stream)) {}

  std::string path_;
  int fd_;
  std::shared_ptr<arrow::io::FileOutputStream> stream_;
};

// Parquet and Arrow IPC (file and stream): Arrow's writers, which buffer and
// frame the batches themselves; Finish closes the writer, then fsyncs the file.
// `Writer` is a smart pointer to parquet::arrow::FileWriter or
// arrow::ipc::RecordBatchWriter (both have WriteRecordBatch and Close).
template <typename Writer>
class ArrowFormatWriter final : public FormatWriter {
 public:
  ArrowFormatWriter(FileOutput out, Writer writer)
      : out_(std::move(out)), writer_(std::move(writer)) {}
  Status Write(const arrow::RecordBatch& batch) override {
    // Parquet: batches accumulate into one row group up to the writer's
    // max_row_group_length, whatever their size.
    return writer_->WriteRecordBatch(batch);
  }
  Result<int64_t> Finish() override {
    RILL_RETURN_NOT_OK(writer_->Close());
    return out_.SyncAndClose();
  }

 private:
  FileOutput out_;
  Writer writer_;
};
using ParquetFormatWriter = ArrowFormatWriter<std::unique_ptr<parquet::arrow::FileWriter>>;
using IpcFormatWriter = ArrowFormatWriter<std::shared_ptr<arrow::ipc::RecordBatchWriter>>;

class NdjsonFormatWriter final : public FormatWriter {
 public:
  explicit NdjsonFormatWriter(FileOutput out) : out_(std::move(out)) {}
  Status Write(const arrow::RecordBatch& batch) override {
    buffer_.clear();
    RILL_RETURN_NOT_OK(AppendNdjson(batch, &buffer_));
    return out_.stream()->Write(buffer_.data(), static_cast<int64_t>(buffer_.size()));
  }
  Result<int64_t> Finish() override { return out_.SyncAndClose(); }

 private:
  FileOutput out_;
  std::string buffer_;
};

}  // namespace

Result<FileFormat> ParseFileFormat(std::string_view name) {
  for (FileFormat f :
       {FileFormat::kParquet, FileFormat::kNdjson, FileFormat::kCsv, FileFormat::kArrow}) {
    if (name == FileExtension(f)) return f;
  }
  return Status::Invalid("file sink: unknown format '", name,
                         "' (expected parquet, ndjson, csv or arrow)");
}

const char* FileExtension(FileFormat format) {
  switch (format) {
    case FileFormat::kParquet:
      return "parquet";
    case FileFormat::kNdjson:
      return "ndjson";
    case FileFormat::kCsv:
      return "csv";
    case FileFormat::kArrow:
      return "arrow";
  }
  return "parquet";
}

std::string EscapeHivePathValue(std::optional<std::string_view> value) {
  if (!value.has_value() || value->empty()) return kHiveDefaultPartition;
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  out.reserve(value->size());
  for (unsigned char c : *value) {
    if (HiveEscapes(c)) {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return out;
}

std::string FormatDataFileName(const DataFileName& name) {
  char buf[128];
  std::snprintf(buf, sizeof(buf), "%s-%012llu-%012llu-%06llu.",
                name.snapshot ? "snapshot" : "part",
                static_cast<unsigned long long>(name.from_version),
                static_cast<unsigned long long>(name.to_version),
                static_cast<unsigned long long>(name.file_number));
  return buf + name.extension;
}

std::optional<DataFileName> ParseDataFileName(std::string_view file_name) {
  DataFileName out;
  if (file_name.substr(0, 5) == "part-") {
    file_name.remove_prefix(5);
  } else if (file_name.substr(0, 9) == "snapshot-") {
    out.snapshot = true;
    file_name.remove_prefix(9);
  } else {
    return std::nullopt;
  }
  size_t dot = file_name.find('.');
  if (dot == std::string_view::npos || dot + 1 == file_name.size()) return std::nullopt;
  out.extension = std::string(file_name.substr(dot + 1));
  std::string_view numbers = file_name.substr(0, dot);
  uint64_t* fields[] = {&out.from_version, &out.to_version, &out.file_number};
  for (int i = 0; i < 3; ++i) {
    size_t dash = i < 2 ? numbers.find('-') : numbers.size();
    if (dash == std::string_view::npos) return std::nullopt;
    if (!ParseNumber(numbers.substr(0, dash), fields[i])) return std::nullopt;
    numbers.remove_prefix(i < 2 ? dash + 1 : dash);
  }
  return out;
}

Result<std::unique_ptr<FormatWriter>> OpenFormatWriter(
    FileFormat format, const std::string& path,
    const std::shared_ptr<arrow::Schema>& schema) {
  RILL_ASSIGN_OR_RAISE(FileOutput out, FileOutput::Create(path));
  switch (format) {
    case FileFormat::kParquet: {
      // pyarrow.parquet.write_table's defaults: snappy, dictionaries, the Arrow
      // schema stored (so readers get the exact types back).
      auto props = parquet::WriterProperties::Builder()
                       .compression(parquet::Compression::SNAPPY)
                       ->build();
      auto arrow_props = parquet::ArrowWriterProperties::Builder().store_schema()->build();
      RILL_ASSIGN_OR_RAISE(auto writer,
                           parquet::arrow::FileWriter::Open(*schema, arrow::default_memory_pool(),
                                                            out.stream(), props, arrow_props));
      return std::make_unique<ParquetFormatWriter>(std::move(out), std::move(writer));
    }
    case FileFormat::kArrow: {
      RILL_ASSIGN_OR_RAISE(auto writer, arrow::ipc::MakeFileWriter(out.stream(), schema));
      return std::make_unique<IpcFormatWriter>(std::move(out), std::move(writer));
    }
    case FileFormat::kCsv: {
      auto options = arrow::csv::WriteOptions::Defaults();
      RILL_ASSIGN_OR_RAISE(auto writer, arrow::csv::MakeCSVWriter(out.stream(), schema, options));
      return std::make_unique<IpcFormatWriter>(std::move(out), std::move(writer));
    }
    case FileFormat::kNdjson:
      return std::make_unique<NdjsonFormatWriter>(std::move(out));
  }
  return Status::Invalid("file sink: unknown format");
}

}  // namespace rill::file_sink_internal
