// POST /api/v1/sql (SQL of every kind: DDL of declared pipelines through the
// engine's catalog, anything else as POST /api/v1/query) and GET
// /api/v1/pipeline (the catalog as a graph, for the dashboard's Pipeline view).
#include "rill/pipeline/catalog.h"
#include "rill/server/auth.h"
#include "rill/server/json_body.h"
#include "rill/server/json_writer.h"
#include "rill/server/server_internal.h"

namespace rill::server {

namespace {

/// HTTP status of a DDL error by its SQLSTATE.
int HttpStatusOf(const std::string& sqlstate) {
  if (sqlstate == pipeline::kSqlStatePrivilege) return 403;
  if (sqlstate == pipeline::kSqlStateUndefined) return 404;
  if (sqlstate == pipeline::kSqlStateDuplicate || sqlstate == pipeline::kSqlStateDependent) {
    return 409;
  }
  return 400;
}

HttpReply DdlError(const std::string& sqlstate, const std::string& message) {
  std::string body = "{\"error\":";
  AppendJsonString(message, &body);
  body += ",\"message\":";
  AppendJsonString(message, &body);
  body += ",\"code\":";
  AppendJsonString(sqlstate, &body);
  body += ",\"sqlstate\":";
  AppendJsonString(sqlstate, &body);
  body += "}";
  return JsonReply(std::move(body), HttpStatusOf(sqlstate));
}

/// The statement of a POST /api/v1/sql body: {"sql": "..."} or the SQL text.
Result<std::string> StatementOf(const HttpRequest& request) {
  std::string_view type = request.header("content-type");
  if (type.find("json") == std::string_view::npos) return request.body;
  RILL_ASSIGN_OR_RAISE(auto obj, ParseJsonObject(request.body));
  RILL_ASSIGN_OR_RAISE(auto sql, GetString(obj, "sql"));
  if (!sql.has_value()) return Status::Invalid("missing \"sql\"");
  return *sql;
}

HttpReply Sql(ServerContext& ctx, const HttpRequest& request) {
  auto sql = StatementOf(request);
  if (!sql.ok()) return StatusReply(sql.status());
  if (!pipeline::IsDdl(*sql)) {
    // Any other statement is a read-only query, as POST /api/v1/query runs it.
    HttpRequest query = request;
    query.path = "/api/v1/query";
    if (request.header("content-type").find("json") == std::string_view::npos) {
      std::string body = "{\"sql\":";
      AppendJsonString(*sql, &body);
      query.body = body + "}";
      query.headers["content-type"] = "application/json";
    }
    return *RouteQuery(ctx, query);
  }
  // CREATE and DROP need the admin token, whatever they say.
  if (!pipeline::IsShowDdl(*sql) && !IsAdmin(request, ctx.admin_token)) {
    return DdlError(pipeline::kSqlStatePrivilege,
                    "permission denied: CREATE and DROP need the admin token (this token is "
                    "read-only)");
  }
  auto statement = pipeline::ParseDdl(*sql);
  if (!statement.ok()) {
    return DdlError(pipeline::SqlStateOf(statement.status()), statement.status().message());
  }
  auto done = pipeline::Catalog::For(ctx.engine).Execute(*statement);
  if (!done.ok()) {
    std::string state = pipeline::SqlStateOf(done.status());
    return DdlError(state.empty() ? "XX000" : state, done.status().message());
  }
  std::string body = "{\"command\":";
  AppendJsonString(done->tag, &body);
  body += ",\"notice\":";
  AppendJsonString(done->notice, &body);
  if (done->rows != nullptr) {
    auto rows = TableToJson(*done->rows, ctx.options.max_json_result_bytes);
    if (!rows.ok()) return StatusReply(rows.status());
    // {"columns": ..., "rows": ..., "row_count": n} after the command.
    body += "," + rows->substr(1, rows->size() - 2);
  }
  return JsonReply(body + "}");
}

}  // namespace

std::optional<HttpReply> RoutePipeline(ServerContext& ctx, const HttpRequest& request) {
  if (request.path == "/api/v1/sql") {
    if (request.method != "POST") {
      return ErrorReply(405, "use POST with the SQL as the body, or {\"sql\": ...}");
    }
    return Sql(ctx, request);
  }
  if (request.path == "/api/v1/pipeline") {
    if (request.method != "GET") return ErrorReply(405, "use GET");
    return JsonReply(pipeline::Catalog::For(ctx.engine).GraphJson());
  }
  if (request.path == "/api/v1/pipeline/dump") {
    if (request.method != "GET") return ErrorReply(405, "use GET");
    // Every option, credentials included: the admin's when there is one.
    if (!ctx.admin_token.empty() && !IsAdmin(request, ctx.admin_token)) {
      return DdlError(pipeline::kSqlStatePrivilege,
                      "permission denied: the dump needs the admin token");
    }
    std::string format = request.query.count("format") != 0 ? request.query.at("format") : "sql";
    HttpReply reply;
    reply.content_type = format == "yaml" ? "application/yaml" : "application/sql";
    const pipeline::Catalog& catalog = pipeline::Catalog::For(ctx.engine);
    reply.body = format == "yaml" ? catalog.DumpYaml() : catalog.DumpSql();
    return reply;
  }
  return std::nullopt;
}

}  // namespace rill::server
