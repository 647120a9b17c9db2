// What checkpoint.cc (capture, restore) and checkpoint_files.cc (the files
// on disk) share.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <arrow/type_fwd.h>

#include "rill/engine/checkpoint.h"
#include "rill/engine/checkpoint_participant.h"
#include "rill/table/live_table.h"

namespace rill::checkpoint_internal {

/// One table of a checkpoint: pinned (when captured) or read back (restore).
struct TableEntry {
  std::string name;
  std::string file;  ///< file name inside the checkpoint directory
  CheckpointFormat format = CheckpointFormat::kParquet;
  std::vector<std::string> primary_key;
  TableMode mode = TableMode::kSnapshot;
  std::optional<RetentionPolicy> retention;
  int64_t rows = 0;
  uint64_t version = 0;
  /// Captured: the pinned immutable version (never changes while written).
  std::shared_ptr<const TableVersion> pinned;
  /// Read back: the rows, with the system columns.
  std::shared_ptr<arrow::Table> data;
  /// Read back: the key index of `data`, built while the file was read (a
  /// keyed snapshot table in Parquet); null when not built. For ReplaceState.
  std::shared_ptr<PreparedKeys> prepared_keys;
};

/// One connector's position.
struct ConnectorEntry {
  std::string name;
  std::string target_table;
  std::string position;  ///< a JSON document (Connector::SavePosition)
};

/// Everything one checkpoint holds.
struct Capture {
  uint64_t id = 0;
  double created_at = 0;
  std::vector<TableEntry> tables;
  std::vector<ConnectorEntry> connectors;
  std::map<std::string, std::string> sections;
  /// The participants' file writers (checkpoint_participant.h), by participant
  /// name: run on the writer thread into the temporary directory, before the
  /// manifest. Captured only (never read back).
  std::vector<std::pair<std::string, CheckpointFileWriter>> participant_files;
};

/// The offsets of a Kafka-shaped position document
/// ({"partitions":[{"topic","partition","offset"}]}); empty for any other.
std::map<std::string, std::map<int32_t, int64_t>> KafkaShapedOffsets(const std::string& position);

/// "ckpt-00000042".
std::string CheckpointDirName(uint64_t id);
/// A file name for a table: letters, digits, '_', '-', '.' kept (not a
/// leading '.'), other bytes as %XX; then the format's extension.
std::string TableFileName(const std::string& table, CheckpointFormat format);

/// Ids of the complete checkpoints in `dir` (ckpt-N with a manifest), ascending.
Result<std::vector<uint64_t>> ListIds(const std::string& dir);
/// Remove leftover .tmp- directories of interrupted writes.
Status RemoveTemporaries(const std::string& dir);

/// Write `capture` as checkpoint `capture.id` (see checkpoint.h for the steps),
/// point `current` and the per-table links at it, delete all but the newest `keep`.
Result<CheckpointInfo> WriteCheckpoint(const Capture& capture, const CheckpointOptions& options);

/// Read the manifest of checkpoint `id` (tables without data).
Result<Capture> ReadManifest(const std::string& dir, uint64_t id);
/// Read every table file of `capture` (read with ReadManifest) into entry.data.
Status ReadTables(const std::string& dir, Capture* capture);

/// Remove a directory tree (no error if absent).
Status RemoveTree(const std::string& path);

}  // namespace rill::checkpoint_internal
