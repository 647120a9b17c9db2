// The parts of the file sink (file_sink.h) that tests reach into: file names,
// Hive path escaping, the format writers and a fault hook.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <arrow/type_fwd.h>

#include "rill/common/status.h"
#include "rill/sink/file_sink.h"

namespace rill::file_sink_internal {

/// The value Hive writes for a null (or empty) partition value.
inline constexpr const char* kHiveDefaultPartition = "__HIVE_DEFAULT_PARTITION__";
/// Prefix of every file the sink writes before Commit renames it into place.
inline constexpr const char* kTmpPrefix = ".tmp-";
/// Suffix of temporary data files: DuckDB 1.4.4's glob does not skip dot-files,
/// so a temporary file must not match `*.parquet` either.
inline constexpr const char* kTmpSuffix = ".tmp";
/// The commit record in the sink's directory (see file_sink.h).
inline constexpr const char* kCommitRecord = ".rill-sink-commit";

enum class FileFormat { kParquet, kNdjson, kCsv, kArrow };
Result<FileFormat> ParseFileFormat(std::string_view name);
/// "parquet", "ndjson", "csv", "arrow".
const char* FileExtension(FileFormat format);

/// Escape a partition value as Hive's FileUtils.escapePathName does: control
/// characters and "#%'*/:=?\{[]^ and DEL as %XX (upper-case hex). Null or
/// empty: __HIVE_DEFAULT_PARTITION__.
std::string EscapeHivePathValue(std::optional<std::string_view> value);

/// What a committed data file's name says.
struct DataFileName {
  bool snapshot = false;  ///< "snapshot-..." (a generation's first files) or "part-..."
  uint64_t from_version = 0;
  uint64_t to_version = 0;
  uint64_t file_number = 0;  ///< unique in the directory, never reused
  std::string extension;
};
/// "part-<from>-<to>-<n>.<ext>" or "snapshot-<from>-<to>-<n>.<ext>".
std::string FormatDataFileName(const DataFileName& name);
/// The inverse of FormatDataFileName; nullopt for any other name.
std::optional<DataFileName> ParseDataFileName(std::string_view file_name);

/// One open output file of one format. Not thread-safe (the sink's thread).
class FormatWriter {
 public:
  virtual ~FormatWriter() = default;
  /// Append `batch` (of the schema the writer was opened with).
  virtual Status Write(const arrow::RecordBatch& batch) = 0;
  /// Finish the file (footer), close it and fsync it. Return its size.
  virtual Result<int64_t> Finish() = 0;
};
/// Create `path` and open a writer of `format` for rows of `schema`.
Result<std::unique_ptr<FormatWriter>> OpenFormatWriter(FileFormat format,
                                                       const std::string& path,
                                                       const std::shared_ptr<arrow::Schema>& schema);

/// Append `batch` as NDJSON (one object per row, "\n" after each) to `out`.
/// Numbers and booleans as JSON numbers/booleans (NaN and infinities as null),
/// strings escaped, lists and structs as arrays and objects, dictionaries as
/// their values, every other type (timestamps, dates, decimals, binary) as the
/// string Arrow's cast to utf8 gives.
Status AppendNdjson(const arrow::RecordBatch& batch, std::string* out);

/// Faults for tests: stop Commit part-way, as a crash would.
struct FileSinkFaults {
  /// Commit returns IOError right after the commit record is durable and before
  /// any file is renamed (Open must finish the renames).
  bool fail_after_commit_record = false;
};
Result<std::unique_ptr<SinkWriter>> MakeFileSinkWriterWithFaults(FileSinkOptions options,
                                                                 FileSinkFaults faults);

}  // namespace rill::file_sink_internal
