// FileSinkWriter: see file_sink.h for the directory layout and the commit
// protocol. Invariants:
// - Every byte of an uncommitted unit is in a file named ".tmp-*": Commit is
//   the only place that gives a data file its visible name.
// - The commit record names every rename of a commit before the first rename
//   happens, and is durable before it; Open finishes the renames of the last
//   record, so a commit is all or nothing once its record exists.
// - File numbers only grow (the record and the names both carry them), so no
//   visible name is ever produced twice.
#include "rill/sink/file_sink.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <unordered_map>

#include <arrow/api.h>
#include <arrow/compute/api_vector.h>
#include <arrow/compute/cast.h>

#include "rill/sink/file_sink_internal.h"

namespace rill {

namespace fs = std::filesystem;
using file_sink_internal::DataFileName;
using file_sink_internal::FileFormat;
using file_sink_internal::FileSinkFaults;
using file_sink_internal::FormatWriter;

namespace {

using Clock = std::chrono::steady_clock;

Status Errno(const std::string& what, const std::string& path) {
  return Status::IOError("file sink: ", what, " '", path, "': ", std::strerror(errno));
}

Status FsyncPath(const std::string& path, bool directory) {
  int fd = ::open(path.c_str(), (directory ? O_DIRECTORY : 0) | O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Errno("cannot open for fsync", path);
  int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) return Errno("fsync failed on", path);
  return Status::OK();
}

std::string ParentOf(const std::string& rel) {
  size_t slash = rel.rfind('/');
  return slash == std::string::npos ? std::string() : rel.substr(0, slash);
}

/// What the commit record says (file_sink.h).
struct CommitRecord {
  uint64_t version = 0;
  uint64_t epoch = 0;
  uint64_t generation = 0;
  uint64_t next_file = 0;
  std::vector<std::pair<std::string, std::string>> renames;  // tmp -> final (relative)
};

constexpr const char* kRecordHeader = "rill-file-sink-commit 1";

std::string FormatRecord(const CommitRecord& r) {
  std::string out = kRecordHeader;
  out += "\nversion " + std::to_string(r.version);
  out += "\nepoch " + std::to_string(r.epoch);
  out += "\ngeneration " + std::to_string(r.generation);
  out += "\nnext_file " + std::to_string(r.next_file);
  // Partition values are escaped (no control characters), so a tab and a
  // newline delimit the names.
  for (const auto& [tmp, final_name] : r.renames) out += "\nrename " + tmp + "\t" + final_name;
  out += "\nend\n";
  return out;
}

Result<CommitRecord> ParseRecord(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Errno("cannot read the commit record", path);
  CommitRecord r;
  std::string line;
  bool header = false, end = false;
  auto bad = [&] {
    return Status::IOError("file sink: the commit record '", path,
                           "' is damaged (line '", line, "'); remove it to start over");
  };
  while (std::getline(in, line)) {
    if (!header) {
      if (line != kRecordHeader) return bad();
      header = true;
      continue;
    }
    if (line == "end") {
      end = true;
      break;
    }
    size_t space = line.find(' ');
    if (space == std::string::npos) return bad();
    std::string key = line.substr(0, space), value = line.substr(space + 1);
    if (key == "rename") {
      size_t tab = value.find('\t');
      if (tab == std::string::npos) return bad();
      r.renames.emplace_back(value.substr(0, tab), value.substr(tab + 1));
      continue;
    }
    uint64_t number = 0;
    auto [last, ec] = std::from_chars(value.data(), value.data() + value.size(), number);
    if (ec != std::errc() || last != value.data() + value.size()) return bad();
    if (key == "version") r.version = number;
    if (key == "epoch") r.epoch = number;
    if (key == "generation") r.generation = number;
    if (key == "next_file") r.next_file = number;
  }
  if (!header || !end) return bad();
  return r;
}

/// A data file of the open unit.
struct UnitFile {
  std::string tmp_rel;  ///< relative to the sink's directory
  std::string dir_rel;  ///< "" or "k=v/k2=v2"
  uint64_t file_number = 0;
  bool snapshot = false;
  int64_t rows = 0;
  Clock::time_point opened_at;
  std::unique_ptr<FormatWriter> writer;  ///< null once finished
};

/// Rows of one batch that go to one partition directory.
struct PartitionGroup {
  std::string dir_rel;
  std::shared_ptr<arrow::Array> indices;  ///< null: every row of the batch
};

class FileSinkWriter final : public SinkWriter {
 public:
  FileSinkWriter(FileSinkOptions options, FileFormat format, FileSinkFaults faults)
      : options_(std::move(options)), format_(format), faults_(faults) {}

  Status Open(const std::shared_ptr<arrow::Schema>& table_schema,
              const std::vector<std::string>& /*primary_key*/) override {
    Abort();
    opened_ = false;
    RILL_RETURN_NOT_OK(PrepareSchemas(table_schema));
    std::error_code ec;
    fs::create_directories(options_.path, ec);
    if (ec) {
      return Status::IOError("file sink: cannot create the directory '", options_.path,
                             "': ", ec.message());
    }
    RILL_RETURN_NOT_OK(Recover());
    opened_ = true;
    return Status::OK();
  }

  Result<std::optional<SinkProgress>> LoadProgress() override {
    if (!opened_) return Status::Invalid("file sink: LoadProgress before Open");
    return progress_;
  }

  Status Write(const ChangeSet& changes, SinkMode mode) override {
    if (mode == SinkMode::kUpsert) {
      return Status::Invalid("file sink: mode 'upsert' is not supported by files ",
                             "(a file cannot replace a key's earlier row); ",
                             "use mode 'changelog' or 'append'");
    }
    if (!opened_) return Status::Invalid("file sink: Write before Open");
    if (changes.snapshot) {
      // The snapshot replaces what the target held: what this unit wrote
      // before it is superseded and was never visible, so it is dropped.
      DiscardUnitFiles();
      snapshot_version_ = changes.to_version;
      part_from_ = changes.to_version + 1;
    } else if (!part_from_.has_value()) {
      part_from_ = changes.from_version + 1;
    }
    RILL_RETURN_NOT_OK(RollOldFiles());
    writing_snapshot_ = changes.snapshot;
    for (const auto& batch : changes.batches) {
      if (batch->num_rows() == 0) continue;
      RILL_RETURN_NOT_OK(WriteBatch(batch, mode));
    }
    if (changes.snapshot) {
      if (open_.empty() && options_.partition_by.empty() && !HasSnapshotFile()) {
        // An empty table still starts a generation: an empty snapshot file says so.
        RILL_ASSIGN_OR_RAISE(UnitFile * file, OpenFileIn("", mode));
        (void)file;
      }
      RILL_RETURN_NOT_OK(FinishOpenFiles());
      writing_snapshot_ = false;
    }
    last_to_version_ = std::max(last_to_version_, changes.to_version);
    return Status::OK();
  }

  Status Commit(const CommitPoint& point) override {
    if (!opened_) return Status::Invalid("file sink: Commit before Open");
    RILL_RETURN_NOT_OK(FinishOpenFiles());
    const uint64_t to_version = std::max(point.version, last_to_version_);
    CommitRecord record;
    record.version = to_version;
    record.epoch = point.epoch;
    record.generation = snapshot_version_.value_or(generation_);
    record.next_file = next_file_;
    std::set<std::string> dirs;
    for (const UnitFile& f : finished_) {
      DataFileName name;
      name.snapshot = f.snapshot;
      name.from_version = f.snapshot ? *snapshot_version_ : part_from_.value_or(to_version);
      name.to_version = f.snapshot ? *snapshot_version_ : to_version;
      name.file_number = f.file_number;
      name.extension = file_sink_internal::FileExtension(format_);
      std::string final_rel = file_sink_internal::FormatDataFileName(name);
      if (!f.dir_rel.empty()) final_rel = f.dir_rel + "/" + final_rel;
      record.renames.emplace_back(f.tmp_rel, final_rel);
      dirs.insert(f.dir_rel);
    }
    record_renamed_ = false;
    Status recorded = WriteRecord(record);
    if (!recorded.ok() && !record_renamed_) return recorded;
    // The record is in place: the commit is decided, whatever fails from here
    // on. The unit's files are no longer ours to remove; Open finishes them.
    finished_.clear();
    Status st = !recorded.ok() ? recorded
                : faults_.fail_after_commit_record
                    ? Status::IOError("file sink: injected failure after the commit record")
                    : Status::OK();
    if (st.ok()) st = ApplyRenames(record.renames, dirs);
    if (!st.ok()) {
      opened_ = false;  // until Open finishes the renames and reads the progress back
      ResetUnit();
      return Status::IOError(st.message(), " (the commit to version ", to_version,
                             " is recorded; Open completes it and LoadProgress reports it)");
    }
    generation_ = record.generation;
    progress_ = SinkProgress{to_version, point.epoch};
    ResetUnit();
    return Status::OK();
  }

  void Abort() override {
    for (auto& [dir, file] : open_) finished_.push_back(std::move(file));
    open_.clear();
    DiscardUnitFiles();
    ResetUnit();
  }

  void Close() override {
    Abort();
    opened_ = false;
  }

  int64_t bytes_written() const override { return bytes_written_; }
  const char* type() const override { return "file"; }

 private:
  std::string Abs(const std::string& rel) const {
    return rel.empty() ? options_.path : options_.path + "/" + rel;
  }

  Status PrepareSchemas(const std::shared_ptr<arrow::Schema>& table_schema) {
    change_schema_ = ChangeSchema(table_schema);
    num_table_columns_ = table_schema->num_fields();
    partition_columns_.clear();
    for (const std::string& name : options_.partition_by) {
      int index = table_schema->GetFieldIndex(name);
      if (index < 0) {
        return Status::Invalid("file sink: partition_by column '", name,
                               "' is not a column of the table");
      }
      if (std::count(options_.partition_by.begin(), options_.partition_by.end(), name) > 1) {
        return Status::Invalid("file sink: partition_by names column '", name, "' twice");
      }
      partition_columns_.push_back(index);
    }
    // Like Hive, pyarrow and DuckDB, partition values live in the path only.
    kept_changelog_.clear();
    arrow::FieldVector changelog_fields, append_fields;
    for (int i = 0; i < change_schema_->num_fields(); ++i) {
      if (std::count(partition_columns_.begin(), partition_columns_.end(), i) > 0) continue;
      kept_changelog_.push_back(i);
      changelog_fields.push_back(change_schema_->field(i));
      if (i < num_table_columns_) append_fields.push_back(change_schema_->field(i));
    }
    kept_append_.assign(kept_changelog_.begin(), kept_changelog_.end() - 2);
    changelog_schema_ = arrow::schema(changelog_fields, table_schema->metadata());
    append_schema_ = arrow::schema(append_fields, table_schema->metadata());
    return Status::OK();
  }

  // Finish the renames of the last commit record, remove temporary files, and
  // read the progress and the next file number back from the directory.
  Status Recover() {
    progress_.reset();
    known_dirs_.clear();
    next_file_ = 0;
    generation_ = 0;
    const std::string record_path = Abs(file_sink_internal::kCommitRecord);
    bool have_record = fs::exists(record_path);
    CommitRecord record;
    if (have_record) {
      RILL_ASSIGN_OR_RAISE(record, ParseRecord(record_path));
      std::vector<std::pair<std::string, std::string>> pending;
      std::set<std::string> dirs;
      for (const auto& rename : record.renames) {
        if (fs::exists(Abs(rename.first))) {
          pending.push_back(rename);
          dirs.insert(ParentOf(rename.first));
        }
      }
      RILL_RETURN_NOT_OK(ApplyRenames(pending, dirs));
      next_file_ = record.next_file;
      generation_ = record.generation;
    }
    uint64_t max_to = 0;
    bool have_files = false;
    std::optional<DataFileName> newest_snapshot;
    std::error_code ec;
    std::vector<fs::path> temporary;
    for (auto it = fs::recursive_directory_iterator(options_.path, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (!it->is_regular_file(ec)) continue;
      std::string name = it->path().filename().string();
      if (name.rfind(file_sink_internal::kTmpPrefix, 0) == 0) {
        temporary.push_back(it->path());
        continue;
      }
      auto parsed = file_sink_internal::ParseDataFileName(name);
      if (!parsed) continue;
      have_files = true;
      max_to = std::max(max_to, parsed->to_version);
      if (parsed->snapshot &&
          (!newest_snapshot || parsed->file_number > newest_snapshot->file_number)) {
        newest_snapshot = parsed;
      }
      next_file_ = std::max(next_file_, parsed->file_number + 1);
    }
    if (ec) {
      return Status::IOError("file sink: cannot list '", options_.path, "': ", ec.message());
    }
    for (const auto& path : temporary) {
      if (!fs::remove(path, ec) && ec) {
        return Status::IOError("file sink: cannot remove the temporary file '",
                               path.string(), "': ", ec.message());
      }
    }
    if (!have_record && newest_snapshot) generation_ = newest_snapshot->to_version;
    if (have_record || have_files) {
      progress_ = SinkProgress{std::max(record.version, max_to), record.epoch};
    }
    return Status::OK();
  }

  Status WriteRecord(const CommitRecord& record) {
    const std::string tmp = Abs(std::string(file_sink_internal::kTmpPrefix) + "commit" +
                                file_sink_internal::kTmpSuffix);
    {
      std::ofstream out(tmp, std::ios::trunc | std::ios::binary);
      out << FormatRecord(record);
      out.close();
      if (!out) return Errno("cannot write the commit record", tmp);
    }
    RILL_RETURN_NOT_OK(FsyncPath(tmp, /*directory=*/false));
    const std::string path = Abs(file_sink_internal::kCommitRecord);
    if (::rename(tmp.c_str(), path.c_str()) != 0) return Errno("cannot rename", tmp);
    // Renamed: from here a failure leaves the commit decided but maybe not
    // durable; the caller treats it like a failure after the record.
    Status st = FsyncPath(options_.path, /*directory=*/true);
    if (!st.ok()) record_renamed_ = true;
    return st;
  }

  Status ApplyRenames(const std::vector<std::pair<std::string, std::string>>& renames,
                      const std::set<std::string>& dirs) {
    for (const auto& [tmp, final_rel] : renames) {
      // Never replace a visible file: a name that exists already is a bug (or
      // a second sink on this directory), not something to overwrite.
      if (::renameat2(AT_FDCWD, Abs(tmp).c_str(), AT_FDCWD, Abs(final_rel).c_str(),
                      RENAME_NOREPLACE) != 0) {
        if (errno == EEXIST) {
          return Status::IOError("file sink: '", Abs(final_rel),
                                 "' exists already (is another sink writing into '",
                                 options_.path, "'?)");
        }
        if (errno != EINVAL || fs::exists(Abs(final_rel)) ||
            ::rename(Abs(tmp).c_str(), Abs(final_rel).c_str()) != 0) {
          return Errno("cannot rename", Abs(tmp));
        }
      }
    }
    for (const std::string& dir : dirs) {
      RILL_RETURN_NOT_OK(FsyncPath(Abs(dir), /*directory=*/true));
    }
    return Status::OK();
  }

  // Write the change rows of `batch` (ChangeSchema) in `mode`.
  Status WriteBatch(const std::shared_ptr<arrow::RecordBatch>& batch, SinkMode mode) {
    if (!batch->schema()->Equals(*change_schema_, /*check_metadata=*/false)) {
      return Status::Invalid("file sink: a change batch has schema ",
                             batch->schema()->ToString(), ", expected ",
                             change_schema_->ToString());
    }
    std::shared_ptr<arrow::RecordBatch> rows = batch;
    if (mode == SinkMode::kAppend) {
      RILL_ASSIGN_OR_RAISE(rows, InsertsOnly(batch));
      if (rows->num_rows() == 0) return Status::OK();
    }
    RILL_ASSIGN_OR_RAISE(std::vector<PartitionGroup> groups, SplitByPartition(*rows));
    const std::vector<int>& kept = mode == SinkMode::kAppend ? kept_append_ : kept_changelog_;
    const auto& schema = mode == SinkMode::kAppend ? append_schema_ : changelog_schema_;
    for (const PartitionGroup& group : groups) {
      std::shared_ptr<arrow::RecordBatch> part = rows;
      if (group.indices) {
        RILL_ASSIGN_OR_RAISE(arrow::Datum taken, arrow::compute::Take(rows, group.indices));
        part = taken.record_batch();
      }
      arrow::ArrayVector columns;
      columns.reserve(kept.size());
      for (int i : kept) columns.push_back(part->column(i));
      RILL_RETURN_NOT_OK(WriteRows(
          group.dir_rel, *arrow::RecordBatch::Make(schema, part->num_rows(), columns), mode));
    }
    return Status::OK();
  }

  // The rows of `batch` whose _op is "insert" (append mode).
  Result<std::shared_ptr<arrow::RecordBatch>> InsertsOnly(
      const std::shared_ptr<arrow::RecordBatch>& batch) {
    const auto& ops = static_cast<const arrow::StringArray&>(*batch->column(num_table_columns_));
    const std::string_view insert = ChangeOpName(ChangeOp::kInsert);
    int64_t inserts = 0;
    for (int64_t i = 0; i < ops.length(); ++i) inserts += ops.GetView(i) == insert;
    if (inserts == ops.length()) return batch;
    arrow::BooleanBuilder keep;
    RILL_RETURN_NOT_OK(keep.Reserve(ops.length()));
    for (int64_t i = 0; i < ops.length(); ++i) keep.UnsafeAppend(ops.GetView(i) == insert);
    RILL_ASSIGN_OR_RAISE(auto mask, keep.Finish());
    RILL_ASSIGN_OR_RAISE(arrow::Datum kept, arrow::compute::Filter(batch, mask));
    return kept.record_batch();
  }

  // Group the rows of `batch` by their partition directory.
  Result<std::vector<PartitionGroup>> SplitByPartition(const arrow::RecordBatch& batch) {
    if (partition_columns_.empty()) return std::vector<PartitionGroup>{{"", nullptr}};
    const int64_t n = batch.num_rows();
    std::vector<int32_t> group_of(n, 0);
    int32_t num_groups = 1;
    std::vector<std::shared_ptr<arrow::StringArray>> dictionaries;
    std::vector<std::vector<int32_t>> codes;  // per partition column, per row
    for (int column : partition_columns_) {
      std::shared_ptr<arrow::Array> values = batch.column(column);
      if (values->type_id() != arrow::Type::STRING) {
        RILL_ASSIGN_OR_RAISE(values, arrow::compute::Cast(*values, arrow::utf8()));
      }
      RILL_ASSIGN_OR_RAISE(arrow::Datum encoded, arrow::compute::DictionaryEncode(values));
      const std::shared_ptr<arrow::Array> encoded_array = encoded.make_array();
      const auto& dict = static_cast<const arrow::DictionaryArray&>(*encoded_array);
      dictionaries.push_back(std::static_pointer_cast<arrow::StringArray>(dict.dictionary()));
      const int32_t null_code = static_cast<int32_t>(dict.dictionary()->length());
      const auto& indices = static_cast<const arrow::Int32Array&>(*dict.indices());
      std::vector<int32_t> column_codes(n);
      for (int64_t i = 0; i < n; ++i) {
        column_codes[i] = indices.IsNull(i) ? null_code : indices.Value(i);
      }
      // Refine the groups: (group so far, this column's code) -> dense group id.
      std::unordered_map<uint64_t, int32_t> refined;
      for (int64_t i = 0; i < n; ++i) {
        uint64_t key = (static_cast<uint64_t>(group_of[i]) << 32) |
                       static_cast<uint32_t>(column_codes[i]);
        auto [it, inserted] = refined.try_emplace(key, static_cast<int32_t>(refined.size()));
        group_of[i] = it->second;
      }
      num_groups = static_cast<int32_t>(refined.size());
      codes.push_back(std::move(column_codes));
    }
    std::vector<PartitionGroup> groups(num_groups);
    std::vector<arrow::Int64Builder> builders(num_groups > 1 ? num_groups : 0);
    std::vector<bool> named(num_groups, false);
    for (int64_t i = 0; i < n; ++i) {
      const int32_t g = group_of[i];
      if (!named[g]) {
        named[g] = true;
        std::string dir;
        for (size_t c = 0; c < partition_columns_.size(); ++c) {
          if (c > 0) dir.push_back('/');
          dir += file_sink_internal::EscapeHivePathValue(options_.partition_by[c]);
          dir.push_back('=');
          const int32_t code = codes[c][i];
          std::optional<std::string_view> value;
          if (code < dictionaries[c]->length()) value = dictionaries[c]->GetView(code);
          dir += file_sink_internal::EscapeHivePathValue(value);
        }
        groups[g].dir_rel = std::move(dir);
      }
      if (num_groups > 1) RILL_RETURN_NOT_OK(builders[g].Append(i));
    }
    for (int32_t g = 0; g < num_groups && num_groups > 1; ++g) {
      RILL_ASSIGN_OR_RAISE(groups[g].indices, builders[g].Finish());
    }
    return groups;
  }

  // Append `rows` (the file schema of `mode`) to the open file of `dir_rel`,
  // rolling to a new file every roll_rows rows.
  Status WriteRows(const std::string& dir_rel, const arrow::RecordBatch& rows, SinkMode mode) {
    int64_t offset = 0;
    while (offset < rows.num_rows()) {
      RILL_ASSIGN_OR_RAISE(UnitFile * file, OpenFileIn(dir_rel, mode));
      const int64_t take = std::min(rows.num_rows() - offset, options_.roll_rows - file->rows);
      RILL_RETURN_NOT_OK(file->writer->Write(*rows.Slice(offset, take)));
      file->rows += take;
      offset += take;
      if (file->rows >= options_.roll_rows) RILL_RETURN_NOT_OK(FinishFile(dir_rel));
    }
    return Status::OK();
  }

  // The open file of `dir_rel`, opened now if there is none.
  Result<UnitFile*> OpenFileIn(const std::string& dir_rel, SinkMode mode) {
    auto it = open_.find(dir_rel);
    if (it != open_.end()) return &it->second;
    if (!dir_rel.empty() && known_dirs_.insert(dir_rel).second) {
      RILL_RETURN_NOT_OK(CreatePartitionDir(dir_rel));
    }
    UnitFile file;
    file.dir_rel = dir_rel;
    file.file_number = next_file_++;
    file.snapshot = writing_snapshot_;
    file.opened_at = Clock::now();
    std::string name = std::string(file_sink_internal::kTmpPrefix) + "part-" +
                       std::to_string(file.file_number) + "." +
                       file_sink_internal::FileExtension(format_) +
                       file_sink_internal::kTmpSuffix;
    file.tmp_rel = dir_rel.empty() ? name : dir_rel + "/" + name;
    const auto& schema = mode == SinkMode::kAppend ? append_schema_ : changelog_schema_;
    RILL_ASSIGN_OR_RAISE(file.writer,
                         file_sink_internal::OpenFormatWriter(format_, Abs(file.tmp_rel), schema));
    return &open_.emplace(dir_rel, std::move(file)).first->second;
  }

  // Create the directories of `dir_rel` and make their entries durable.
  Status CreatePartitionDir(const std::string& dir_rel) {
    std::string sofar;
    size_t start = 0;
    while (start <= dir_rel.size()) {
      size_t slash = dir_rel.find('/', start);
      if (slash == std::string::npos) slash = dir_rel.size();
      const std::string parent = sofar;
      sofar = dir_rel.substr(0, slash);
      if (::mkdir(Abs(sofar).c_str(), 0755) == 0) {
        RILL_RETURN_NOT_OK(FsyncPath(Abs(parent), /*directory=*/true));
      } else if (errno != EEXIST) {
        return Errno("cannot create the directory", Abs(sofar));
      }
      start = slash + 1;
    }
    return Status::OK();
  }

  Status FinishFile(const std::string& dir_rel) {
    auto it = open_.find(dir_rel);
    UnitFile file = std::move(it->second);
    open_.erase(it);
    auto size = file.writer->Finish();
    file.writer.reset();
    finished_.push_back(std::move(file));  // removed by Abort even when Finish failed
    RILL_RETURN_NOT_OK(size.status());
    bytes_written_ += *size;
    return Status::OK();
  }

  Status FinishOpenFiles() {
    while (!open_.empty()) RILL_RETURN_NOT_OK(FinishFile(open_.begin()->first));
    return Status::OK();
  }

  Status RollOldFiles() {
    const auto now = Clock::now();
    std::vector<std::string> old;
    for (const auto& [dir, file] : open_) {
      if (std::chrono::duration<double>(now - file.opened_at).count() >= options_.roll_seconds) {
        old.push_back(dir);
      }
    }
    for (const std::string& dir : old) RILL_RETURN_NOT_OK(FinishFile(dir));
    return Status::OK();
  }

  bool HasSnapshotFile() const {
    return std::any_of(finished_.begin(), finished_.end(),
                       [](const UnitFile& f) { return f.snapshot; });
  }

  // Close and remove every file of the open unit (never visible).
  void DiscardUnitFiles() {
    for (auto& [dir, file] : open_) finished_.push_back(std::move(file));
    open_.clear();
    for (UnitFile& file : finished_) {
      file.writer.reset();
      std::error_code ec;
      fs::remove(Abs(file.tmp_rel), ec);
    }
    finished_.clear();
  }

  void ResetUnit() {
    writing_snapshot_ = false;
    part_from_.reset();
    snapshot_version_.reset();
    last_to_version_ = 0;
  }

  const FileSinkOptions options_;
  const FileFormat format_;
  const FileSinkFaults faults_;
  bool opened_ = false;
  bool record_renamed_ = false;  ///< WriteRecord failed after its rename

  std::shared_ptr<arrow::Schema> change_schema_, changelog_schema_, append_schema_;
  int num_table_columns_ = 0;
  std::vector<int> partition_columns_;  ///< indices in the table (= change) schema
  std::vector<int> kept_changelog_, kept_append_;  ///< change columns written to files

  std::optional<SinkProgress> progress_;
  uint64_t next_file_ = 0;
  uint64_t generation_ = 0;
  std::set<std::string> known_dirs_;
  int64_t bytes_written_ = 0;

  // The open unit.
  bool writing_snapshot_ = false;
  std::optional<uint64_t> part_from_;        ///< first version of its part files
  std::optional<uint64_t> snapshot_version_; ///< the snapshot it starts with
  uint64_t last_to_version_ = 0;
  std::map<std::string, UnitFile> open_;  ///< by partition directory
  std::vector<UnitFile> finished_;
};

}  // namespace

namespace file_sink_internal {

Result<std::unique_ptr<SinkWriter>> MakeFileSinkWriterWithFaults(FileSinkOptions options,
                                                                 FileSinkFaults faults) {
  if (options.path.empty()) return Status::Invalid("file sink: path must not be empty");
  RILL_ASSIGN_OR_RAISE(FileFormat format, ParseFileFormat(options.format));
  if (options.roll_rows <= 0) {
    return Status::Invalid("file sink: roll_rows must be > 0, got ", options.roll_rows);
  }
  if (!(options.roll_seconds > 0)) {
    return Status::Invalid("file sink: roll_seconds must be > 0, got ", options.roll_seconds);
  }
  while (options.path.size() > 1 && options.path.back() == '/') options.path.pop_back();
  return std::make_unique<FileSinkWriter>(std::move(options), format, faults);
}

}  // namespace file_sink_internal

Result<std::unique_ptr<SinkWriter>> MakeFileSinkWriter(FileSinkOptions options) {
  return file_sink_internal::MakeFileSinkWriterWithFaults(std::move(options), {});
}

}  // namespace rill
