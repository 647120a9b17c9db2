// Declarations shared by the binding files of rills._core.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nanobind/nanobind.h>

#include <memory>

#include "rill/connector/connector.h"
#include "py_callback.h"
#include "rill/table/live_table.h"

namespace rill {
class Engine;
class MetricsStore;
}  // namespace rill

namespace rills {

namespace nb = nanobind;

/// Build TableOptions from the Python arguments (unset values come from the
/// schema metadata). Raises ValueError for an unknown mode.
rill::TableOptions MakeTableOptions(const std::vector<std::string>& primary_key,
                                    const std::optional<std::string>& mode,
                                    std::optional<int64_t> max_rows,
                                    std::optional<double> max_age_seconds,
                                    const std::optional<std::string>& time_column,
                                    std::optional<int64_t> auto_compact_chunks);

/// A retention policy as (max_rows, max_age_seconds, time_column), or None.
nb::object RetentionToTuple(const std::optional<rill::RetentionPolicy>& policy);

/// A table subscriber calling `callback(stream capsule)` with the GIL; its
/// exceptions go to `reporter` as "subscriber:<table>".
rill::LiveTable::Subscriber MakeSubscriber(nb::handle callback, ReporterPtr reporter,
                                           const std::string& table);

/// Return a connector's counters as a dict.
nb::dict StatsToDict(const rill::ConnectorStats& stats);

/// What bind_server.cc needs of a `_core.Engine` (raises if it is closed).
struct EngineAccess {
  rill::Engine* engine = nullptr;
  rill::MetricsStore* metrics = nullptr;  ///< null while the store is not open
  /// Owned by the engine object and reset first when it closes, so a server
  /// kept here stops before the engine and the store go away.
  std::shared_ptr<void>* server_slot = nullptr;
  /// The engine's rill::Checkpointer (bind_checkpoint.cc), reset before anything else.
  std::shared_ptr<void>* checkpointer_slot = nullptr;
};
EngineAccess AccessEngine(nb::handle core);

void BindTable(nb::module_& m);
void BindConnector(nb::module_& m);
void BindEngine(nb::module_& m);
void BindWindow(nb::module_& m);  // bind_window.cc

/// Return the rill::Engine of a rills._core.Engine object (RuntimeError when
/// closed). Defined in bind_engine.cc.
rill::Engine& CoreEngine(nb::handle engine);
void BindIoConnectors(nb::module_& m);
void BindServer(nb::module_& m);
void BindToolkit(nb::module_& m);  // bind_toolkit.cc
void BindSeed(nb::module_& m);  // bind_seed.cc: log queue, run_task_now, alert rules
void BindCheckpoint(nb::module_& m);  // bind_checkpoint.cc
void BindSink(nb::module_& m);        // bind_sink.cc: rills.sinks

}  // namespace rills
