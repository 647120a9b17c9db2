// Declarations shared by the binding files of rills._core.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nanobind/nanobind.h>

#include "rill/connector/connector.h"
#include "rill/table/live_table.h"

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

/// Return a connector's counters as a dict.
nb::dict StatsToDict(const rill::ConnectorStats& stats);

void BindTable(nb::module_& m);
void BindConnector(nb::module_& m);
void BindEngine(nb::module_& m);
void BindIoConnectors(nb::module_& m);

}  // namespace rills
