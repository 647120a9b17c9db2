// Checkpointer: capture at a tick boundary, the writer thread, restore.
#include "rill/engine/checkpoint.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <set>

#include <arrow/table.h>
#include <arrow/type.h>

#include "rill/common/logging.h"
#include "rill/common/thread_priority.h"
#include "rill/connector/connector.h"
#include "rill/engine/checkpoint_internal.h"
#include "rill/engine/engine.h"

namespace rill {

using checkpoint_internal::Capture;
using checkpoint_internal::ConnectorEntry;
using checkpoint_internal::TableEntry;

Result<CheckpointFormat> ParseCheckpointFormat(std::string_view text) {
  if (text == "parquet") return CheckpointFormat::kParquet;
  if (text == "arrow" || text == "ipc" || text == "feather") return CheckpointFormat::kArrowIpc;
  return Status::Invalid("Unknown checkpoint format '", text,
                         "': expected 'parquet' or 'arrow' (Arrow IPC)");
}

const char* CheckpointFormatName(CheckpointFormat format) {
  return format == CheckpointFormat::kParquet ? "parquet" : "arrow";
}

namespace {

Status MakeDirs(const std::string& dir) {
  std::string path;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = dir.find('/', pos + 1);
    path = dir.substr(0, pos);
    if (path.empty()) continue;
    if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
      return Status::IOError("checkpoint: cannot create directory '", path,
                             "': ", std::strerror(errno));
    }
  }
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return Status::IOError("checkpoint: '", dir, "' is not a directory");
  }
  return Status::OK();
}

}  // namespace

Result<std::unique_ptr<Checkpointer>> Checkpointer::Make(Engine* engine,
                                                         CheckpointOptions options) {
  if (!engine) return Status::Invalid("Checkpointer: null engine");
  if (options.dir.empty()) return Status::Invalid("Checkpointer: empty checkpoint_dir");
  if (!(options.interval_seconds > 0) || !std::isfinite(options.interval_seconds)) {
    return Status::Invalid("Checkpointer: checkpoint_interval_seconds must be > 0, got ",
                           options.interval_seconds);
  }
  if (options.keep < 1) {
    return Status::Invalid("Checkpointer: keep must be >= 1, got ", options.keep);
  }
  while (options.dir.size() > 1 && options.dir.back() == '/') options.dir.pop_back();
  RILL_RETURN_NOT_OK(MakeDirs(options.dir));
  RILL_RETURN_NOT_OK(checkpoint_internal::RemoveTemporaries(options.dir));
  RILL_ASSIGN_OR_RAISE(auto ids, checkpoint_internal::ListIds(options.dir));
  const uint64_t next = ids.empty() ? 1 : ids.back() + 1;
  return std::unique_ptr<Checkpointer>(new Checkpointer(engine, std::move(options), next));
}

Checkpointer::Checkpointer(Engine* engine, CheckpointOptions options, uint64_t next_id)
    : engine_(engine), options_(std::move(options)), next_id_(next_id) {
  // From now on sources are committed only to what a complete checkpoint holds.
  engine_->SetCommitsFollowCheckpoints(true);
  // Incremental views' state, so that a restore does not rebuild them.
  sections_["task_states"] = Section{[engine] { return engine->SaveTaskStates(); },
                                     [engine](std::string_view text) {
                                       return engine->RestoreTaskStates(text);
                                     }};
}

Checkpointer::~Checkpointer() {
  Stop();
  engine_->SetCommitsFollowCheckpoints(false);
}

Status Checkpointer::Start() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (started_) return Status::OK();
    started_ = true;
    stopping_ = false;
    last_capture_ = engine_->Now();
  }
  writer_ = std::thread([this] { WriterLoop(); });
  tick_hook_ = engine_->AddTickEndHook([this](double now) { OnTickEnd(now); });
  return Status::OK();
}

void Checkpointer::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!started_) return;
  }
  // After this returns no tick calls OnTickEnd: RemoveTickEndHook waits for a
  // tick already running it.
  engine_->RemoveTickEndHook(tick_hook_);
  (void)engine_->AtTickBoundary([] { return Status::OK(); });
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (writer_.joinable()) writer_.join();
  std::lock_guard<std::mutex> lock(mu_);
  started_ = false;
}

bool Checkpointer::started() const {
  std::lock_guard<std::mutex> lock(mu_);
  return started_;
}

bool Checkpointer::IsDue(double now) const {
  std::lock_guard<std::mutex> lock(mu_);
  return now - last_capture_ >= options_.interval_seconds;
}

double Checkpointer::last_checkpoint_time() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_capture_;
}

Result<std::unique_ptr<Capture>> Checkpointer::CaptureLocked(double now) {
  auto c = std::make_unique<Capture>();
  c->created_at = now;
  for (const auto& name : engine_->TableNames()) {
    auto table = engine_->GetTable(name);
    if (!table.ok()) continue;  // dropped meanwhile
    const LiveTable& t = **table;
    TableEntry e;
    e.name = name;
    auto fmt = options_.table_formats.find(name);
    e.format = fmt != options_.table_formats.end() ? fmt->second : options_.format;
    e.file = checkpoint_internal::TableFileName(name, e.format);
    e.primary_key = t.primary_key();
    e.mode = t.mode();
    e.retention = t.retention();
    e.pinned = t.snapshot();  // immutable: the writer reads it while ticks go on
    e.rows = e.pinned->num_rows();
    e.version = e.pinned->version();
    c->tables.push_back(std::move(e));
  }
  for (const auto& connector : engine_->Connectors()) {
    RILL_ASSIGN_OR_RAISE(std::string position, connector->SavePosition());
    if (position.empty()) continue;
    c->connectors.push_back({connector->name(), connector->target_table(), std::move(position)});
  }
  std::map<std::string, Section> sections;
  {
    std::lock_guard<std::mutex> lock(mu_);
    sections = sections_;
    c->id = next_id_++;
  }
  for (const auto& [name, section] : sections) {
    RILL_ASSIGN_OR_RAISE(c->sections[name], section.save());
  }
  std::map<std::string, uint64_t> versions;
  for (const auto& t : c->tables) versions[t.name] = t.version;
  for (const auto& [name, participant] : engine_->CheckpointParticipants()) {
    RILL_ASSIGN_OR_RAISE(CheckpointFileWriter files, participant->Capture(c->id, versions));
    if (files) c->participant_files.emplace_back(name, std::move(files));
  }
  return c;
}

namespace {

std::vector<CheckpointedPosition> PositionsOf(
    const std::vector<ConnectorEntry>& entries,
    const std::map<std::string, std::shared_ptr<Connector>>& connectors) {
  std::vector<CheckpointedPosition> out;
  for (const auto& e : entries) {
    CheckpointedPosition p;
    p.connector = e.name;
    p.target_table = e.target_table;
    p.position = e.position;
    p.offsets = checkpoint_internal::KafkaShapedOffsets(e.position);
    auto it = connectors.find(e.name);
    if (it != connectors.end()) p.group = it->second->source_group();
    out.push_back(std::move(p));
  }
  return out;
}

std::map<std::string, std::shared_ptr<Connector>> ConnectorsByName(Engine& engine) {
  std::map<std::string, std::shared_ptr<Connector>> out;
  for (auto& c : engine.Connectors()) out[c->name()] = c;
  return out;
}

}  // namespace

void Checkpointer::NotifyComplete(const Capture& capture, const CheckpointInfo& info) {
  auto participants = engine_->CheckpointParticipants();
  if (participants.empty()) return;
  CompletedCheckpoint done;
  done.id = capture.id;
  done.path = info.path;
  done.created_at = capture.created_at;
  for (const auto& t : capture.tables) done.table_versions[t.name] = t.version;
  done.positions = PositionsOf(capture.connectors, ConnectorsByName(*engine_));
  for (const auto& [name, participant] : participants) participant->OnComplete(done);
}

void Checkpointer::OnTickEnd(double now) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || now - last_capture_ < options_.interval_seconds) return;
    if (writing_ || pending_) {
      ++stats_.skipped_busy;  // never queue behind a slow disk: retry next tick
      return;
    }
    last_capture_ = now;
  }
  auto capture = CaptureLocked(now);
  if (!capture.ok()) {
    uint64_t id;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.failed;
      stats_.last_error = capture.status().ToString();
      writer_error_ = capture.status();
      id = next_id_;
    }
    engine_->RecordCheckpointFailure(id, capture.status());  // no lock of ours held
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  pending_ = std::move(*capture);
  cv_.notify_all();
}

void Checkpointer::WriterLoop() {
  // A background job: on a busy machine the tick thread goes first.
  LowerThisThreadPriority();
  for (;;) {
    std::unique_ptr<Capture> capture;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || pending_ != nullptr; });
      if (!pending_) return;  // stopping with nothing left to write
      capture = std::move(pending_);
      writing_ = true;
    }
    auto written = Write(*capture);
    capture.reset();  // unpin the versions
    std::lock_guard<std::mutex> lock(mu_);
    writing_ = false;
    if (!written.ok()) writer_error_ = written.status();
    cv_.notify_all();
  }
}

Result<CheckpointInfo> Checkpointer::Write(const Capture& capture) {
  Result<CheckpointInfo> written;
  {
    std::lock_guard<std::mutex> one_at_a_time(write_mu_);
    written = checkpoint_internal::WriteCheckpoint(capture, options_);
    if (written.ok()) {
      CommitPositions(capture);  // sources commit what it holds
      NotifyComplete(capture, *written);  // then the sinks commit theirs
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (written.ok()) {
      ++stats_.written;
      stats_.last_write_seconds = written->write_seconds;
      stats_.last = *written;
    } else {
      ++stats_.failed;
      stats_.last_error = written.status().ToString();
    }
  }
  // A failed write (disk full, read-only directory) left the earlier
  // checkpoints as they were and removed its own temporary directory; the
  // engine counts it and records an error alert (it logs the event too).
  if (!written.ok()) engine_->RecordCheckpointFailure(capture.id, written.status());
  return written;
}

void Checkpointer::CommitPositions(const Capture& capture) {
  std::map<std::string, std::shared_ptr<Connector>> connectors;
  for (auto& c : engine_->Connectors()) connectors[c->name()] = c;
  for (const auto& e : capture.connectors) {
    auto it = connectors.find(e.name);
    if (it != connectors.end()) it->second->CommitCheckpointed(e.position);
  }
}

Result<CheckpointInfo> Checkpointer::Save() {
  std::unique_ptr<Capture> capture;
  RILL_RETURN_NOT_OK(engine_->AtTickBoundary([&]() -> Status {
    const double now = engine_->Now();
    RILL_ASSIGN_OR_RAISE(capture, CaptureLocked(now));
    std::lock_guard<std::mutex> lock(mu_);
    last_capture_ = now;
    return Status::OK();
  }));
  return Write(*capture);
}

Status Checkpointer::Flush() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return !writing_ && !pending_; });
  Status st = writer_error_;
  writer_error_ = Status::OK();
  return st;
}

void Checkpointer::AddSection(const std::string& name, SaveSection save,
                              RestoreSection restore) {
  std::lock_guard<std::mutex> lock(mu_);
  sections_[name] = Section{std::move(save), std::move(restore)};
}

CheckpointStats Checkpointer::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

Result<std::vector<CheckpointInfo>> Checkpointer::List() const {
  RILL_ASSIGN_OR_RAISE(auto ids, checkpoint_internal::ListIds(options_.dir));
  std::vector<CheckpointInfo> out;
  for (uint64_t id : ids) {
    auto manifest = checkpoint_internal::ReadManifest(options_.dir, id);
    if (!manifest.ok()) continue;
    CheckpointInfo info;
    info.id = id;
    info.path = options_.dir + "/" + checkpoint_internal::CheckpointDirName(id);
    info.created_at = manifest->created_at;
    for (const auto& t : manifest->tables) {
      info.tables.push_back(t.name);
      info.rows += t.rows;
    }
    out.push_back(std::move(info));
  }
  return out;
}

Result<std::optional<std::string>> Checkpointer::ReadSection(const std::string& name) const {
  RILL_ASSIGN_OR_RAISE(auto ids, checkpoint_internal::ListIds(options_.dir));
  // The checkpoint Restore would pick: the newest whose manifest reads.
  for (auto it = ids.rbegin(); it != ids.rend(); ++it) {
    auto loaded = checkpoint_internal::ReadManifest(options_.dir, *it);
    if (!loaded.ok()) continue;
    auto section = loaded->sections.find(name);
    if (section == loaded->sections.end()) return std::optional<std::string>();
    return std::optional<std::string>(section->second);
  }
  return std::optional<std::string>();
}

Result<std::optional<CheckpointInfo>> Checkpointer::Restore() {
  RILL_ASSIGN_OR_RAISE(auto ids, checkpoint_internal::ListIds(options_.dir));
  Status first_error;
  // Newest first; an unreadable one (a damaged disk) falls back to the one before.
  for (auto it = ids.rbegin(); it != ids.rend(); ++it) {
    auto loaded = checkpoint_internal::ReadManifest(options_.dir, *it);
    Status st = loaded.status();
    if (st.ok()) st = checkpoint_internal::ReadTables(options_.dir, &*loaded);
    if (!st.ok()) {
      Logger("checkpoint")->error("cannot restore checkpoint {}: {}", *it, st.ToString());
      if (first_error.ok()) first_error = st;
      continue;
    }
    RILL_RETURN_NOT_OK(engine_->AtTickBoundary([&] { return Apply(*loaded); }));
    {
      std::lock_guard<std::mutex> lock(mu_);
      next_id_ = std::max(next_id_, ids.back() + 1);
    }
    CheckpointInfo info;
    info.id = loaded->id;
    info.path = options_.dir + "/" + checkpoint_internal::CheckpointDirName(loaded->id);
    info.created_at = loaded->created_at;
    for (const auto& t : loaded->tables) {
      info.tables.push_back(t.name);
      info.rows += t.rows;
    }
    return std::optional<CheckpointInfo>(std::move(info));
  }
  if (!first_error.ok()) return first_error;
  return std::optional<CheckpointInfo>();
}

Status Checkpointer::Apply(const Capture& loaded) {
  const double now = engine_->Now();
  RestoredCheckpoint restored;
  restored.id = loaded.id;
  restored.path = options_.dir + "/" + checkpoint_internal::CheckpointDirName(loaded.id);
  restored.created_at = loaded.created_at;
  // Tables whose source rebuilds them otherwise (an application's source into
  // a table not held per partition) start empty.
  std::set<std::string> skipped;
  for (const auto& c : engine_->Connectors()) {
    if (!c->RestoresTableFromCheckpoint()) skipped.insert(c->target_table());
  }
  for (const auto& t : loaded.tables) {
    if (skipped.count(t.name)) {
      Logger("checkpoint")->info(
          "checkpoint {}: table '{}' starts empty (its application's source reads on from the "
          "group's committed offsets)",
          loaded.id, t.name);
      continue;
    }
    auto table = engine_->GetTable(t.name);
    if (!table.ok()) {
      auto user_schema = WithoutSystemColumns(t.data->schema());
      TableOptions options;
      options.primary_key = t.primary_key;
      options.mode = t.mode;
      options.retention = t.retention;
      options.auto_compact_chunks = engine_->options().auto_compact_chunks;
      if (engine_->TableDeclaration(t.name)) {
        table = engine_->TableForWrite(t.name, user_schema);
      } else {
        table = engine_->RegisterTable(t.name, user_schema, options);
      }
    }
    if (!table.ok()) {
      return Status::Invalid("checkpoint: cannot create table '", t.name,
                             "': ", table.status().message());
    }
    auto replaced = (*table)->ReplaceState(t.data, now, t.prepared_keys);
    if (!replaced.ok()) {
      return Status::Invalid("checkpoint: cannot restore table '", t.name,
                             "': ", replaced.status().message());
    }
    restored.table_versions[t.name] = t.version;
    restored.restored_versions[t.name] = (*table)->snapshot()->version();
  }
  std::map<std::string, std::shared_ptr<Connector>> connectors;
  for (auto& c : engine_->Connectors()) connectors[c->name()] = c;
  for (const auto& e : loaded.connectors) {
    auto it = connectors.find(e.name);
    if (it == connectors.end()) {
      Logger("checkpoint")->warn(
          "checkpoint {}: no connector named '{}' to resume (add connectors before restoring)",
          loaded.id, e.name);
      continue;
    }
    RILL_RETURN_NOT_OK(it->second->RestorePosition(e.position));
  }
  std::map<std::string, Section> sections;
  {
    std::lock_guard<std::mutex> lock(mu_);
    sections = sections_;
  }
  for (const auto& [name, text] : loaded.sections) {
    auto it = sections.find(name);
    if (it != sections.end() && it->second.restore) {
      RILL_RETURN_NOT_OK(it->second.restore(text));
    }
  }
  restored.positions = PositionsOf(loaded.connectors, connectors);
  engine_->SetRestoredCheckpoint(restored);
  for (const auto& [name, participant] : engine_->CheckpointParticipants()) {
    Status st = participant->Restore(restored);
    if (!st.ok()) {
      return Status::Invalid("checkpoint: '", name, "' cannot restore: ", st.message());
    }
  }
  return Status::OK();
}

}  // namespace rill
