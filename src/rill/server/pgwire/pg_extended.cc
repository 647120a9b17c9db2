// The extended query protocol and SQL-level cursors (which are portals too:
// psycopg's server-side cursors DECLARE one, Describe it as a portal and FETCH
// from it in chunks).
#include <algorithm>

#include <arrow/api.h>

#include "rill/server/pgwire/pg_catalog.h"
#include "rill/server/pgwire/pg_session_internal.h"
#include "rill/server/pgwire/pg_sql.h"
#include "rill/server/pgwire/pg_types.h"

namespace rill::pgwire {
namespace {

// Whitespace-separated tokens; double-quoted identifiers kept case and
// unquoted, others lower-cased.
std::vector<std::string> Tokens(std::string_view sql, size_t max_tokens) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < sql.size() && out.size() < max_tokens) {
    if (std::isspace(static_cast<unsigned char>(sql[i]))) {
      ++i;
      continue;
    }
    std::string token;
    if (sql[i] == '"') {
      ++i;
      while (i < sql.size()) {
        if (sql[i] == '"') {
          if (i + 1 < sql.size() && sql[i + 1] == '"') {
            token.push_back('"');
            i += 2;
            continue;
          }
          ++i;
          break;
        }
        token.push_back(sql[i++]);
      }
    } else {
      while (i < sql.size() && !std::isspace(static_cast<unsigned char>(sql[i]))) {
        token.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(sql[i++]))));
      }
    }
    out.push_back(std::move(token));
  }
  return out;
}

// Position just after the first top-level keyword `word` (lower case) that
// stands alone, or npos.
size_t FindKeyword(const std::string& sql, const std::string& word) {
  std::string lower = sql;
  std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
  size_t pos = 0;
  while ((pos = lower.find(word, pos)) != std::string::npos) {
    bool start_ok = pos == 0 || std::isspace(static_cast<unsigned char>(lower[pos - 1]));
    size_t end = pos + word.size();
    bool end_ok = end == lower.size() || std::isspace(static_cast<unsigned char>(lower[end]));
    if (start_ok && end_ok) {
      return end;
    }
    pos = end;
  }
  return std::string::npos;
}

}  // namespace

void PgSession::ExtendedError(std::string_view sqlstate, const Status& status) {
  if (sqlstate.empty()) {
    SendError(status);
  } else {
    SendErrorCode(sqlstate, status.message());
  }
  discard_until_sync_ = true;
}

Status PgSession::ExtendedMessage(const PgFrame& frame) {
  if (frame.type == 'S') {  // Sync
    discard_until_sync_ = false;
    if (!in_transaction_) {
      ClosePortalsAtTransactionEnd();
    }
    writer_.ReadyForQuery(TransactionStatus());
    return Status::OK();
  }
  if (frame.type == 'H') {  // Flush: output goes out when Feed returns anyway
    return flush_ && !inline_ ? flush_(writer_.buffer()) : Status::OK();
  }
  if (discard_until_sync_) {
    // Still check the type, so garbage cannot hide behind an error.
    if (std::string_view("PBDECdcf").find(frame.type) == std::string_view::npos) {
      return Fatal(session_internal::kProtocolViolation,
                   Status::Invalid("invalid frontend message type ", int(frame.type)));
    }
    return Status::OK();
  }
  switch (frame.type) {
    case 'P': return OnParse(frame.body);
    case 'B': return OnBind(frame.body);
    case 'D': return OnDescribe(frame.body);
    case 'E': return OnExecute(frame.body);
    case 'C': return OnClose(frame.body);
    case 'd':
    case 'c':
    case 'f':
      ExtendedError("08P01", Status::Invalid("COPY is not supported"));
      return Status::OK();
    default:
      return Fatal(session_internal::kProtocolViolation,
                   Status::Invalid("invalid frontend message type ",
                                   static_cast<int>(static_cast<uint8_t>(frame.type))));
  }
}

Status PgSession::OnParse(std::string_view body) {
  auto m = ParseParse(body);
  if (!m.ok()) {
    return Fatal(session_internal::kProtocolViolation, m.status());
  }
  if (!IsValidUtf8(m->query) || !IsValidUtf8(m->name)) {
    ExtendedError("22021", Status::Invalid("invalid byte sequence for encoding \"UTF8\""));
    return Status::OK();
  }
  if (!m->name.empty() && statements_.count(m->name) > 0) {
    ExtendedError("42P05", Status::Invalid("prepared statement \"", m->name,
                                           "\" already exists"));
    return Status::OK();
  }
  if (SplitStatements(m->query).size() > 1) {
    ExtendedError("42601",
                  Status::Invalid("cannot insert multiple commands into a prepared statement"));
    return Status::OK();
  }
  auto count = CountParameters(m->query);
  if (!count.ok()) {
    ExtendedError("42601", count.status());
    return Status::OK();
  }
  auto statement = std::make_shared<Statement>();
  statement->sql = std::move(m->query);
  statement->param_types = std::move(m->param_types);
  if (auto replacement = DriverIntrospectionSql(statement->sql)) {
    statement->sql = std::move(*replacement);
    statement->param_types.resize(1);
    statement->param_types[0] = PgArrayOidFor(oid::kOid);  // oid[], as asyncpg sends it
  }
  if (statement->param_types.size() < static_cast<size_t>(*count)) {
    statement->param_types.resize(static_cast<size_t>(*count), 0);
  }
  statements_[m->name] = std::move(statement);
  writer_.ParseComplete();
  return Status::OK();
}

Status PgSession::OnBind(std::string_view body) {
  auto m = ParseBind(body);
  if (!m.ok()) {
    return Fatal(session_internal::kProtocolViolation, m.status());
  }
  auto it = statements_.find(m->statement);
  if (it == statements_.end()) {
    ExtendedError("26000", Status::Invalid("prepared statement \"", m->statement,
                                           "\" does not exist"));
    return Status::OK();
  }
  Statement& statement = *it->second;
  if (m->params.size() != statement.param_types.size()) {
    ExtendedError("08P01", Status::Invalid("bind message supplies ", m->params.size(),
                                           " parameters, but prepared statement \"",
                                           m->statement, "\" requires ",
                                           statement.param_types.size()));
    return Status::OK();
  }
  if (!m->portal.empty() && portals_.count(m->portal) > 0) {
    ExtendedError("42P03", Status::Invalid("portal \"", m->portal, "\" already exists"));
    return Status::OK();
  }
  auto format_of = [&](size_t i) -> int16_t {
    return m->param_formats.empty()       ? 0
           : m->param_formats.size() == 1 ? m->param_formats[0]
                                          : m->param_formats[i];
  };
  // A binary value of an unspecified type: the client encoded it for the type
  // a Describe announced (or assumes one), so decode it as the bound type.
  for (size_t i = 0; i < m->params.size() && !statement.inferred; ++i) {
    if (format_of(i) == 1 && statement.param_types[i] == 0) {
      InferParameterTypes(statement);
    }
  }
  std::vector<std::string> literals;
  literals.reserve(m->params.size());
  for (size_t i = 0; i < m->params.size(); ++i) {
    const int16_t format = format_of(i);
    if (format == 0 && m->params[i].has_value() && !IsValidUtf8(*m->params[i])) {
      ExtendedError("22021", Status::Invalid("parameter $", i + 1,
                                             ": invalid byte sequence for encoding \"UTF8\""));
      return Status::OK();
    }
    auto literal = ParameterLiteral(m->params[i], statement.param_types[i], format);
    if (!literal.ok()) {
      ExtendedError("22P02", Status::Invalid("parameter $", i + 1, ": ",
                                             literal.status().message()));
      return Status::OK();
    }
    literals.push_back(std::move(*literal));
  }
  auto sql = SubstituteParameters(statement.sql, literals);
  if (!sql.ok()) {
    ExtendedError("42P02", sql.status());
    return Status::OK();
  }
  auto portal = std::make_shared<Portal>();
  portal->statement = it->second;
  portal->sql = std::move(*sql);
  portal->result_formats = std::move(m->result_formats);
  portals_[m->portal] = std::move(portal);
  writer_.BindComplete();
  return Status::OK();
}

bool PgSession::EnsurePortalRun(Portal& portal) {
  if (portal.executed) {
    return true;
  }
  portal.executed = true;
  Outcome out = Run(portal.sql);
  if (!out.status.ok()) {
    ExtendedError(out.sqlstate, out.status);
    return false;
  }
  portal.result = std::move(out.table);
  portal.tag = std::move(out.tag);
  portal.empty = out.empty;
  portal.fetch = portal.tag.rfind("FETCH", 0) == 0;
  return true;
}

void PgSession::InferParameterTypes(Statement& statement) {
  if (statement.inferred) {
    return;
  }
  statement.inferred = true;
  if (std::none_of(statement.param_types.begin(), statement.param_types.end(),
                   [](int32_t t) { return t == 0; })) {
    return;
  }
  CatalogSessionInfo info{database_, user_, pid_, &settings_};
  auto types = config_->executor->ParameterTypes(database_, RewriteCatalogSql(statement.sql, info));
  if (!types.ok()) {
    return;  // the statement's error shows when it runs (or is described)
  }
  // A parameter DuckDB leaves open (or of a type without an OID here) is
  // text, as PostgreSQL types `SELECT $1`: its value becomes a string literal
  // either way, which DuckDB casts to what the expression needs.
  for (size_t i = 0; i < statement.param_types.size(); ++i) {
    if (statement.param_types[i] == 0) {
      const int32_t bound = i < types->size() ? PgOidForDuckType((*types)[i]) : 0;
      statement.param_types[i] = bound != 0 ? bound : oid::kText;
    }
  }
}

void PgSession::DescribeStatement(Statement& statement) {
  InferParameterTypes(statement);
  std::vector<int32_t> types = statement.param_types;
  for (auto& t : types) {
    if (t == 0) t = oid::kText;  // undeclared: the client sends text
  }
  writer_.ParameterDescription(types);
  auto words = LeadingWords(statement.sql, 2);
  const std::string w0 = words.empty() ? "" : words[0];
  static const char* kQueries[] = {"SELECT", "WITH", "VALUES", "FROM", "TABLE"};
  bool query = std::any_of(std::begin(kQueries), std::end(kQueries),
                           [&](const char* k) { return w0 == k; });
  if (!query && w0 != "SHOW" && w0 != "DESCRIBE" && w0 != "EXPLAIN" && w0 != "SUMMARIZE") {
    writer_.NoData();
    return;
  }
  // Learn the columns by running the statement without rows, parameters NULL
  // of the type they will have, so `SELECT $1` (text) is described as it will
  // run; untyped NULL where the database could not tell (0).
  std::vector<std::string> nulls;
  for (int32_t type : statement.param_types) {
    // numeric: the widest decimal (a value's literal has its own scale), in a
    // subquery, since DuckDB folds arithmetic on a NULL decimal to type NULL.
    if (type == oid::kNumeric) {
      nulls.push_back("(SELECT CAST(NULL AS DECIMAL(38,10)))");
      continue;
    }
    const std::string duck = type == 0 ? "" : DuckTypeForOid(type);
    nulls.push_back(duck.empty() ? "NULL" : "CAST(NULL AS " + duck + ")");
  }
  auto sql = SubstituteParameters(statement.sql, nulls);
  std::string probe = sql.ok() ? *sql : statement.sql;
  if (query) {
    probe = "SELECT * FROM (" + TrimStatement(probe) + "\n) AS rill_describe LIMIT 0";
  }
  Outcome out = Run(probe);
  if (!out.status.ok()) {
    ExtendedError(out.sqlstate, out.status);
    return;
  }
  if (out.table == nullptr) {
    writer_.NoData();
    return;
  }
  SendRowDescription(*out.table->schema(), {});
}

Status PgSession::OnDescribe(std::string_view body) {
  auto m = ParseDescribeOrClose(body, "Describe");
  if (!m.ok()) {
    return Fatal(session_internal::kProtocolViolation, m.status());
  }
  if (m->kind == 'S') {
    auto it = statements_.find(m->name);
    if (it == statements_.end()) {
      ExtendedError("26000", Status::Invalid("prepared statement \"", m->name,
                                             "\" does not exist"));
      return Status::OK();
    }
    DescribeStatement(*it->second);
    return Status::OK();
  }
  auto it = portals_.find(m->name);
  if (it == portals_.end()) {
    ExtendedError("34000", Status::Invalid("portal \"", m->name, "\" does not exist"));
    return Status::OK();
  }
  // Keep the portal alive even if its statement closes portals (DISCARD ALL).
  std::shared_ptr<Portal> holder = it->second;
  Portal& portal = *holder;
  if (!EnsurePortalRun(portal)) {
    return Status::OK();
  }
  if (portal.result == nullptr) {
    writer_.NoData();
    return Status::OK();
  }
  const auto& formats = portal.result_formats;
  if (formats.size() > 1 && formats.size() != static_cast<size_t>(portal.result->num_columns())) {
    ExtendedError("08P01", Status::Invalid("bind message has ", formats.size(),
                                           " result formats but query has ",
                                           portal.result->num_columns(), " columns"));
    return Status::OK();
  }
  SendRowDescription(*portal.result->schema(), formats);
  return Status::OK();
}

Status PgSession::OnExecute(std::string_view body) {
  auto m = ParseExecute(body);
  if (!m.ok()) {
    return Fatal(session_internal::kProtocolViolation, m.status());
  }
  auto it = portals_.find(m->portal);
  if (it == portals_.end()) {
    ExtendedError("34000", Status::Invalid("portal \"", m->portal, "\" does not exist"));
    return Status::OK();
  }
  // Keep the portal alive even if its statement closes portals (DISCARD ALL).
  std::shared_ptr<Portal> holder = it->second;
  Portal& portal = *holder;
  if (!EnsurePortalRun(portal)) {
    return Status::OK();
  }
  if (portal.empty) {
    writer_.EmptyQueryResponse();
    return Status::OK();
  }
  if (portal.result == nullptr) {
    writer_.CommandComplete(portal.tag);
    return Status::OK();
  }
  auto sent = SendRows(*portal.result, portal.result_formats, &portal.position, m->max_rows);
  if (!sent.ok()) {
    ExtendedError(sent.status().IsNotImplemented() ? "42883" : "", sent.status());
    return Status::OK();
  }
  if (m->max_rows > 0 && portal.position < portal.result->num_rows()) {
    writer_.PortalSuspended();
    return Status::OK();
  }
  writer_.CommandComplete((portal.fetch ? "FETCH " : "SELECT ") + std::to_string(*sent));
  return Status::OK();
}

Status PgSession::OnClose(std::string_view body) {
  auto m = ParseDescribeOrClose(body, "Close");
  if (!m.ok()) {
    return Fatal(session_internal::kProtocolViolation, m.status());
  }
  if (m->kind == 'S') {
    statements_.erase(m->name);
  } else {
    portals_.erase(m->name);
  }
  writer_.CloseComplete();
  return Status::OK();
}

void PgSession::ClosePortalsAtTransactionEnd() {
  for (auto it = portals_.begin(); it != portals_.end();) {
    it = it->second->hold ? std::next(it) : portals_.erase(it);
  }
}

std::optional<PgSession::Outcome> PgSession::RunCursorStatement(const std::string& sql) {
  std::string trimmed = TrimStatement(sql);
  auto tokens = Tokens(trimmed, 8);
  if (tokens.empty()) {
    return std::nullopt;
  }
  Outcome out;
  if (tokens[0] == "declare" && tokens.size() >= 2) {
    size_t cursor = FindKeyword(trimmed, "cursor");
    size_t for_pos = cursor == std::string::npos ? cursor : FindKeyword(trimmed.substr(cursor), "for");
    if (for_pos == std::string::npos) {
      out.status = Status::Invalid("syntax error in DECLARE: expected CURSOR ... FOR <query>");
      out.sqlstate = "42601";
      return out;
    }
    std::string options = trimmed.substr(0, cursor);
    std::transform(options.begin(), options.end(), options.begin(), ::tolower);
    std::string between = trimmed.substr(cursor, for_pos);
    std::transform(between.begin(), between.end(), between.begin(), ::tolower);
    const std::string& name = tokens[1];
    if (portals_.count(name) > 0) {
      out.status = Status::Invalid("cursor \"", name, "\" already exists");
      out.sqlstate = "42P03";
      return out;
    }
    Outcome result = Run(trimmed.substr(cursor + for_pos));
    if (!result.status.ok() || result.table == nullptr) {
      if (result.status.ok()) {
        result.status = Status::Invalid("DECLARE CURSOR needs a query that returns rows");
        result.sqlstate = "42P11";
      }
      return result;
    }
    auto portal = std::make_shared<Portal>();
    portal->sql = trimmed;
    portal->executed = true;
    portal->result = std::move(result.table);
    portal->hold = between.find("with hold") != std::string::npos;
    if (options.find(" binary") != std::string::npos) {
      portal->result_formats = {1};
    }
    portals_[name] = std::move(portal);
    out.tag = "DECLARE CURSOR";
    return out;
  }
  if (tokens[0] == "fetch" || tokens[0] == "move") {
    // FETCH [NEXT | FORWARD [n | ALL] | n | ALL] [FROM | IN] name
    int64_t count = 1;
    size_t i = 1;
    if (i < tokens.size() && (tokens[i] == "next" || tokens[i] == "forward")) ++i;
    if (i < tokens.size() && tokens[i] == "all") {
      count = -1;
      ++i;
    } else if (i < tokens.size() && !tokens[i].empty() &&
               std::all_of(tokens[i].begin(), tokens[i].end(), ::isdigit) &&
               tokens[i].size() < 18) {
      count = std::stoll(tokens[i]);
      ++i;
    }
    if (i < tokens.size() && (tokens[i] == "from" || tokens[i] == "in")) ++i;
    if (i >= tokens.size()) {
      out.status = Status::Invalid("syntax error in ", tokens[0], ": no cursor name");
      out.sqlstate = "42601";
      return out;
    }
    auto it = portals_.find(tokens[i]);
    if (it == portals_.end() || it->second->result == nullptr) {
      out.status = Status::Invalid("cursor \"", tokens[i], "\" does not exist");
      out.sqlstate = "34000";
      return out;
    }
    Portal& cursor = *it->second;
    int64_t left = cursor.result->num_rows() - cursor.position;
    int64_t n = count < 0 ? left : std::min(count, left);
    if (tokens[0] == "move") {
      cursor.position += n;
      out.tag = "MOVE " + std::to_string(n);
      return out;
    }
    out.table = cursor.result->Slice(cursor.position, n);
    cursor.position += n;
    out.tag = "FETCH " + std::to_string(n);
    return out;
  }
  if (tokens[0] == "close" && tokens.size() >= 2) {
    if (tokens[1] == "all") {
      portals_.clear();
      out.tag = "CLOSE CURSOR ALL";
    } else {
      if (portals_.erase(tokens[1]) == 0) {
        out.status = Status::Invalid("cursor \"", tokens[1], "\" does not exist");
        out.sqlstate = "34000";
        return out;
      }
      out.tag = "CLOSE CURSOR";
    }
    return out;
  }
  return std::nullopt;
}

}  // namespace rill::pgwire
