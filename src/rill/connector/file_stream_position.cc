// FileStreamConnector: its position for checkpoints (the processed set as of
// the last Poll) and the restore of one.
#include <simdjson.h>

#include "rill/common/json_text.h"
#include "rill/connector/file_stream_connector.h"

namespace rill {

Result<std::string> FileStreamConnector::SavePosition() const {
  std::string out = "{\"files\":[";
  std::lock_guard<std::mutex> lock(mu_);
  bool first = true;
  for (const auto& [name, s] : polled_) {
    if (!s.done && s.offset == 0) continue;
    if (!first) out += ',';
    first = false;
    out += "{\"name\":";
    AppendJsonString(&out, name);
    out += ",\"size\":" + std::to_string(s.size) + ",\"mtime_ns\":" + std::to_string(s.mtime_ns) +
           ",\"offset\":" + std::to_string(s.offset) + ",\"done\":" + (s.done ? "true" : "false") +
           "}";
  }
  out += "]}";
  return out;
}

Result<FileStreamConnector::FileMap> FileStreamConnector::ParsePosition(
    std::string_view position) const {
  FileMap restored;
  if (position.empty()) return restored;
  simdjson::dom::parser parser;
  simdjson::padded_string padded(position);
  simdjson::dom::element doc;
  simdjson::dom::array files;
  if (parser.parse(padded).get(doc) || doc["files"].get_array().get(files)) {
    return Status::Invalid("FileStreamConnector '", name(),
                           "': the checkpoint position is not {\"files\": [...]}");
  }
  for (simdjson::dom::element f : files) {
    std::string_view file_name;
    FileState s;
    bool done = false;
    if (f["name"].get_string().get(file_name) || f["size"].get_int64().get(s.size) ||
        f["mtime_ns"].get_int64().get(s.mtime_ns) || f["offset"].get_int64().get(s.offset) ||
        f["done"].get_bool().get(done)) {
      return Status::Invalid("FileStreamConnector '", name(),
                             "': a file entry of the checkpoint position lacks "
                             "name, size, mtime_ns, offset or done");
    }
    s.done = done;
    restored[std::string(file_name)] = s;
  }
  return restored;
}

Status FileStreamConnector::RestorePosition(std::string_view position) {
  RILL_ASSIGN_OR_RAISE(FileMap restored, ParsePosition(position));
  const bool was_running = thread_.joinable();
  if (was_running) Stop();
  {
    std::lock_guard<std::mutex> commit(commit_mu_);
    {
      // What is buffered came after the position: it is read again from the files.
      std::lock_guard<std::mutex> deliver(deliver_mu_);
      buffer_.Drain();
      std::lock_guard<std::mutex> lock(mu_);
      files_ = restored;
      polled_ = restored;
      polled_changed_ = false;
      pending_commit_.reset();  // a commit older than the restored position
      unpolled_.clear();
      rejects_.clear();
    }
    RILL_RETURN_NOT_OK(WriteState(restored));
  }
  if (was_running) return Start();
  return Status::OK();
}

}  // namespace rill
