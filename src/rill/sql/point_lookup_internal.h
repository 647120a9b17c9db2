// Private to src/rill/sql: point queries answered through a table's key index.
//
// A SELECT over one keyed live table whose WHERE clause pins the primary key
// to constants (`key = 42`, `key = '42'`, `key = '42'::BIGINT` as pgwire
// sends a parameter, `key IN (1, 2)`, every column of a composite key) would
// make DuckDB scan and filter the whole version. Instead the rows with those
// keys are looked up in the table's current version (LiveTable::LookupKeys),
// and the query runs over them as if they were the table: the view reads
// them (LiveTableSource::Substitute) and DuckDB evaluates the whole statement,
// WHERE clause included, so types, NULLs and casts are DuckDB's. This holds
// because the looked-up rows are a superset of the rows the WHERE clause
// keeps (every row it keeps has one of the keys) and a subset of the version.
// A plain projection of columns (`SELECT a, b` or `SELECT *`, no other
// clause, only the key predicates) is answered from the rows directly, as
// DuckDB would return it.
//
// The shape is read from DuckDB's parsed statement, never from the SQL text.
// Anything unsure (a constant DuckDB might compare in another type, a
// subquery, a join, a second reference to the table, an unsupported key
// type) leaves the statement to the ordinary scan.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>

#include <arrow/type_fwd.h>

namespace duckdb {
class SQLStatement;
}  // namespace duckdb

namespace rill::sql_internal {

class LiveTableSource;

/// The rows of a point query's table, looked up by key.
struct PointLookup {
  /// The view the statement reads (one of the connection's).
  std::shared_ptr<LiveTableSource> view;
  /// The rows to show the statement as the view's table (its full schema).
  std::shared_ptr<arrow::Table> rows;
  /// The statement's whole result, when it is a plain projection; else null.
  std::shared_ptr<arrow::Table> answer;
};

/// Return the point lookup of `statement` over the connection's `views`
/// (by view name), or nullopt when the statement is not a point query of a
/// keyed table (it then runs the ordinary way). Never fails: whatever cannot
/// be decided here is left to DuckDB. Any thread; reads the tables' current
/// versions.
std::optional<PointLookup> FindPointLookup(
    const duckdb::SQLStatement& statement,
    const std::map<std::string, std::shared_ptr<LiveTableSource>>& views);

}  // namespace rill::sql_internal
