// `rill query`: run SQL on a running rill server over its HTTP API.
//
// POSTs {"sql": ..., "format": ...} to http://ADDR/api/v1/sql with the
// bearer token and prints the result: an aligned text table (default; asks
// for JSON and formats it), or the server's CSV / JSON unchanged.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <arrow/type_fwd.h>

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
  /// `rill query --app APP`: ask every instance of the application instead
  /// of one server (RunAppQuery); `bootstrap_servers` is its Kafka cluster.
  std::string app;
  std::string bootstrap_servers = "127.0.0.1:9092";
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

/// One HTTP request to a rill server (`url` on `server`): POST `*post_body`
/// as JSON, or GET when null. 0 with the body in `*response`; 1 when the
/// server refused it (its message in `*err`); 2 when it could not be reached.
int HttpExchange(const std::string& server, const std::string& url, const std::string& token,
                 const std::string* post_body, double timeout_seconds, std::string* response,
                 std::string* err);

/// `rill query --app APP --bootstrap-servers B SQL` (query_app.cc): an
/// aggregate over a table of a scaled-out application, answered by fan-out.
/// 1. The query is split (sql/global_plan.h) into a partial query per
///    partition and a final merge; the table needs the `_partition` column
///    (its Kafka source's metadata_columns).
/// 2. The members: the group's description (each member's partitions) and
///    the topic "<app>-members" (each instance's server URL, announced by
///    `rill serve`).
/// 3. Coverage: every partition of the input topics is owned by exactly one
///    member, the group is Stable, and each owner's table holds its
///    partitions whole (its first row is the partition's first offset, or it
///    owns it from the start, and it was never rewound); otherwise an error
///    naming the partition, never a partial answer.
/// 4. Each owner runs the partial query over its partitions
///    (POST /api/v1/query, Arrow IPC); the group is described again, and a
///    change of assignment meanwhile (a rebalance) starts over (up to 5 times).
/// 5. The partials are merged in DuckDB with the final query and printed as
///    RunQuery does. Return codes as RunQuery's.
int RunAppQuery(const QueryOptions& options, std::string* out, std::string* err);

/// An Arrow table as a QueryTable (cells as text), for FormatTable.
QueryTable ToQueryTable(const arrow::Table& table);

}  // namespace rill::app
