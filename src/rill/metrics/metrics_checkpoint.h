// The metrics store's definitions in engine checkpoints: KPI queries
// (add_dashboard_scheduled_query) and alert rules, as one checkpoint section.
#pragma once

#include <functional>

#include "rill/common/status.h"

namespace rill {

class Checkpointer;
class MetricsStore;

/// Name of the section in a checkpoint's manifest.
inline constexpr char kMetricsCheckpointSection[] = "metrics";

/// Add the "metrics" section to `checkpointer`: saves the KPI queries and
/// alert rules of the store `store()` returns (nothing while it returns null)
/// and restores them (adding or replacing by name). `store` is called on the
/// tick thread and on the restoring thread; what it returns must stay valid
/// while the checkpointer lives.
void AddMetricsCheckpointSection(Checkpointer& checkpointer,
                                 std::function<MetricsStore*()> store);

}  // namespace rill
