// DDL over pgwire: CREATE / DROP / SHOW of declared pipelines (pipeline/ddl.h).
// CREATE and DROP need the admin credential (the user `admin`); SHOW lists
// are read-only and open to every session.
#include "rill/pipeline/catalog.h"
#include "rill/pipeline/options.h"
#include "rill/server/pgwire/pg_executor.h"
#include "rill/server/pgwire/pg_session.h"
#include "rill/server/pgwire/pg_session_internal.h"

namespace rill::pgwire {

std::optional<PgSession::Outcome> PgSession::RunDdl(const std::string& sql) {
  // The metrics database's SHOW TABLES is DuckDB's; its writes are refused as writes.
  if (database_ == kMetricsDatabase || !pipeline::IsDdl(sql)) return std::nullopt;
  Outcome out;
  // CREATE and DROP need the admin credential, whatever they say.
  if (!admin_ && !pipeline::IsShowDdl(sql)) {
    out.status = Status::Invalid(
        "permission denied: CREATE and DROP need the admin credential (log in as user \"",
        kAdminUser, "\" with the admin token); this session is read-only");
    out.sqlstate = pipeline::kSqlStatePrivilege;
    return out;
  }
  auto statement = pipeline::ParseDdl(sql);
  if (!statement.ok()) {
    out.status = statement.status();
    out.sqlstate = pipeline::SqlStateOf(statement.status());
    return out;
  }
  auto done = config_->executor->RunDdl(*statement);
  if (!done.ok()) {
    out.status = done.status();
    out.sqlstate = pipeline::SqlStateOf(done.status());
    if (out.sqlstate.empty()) out.sqlstate = "XX000";
    return out;
  }
  if (!done->notice.empty()) writer_.Notice("00000", done->notice);
  out.tag = done->tag;
  out.table = done->rows;
  return out;
}

Result<pipeline::DdlResult> EnginePgExecutor::RunDdl(const pipeline::DdlStatement& statement) {
  return pipeline::Catalog::For(engine_).Execute(statement);
}

}  // namespace rill::pgwire
