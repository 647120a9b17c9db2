// GeneratorConnector: synthetic rows for demos and pipeline files.
//
// A generator pushes `rows_per_second` rows into its buffer from its own
// thread, in batches every `interval_ms`. Each column of the target table is
// filled by one spec:
//
//   {sequence: START}            START, START+1, ... (or {sequence: {start, step}})
//   {random_int: [LO, HI]}       uniform integers in [LO, HI]
//   {random_float: [LO, HI]}     uniform reals in [LO, HI)
//   {choice: [A, B, ...]}        uniform pick; {choice: [...], weights: [...]}
//   now                          the engine clock (seconds, or the timestamp unit)
//   {constant: V}                always V
//
// A random_int over a key column gives a snapshot table a stream of new keys
// and updates of existing ones. Columns without a spec are null (they must be
// nullable). Values are cast to the column's type (unsafe casts truncate).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <arrow/type_fwd.h>

#include "rill/common/clock.h"
#include "rill/connector/memory_connector.h"

namespace rill::app {

/// How one generated column is filled.
struct GeneratorColumnSpec {
  enum class Kind { kSequence, kRandomInt, kRandomFloat, kChoice, kNow, kConstant };
  Kind kind = Kind::kNow;
  int64_t start = 0;
  int64_t step = 1;
  double lo = 0;
  double hi = 0;
  /// Values of kChoice (and the single value of kConstant), as text; cast to
  /// the column type.
  std::vector<std::string> choices;
  /// Optional weights of kChoice (same length as choices, non-negative).
  std::vector<double> weights;
};

struct GeneratorSpec {
  double rows_per_second = 100;
  int64_t interval_ms = 100;
  uint64_t seed = 0;  ///< 0: random
  std::map<std::string, GeneratorColumnSpec> columns;
};

/// A MemoryConnector fed by its own producer thread. Threads: as Connector.
class GeneratorConnector : public MemoryConnector {
 public:
  /// Check `spec` against `schema` (the table's user columns): Invalid for a
  /// spec naming an unknown column, a non-nullable column without a spec, or
  /// a value that does not cast to its column's type.
  static Result<std::shared_ptr<GeneratorConnector>> Make(
      std::string name, std::string table, std::shared_ptr<arrow::Schema> schema,
      GeneratorSpec spec, BufferLimits limits, Clock clock);
  ~GeneratorConnector() override;

  Status Start() override;
  void Stop() override;

  /// Generate `rows` rows at time `now` (the producer thread's step; public
  /// for tests).
  Result<std::shared_ptr<arrow::RecordBatch>> Generate(int64_t rows, double now);

 private:
  GeneratorConnector(std::string name, std::string table, std::shared_ptr<arrow::Schema> schema,
                     GeneratorSpec spec, BufferLimits limits, Clock clock);
  void Produce();

  std::shared_ptr<arrow::Schema> schema_;
  GeneratorSpec spec_;
  Clock clock_;
  // Generator state: the producer thread only (or a test calling Generate
  // while stopped).
  struct State;
  std::unique_ptr<State> state_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread producer_;
};

}  // namespace rill::app
