// CheckpointParticipant: how a layer above the engine (the sinks) takes part
// in the engine's checkpoints without the engine knowing it.
//
// A participant registered with Engine::AddCheckpointParticipant is asked, for
// every checkpoint a Checkpointer of that engine takes:
//   1. Capture, on the tick thread at the capture's tick boundary: pin what
//      belongs to the checkpoint (cheap: copy pointers and counters) and
//      return a CheckpointFileWriter;
//   2. that writer, on the checkpointer's writer thread, with the checkpoint's
//      temporary directory: write its files there (a checkpoint whose file
//      writer fails is a failed checkpoint, like a table file that cannot be
//      written); the files become part of the checkpoint by its rename;
//   3. OnComplete, on the writer thread, once the checkpoint is complete on
//      disk (renamed and fsynced) and the sources committed its positions;
//   4. Restore, at the tick boundary of Checkpointer::Restore, after the
//      tables, connectors and sections: read its files back from the restored
//      checkpoint's directory.
// Participants added after a Restore read Engine::last_restored_checkpoint().
//
// Threads: see each method. A participant must not call back into the
// Checkpointer from these methods, nor block (no I/O in Capture).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "rill/common/status.h"

namespace rill {

/// One connector's position as a checkpoint holds it.
struct CheckpointedPosition {
  std::string connector;
  std::string target_table;
  std::string position;  ///< the JSON document of Connector::SavePosition
  /// Kafka-shaped positions ({"partitions":[{"topic","partition","offset"}]}):
  /// topic -> partition -> next offset. Empty for other connectors.
  std::map<std::string, std::map<int32_t, int64_t>> offsets;
  /// The Kafka consumer group of those offsets (Connector::source_group), "" if none.
  std::string group;
};

/// A checkpoint that is complete on disk.
struct CompletedCheckpoint {
  uint64_t id = 0;
  std::string path;         ///< its directory
  double created_at = 0;    ///< engine time of its tick boundary
  /// Each user table's version as captured.
  std::map<std::string, uint64_t> table_versions;
  std::vector<CheckpointedPosition> positions;
};

/// A checkpoint that was restored into the engine.
struct RestoredCheckpoint {
  uint64_t id = 0;
  std::string path;
  double created_at = 0;
  /// Each table's version in the checkpoint (the engine that wrote it).
  std::map<std::string, uint64_t> table_versions;
  /// Each table's version right after the restore (this engine's numbering).
  std::map<std::string, uint64_t> restored_versions;
  std::vector<CheckpointedPosition> positions;
};

/// Writes a participant's files into a checkpoint's temporary directory `dir`
/// (fsynced when `sync`); returns the bytes written. Checkpointer writer thread.
using CheckpointFileWriter = std::function<Result<int64_t>(const std::string& dir, bool sync)>;

/// See the file comment.
class CheckpointParticipant {
 public:
  virtual ~CheckpointParticipant() = default;
  /// Tick thread, at checkpoint `id`'s tick boundary (no tick runs): pin what
  /// the checkpoint holds, given each user table's captured version. A null
  /// writer writes nothing.
  virtual Result<CheckpointFileWriter> Capture(
      uint64_t id, const std::map<std::string, uint64_t>& table_versions) = 0;
  /// Writer thread: checkpoint `done` is complete. Must not block for long.
  virtual void OnComplete(const CompletedCheckpoint& done) = 0;
  /// Tick boundary of Checkpointer::Restore: `restored` is now the state.
  virtual Status Restore(const RestoredCheckpoint& restored) = 0;
};

}  // namespace rill
