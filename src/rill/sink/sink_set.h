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

#include <memory>
#include <string>
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
};

}  // namespace rill
