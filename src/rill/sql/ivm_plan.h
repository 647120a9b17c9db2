// Incremental view maintenance: which queries can be kept up to date from
// their sources' changes, and the SQL that does it.
//
// PlanIncremental reads a query with DuckDB's own parser (the shape: one
// SELECT over live tables joined by INNER or LEFT joins, WHERE, GROUP BY,
// HAVING) and binder (result names and types, determinism of every function),
// and returns an IvmPlan, or Invalid naming the part that is not maintainable.
//
// The plan splits the query in two stages:
//  - the *row stage* maps the FROM / WHERE part to rows with a multiplicity
//    column `__m` (+n: rows added, -n: rows removed). `full_sql` reads the
//    live tables (every row once); each of `terms` reads the changes of some
//    sources (the scratch relations `sources[i].scratch`: the source's
//    columns plus `__m`) and the current version of the others, so that the
//    terms together are the change of the join (inclusion-exclusion over the
//    sources; a LEFT JOIN adds the rows whose match count went to or from 0).
//    The stage columns are, for an aggregate query, the GROUP BY values
//    (__g<i>) then the aggregates' arguments (__x<j>); otherwise the query's
//    own output columns.
//  - for an aggregate query, the *group stage* (`final_sql`) computes the
//    query's output rows from the relation `groups_scratch` holding, per
//    changed group, __g<i>, the aggregate values __a<j> and a row id __gid;
//    the caller keeps the per-group aggregate state between runs.
//
// Threads: PlanIncremental may be called from any thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <arrow/type_fwd.h>

#include "rill/common/status.h"

namespace rill {

class SqlEngine;

enum class IvmAggregateKind { kCountStar, kCount, kSum, kAvg, kMin, kMax, kCountDistinct };

struct IvmAggregate {
  IvmAggregateKind kind = IvmAggregateKind::kCountStar;
  int arg = -1;  ///< the argument's stage column (-1 for count(*))
  std::string text;  ///< as written, for messages
};

struct IvmSource {
  std::string table;    ///< the live table
  std::string alias;    ///< its name in the query
  std::string scratch;  ///< the relation its changes are shown under
};

struct IvmTerm {
  std::string sql;
  /// Bit i set: reads the changes of source i (the term is empty, and skipped,
  /// when one of them has none).
  uint32_t delta_sources = 0;
};

struct IvmPlan {
  std::vector<IvmSource> sources;
  bool aggregate = false;
  int num_groups = 0;  ///< stage columns [0, num_groups) are the group values
  std::vector<IvmAggregate> aggregates;
  /// Shared by every term (WITH ...), or empty.
  std::string with_clause;
  std::vector<IvmTerm> terms;
  std::string full_sql;
  std::string groups_scratch;
  std::string final_sql;
  /// The output's columns (the query's names) and its key (upserts and
  /// deletes): the GROUP BY columns, or the sources' key columns; empty for
  /// an aggregate without GROUP BY (one row, replaced).
  std::vector<std::string> output_names;
  std::vector<std::string> output_key;
  /// Aggregate queries: for each output key column, its group index.
  std::vector<int> key_groups;
  /// Non-aggregate queries: for each output key column, its stage column.
  std::vector<int> key_columns;
};

/// Analyse `query` over the tables registered in `sql` now. `prefix` names
/// the scratch relations (`<prefix>_d<i>`, `<prefix>_groups`).
Result<IvmPlan> PlanIncremental(SqlEngine& sql, const std::string& query,
                                const std::string& prefix);

}  // namespace rill
