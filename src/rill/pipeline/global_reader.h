// The read half of a global view (cluster/global_view.h has the whole): the
// keyed table "<view>__partials" holding every instance's partial rows, fed by
// a Kafka source of its own (outside any application's group) that reads the
// compacted topic "<app_id>-<view>-partials" from its beginning,
// read_committed, and the view "<view>": the final query over that table.
//
// An application's instance makes it after its own partial view and sink; a
// Rill that is no instance makes only this half (CREATE MATERIALIZED VIEW ...
// WITH (scope = 'global', app_id = ..., bootstrap_servers = ...)) and serves
// the same answer.
// Threads: as the catalog (any thread but the tick's).
#pragma once

#include <memory>
#include <string>

#include "rill/common/status.h"
#include "rill/pipeline/options.h"
#include "rill/pipeline/tasks.h"
#include "rill/sql/global_plan.h"

namespace rill {
class Engine;
namespace pipeline {

/// The compacted topic of the partials of view `view` of application `app_id`.
std::string GlobalPartialsTopic(const std::string& app_id, const std::string& view);

/// The plan of global view `decl` over `engine`'s table: PlanGlobal's (the
/// partials keyed by the groups and `_partition`: a partition's shard, keyed
/// or append, is held by its owner alone). Refused with a SQLSTATE: a query
/// that does not decompose (0A000), a missing table (42704), a table without
/// _partition (22023).
Result<GlobalPlan> PlanGlobalView(Engine* engine, const MaterializedViewDecl& decl);

struct GlobalReaderSpec {
  /// The view: its name, query's plan, interval and incremental mode.
  MaterializedViewDecl decl;
  GlobalPlan plan;
  /// The partial rows' columns (the partial query's result).
  std::shared_ptr<arrow::Schema> partial_schema;
  std::string topic;
  /// bootstrap.servers and the security settings, as dotted options.
  Options kafka;
  std::string group_id;  ///< the source consumer's group.id (its own)
};

/// Make "<view>__partials", its source "<view>__partials_in" and the view.
/// Refused (nothing stays) as the engine refuses them.
Status MakeGlobalReader(Engine* engine, const GlobalReaderSpec& spec);
/// Remove what MakeGlobalReader made for `view` (absent parts are skipped).
void DropGlobalReader(Engine* engine, const std::string& view);
/// Add view `view` and run it once (its output table exists after); Invalid
/// with the first run's error.
Status AddAndRunView(Engine* engine, const MaterializedViewDecl& view);

}  // namespace pipeline
}  // namespace rill
