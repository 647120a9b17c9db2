// `rill query`: run SQL on a running rill server over its HTTP API.
//
// POSTs {"sql": ..., "format": ...} to http://ADDR/api/v1/sql with the
// bearer token and prints the result: an aligned text table (default; asks
// for JSON and formats it), or the server's CSV / JSON unchanged.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "rill/common/status.h"

namespace rill::app {

struct QueryOptions {
  /// HOST:PORT, quack:HOST:PORT or http://HOST:PORT.
  std::string server = "127.0.0.1:9494";
  /// Bearer token; empty sends none.
  std::string token;
  /// "table", "csv" or "json".
  std::string format = "table";
  std::string sql;
  double timeout_seconds = 60;
};

/// A JSON query result: column names and types, cells as text.
struct QueryTable {
  std::vector<std::string> names;
  std::vector<std::string> types;  ///< empty strings when the server sent none
  /// Each cell's text; nullopt for SQL NULL.
  std::vector<std::vector<std::optional<std::string>>> rows;
};

/// Return the URL of the query endpoint for `server` (see QueryOptions).
/// Invalid for an address without a port.
Result<std::string> QueryUrl(const std::string& server);

/// Parse the JSON result `{"columns": [{"name", "type"}...], "rows": [...]}`;
/// rows may be arrays (in column order) or objects (by column name; without
/// "columns" the first row's keys name them). Invalid otherwise.
Result<QueryTable> ParseJsonResult(const std::string& json);

/// Format `table` as aligned text: a header, a rule, the rows (numbers
/// right-aligned, NULL for nulls) and a "(N rows)" line.
std::string FormatTable(const QueryTable& table);

struct DumpOptions {
  std::string server = "127.0.0.1:9494";
  /// The admin token (the dump shows every option, credentials included).
  std::string token;
  /// "yaml" (a pipeline file) or "sql" (CREATE statements).
  std::string format = "yaml";
  double timeout_seconds = 60;
};

/// `rill pipeline dump --server ADDR`: fetch the running catalog
/// (GET /api/v1/pipeline/dump). Return codes as RunQuery's.
int RunDump(const DumpOptions& options, std::string* out, std::string* err);

/// Run the statement over POST /api/v1/sql (a query, or DDL with the admin
/// token: the command tag is printed). On success return 0 and the text to print in `*out`. On
/// failure return 1 when the server refused the query (its message in
/// `*err`), 2 when it could not be reached or answered something unreadable.
int RunQuery(const QueryOptions& options, std::string* out, std::string* err);

}  // namespace rill::app
