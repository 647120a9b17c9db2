// A sink's file in a checkpoint: sinks/<name>.arrow, an Arrow IPC file of the
// change rows after the sink's last commit, the counters in its schema metadata.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>

#include <arrow/io/file.h>
#include <arrow/ipc/reader.h>
#include <arrow/ipc/writer.h>
#include <arrow/record_batch.h>
#include <arrow/type.h>
#include <arrow/util/key_value_metadata.h>

#include "rill/sink/sink_internal.h"

namespace rill::sink_internal {

namespace {

constexpr char kSinksDir[] = "sinks";

std::string EscapedName(const std::string& name) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : name) {
    if (std::isalnum(c) || c == '_' || c == '-' || (c == '.' && !out.empty())) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out + ".arrow";
}

Status FsyncPath(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return Status::IOError("cannot open '", path, "': ", std::strerror(errno));
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) return Status::IOError("fsync failed on '", path, "': ", std::strerror(errno));
  return Status::OK();
}

Result<uint64_t> MetadataNumber(const arrow::KeyValueMetadata& m, const std::string& key) {
  auto value = m.Get(key);
  if (!value.ok()) return Status::Invalid("sink checkpoint file without '", key, "'");
  try {
    return static_cast<uint64_t>(std::stoull(*value));
  } catch (...) {
    return Status::Invalid("sink checkpoint file: bad '", key, "': ", *value);
  }
}

}  // namespace

Result<int64_t> WriteSinkSection(const std::string& dir, const std::string& sink,
                                 const std::shared_ptr<arrow::Schema>& change_schema,
                                 const SinkSection& section, bool sync) {
  const std::string sinks = dir + "/" + kSinksDir;
  if (::mkdir(sinks.c_str(), 0755) != 0 && errno != EEXIST) {
    return Status::IOError("cannot create '", sinks, "': ", std::strerror(errno));
  }
  const std::string path = sinks + "/" + EscapedName(sink);
  auto metadata = arrow::key_value_metadata(
      {"rill_sink", "rill_sink_epoch", "rill_sink_base", "rill_sink_version",
       "rill_sink_needs_snapshot"},
      {sink, std::to_string(section.epoch), std::to_string(section.base),
       std::to_string(section.version), section.needs_snapshot ? "1" : "0"});
  auto schema =
      (section.rows.empty() ? change_schema : section.rows[0]->schema())->WithMetadata(metadata);
  RILL_ASSIGN_OR_RAISE(auto file, arrow::io::FileOutputStream::Open(path));
  RILL_ASSIGN_OR_RAISE(auto writer, arrow::ipc::MakeFileWriter(file, schema));
  for (const auto& batch : section.rows) RILL_RETURN_NOT_OK(writer->WriteRecordBatch(*batch));
  RILL_RETURN_NOT_OK(writer->Close());
  RILL_ASSIGN_OR_RAISE(int64_t bytes, file->Tell());
  if (sync && ::fsync(file->file_descriptor()) != 0) {
    return Status::IOError("fsync failed on '", path, "': ", std::strerror(errno));
  }
  RILL_RETURN_NOT_OK(file->Close());
  if (sync) RILL_RETURN_NOT_OK(FsyncPath(sinks));
  return bytes;
}

Result<std::optional<SinkSection>> ReadSinkSection(const std::string& dir,
                                                   const std::string& sink) {
  const std::string path = dir + "/" + kSinksDir + "/" + EscapedName(sink);
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return std::optional<SinkSection>();
  RILL_ASSIGN_OR_RAISE(auto file, arrow::io::ReadableFile::Open(path));
  RILL_ASSIGN_OR_RAISE(auto reader, arrow::ipc::RecordBatchFileReader::Open(file));
  auto metadata = reader->schema()->metadata();
  if (!metadata) return Status::Invalid("sink checkpoint file '", path, "' has no metadata");
  SinkSection section;
  RILL_ASSIGN_OR_RAISE(section.epoch, MetadataNumber(*metadata, "rill_sink_epoch"));
  RILL_ASSIGN_OR_RAISE(section.base, MetadataNumber(*metadata, "rill_sink_base"));
  RILL_ASSIGN_OR_RAISE(section.version, MetadataNumber(*metadata, "rill_sink_version"));
  RILL_ASSIGN_OR_RAISE(uint64_t snapshot, MetadataNumber(*metadata, "rill_sink_needs_snapshot"));
  section.needs_snapshot = snapshot != 0;
  auto plain = reader->schema()->RemoveMetadata();
  for (int i = 0; i < reader->num_record_batches(); ++i) {
    RILL_ASSIGN_OR_RAISE(auto batch, reader->ReadRecordBatch(i));
    section.rows.push_back(arrow::RecordBatch::Make(plain, batch->num_rows(), batch->columns()));
  }
  return std::optional<SinkSection>(std::move(section));
}

}  // namespace rill::sink_internal
