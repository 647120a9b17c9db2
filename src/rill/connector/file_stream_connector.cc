#include "rill/connector/file_stream_connector.h"

#include <dirent.h>
#include <fnmatch.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include <arrow/record_batch.h>
#include <arrow/type.h>

#include "rill/connector/change_envelope_internal.h"
#include "rill/connector/decode_counters.h"
#include "rill/connector/file_readers_internal.h"
#include "rill/connector/json_stream_connector.h"

namespace rill {

namespace {

using file_internal::FileFormat;

constexpr int64_t kMaxPendingRejects = 10000;
/// Where delete_after_process puts the files that failed to read (in watch_path).
constexpr char kFailedFolder[] = "failed";

double NowSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

Result<std::string> ReadRange(const std::string& path, int64_t offset, int64_t length) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Status::IOError("cannot open '", path, "'");
  f.seekg(offset);
  std::string data(static_cast<size_t>(length), '\0');
  f.read(data.data(), length);
  data.resize(static_cast<size_t>(f.gcount()));
  return data;
}

}  // namespace

Result<std::shared_ptr<FileStreamConnector>> FileStreamConnector::Make(
    std::string target_table, FileStreamOptions options) {
  if (target_table.empty()) return Status::Invalid("FileStreamConnector: empty target_table");
  struct stat st;
  if (options.watch_path.empty() || ::stat(options.watch_path.c_str(), &st) != 0 ||
      !S_ISDIR(st.st_mode)) {
    return Status::Invalid("FileStreamConnector: watch_path '", options.watch_path,
                           "' is not an existing folder");
  }
  if (options.poll_interval_ms <= 0 || options.stable_ms < 0) {
    return Status::Invalid("FileStreamConnector: poll_interval_ms must be > 0 and stable_ms >= 0");
  }
  RILL_ASSIGN_OR_RAISE(auto decoder, JsonDecoder::Make(options.decode));
  std::shared_ptr<FileStreamConnector> c(
      new FileStreamConnector(std::move(target_table), std::move(options), std::move(decoder)));
  RILL_RETURN_NOT_OK(c->LoadState());
  return c;
}

FileStreamConnector::FileStreamConnector(std::string target_table, FileStreamOptions options,
                                         std::unique_ptr<JsonDecoder> decoder)
    : Connector(options.name, std::move(target_table), options.decode.schema),
      options_([&] {
        FileStreamOptions o = std::move(options);
        if (o.state_path.empty()) {
          o.state_path = o.watch_path + "/.rill-" + (o.name.empty() ? name() : o.name) + ".state";
        }
        return o;
      }()),
      explicit_schema_(options_.decode.schema != nullptr),
      buffer_(options_.limits),
      decoder_(std::move(decoder)) {}

FileStreamConnector::~FileStreamConnector() { Stop(); }

// State file: "size<TAB>mtime_ns<TAB>offset<TAB>name" per processed file.
Status FileStreamConnector::LoadState() {
  std::ifstream f(options_.state_path);
  if (!f) return Status::OK();  // first run
  std::string line;
  std::lock_guard<std::mutex> lock(mu_);
  while (std::getline(f, line)) {
    std::istringstream in(line);
    FileState s;
    std::string name;
    if (!(in >> s.size >> s.mtime_ns >> s.offset) || !std::getline(in >> std::ws, name)) {
      return Status::IOError("FileStreamConnector: corrupt state file '", options_.state_path,
                             "': ", line);
    }
    s.done = !options_.tail || file_internal::FormatOf(name) != FileFormat::kJson;
    files_[name] = s;
    polled_[name] = s;
    // Committed but maybe not deleted yet (a crash between the two).
    if (s.done && options_.delete_after_process) to_delete_.insert(name);
  }
  return Status::OK();
}

Status FileStreamConnector::WriteState(const FileMap& files) {
  std::string tmp = options_.state_path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    for (const auto& [name, s] : files) {
      if (s.done || s.offset > 0) {
        f << s.size << '\t' << s.mtime_ns << '\t' << s.offset << '\t' << name << '\n';
      }
    }
    if (!f) return Status::IOError("cannot write state file '", tmp, "'");
  }
  if (std::rename(tmp.c_str(), options_.state_path.c_str()) != 0) {
    return Status::IOError("cannot replace state file '", options_.state_path, "'");
  }
  return Status::OK();
}

void FileStreamConnector::ApplyPendingCommit() {
  std::lock_guard<std::mutex> commit(commit_mu_);
  FileMap files;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!pending_commit_) return;
    files = std::move(*pending_commit_);
    pending_commit_.reset();
  }
  Status written = WriteState(files);
  std::vector<std::pair<std::string, FileState>> deletes;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!written.ok()) {
      // Nothing is deleted; the next commit (or this one, again) retries.
      ++counters_.errors;
      if (!pending_commit_) pending_commit_ = std::move(files);
      return;
    }
    for (auto it = to_delete_.begin(); it != to_delete_.end();) {
      auto f = files.find(*it);
      if (f != files.end() && f->second.done) {
        deletes.emplace_back(*it, f->second);
        it = to_delete_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (const auto& [name, s] : deletes) {
    // Only the file that was read: one replaced under the same name since stays.
    const std::string path = options_.watch_path + "/" + name;
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) continue;
    const int64_t mtime =
        static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
    if (st.st_size == s.size && mtime == s.mtime_ns) ::unlink(path.c_str());
  }
}

void FileStreamConnector::CommitApplied() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!polled_changed_) return;  // no I/O for a tick that took no file
    polled_changed_ = false;
    pending_commit_ = polled_;
  }
  // The reader thread writes it on its next round; a stopped connector (or
  // one used without Start) has no thread to do it.
  if (!running_.load()) ApplyPendingCommit();
}

void FileStreamConnector::CommitCheckpointed(std::string_view position) {
  auto files = ParsePosition(position);
  if (!files.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    ++counters_.errors;
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending_commit_ = std::move(*files);
  }
  ApplyPendingCommit();  // the checkpoint writer's thread: I/O is fine here
}

Status FileStreamConnector::Start() {
  if (thread_.joinable()) return Status::OK();
  stop_ = false;
  if (options_.use_inotify && inotify_fd_ < 0) {
    inotify_fd_ = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (inotify_fd_ >= 0 &&
        inotify_add_watch(inotify_fd_, options_.watch_path.c_str(),
                          IN_CLOSE_WRITE | IN_MOVED_TO | IN_MODIFY | IN_CREATE) < 0) {
      ::close(inotify_fd_);
      inotify_fd_ = -1;  // polling fallback
    }
  }
  running_ = true;
  thread_ = std::thread([this] { Run(); });
  return Status::OK();
}

void FileStreamConnector::Stop() {
  stop_ = true;
  room_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  running_ = false;
  if (inotify_fd_ >= 0) {
    ::close(inotify_fd_);
    inotify_fd_ = -1;
  }
  ApplyPendingCommit();  // what the tick applied before the stop
}

void FileStreamConnector::Run() {
  while (!stop_) {
    ApplyPendingCommit();
    Status st = ScanOnce();
    if (!st.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      ++counters_.errors;
    }
    if (inotify_fd_ >= 0) {
      pollfd p{inotify_fd_, POLLIN, 0};
      ::poll(&p, 1, static_cast<int>(options_.poll_interval_ms));
      DrainInotify();
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(options_.poll_interval_ms));
    }
  }
}

void FileStreamConnector::DrainInotify() {
  alignas(inotify_event) char buf[16384];
  for (;;) {
    ssize_t n = ::read(inotify_fd_, buf, sizeof(buf));
    if (n <= 0) return;
    for (char* p = buf; p < buf + n;) {
      auto* ev = reinterpret_cast<inotify_event*>(p);
      if (ev->len > 0) {
        std::lock_guard<std::mutex> lock(mu_);
        FileState& s = files_[ev->name];
        if (ev->mask & (IN_CLOSE_WRITE | IN_MOVED_TO)) {
          s.closed = true;
        } else if (ev->mask & (IN_MODIFY | IN_CREATE)) {
          s.closed = false;
        }
      }
      p += sizeof(inotify_event) + ev->len;
    }
  }
}

Status FileStreamConnector::ScanOnce(bool present_are_complete) {
  std::lock_guard<std::mutex> scan(scan_mu_);
  DIR* dir = ::opendir(options_.watch_path.c_str());
  if (!dir) return Status::IOError("cannot list '", options_.watch_path, "'");
  std::vector<std::string> names;
  while (dirent* e = ::readdir(dir)) {
    std::string name = e->d_name;
    if (name.empty() || name[0] == '.') continue;  // hidden files: state, temporaries
    if (::fnmatch(options_.file_pattern.c_str(), name.c_str(), 0) != 0) continue;
    names.push_back(std::move(name));
  }
  ::closedir(dir);
  std::sort(names.begin(), names.end());  // oldest-named first, deterministic

  const double now = NowSeconds();
  for (const auto& name : names) {
    if (stop_) break;
    struct stat st;
    std::string path = options_.watch_path + "/" + name;
    if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    const int64_t mtime = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
    FileState snapshot;
    {
      std::lock_guard<std::mutex> lock(mu_);
      FileState& s = files_[name];
      if (s.done) continue;
      if (s.size != st.st_size || s.mtime_ns != mtime) {
        if (s.offset == 0 || st.st_size != s.size) s.stable_since = now;
        s.size = st.st_size;
        s.mtime_ns = mtime;
      }
      snapshot = s;
    }
    const bool tailing = options_.tail && file_internal::FormatOf(name) == FileFormat::kJson;
    const bool ready = present_are_complete || tailing || snapshot.closed ||
                       (snapshot.stable_since > 0 &&
                        (now - snapshot.stable_since) * 1000 >= options_.stable_ms);
    // Files are applied in name order, also after a restart (when files written
    // meanwhile are found by the scan, not by inotify): a file not yet complete
    // holds back the names after it, so a later file never overtakes it.
    if (!ready) break;
    FileState work = snapshot;
    auto read = ReadFile(name, &work);
    Batches batches;
    if (read.ok()) batches = std::move(*read);
    // A file read whole is deleted once a commit covers it (not now: its rows
    // are only buffered).
    const bool delete_when_committed = read.ok() && work.done && options_.delete_after_process;
    if (!Deliver(name, std::move(batches), work, delete_when_committed)) break;  // stopping
    if (!read.ok()) {
      // A file that failed to read is never deleted: with delete_after_process
      // it is moved to failed/ (it is read once: its state says done).
      RejectFile(name, path, read.status(), work.done && options_.delete_after_process);
    }
  }
  // The state file is written by the commits (CommitApplied/CommitCheckpointed).
  return Status::OK();
}

Result<FileStreamConnector::Batches> FileStreamConnector::ReadFile(const std::string& name,
                                                                    FileState* state) {
  std::string path = options_.watch_path + "/" + name;
  const FileFormat format = file_internal::FormatOf(name);
  if (options_.tail && format == FileFormat::kJson) return ReadTail(name, path, state);
  state->done = true;  // read once, whatever happens
  {
    std::lock_guard<std::mutex> lock(mu_);
    counters_.received_bytes += state->size;
  }
  return ReadWhole(name, path, state->size);
}

Result<FileStreamConnector::Batches> FileStreamConnector::ReadWhole(const std::string& name,
                                                                     const std::string& path,
                                                                     int64_t size) {
  const FileFormat format = file_internal::FormatOf(name);
  if (format == FileFormat::kJson) {
    RILL_ASSIGN_OR_RAISE(std::string data, ReadRange(path, 0, size));
    JsonInputPosition where;
    where.prefix = "file " + name + ", ";
    DecodeResult decoded;
    {
      std::lock_guard<std::mutex> lock(mu_);
      RILL_ASSIGN_OR_RAISE(decoded, decoder_->Decode(data, where));
      counters_.received_records += decoded.records;
      counters_.unknown_fields += decoded.unknown_fields;
    }
    AddRejects(std::move(decoded.rejects));
    if (decoded.batch) return Batches{decoded.batch};
    return Batches{};
  }
  std::shared_ptr<arrow::Schema> schema;
  {
    std::lock_guard<std::mutex> lock(mu_);
    schema = explicit_schema_ ? options_.decode.schema : target_schema_;
  }
  RILL_ASSIGN_OR_RAISE(auto batches, file_internal::ReadBatches(path, format, schema));
  int64_t rows = 0;
  for (auto& b : batches) {
    rows += b->num_rows();
    // op_column: the table reads the renamed column's operation names.
    const std::string& op = options_.decode.op_column;
    const int at = op.empty() ? -1 : b->schema()->GetFieldIndex(op);
    if (at >= 0) {
      RILL_ASSIGN_OR_RAISE(
          b, b->SetColumn(at, b->schema()->field(at)->WithName(json_internal::kOpColumn), b->column(at)));
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    counters_.received_records += rows;
  }
  return batches;
}

Result<FileStreamConnector::Batches> FileStreamConnector::ReadTail(const std::string& name,
                                                                    const std::string& path,
                                                                    FileState* state) {
  if (state->size < state->offset) state->offset = 0;  // truncated / replaced: start over
  if (state->size == state->offset) return Batches{};
  RILL_ASSIGN_OR_RAISE(std::string data,
                       ReadRange(path, state->offset, state->size - state->offset));
  // Only complete lines: a line still being written is read next time.
  size_t end = data.rfind('\n');
  if (end == std::string::npos) return Batches{};
  data.resize(end + 1);
  JsonInputPosition where;
  where.prefix = "file " + name + ", ";
  where.base_offset = state->offset;
  // Lines are counted from where this read starts; the byte offset is exact.
  DecodeResult decoded;
  {
    std::lock_guard<std::mutex> lock(mu_);
    RILL_ASSIGN_OR_RAISE(decoded, decoder_->Decode(data, where));
    counters_.received_bytes += static_cast<int64_t>(data.size());
    counters_.received_records += decoded.records;
    counters_.unknown_fields += decoded.unknown_fields;
  }
  state->offset += static_cast<int64_t>(data.size());
  AddRejects(std::move(decoded.rejects));
  if (decoded.batch) return Batches{decoded.batch};
  return Batches{};
}

bool FileStreamConnector::Deliver(const std::string& name, Batches batches,
                                  const FileState& read, bool delete_when_committed) {
  int64_t rows = 0;
  for (const auto& b : batches) rows += b->num_rows();
  // With on_overflow = error, wait for the tick to make room: files are not lost.
  for (;;) {
    {
      std::lock_guard<std::mutex> deliver(deliver_mu_);
      // TryPush: a file waiting for room is not refused; one larger than the
      // whole buffer is taken when the buffer is empty (or it would wait forever).
      Status st = batches.empty() ? Status::OK()
                                  : buffer_.TryPush(batches, /*oversize_when_empty=*/true);
      if (!st.IsCapacityError()) {
        std::lock_guard<std::mutex> lock(mu_);
        counters_.parsed_records += rows;
        FileState& s = files_[name];
        s.done = read.done;
        s.offset = read.offset;
        unpolled_[name] = s;
        if (delete_when_committed) to_delete_.insert(name);
        return true;
      }
    }
    if (stop_) return false;
    if (running_.load()) ApplyPendingCommit();  // the tick's commits go on while we wait
    std::unique_lock<std::mutex> lock(mu_);
    room_cv_.wait_for(lock, std::chrono::milliseconds(options_.poll_interval_ms));
  }
}

void FileStreamConnector::AddRejects(std::vector<RejectedRecord> rejects) {
  std::lock_guard<std::mutex> lock(mu_);
  counters_.rejected_records += static_cast<int64_t>(rejects.size());
  CollectRejects(name(), std::move(rejects), kMaxPendingRejects, &rejects_,
                 &counters_.rejects_overflowed);
}

void FileStreamConnector::RejectFile(const std::string& name, const std::string& path,
                                     const Status& error, bool move_to_failed) {
  RejectedRecord r;
  r.position = "file " + name;
  r.error = error.message();
  auto head = ReadRange(path, 0, options_.decode.max_raw_bytes);
  r.raw = head.ok() ? *head : "";
  struct stat st;
  r.raw_size = ::stat(path.c_str(), &st) == 0 ? st.st_size : 0;
  if (move_to_failed) {
    auto moved = MoveToFailed(name, path);
    r.error += moved.ok() ? " (the file was moved to '" + *moved + "')"
                          : " (the file was kept in place: " + moved.status().message() + ")";
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++counters_.errors;
  }
  AddRejects({std::move(r)});
}

Result<std::string> FileStreamConnector::MoveToFailed(const std::string& name,
                                                      const std::string& path) {
  const std::string folder = options_.watch_path + "/" + kFailedFolder;
  if (::mkdir(folder.c_str(), 0755) != 0 && errno != EEXIST) {
    return Status::IOError("cannot create '", folder, "': ", std::strerror(errno));
  }
  // A name failed before keeps its file: the newer one gets a suffix.
  std::string target = std::string(kFailedFolder) + "/" + name;
  struct stat st;
  for (int i = 1; ::lstat((options_.watch_path + "/" + target).c_str(), &st) == 0; ++i) {
    target = std::string(kFailedFolder) + "/" + name + "." + std::to_string(i);
  }
  if (std::rename(path.c_str(), (options_.watch_path + "/" + target).c_str()) != 0) {
    return Status::IOError("cannot move it to '", target, "': ", std::strerror(errno));
  }
  return target;
}

Result<std::vector<std::shared_ptr<arrow::RecordBatch>>> FileStreamConnector::Poll() {
  std::vector<std::shared_ptr<arrow::RecordBatch>> out;
  {
    std::lock_guard<std::mutex> deliver(deliver_mu_);
    out = buffer_.Drain();
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [name, s] : unpolled_) polled_[name] = s;
    polled_changed_ |= !unpolled_.empty();
    unpolled_.clear();
  }
  room_cv_.notify_all();
  return out;
}

std::vector<RejectedRecord> FileStreamConnector::TakeRejects() {
  std::lock_guard<std::mutex> lock(mu_);
  return std::move(rejects_);
}

void FileStreamConnector::SetTargetSchema(const std::shared_ptr<arrow::Schema>& schema) {
  if (explicit_schema_ || !schema) return;
  std::lock_guard<std::mutex> lock(mu_);
  target_schema_ = schema;
  if (!decoder_->SetSchema(schema).ok()) ++counters_.errors;
}

ConnectorStats FileStreamConnector::stats() const {
  ConnectorStats s = buffer_.stats();
  std::lock_guard<std::mutex> lock(mu_);
  return WithDecodeCounters(s, counters_);
}

std::vector<std::string> FileStreamConnector::processed_files() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  for (const auto& [name, s] : files_) {
    if (s.done || s.offset > 0) out.push_back(name);
  }
  return out;
}

}  // namespace rill
