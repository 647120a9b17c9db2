// Global views: a materialized view over every instance of an application
// (`CREATE MATERIALIZED VIEW v WITH (scope = 'global') AS <aggregate>`,
// rills.ApplicationView, a pipeline file's view with `scope: global`).
//
// The query is split by PlanGlobal (sql/global_plan.h) into a partial query
// per group and input partition and a final query that merges the partials.
// On each instance, view `v` is made of:
//
//   v__partial           a materialized view: the partial query over the
//                        instance's own rows (its input partitions), keyed by
//                        the group columns and _partition
//   sink v__partial      its changes, upserts and tombstones, to the compacted
//                        topic "<app_id>-v-partials", keyed the same; on an
//                        exactly-once application in the instance's
//                        transactions, with the input offsets
//   v__partials          a keyed table with every instance's partials: a
//                        source of its own (not the group's) reads the whole
//                        topic from its beginning
//   v                    the final query over v__partials
//
// So every instance (and a Rill that only reads the topic) serves the same
// application-wide answer, over pgwire, SQL and the dashboard, one commit
// interval plus one view interval behind the input.
//
// Threads: Create and Drop from the catalog (any thread but the tick's).
#pragma once

#include <memory>

#include "rill/pipeline/catalog.h"

namespace rill {
class Engine;
namespace cluster {

class Application;

/// The maker of global views of `app`'s engine (Catalog::SetGlobalViewMaker).
std::shared_ptr<pipeline::GlobalViewMaker> MakeGlobalViews(Engine* engine, Application* app);

/// The compacted topic of the partials of view `view` of application `app_id`.
std::string PartialsTopic(const std::string& app_id, const std::string& view);

}  // namespace cluster
}  // namespace rill
