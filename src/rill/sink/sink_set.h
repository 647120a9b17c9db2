// Sink and SinkSet: the runtime of the sinks of one engine (sink/sink.h has
// the writer contract and the commit protocol).
//
//     SinkSet& sinks = SinkSet::For(engine);                 // one per engine
//     RILL_ASSIGN_OR_RAISE(auto writer, MakeFileSinkWriter(file_options));
//     RILL_RETURN_NOT_OK(sinks.Add(options, std::move(writer)));  // starts it
//     ... sinks.stats() / sinks.Remove("name") ...
//
// A Sink runs one thread: it reads its table's change feed, batches by
// interval_seconds / max_batch_rows, applies the mode (upsert: coalesced to the
// last change per key; append: inserts only), calls its writer and commits,
// retrying per on_error. With a Checkpointer attached to the engine it follows
// the exactly-once protocol of sink/sink.h (writes only checkpointed versions,
// commits after each complete checkpoint, keeps the uncommitted changes in the
// checkpoint). Counters go to SinkStats, which the engine's rill_metrics, the
// metrics store, /api/v1/telemetry/sinks and /metrics read.
//
// Threads: every SinkSet method may be called from any thread except from
// inside a tick (engine callbacks); a Sink's thread never blocks the tick.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "rill/common/status.h"
#include "rill/sink/sink.h"

namespace rill {

class Engine;

/// One running sink.
class Sink {
 public:
  virtual ~Sink() = default;
  virtual const SinkOptions& options() const = 0;
  const std::string& name() const { return options().name; }
  /// "kafka", "postgres", "file".
  virtual const char* type() const = 0;
  virtual SinkStats stats() const = 0;
  /// Write and commit everything published so far (with a checkpointer: up to
  /// the newest complete checkpoint); return when done, or IOError ("deadline
  /// exceeded", with the last error) when `timeout_seconds` passed first, or
  /// Cancelled once stopped. For tests, shutdown and `rill` one-shot runs. Any
  /// thread but the tick's.
  virtual Status Flush(double timeout_seconds) = 0;
};

/// The Kafka sinks whose output an instance of a scaled-out application
/// (cluster/) commits in its own transactions, with the input offsets of the
/// same cut (SinkSet::DriveKafkaSinks). Such a sink has no thread and no
/// producer of its own: at every commit, the instance captures a cut at a tick
/// boundary (Capture: each driven sink's table version), opens its transaction,
/// calls Write (each sink's changes after its last commit up to the cut, in
/// its mode, produced with the instance's producer), adds the offsets and
/// commits; then Committed (the sinks move on) or Aborted (the next commit
/// writes the same changes again, with more). Flush waits for the instance's
/// commits. Shared by the SinkSet and the instance; either may go first.
/// Threads: Capture inside AtTickBoundary; the others from the instance's
/// committing thread (one at a time).
class DrivenSinks {
 public:
  virtual ~DrivenSinks() = default;
  /// Each driven sink's table version now.
  struct Cut {
    std::vector<std::pair<std::shared_ptr<Sink>, uint64_t>> versions;
  };
  virtual Cut Capture() = 0;
  /// True when some sink of the cut has changes it has not committed.
  virtual bool HasChanges(const Cut& cut) const = 0;
  /// Produce every sink's changes up to the cut with `producer` (rd_kafka_t*,
  /// its transaction open).
  virtual Status Write(const Cut& cut, void* producer) = 0;
  virtual void Committed(const Cut& cut) = 0;
  /// The transaction was aborted; the next commit writes the changes again.
  virtual void Aborted(const Cut& cut, const Status& why) = 0;
  /// The transaction was aborted and the inputs are read again from the
  /// committed offsets (the instance rewinds its sources): the cut's changes
  /// are not written, since the re-read input makes them again (here or on
  /// the partitions' new owner).
  virtual void Discard(const Cut& cut, const Status& why) = 0;
  /// The changes of `table` so far are not output: its sinks move past them
  /// without writing (a restored or dropped partition shard: the rows moved
  /// between instances, they did not change). Call at a tick boundary.
  virtual void Skip(const std::string& table) = 0;
  /// Sink `sink_name` starts from its table's version now: what the table
  /// holds so far is not written (an application's changelog made over rows
  /// that are in it already). False for an unknown sink. At a tick boundary.
  virtual bool SkipSink(const std::string& sink_name) = 0;
  /// Keeps, of the rows a sink is about to write, those to output (the rows
  /// of the partitions an instance owns, for a global view's partials).
  using RowFilter = std::function<Result<std::shared_ptr<arrow::RecordBatch>>(
      const std::shared_ptr<arrow::RecordBatch>&)>;
  /// Filter the rows of driven sink `sink_name` (null: every row). False when
  /// no driven sink has that name.
  virtual bool SetRowFilter(const std::string& sink_name, RowFilter filter) = 0;
};

/// The sinks of one engine. Created on first use, destroyed with the engine
/// (sinks are stopped, after a final flush bounded by a few seconds, before the
/// engine's tables go away).
class SinkSet {
 public:
  /// The engine's SinkSet (created on first call).
  static SinkSet& For(Engine* engine);
  virtual ~SinkSet() = default;
  /// Add and start a sink of `options.table` (which must exist) writing through
  /// `writer`. Invalid for a duplicate name, an unknown table, a mode the table
  /// cannot have (upsert needs a key; append needs an append table or accepts
  /// only inserts), or options out of range; the error names the option.
  virtual Result<std::shared_ptr<Sink>> Add(SinkOptions options,
                                            std::unique_ptr<SinkWriter> writer) = 0;
  /// Stop (after a final flush) and forget a sink. False when unknown.
  virtual bool Remove(const std::string& name) = 0;
  virtual std::shared_ptr<Sink> Find(const std::string& name) const = 0;
  /// The sinks in the order they were added.
  virtual std::vector<std::shared_ptr<Sink>> List() const = 0;
  /// From now on, Kafka sinks added whose writer writes to `kafka_cluster`
  /// (their bootstrap.servers) are driven by the returned object's owner
  /// (DrivenSinks); sinks added before, and other sinks, run as before.
  virtual std::shared_ptr<DrivenSinks> DriveKafkaSinks(const std::string& kafka_cluster) = 0;
  /// The versions `table` publishes from now until EndMoves are moves (an
  /// application's partition shards restored or dropped): its sinks that are
  /// not driven write nothing for them (the driven ones skip them through
  /// DrivenSinks::Skip). At a tick boundary.
  virtual void BeginMoves(const std::string& table) = 0;
  virtual void EndMoves(const std::string& table) = 0;
};

}  // namespace rill
