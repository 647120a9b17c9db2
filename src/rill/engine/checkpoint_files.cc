// Checkpoints on disk: writing one atomically (temporary directory, fsync,
// rename), the manifest, reading one back, listing and pruning.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <future>

#include <arrow/io/file.h>
#include <arrow/ipc/reader.h>
#include <arrow/ipc/writer.h>
#include <arrow/record_batch.h>
#include <arrow/table.h>
#include <arrow/type.h>
#include <parquet/arrow/reader.h>
#include <parquet/arrow/writer.h>
#include <parquet/properties.h>
#include <simdjson.h>

#include "rill/common/arrow_init.h"
#include "rill/common/json_text.h"
#include "rill/common/logging.h"
#include "rill/engine/checkpoint_internal.h"
#include "rill/table/schema.h"

namespace rill::checkpoint_internal {

namespace {

constexpr char kManifest[] = "manifest.json";
constexpr char kDirPrefix[] = "ckpt-";
constexpr char kTmpPrefix[] = ".tmp-";
constexpr int kManifestVersion = 1;

Status Errno(const std::string& what, const std::string& path) {
  return Status::IOError("checkpoint: ", what, " '", path, "': ", std::strerror(errno));
}

Status FsyncPath(const std::string& path, bool directory) {
  int fd = ::open(path.c_str(), (directory ? O_DIRECTORY : 0) | O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Errno("cannot open for fsync", path);
  int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) return Errno("fsync failed on", path);
  return Status::OK();
}

/// Open `path` for writing as an Arrow stream; `*fd` stays usable for fsync
/// until the stream is closed.
Result<std::shared_ptr<arrow::io::FileOutputStream>> OpenOutput(const std::string& path,
                                                               int* fd) {
  *fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (*fd < 0) return Errno("cannot create", path);
  auto stream = arrow::io::FileOutputStream::Open(*fd);
  if (!stream.ok()) ::close(*fd);
  return stream;
}

// Write the live rows of every chunk of `version` through a freshly opened
// writer (Parquet or Arrow IPC), then close it; the first error wins.
template <typename WriterPtr, typename Version>
Status WriteLiveChunks(arrow::Result<WriterPtr> writer, const Version& version) {
  if (!writer.ok()) return writer.status();
  Status st;
  for (const auto& chunk : version.chunks()) {
    if (chunk.live_rows == 0) continue;
    auto batch = TableVersion::LiveBatch(chunk);
    st = batch.ok() ? (*writer)->WriteRecordBatch(**batch) : batch.status();
    if (!st.ok()) break;
  }
  st &= (*writer)->Close();
  return st;
}

Status WriteTableFile(const TableEntry& t, const std::string& path, bool sync,
                      int64_t* bytes) {
  int fd = -1;
  RILL_ASSIGN_OR_RAISE(auto out, OpenOutput(path, &fd));
  const auto& schema = t.pinned->schema();
  Status st;
  if (t.format == CheckpointFormat::kParquet) {
    auto props = parquet::WriterProperties::Builder().build();
    auto arrow_props = parquet::ArrowWriterProperties::Builder().store_schema()->build();
    st = WriteLiveChunks(parquet::arrow::FileWriter::Open(*schema, arrow::default_memory_pool(),
                                                          out, props, arrow_props),
                         *t.pinned);
  } else {
    st = WriteLiveChunks(arrow::ipc::MakeFileWriter(out, schema), *t.pinned);
  }
  if (st.ok()) {
    auto pos = out->Tell();
    if (pos.ok()) *bytes = *pos;
    if (sync && ::fsync(fd) != 0) st = Errno("fsync failed on", path);
  }
  st &= out->Close();  // closes fd
  if (!st.ok()) {
    // Arrow keeps the errno ("No space left on device") in the detail, not the message.
    return Status::IOError("checkpoint: writing table '", t.name, "' to '", path,
                           "': ", st.message(),
                           st.detail() ? " (" + st.detail()->ToString() + ")" : "");
  }
  return Status::OK();
}

Status WriteTextFile(const std::string& path, const std::string& text, bool sync) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Errno("cannot create", path);
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ::close(fd);
      return Errno("cannot write", path);
    }
    done += static_cast<size_t>(n);
  }
  if (sync && ::fsync(fd) != 0) {
    ::close(fd);
    return Errno("fsync failed on", path);
  }
  ::close(fd);
  return Status::OK();
}

void AppendStringArray(std::string* out, const std::vector<std::string>& values) {
  *out += '[';
  for (size_t i = 0; i < values.size(); ++i) {
    if (i) *out += ',';
    AppendJsonString(out, values[i]);
  }
  *out += ']';
}

std::string ManifestJson(const Capture& c) {
  std::string j = "{\"rill_checkpoint\":" + std::to_string(kManifestVersion) +
                  ",\"id\":" + std::to_string(c.id) + ",\"created_at\":";
  AppendJsonNumber(&j, c.created_at);
  j += ",\n\"tables\":[";
  for (size_t i = 0; i < c.tables.size(); ++i) {
    const TableEntry& t = c.tables[i];
    j += i ? ",\n" : "\n";
    j += "{\"name\":";
    AppendJsonString(&j, t.name);
    j += ",\"file\":";
    AppendJsonString(&j, t.file);
    j += ",\"format\":";
    AppendJsonString(&j, CheckpointFormatName(t.format));
    j += ",\"rows\":" + std::to_string(t.rows) + ",\"version\":" + std::to_string(t.version);
    j += ",\"primary_key\":";
    AppendStringArray(&j, t.primary_key);
    j += ",\"mode\":";
    AppendJsonString(&j, TableModeName(t.mode));
    j += ",\"retention\":";
    if (!t.retention) {
      j += "null";
    } else {
      j += "{\"max_rows\":" +
           (t.retention->max_rows ? std::to_string(*t.retention->max_rows) : "null");
      j += ",\"max_age_seconds\":";
      if (t.retention->max_age_seconds) {
        AppendJsonNumber(&j, *t.retention->max_age_seconds);
      } else {
        j += "null";
      }
      j += ",\"time_column\":";
      AppendJsonString(&j, t.retention->time_column);
      j += '}';
    }
    j += '}';
  }
  j += "],\n\"connectors\":[";
  for (size_t i = 0; i < c.connectors.size(); ++i) {
    const ConnectorEntry& e = c.connectors[i];
    j += i ? ",\n" : "\n";
    j += "{\"name\":";
    AppendJsonString(&j, e.name);
    j += ",\"target_table\":";
    AppendJsonString(&j, e.target_table);
    j += ",\"position\":" + e.position + '}';  // a JSON document already
  }
  j += "],\n\"sections\":{";
  bool first = true;
  for (const auto& [name, text] : c.sections) {
    j += first ? "\n" : ",\n";
    first = false;
    AppendJsonString(&j, name);
    j += ':';
    AppendJsonString(&j, text);
  }
  j += "}}\n";
  return j;
}

/// Point dir/<link> at `target` by renaming a fresh symlink over it.
Status ReplaceSymlink(const std::string& dir, const std::string& link, const std::string& target) {
  std::string tmp = dir + "/" + kTmpPrefix + "link-" + link;
  ::unlink(tmp.c_str());
  if (::symlink(target.c_str(), tmp.c_str()) != 0) return Errno("cannot create symlink", tmp);
  std::string path = dir + "/" + link;
  if (::rename(tmp.c_str(), path.c_str()) != 0) return Errno("cannot rename symlink to", path);
  return Status::OK();
}

Status Prune(const std::string& dir, int keep) {
  RILL_ASSIGN_OR_RAISE(auto ids, ListIds(dir));
  // Incomplete ckpt- directories cannot exist (rename is the last step), so
  // everything but the newest `keep` complete ones goes.
  // A checkpoint is first renamed out of the ckpt- namespace (atomic), then
  // deleted: a crash mid-delete must not leave a manifest without its files.
  for (size_t i = 0; i + static_cast<size_t>(keep) < ids.size(); ++i) {
    const std::string from = dir + "/" + CheckpointDirName(ids[i]);
    const std::string doomed = dir + "/" + kTmpPrefix + "old-" + CheckpointDirName(ids[i]);
    if (::rename(from.c_str(), doomed.c_str()) != 0) return Errno("cannot rename", from);
    RILL_RETURN_NOT_OK(RemoveTree(doomed));
  }
  return Status::OK();
}

Result<std::string> ReadWholeFile(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return Errno("cannot open", path);
  std::string data;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) data.append(buf, n);
  const bool failed = std::ferror(f);
  std::fclose(f);
  if (failed) return Errno("cannot read", path);
  return data;
}

/// Leaf column indices of the fields of `schema` (all flat) named `names`;
/// empty when one is missing.
std::vector<int> FieldIndices(const arrow::Schema& schema, const std::vector<std::string>& names) {
  std::vector<int> out;
  for (const auto& name : names) {
    const int i = schema.GetFieldIndex(name);
    if (i < 0) return {};
    out.push_back(i);
  }
  return out;
}

// A keyed snapshot table: its key columns first; then, while another thread
// builds their key index (LiveTable::PrepareKeys, the larger part of a
// restore's CPU time after the read), the other columns. A failure to prepare
// leaves *prepared null: ReplaceState builds the index itself (and reports).
Result<std::shared_ptr<arrow::Table>> ReadParquet(parquet::arrow::FileReader* reader,
                                                  const TableEntry& t,
                                                  std::shared_ptr<PreparedKeys>* prepared) {
  std::shared_ptr<arrow::Schema> schema;
  RILL_RETURN_NOT_OK(reader->GetSchema(&schema));
  bool flat = true;
  for (const auto& f : schema->fields()) flat = flat && f->type()->num_fields() == 0;
  const std::vector<int> key_columns = FieldIndices(*schema, t.primary_key);
  if (t.mode != TableMode::kSnapshot || key_columns.empty() || !flat) {
    return reader->ReadTable();
  }
  RILL_ASSIGN_OR_RAISE(auto keys, reader->ReadTable(key_columns));
  const auto user_schema = WithoutSystemColumns(schema);
  auto index = std::async(std::launch::async, [&] {
    return LiveTable::PrepareKeys(*user_schema, t.primary_key, *keys);
  });  // the future's destructor waits, also on an early return
  std::vector<int> other_columns;
  for (int i = 0; i < schema->num_fields(); ++i) {
    if (std::find(key_columns.begin(), key_columns.end(), i) == key_columns.end()) {
      other_columns.push_back(i);
    }
  }
  RILL_ASSIGN_OR_RAISE(auto others, reader->ReadTable(other_columns));
  std::vector<std::shared_ptr<arrow::ChunkedArray>> columns;
  for (const auto& field : schema->fields()) {
    auto column = keys->GetColumnByName(field->name());
    columns.push_back(column ? column : others->GetColumnByName(field->name()));
    if (!columns.back()) return Status::IOError("column '", field->name(), "' was not read");
  }
  auto built = index.get();
  if (built.ok()) *prepared = std::move(*built);
  return arrow::Table::Make(schema, std::move(columns), keys->num_rows());
}

Result<std::shared_ptr<arrow::Table>> ReadTableFile(const std::string& path, const TableEntry& t,
                                                    std::shared_ptr<PreparedKeys>* prepared) {
  RILL_ASSIGN_OR_RAISE(auto file, arrow::io::ReadableFile::Open(path, TableMemoryPool()));
  if (t.format == CheckpointFormat::kParquet) {
    RILL_ASSIGN_OR_RAISE(auto reader, parquet::arrow::OpenFile(file, TableMemoryPool()));
    reader->set_use_threads(true);
    return ReadParquet(reader.get(), t, prepared);
  }
  RILL_ASSIGN_OR_RAISE(auto reader, arrow::ipc::RecordBatchFileReader::Open(file));
  std::vector<std::shared_ptr<arrow::RecordBatch>> batches;
  for (int i = 0; i < reader->num_record_batches(); ++i) {
    RILL_ASSIGN_OR_RAISE(auto batch, reader->ReadRecordBatch(i));
    batches.push_back(std::move(batch));
  }
  return arrow::Table::FromRecordBatches(reader->schema(), std::move(batches));
}

Status ParseTable(simdjson::dom::element t, TableEntry* e) {
  std::string_view name, file, format, mode;
  simdjson::dom::array key;
  if (t["name"].get_string().get(name) || t["file"].get_string().get(file) ||
      t["format"].get_string().get(format) || t["mode"].get_string().get(mode) ||
      t["primary_key"].get_array().get(key) || t["rows"].get_int64().get(e->rows)) {
    return Status::Invalid("a table entry lacks name, file, format, mode, primary_key or rows");
  }
  e->name = std::string(name);
  e->file = std::string(file);
  if (e->file.find('/') != std::string::npos || e->file.empty() || e->file[0] == '.') {
    return Status::Invalid("table file name '", e->file, "' is not a plain file name");
  }
  RILL_ASSIGN_OR_RAISE(e->format, ParseCheckpointFormat(format));
  RILL_ASSIGN_OR_RAISE(e->mode, ParseTableMode(mode));
  for (simdjson::dom::element k : key) {
    std::string_view column;
    if (k.get_string().get(column)) return Status::Invalid("primary_key holds a non-string");
    e->primary_key.emplace_back(column);
  }
  uint64_t version = 0;
  if (!t["version"].get_uint64().get(version)) e->version = version;
  simdjson::dom::object retention;
  if (!t["retention"].get_object().get(retention)) {
    RetentionPolicy policy;
    int64_t max_rows = 0;
    double max_age = 0;
    std::string_view time_column;
    if (!retention["max_rows"].get_int64().get(max_rows)) policy.max_rows = max_rows;
    if (!retention["max_age_seconds"].get_double().get(max_age)) policy.max_age_seconds = max_age;
    if (!retention["time_column"].get_string().get(time_column)) {
      policy.time_column = std::string(time_column);
    }
    e->retention = policy;
  }
  return Status::OK();
}

}  // namespace

std::string CheckpointDirName(uint64_t id) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%s%08llu", kDirPrefix, static_cast<unsigned long long>(id));
  return buf;
}

std::string TableFileName(const std::string& table, CheckpointFormat format) {
  std::string out;
  for (size_t i = 0; i < table.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(table[i]);
    if (std::isalnum(c) || c == '_' || c == '-' || (c == '.' && i > 0)) {
      out.push_back(static_cast<char>(c));
    } else {
      char buf[4];
      std::snprintf(buf, sizeof(buf), "%%%02X", c);
      out += buf;
    }
  }
  return out + (format == CheckpointFormat::kParquet ? ".parquet" : ".arrow");
}

Status RemoveTree(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return Status::OK();
  if (S_ISDIR(st.st_mode)) {
    DIR* d = ::opendir(path.c_str());
    if (!d) return Errno("cannot list", path);
    std::vector<std::string> names;
    while (dirent* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n != "." && n != "..") names.push_back(n);
    }
    ::closedir(d);
    for (const auto& n : names) RILL_RETURN_NOT_OK(RemoveTree(path + "/" + n));
    if (::rmdir(path.c_str()) != 0) return Errno("cannot remove", path);
    return Status::OK();
  }
  if (::unlink(path.c_str()) != 0) return Errno("cannot remove", path);
  return Status::OK();
}

Result<std::vector<uint64_t>> ListIds(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return Errno("cannot list", dir);
  std::vector<uint64_t> ids;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n.rfind(kDirPrefix, 0) != 0) continue;
    char* end = nullptr;
    unsigned long long id = std::strtoull(n.c_str() + std::strlen(kDirPrefix), &end, 10);
    if (end == n.c_str() + std::strlen(kDirPrefix) || *end != '\0') continue;
    struct stat st;
    if (::stat((dir + "/" + n + "/" + kManifest).c_str(), &st) != 0) continue;
    ids.push_back(id);
  }
  ::closedir(d);
  std::sort(ids.begin(), ids.end());
  return ids;
}

Status RemoveTemporaries(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return Errno("cannot list", dir);
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n.rfind(kTmpPrefix, 0) == 0) names.push_back(n);
  }
  ::closedir(d);
  for (const auto& n : names) RILL_RETURN_NOT_OK(RemoveTree(dir + "/" + n));
  return Status::OK();
}

Result<CheckpointInfo> WriteCheckpoint(const Capture& capture, const CheckpointOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string& dir = options.dir;
  const std::string name = CheckpointDirName(capture.id);
  const std::string tmp = dir + "/" + kTmpPrefix + name;
  RILL_RETURN_NOT_OK(RemoveTree(tmp));
  if (::mkdir(tmp.c_str(), 0755) != 0) return Errno("cannot create", tmp);
  CheckpointInfo info;
  info.id = capture.id;
  info.created_at = capture.created_at;
  Status st;
  for (const auto& t : capture.tables) {
    int64_t bytes = 0;
    st = WriteTableFile(t, tmp + "/" + t.file, options.sync, &bytes);
    if (!st.ok()) break;
    info.tables.push_back(t.name);
    info.rows += t.rows;
    info.bytes += bytes;
  }
  for (const auto& [participant, write] : capture.participant_files) {
    if (!st.ok()) break;
    auto bytes = write(tmp, options.sync);
    if (!bytes.ok()) {
      st = Status::IOError("checkpoint: the files of '", participant,
                           "' cannot be written: ", bytes.status().message());
      break;
    }
    info.bytes += *bytes;
  }
  // The manifest last: a ckpt- directory with a manifest is complete.
  if (st.ok()) st = WriteTextFile(tmp + "/" + kManifest, ManifestJson(capture), options.sync);
  if (st.ok() && options.sync) st = FsyncPath(tmp, /*directory=*/true);
  const std::string final_path = dir + "/" + name;
  if (st.ok() && ::rename(tmp.c_str(), final_path.c_str()) != 0) {
    st = Errno("cannot rename into place", final_path);
  }
  if (!st.ok()) {
    (void)RemoveTree(tmp);
    return st;
  }
  if (options.sync) RILL_RETURN_NOT_OK(FsyncPath(dir, /*directory=*/true));
  // From here on the checkpoint is complete and restorable. Pruning goes first
  // (on a full disk it frees the room the next checkpoint needs); the links
  // are conveniences for people and tools that restore does not rely on, so a
  // failure to make them (ENOSPC) is logged, not a failed checkpoint.
  RILL_RETURN_NOT_OK(Prune(dir, options.keep));
  Status links = ReplaceSymlink(dir, "current", name);
  for (const auto& t : capture.tables) {
    if (!links.ok()) break;
    std::string link = dir + "/" + t.file;
    struct stat st_link;
    if (::lstat(link.c_str(), &st_link) != 0 &&
        ::symlink(("current/" + t.file).c_str(), link.c_str()) != 0) {
      links = Errno("cannot create symlink", link);
    }
  }
  if (links.ok() && options.sync) links = FsyncPath(dir, /*directory=*/true);
  if (!links.ok()) {
    Logger("checkpoint")->warn("checkpoint {} is complete, but its links are not: {}",
                               capture.id, links.ToString());
  }
  info.path = final_path;
  info.write_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return info;
}

Result<Capture> ReadManifest(const std::string& dir, uint64_t id) {
  const std::string path = dir + "/" + CheckpointDirName(id) + "/" + kManifest;
  RILL_ASSIGN_OR_RAISE(std::string text, ReadWholeFile(path));
  simdjson::dom::parser parser;
  simdjson::padded_string padded(text);
  simdjson::dom::element doc;
  int64_t version = 0;
  uint64_t stored_id = 0;
  simdjson::dom::array tables, connectors;
  simdjson::dom::object sections;
  auto bad = [&](const std::string& what) {
    return Status::IOError("checkpoint: manifest '", path, "' is unreadable: ", what);
  };
  if (parser.parse(padded).get(doc)) return bad("not JSON");
  if (doc["rill_checkpoint"].get_int64().get(version) || version != kManifestVersion) {
    return bad("unknown manifest version");
  }
  Capture c;
  if (doc["id"].get_uint64().get(stored_id) || doc["created_at"].get_double().get(c.created_at) ||
      doc["tables"].get_array().get(tables) || doc["connectors"].get_array().get(connectors) ||
      doc["sections"].get_object().get(sections)) {
    return bad("missing id, created_at, tables, connectors or sections");
  }
  c.id = stored_id;
  for (simdjson::dom::element t : tables) {
    TableEntry e;
    Status st = ParseTable(t, &e);
    if (!st.ok()) return bad(st.message());
    c.tables.push_back(std::move(e));
  }
  for (simdjson::dom::element x : connectors) {
    std::string_view name, target;
    simdjson::dom::element position;
    if (x["name"].get_string().get(name) || x["target_table"].get_string().get(target) ||
        x["position"].get(position)) {
      return bad("a connector entry lacks name, target_table or position");
    }
    c.connectors.push_back({std::string(name), std::string(target), simdjson::minify(position)});
  }
  for (auto field : sections) {
    std::string_view text;
    if (field.value.get_string().get(text)) return bad("a section is not a string");
    c.sections[std::string(field.key)] = std::string(text);
  }
  return c;
}

Status ReadTables(const std::string& dir, Capture* capture) {
  const std::string base = dir + "/" + CheckpointDirName(capture->id) + "/";
  for (auto& t : capture->tables) {
    auto data = ReadTableFile(base + t.file, t, &t.prepared_keys);
    if (!data.ok()) {
      return Status::IOError("checkpoint: table file '", base + t.file,
                             "' is unreadable: ", data.status().message());
    }
    if ((*data)->num_rows() != t.rows) {
      return Status::IOError("checkpoint: table file '", base + t.file, "' holds ",
                             (*data)->num_rows(), " rows, the manifest says ", t.rows);
    }
    t.data = std::move(*data);
  }
  return Status::OK();
}

std::map<std::string, std::map<int32_t, int64_t>> KafkaShapedOffsets(const std::string& position) {
  std::map<std::string, std::map<int32_t, int64_t>> out;
  if (position.empty()) return out;
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  simdjson::dom::array partitions;
  if (parser.parse(position).get(doc) || doc["partitions"].get_array().get(partitions)) {
    return out;
  }
  for (auto p : partitions) {
    std::string_view topic;
    int64_t partition = 0;
    int64_t offset = 0;
    if (p["topic"].get_string().get(topic) || p["partition"].get_int64().get(partition) ||
        p["offset"].get_int64().get(offset)) {
      return {};  // not Kafka's shape after all
    }
    out[std::string(topic)][static_cast<int32_t>(partition)] = offset;
  }
  return out;
}

}  // namespace rill::checkpoint_internal
