// Pieces of PgSession shared by its source files. Private to pgwire.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>

#include <arrow/type_fwd.h>

#include "rill/common/status.h"
#include "rill/server/pgwire/pg_session.h"

namespace rill::pgwire {

/// What running one statement produced.
struct PgSession::Outcome {
  Status status;
  std::string sqlstate;  ///< for errors; empty = derive from status
  std::shared_ptr<arrow::Table> table;  ///< rows, for statements that return rows
  std::string tag;       ///< command tag for statements without rows
  bool empty = false;    ///< empty query
};

namespace session_internal {

constexpr std::string_view kProtocolViolation = "08P01";

/// Settings reported with ParameterStatus (lower-case keys).
inline constexpr const char* kReportedSettings[] = {
    "server_version",  "server_version_num", "server_encoding",
    "client_encoding", "datestyle",          "standard_conforming_strings",
    "integer_datetimes", "timezone",         "application_name",
    "intervalstyle",   "is_superuser",       "session_authorization"};

/// Setting values at session start.
std::map<std::string, std::string> DefaultSettings(const PgServerConfig& config);
/// PostgreSQL's spelling of a setting name ("DateStyle" for "datestyle").
std::string DisplayName(const std::string& lower_name);
/// The SQLSTATE for an error from the executor.
std::string SqlStateFor(const Status& status);
/// True for statements that write or change the database (25006).
bool IsWriteKeyword(const std::string& word);

}  // namespace session_internal
}  // namespace rill::pgwire
