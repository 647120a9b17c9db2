// The SQL DDL of declared pipelines: parsing (this file; applying them to an
// engine is the catalog's, and their options are the kinds' option tables).
//
//   CREATE TABLE [IF NOT EXISTS] name (col type [NOT NULL] [PRIMARY KEY], ...,
//       [PRIMARY KEY (a, b)]) [WITH (option = value, ...)]
//   CREATE SOURCE [IF NOT EXISTS] name INTO table WITH (connector = 'kafka', ...)
//   CREATE MATERIALIZED VIEW [IF NOT EXISTS] name [WITH (...)] AS SELECT ...
//   CREATE STREAM VIEW [IF NOT EXISTS] name WITH (source = 't', ...) AS SELECT ...
//   CREATE WINDOW [IF NOT EXISTS] name WITH (source = 't', window = 'tumbling', ...)
//   CREATE SINK [IF NOT EXISTS] name FROM table WITH (connector = 'kafka', ...)
//   CREATE KPI [IF NOT EXISTS] name [WITH (...)] AS SELECT ...
//   CREATE ALERT RULE [IF NOT EXISTS] name WITH (metric = 'm', op = '>', ...)
//   DROP TABLE | SOURCE | MATERIALIZED VIEW | STREAM VIEW | WINDOW | SINK | KPI |
//       ALERT RULE [IF EXISTS] name [CASCADE | RESTRICT]
//   SHOW TABLES | SOURCES | VIEWS | SINKS | WINDOWS | KPIS | ALERT RULES
//
// Keywords are case-insensitive; names follow PostgreSQL: unquoted names are
// folded to lower case, "quoted" names are kept as written ("" is a quote).
// Option values are string literals ('...', '' a quote), numbers, true /
// false or bare words; option names are names, and a quoted name may hold
// dots ("bootstrap.servers"). A trailing `;` is allowed. Errors are
// DeclError(42601) naming the token: `syntax error at or near "X"`.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "rill/common/status.h"
#include "rill/pipeline/options.h"

namespace rill::pipeline {

/// What a statement declares or asks.
enum class DdlObject {
  kTable,
  kSource,
  kMaterializedView,
  kStreamView,
  kWindow,
  kSink,
  kKpi,
  kAlertRule,
};

/// "TABLE", "SOURCE", "MATERIALIZED VIEW", ... (as written in SQL).
const char* DdlObjectName(DdlObject object);

/// One column of CREATE TABLE.
struct DdlColumn {
  std::string name;
  /// The SQL type as written, upper-cased and normalized ("BIGINT",
  /// "DOUBLE PRECISION", "VARCHAR", "TIMESTAMP WITH TIME ZONE").
  std::string sql_type;
  /// The pipeline file's type name for it ("int64", "float64", "string",
  /// "timestamp[us, UTC]", ...; table/schema.h's ParseType reads it).
  std::string type;
  bool not_null = false;
};

struct DdlStatement {
  enum class Verb { kCreate, kDrop, kShow };
  Verb verb = Verb::kCreate;
  DdlObject object = DdlObject::kTable;
  /// SHOW VIEWS lists materialized and stream views (object: kMaterializedView).
  bool show_all_views = false;
  std::string name;
  bool if_not_exists = false;  ///< CREATE ... IF NOT EXISTS
  bool if_exists = false;      ///< DROP ... IF EXISTS
  bool cascade = false;        ///< DROP ... CASCADE
  std::string into;            ///< CREATE SOURCE ... INTO table
  std::string from;            ///< CREATE SINK ... FROM table
  std::vector<DdlColumn> columns;        ///< CREATE TABLE
  std::vector<std::string> primary_key;  ///< CREATE TABLE
  Options with;                          ///< WITH (...), in order
  std::string query;                     ///< AS <query>: its text, trimmed, no `;`
};

/// Parse one DDL statement. DeclError with SQLSTATE 42601 for anything that
/// is not one of the statements above.
Result<DdlStatement> ParseDdl(std::string_view sql);

/// True when `sql` starts (after blanks and comments) with CREATE or DROP, or
/// is SHOW of one of the lists above (not SHOW of a setting, which pgwire
/// answers): the statements a server sends to ParseDdl instead of DuckDB.
bool IsDdl(std::string_view sql);

/// True when `sql` is one of the SHOW lists of IsDdl (read-only: open to
/// every client, unlike CREATE and DROP).
bool IsShowDdl(std::string_view sql);

/// `name` as SQL writes it: bare when it is a lower-case identifier, else
/// in double quotes (for `rill pipeline dump --format sql`).
std::string QuoteName(std::string_view name);
/// `text` as a SQL string literal ('...' with '' for a quote).
std::string QuoteLiteral(std::string_view text);

}  // namespace rill::pipeline
