// Nexmark queries q0, q1, q2, q3, q4, q5, q7, q8 written with Rill's public C++
// API as a user would write them, and the reference SQL each is checked against.
//
// Every pipeline has three append tables `person`, `auction`, `bid` fed by one
// MemoryConnector each, and an engine whose clock the caller drives (a
// simulated tick time), so runs are deterministic. The queries:
//   q0  pass-through            StreamSqlTask over new bids
//   q1  currency conversion     StreamSqlTask over new bids (price * 0.908)
//   q2  selection               StreamSqlTask over new bids (auction % 123 = 0)
//   q3  local item suggestion   two StreamSqlTasks (new auctions ⋈ persons, new
//                               persons ⋈ earlier auctions), an incremental join
//   q4  average price/category  ScheduledSqlTask re-running the whole query (its
//                               subquery in FROM is not maintainable; with
//                               q4_split two chained incremental tasks)
//   q5  hot items               WindowTask (hopping 10 s / 2 s, count per auction)
//                               → StreamSqlTask keeping each window's maximum
//   q7  highest bid             WindowTask (tumbling 10 s, max(price))
//                               → StreamSqlTask joining the window's bids
//   q8  monitor new users       WindowTasks on persons and auctions (tumbling
//                               10 s) → two StreamSqlTasks joining them
// Reference SQL (DuckDB over all events): the Nexmark queries' SQL with windows
// written as integer buckets of epoch milliseconds.
//
// Threads: a Pipeline belongs to one thread (it drives the engine's ticks).
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "nexmark/generator.h"
#include "rill/connector/memory_connector.h"
#include "rill/engine/engine.h"

namespace rill::nexmark {

/// The queries implemented.
inline const std::vector<int> kQueries = {0, 1, 2, 3, 4, 5, 7, 8};

struct PipelineOptions {
  /// Simulated tick period: the engine clock advances this much per Tick().
  double tick_seconds = 0.01;
  /// Rows kept in each input and output table.
  int64_t max_rows = 50'000'000;
  /// Event-time disorder to wait for in windows (the generator's max_delay).
  double allowed_lateness_seconds = 0;
  /// q4's re-run interval (engine-clock seconds).
  double q4_interval_seconds = 0.1;
  /// q4's ScheduledSqlTask `incremental` option. The Nexmark SQL (a subquery in
  /// FROM) is not maintainable: kAuto re-runs it, kOn refuses it.
  IncrementalMode q4_incremental = IncrementalMode::kAuto;
  /// Write q4 as two chained tasks, which the incremental planner accepts:
  /// q4_1_max (max(price) per auction of auction ⋈ bid, into q4_max), then
  /// q4_2_avg (avg per category over q4_max); both get q4_incremental.
  bool q4_split = false;
  /// Ingest buffer limit per connector, records (0: the default).
  int64_t buffer_records = 0;
};

/// An engine running one query, fed by three memory connectors.
struct Pipeline {
  int query = 0;
  std::shared_ptr<std::atomic<double>> clock;
  std::unique_ptr<Engine> engine;
  std::shared_ptr<MemoryConnector> person, auction, bid;
  double tick_seconds = 0.01;
  std::string output_table;

  /// Push one batch of events (empty kinds skipped). Any thread.
  Status Push(const EventBatch& batch);
  /// Advance the clock by one tick period and run one tick. Tick owner only.
  Status Tick();
  /// End of stream: advance the clock far enough for every window to close
  /// (idle timeout) and tick until every task has seen it.
  Status Finish();
  /// Push and tick each batch of `events`, then Finish; return the seconds it took.
  Result<double> Run(const std::vector<EventBatch>& events);
};

/// Make the pipeline of query `q` (one of kQueries).
Result<Pipeline> MakePipeline(int q, const PipelineOptions& options);

/// The Nexmark SQL of query `q` over tables person, auction, bid, with
/// normalized output columns (times as epoch ms).
std::string ReferenceSql(int q);
/// SQL reading Rill's output table (named `out`) into the same columns.
std::string ResultSql(int q);

/// The outcome of comparing Rill's output with the reference (multisets).
struct CheckResult {
  int64_t reference_rows = 0;
  int64_t rill_rows = 0;
  int64_t missing = 0;  ///< reference rows Rill did not produce
  int64_t extra = 0;    ///< Rill rows not in the reference
  bool correct() const { return missing == 0 && extra == 0; }
};

/// Compare Rill's output of `pipeline` with DuckDB running ReferenceSql over all
/// `events`.
Result<CheckResult> CheckAgainstDuckDb(Pipeline& pipeline,
                                       const std::vector<EventBatch>& events);

}  // namespace rill::nexmark
