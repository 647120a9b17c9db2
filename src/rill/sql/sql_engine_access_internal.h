// A pooled DuckDB connection of a SqlEngine, for the sql/ folder's own code
// (ivm_plan.cc binds queries on it). Not for other folders.
#pragma once

#include <functional>

#include <duckdb.hpp>

#include "rill/common/status.h"
#include "rill/sql/sql_engine.h"

namespace rill {

struct SqlEngineAccess {
  /// Run `fn` on a pooled connection (its views match the registered tables);
  /// DuckDB exceptions become Invalid.
  static Status WithConnection(SqlEngine& sql,
                               const std::function<Status(duckdb::Connection&)>& fn);
};

}  // namespace rill
