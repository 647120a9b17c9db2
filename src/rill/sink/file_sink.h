// FileSinkWriter: a table's changes as files (Arrow's writers); docs/sinks.md
// ("File sink") is the user's view.
//
// Formats: parquet (snappy, the Arrow schema stored, like
// pyarrow.parquet.write_table), ndjson (one object per row; timestamps, dates
// and decimals as strings), csv (header row), arrow (IPC file).
//
// Directory layout (`path`, one sink per directory):
//   [k1=v1/k2=v2/]part-<from>-<to>-<n>.<ext>      changes of versions from..to
//   [k1=v1/k2=v2/]snapshot-<v>-<v>-<n>.<ext>      full state at version v
//   .rill-sink-commit                             the last commit (progress)
//   .tmp-*                                        uncommitted (never read)
// Versions are zero-padded to 12 digits and <n> to 6, so names sort in
// commit order; <n> is unique in the directory and never reused.
// Partitioning is Hive's: partition_by columns leave the files and go into the
// path as column=value, the value as Arrow's cast to text escaped as Hive's
// FileUtils.escapePathName does (%XX for / = : % " # ' * ? \ { [ ] ^, DEL,
// control characters), null or "" as __HIVE_DEFAULT_PARTITION__.
//
// Units and commits: Write appends to one open file per partition directory,
// named ".tmp-part-<n>.<ext>.tmp" (DuckDB 1.4.4's glob does not skip dot-files,
// so temporary names also end in ".tmp"; pyarrow.dataset skips them by the
// dot). A file is closed (finished and fsynced) after roll_rows rows, when it
// is older than roll_seconds at the next Write, or at Commit; it stays
// invisible until Commit. Commit writes the commit record (the version, the
// epoch, the generation, the next file number and every rename of the commit)
// to a temporary file, fsyncs it and renames it into place - the commit point
// - then renames each file to its visible name and fsyncs the directories.
// Open finishes the renames of the last record (a crash after the commit point
// loses nothing), removes every ".tmp-*" file (a crash before it leaves
// nothing), and reads the progress back: the record's version and epoch, or
// without a record the largest <to> in the names. A file holds at most one
// commit's changes: how often files appear is the sink's interval_seconds (or
// its checkpoint interval with exactly-once), split further by roll_rows and
// roll_seconds.
//
// Modes: changelog (the table's columns, _op, _version), append (the inserted
// rows, without _op and _version). upsert is refused (Invalid, naming the
// mode): a file cannot replace a key's earlier row.
//
// Snapshots (ChangeSet::snapshot: the sink fell behind the change log or saw
// nothing yet) start a new generation: the snapshot's rows go into
// "snapshot-<v>-<v>-<n>" files (an empty one for an empty table when there is
// no partitioning), the record's "generation" becomes v, and changes after it
// go into part files after them. Older files are kept (nothing is deleted);
// the current contents of the directory are the files whose <n> is at least
// the smallest <n> of the newest snapshot's files (numbers only grow; versions
// may restart with an engine without checkpoints). docs/sinks.md shows the
// DuckDB query.
//
// Threads: a writer is used by one thread at a time (the sink's thread).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "rill/common/status.h"
#include "rill/sink/sink.h"

namespace rill {

/// Where and how a FileSinkWriter writes (the pipeline file's and rills.sinks' names).
struct FileSinkOptions {
  std::string path;               ///< the output directory (created if missing)
  std::string format = "parquet"; ///< "parquet" | "ndjson" | "csv" | "arrow"
  /// Hive partition columns, outermost first (columns of the table).
  std::vector<std::string> partition_by;
  int64_t roll_rows = 1000000;  ///< rows per file at most (> 0)
  double roll_seconds = 60;     ///< a file older than this is closed at the next Write (> 0)
};

/// Return a writer for `options`. Invalid (naming the option) for an empty path,
/// an unknown format, or roll_rows / roll_seconds not > 0; Open refuses a
/// partition_by name that is not a column of the table. Any thread.
Result<std::unique_ptr<SinkWriter>> MakeFileSinkWriter(FileSinkOptions options);

}  // namespace rill
