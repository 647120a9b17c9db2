// Global results of a scaled-out application (issue 28): an aggregate query
// split into a partial query each instance runs over the partitions it owns,
// and a final query that merges the partials of every partition.
//
//     SELECT region, sum(price) AS revenue, avg(price) AS mean, count(*) AS n
//     FROM orders WHERE price > 0 GROUP BY region
//
// becomes the partial query (per group and input partition; `_partition` is
// the Kafka source's metadata column)
//
//     SELECT region AS "region", _partition AS "_partition",
//            sum(price) AS "revenue", sum(price) AS "mean__sum",
//            count(price) AS "mean__count", count(*) AS "n"
//     FROM orders WHERE price > 0 GROUP BY region, _partition
//
// and the final query over a relation holding those rows (`{partials}`)
//
//     SELECT "region", sum("revenue") AS "revenue",
//            sum("mean__sum") / sum("mean__count") AS "mean", sum("n") AS "n"
//     FROM {partials} GROUP BY "region"
//
// The shape accepted: one SELECT over one table, an optional WHERE, GROUP BY
// plain columns, and a select list of those columns and of the decomposable
// aggregates count(*), count(x), sum(x), min(x), max(x), avg(x), each an
// output column of its own. Anything else is refused (Invalid, naming it).
// Threads: any.
#pragma once

#include <string>
#include <vector>

#include "rill/common/status.h"

namespace rill {

struct GlobalPlan {
  std::string table;                       ///< the FROM table
  std::vector<std::string> group_columns;  ///< output names of the GROUP BY columns
  /// The partial query (GROUP BY the group columns and `partition_column`).
  std::string partial_sql;
  /// The partial rows' key: the group columns, then `partition_column`.
  std::vector<std::string> partial_key;
  /// The final query; `{partials}` stands for the relation of partial rows.
  std::string final_sql;
  /// The final query's output columns, in order.
  std::vector<std::string> output_names;
  /// The partial query restricted to some partitions: the partial query with
  /// `AND _partition IN ({partitions})` (for ad-hoc fan-out; `{partitions}`
  /// stands for the list).
  std::string partial_sql_for_partitions;
};

/// The partial rows' column naming who computed them (see PlanGlobal).
inline constexpr char kContributorColumn[] = "_contributor";

/// Split `query` (see above). `partition_column` names the input partition
/// column of the table (default "_partition"). A non-empty `contributor` adds
/// the column kContributorColumn with that value to the partial rows, after
/// the partition, and to their key: the partials of an append table from
/// different instances (or lives of one) then add up instead of replacing
/// each other (cluster/global_view.h).
Result<GlobalPlan> PlanGlobal(const std::string& query,
                              const std::string& partition_column = "_partition",
                              const std::string& contributor = "");

/// `final_sql` with `{partials}` replaced by `relation`.
std::string FinalSqlOver(const GlobalPlan& plan, const std::string& relation);

}  // namespace rill
