// Running one statement: session statements answered by the session itself,
// writes refused (25006), the rest through the catalog rewrite to the
// executor. Also the result messages (RowDescription, DataRow) and errors.
#include <algorithm>
#include <cstring>

#include <arrow/api.h>

#include "rill/server/pgwire/pg_catalog.h"
#include "rill/server/pgwire/pg_session_internal.h"
#include "rill/server/pgwire/pg_sql.h"
#include "rill/server/pgwire/pg_types.h"

namespace rill::pgwire {
namespace session_internal {

std::map<std::string, std::string> DefaultSettings(const PgServerConfig& config) {
  std::string version_num = "160004";
  return {{"server_version", config.server_version},
          {"server_version_num", version_num},
          {"server_encoding", "UTF8"},
          {"client_encoding", "UTF8"},
          {"datestyle", "ISO, MDY"},
          {"standard_conforming_strings", "on"},
          {"integer_datetimes", "on"},
          {"timezone", config.time_zone},
          {"application_name", ""},
          {"intervalstyle", "postgres"},
          {"is_superuser", "off"},
          {"session_authorization", ""},
          {"transaction_isolation", "read committed"},
          {"default_transaction_read_only", "on"},
          {"transaction_read_only", "on"},
          {"search_path", "\"$user\", public"},
          {"extra_float_digits", "1"},
          {"max_identifier_length", "63"},
          {"lc_collate", "C.UTF-8"},
          {"lc_ctype", "C.UTF-8"},
          {"statement_timeout", "0"},
          {"bytea_output", "hex"},
          {"jit", "off"}};
}

std::string DisplayName(const std::string& lower_name) {
  if (lower_name == "datestyle") return "DateStyle";
  if (lower_name == "timezone") return "TimeZone";
  if (lower_name == "intervalstyle") return "IntervalStyle";
  return lower_name;
}

std::string SqlStateFor(const Status& status) {
  if (status.IsCancelled()) return "57014";
  const std::string& m = status.message();
  auto has = [&](const char* s) { return m.find(s) != std::string::npos; };
  if (has("INTERRUPT") || has("Interrupted")) return "57014";
  if (has("Out of Memory")) return "53200";  // the query memory limit
  if (has("only SELECT and EXPLAIN")) return "25006";
  if (has("Parser Error") || has("syntax error")) return "42601";
  if (has("Table with name") || has("Table Function with name") ||
      has("no table named") || has("View with name")) {
    return "42P01";
  }
  if (has("Function with name") || has("Macro Function")) return "42883";
  if (has("Referenced column") || (has("column") && has("not found"))) return "42703";
  if (has("Division by zero")) return "22012";
  if (has("Out of Range")) return "22003";
  if (has("Conversion Error") || has("Could not convert")) return "22P02";
  if (has("Binder Error")) return "42804";
  if (status.IsKeyError()) return "42P01";
  if (status.IsNotImplemented()) return "0A000";
  if (status.IsInvalid()) return "42000";
  return "XX000";
}

bool IsWriteKeyword(const std::string& w) {
  static const char* kWrites[] = {"INSERT", "UPDATE", "DELETE",  "MERGE",   "CREATE",
                                  "DROP",   "ALTER",  "COPY",    "TRUNCATE", "ATTACH",
                                  "DETACH", "GRANT",  "REVOKE",  "VACUUM",  "CHECKPOINT",
                                  "INSTALL", "LOAD",  "IMPORT",  "EXPORT",  "CALL",
                                  "UPSERT", "REPLACE", "COMMENT", "REINDEX", "CLUSTER",
                                  "REFRESH", "LOCK",  "USE",     "PRAGMA",  "UPDATE_EXTENSIONS"};
  return std::any_of(std::begin(kWrites), std::end(kWrites),
                     [&](const char* k) { return w == k; });
}

namespace {

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), ::tolower);
  return s;
}

std::string Unquote(std::string v) {
  while (!v.empty() && std::isspace(static_cast<unsigned char>(v.back()))) v.pop_back();
  size_t b = 0;
  while (b < v.size() && std::isspace(static_cast<unsigned char>(v[b]))) ++b;
  v = v.substr(b);
  if (v.size() >= 2 && (v.front() == '\'' || v.front() == '"') && v.back() == v.front()) {
    v = v.substr(1, v.size() - 2);
  }
  return v;
}

// Split "SET [SESSION|LOCAL] name {TO|=} value" / "SET TIME ZONE value".
bool ParseSet(const std::string& trimmed, std::string* name, std::string* value) {
  std::string rest = trimmed.substr(3);
  std::string lower = Lower(rest);
  size_t pos = lower.find_first_not_of(" \t\r\n");
  for (const char* scope : {"session ", "local "}) {
    if (pos != std::string::npos && lower.compare(pos, std::strlen(scope), scope) == 0) {
      pos = lower.find_first_not_of(" \t\r\n", pos + std::strlen(scope));
    }
  }
  if (pos == std::string::npos) return false;
  if (lower.compare(pos, 9, "time zone") == 0) {
    *name = "timezone";
    *value = Unquote(rest.substr(pos + 9));
    return true;
  }
  size_t end = pos;
  while (end < lower.size() && (std::isalnum(static_cast<unsigned char>(lower[end])) ||
                                lower[end] == '_' || lower[end] == '.')) {
    ++end;
  }
  *name = lower.substr(pos, end - pos);
  size_t v = lower.find_first_not_of(" \t\r\n", end);
  if (v == std::string::npos) return false;
  if (lower[v] == '=') {
    v += 1;
  } else if (lower.compare(v, 3, "to ") == 0 || lower.compare(v, 3, "to\t") == 0) {
    v += 3;
  } else {
    return false;
  }
  *value = Unquote(rest.substr(v));
  return !name->empty();
}

}  // namespace
}  // namespace session_internal

using session_internal::Lower;

std::optional<PgSession::Outcome> PgSession::RunSessionStatement(const std::string& sql) {
  auto words = LeadingWords(sql, 3);
  const std::string w0 = words.empty() ? "" : words[0];
  const std::string w1 = words.size() > 1 ? words[1] : "";
  Outcome out;
  if (w0 == "BEGIN" || w0 == "START") {
    if (in_transaction_) {
      writer_.Notice("25001", "there is already a transaction in progress");
    }
    in_transaction_ = true;
    out.tag = w0 == "BEGIN" ? "BEGIN" : "START TRANSACTION";
    return out;
  }
  if (w0 == "SAVEPOINT" || w0 == "RELEASE") {
    out.tag = w0;  // nothing to undo: sessions only read
    return out;
  }
  if (w0 == "ROLLBACK" && w1 == "TO") {
    failed_transaction_ = false;
    out.tag = "ROLLBACK";
    return out;
  }
  if (w0 == "COMMIT" || w0 == "END" || w0 == "ROLLBACK" || w0 == "ABORT") {
    if (!in_transaction_) {
      writer_.Notice("25P01", "there is no transaction in progress");
    }
    bool rolled_back = failed_transaction_ || w0 == "ROLLBACK" || w0 == "ABORT";
    in_transaction_ = false;
    failed_transaction_ = false;
    out.tag = rolled_back ? "ROLLBACK" : "COMMIT";
    return out;
  }
  if (w0 == "SET") {
    return RunSet(sql, words);
  }
  if (w0 == "RESET") {
    auto defaults = session_internal::DefaultSettings(*config_);
    std::string name = Lower(w1);
    if (name == "all") {
      settings_ = defaults;
    } else if (defaults.count(name) > 0) {
      settings_[name] = defaults[name];
    } else {
      settings_.erase(name);
    }
    out.tag = "RESET";
    return out;
  }
  if (w0 == "SHOW") {
    std::string name = Lower(w1);
    if (name == "time" && words.size() > 2 && words[2] == "ZONE") name = "timezone";
    if (name == "transaction" && words.size() > 2 && words[2] == "ISOLATION") {
      name = "transaction_isolation";
    }
    if (name == "all" || settings_.count(name) > 0) {
      return RunShow(name);
    }
    return std::nullopt;  // DuckDB's SHOW TABLES, SHOW <table>, ...
  }
  if (w0 == "DISCARD") {
    statements_.clear();
    portals_.clear();
    settings_ = session_internal::DefaultSettings(*config_);
    out.tag = "DISCARD " + (w1.empty() ? std::string("ALL") : w1);
    return out;
  }
  if (w0 == "DEALLOCATE") {
    std::string trimmed = TrimStatement(sql);
    auto parts = LeadingWords(sql, 3);
    std::string target = parts.size() > 1 && parts[1] == "PREPARE" ? (parts.size() > 2 ? parts[2] : "")
                                                                    : w1;
    if (target == "ALL") {
      statements_.clear();
      out.tag = "DEALLOCATE ALL";
    } else {
      // Prepared names are case-sensitive when quoted; find it case-insensitively.
      for (auto it = statements_.begin(); it != statements_.end(); ++it) {
        if (Lower(it->first) == Lower(target)) {
          statements_.erase(it);
          break;
        }
      }
      out.tag = "DEALLOCATE";
    }
    return out;
  }
  if (w0 == "LISTEN" || w0 == "UNLISTEN") {
    out.tag = w0;
    return out;
  }
  if (session_internal::IsWriteKeyword(w0)) {
    out.status = Status::Invalid("cannot execute ", w0,
                                 " in a read-only transaction: Rill's SQL is read-only");
    out.sqlstate = "25006";
    return out;
  }
  return std::nullopt;
}

PgSession::Outcome PgSession::RunSet(const std::string& sql,
                                     const std::vector<std::string>& words) {
  const std::string w1 = words.size() > 1 ? words[1] : "";
  Outcome out;
  if (w1 == "TRANSACTION" ||
      (w1 == "SESSION" && words.size() > 2 && words[2] == "CHARACTERISTICS")) {
    out.tag = "SET";
    return out;
  }
  std::string name, value;
  if (!session_internal::ParseSet(TrimStatement(sql), &name, &value)) {
    out.status = Status::Invalid("syntax error in SET statement");
    out.sqlstate = "42601";
    return out;
  }
  if (name == "client_encoding" && Lower(value) != "utf8" && Lower(value) != "unicode" &&
      Lower(value) != "utf-8") {
    out.status = Status::Invalid("only client_encoding UTF8 is supported, not '", value, "'");
    out.sqlstate = "22023";
    return out;
  }
  settings_[name] = value;
  for (const char* reported : session_internal::kReportedSettings) {
    if (name == reported) {
      writer_.ParameterStatus(session_internal::DisplayName(name), value);
    }
  }
  out.tag = "SET";
  return out;
}

PgSession::Outcome PgSession::RunShow(const std::string& name) {
  Outcome out;
  arrow::StringBuilder names, values;
  std::shared_ptr<arrow::Array> name_array, value_array;
  if (name == "all") {
    for (auto& [k, v] : settings_) {
      (void)names.Append(session_internal::DisplayName(k));
      (void)values.Append(v);
    }
    (void)names.Finish(&name_array);
    (void)values.Finish(&value_array);
    out.table = arrow::Table::Make(
        arrow::schema({arrow::field("name", arrow::utf8()), arrow::field("setting", arrow::utf8())}),
        {name_array, value_array});
  } else {
    (void)values.Append(settings_[name]);
    (void)values.Finish(&value_array);
    out.table = arrow::Table::Make(
        arrow::schema({arrow::field(session_internal::DisplayName(name), arrow::utf8())}),
        {value_array});
  }
  out.tag = "SHOW";
  return out;
}

PgSession::Outcome PgSession::Run(const std::string& sql) {
  Outcome out;
  if (TrimStatement(sql).empty()) {
    out.empty = true;
    return out;
  }
  auto words = LeadingWords(sql, 1);
  if (failed_transaction_ && !words.empty() && words[0] != "ROLLBACK" && words[0] != "ABORT" &&
      words[0] != "COMMIT" && words[0] != "END") {
    out.status = Status::Invalid(
        "current transaction is aborted, commands ignored until end of transaction block");
    out.sqlstate = "25P02";
    return out;
  }
  if (auto cursor = RunCursorStatement(sql)) {
    return std::move(*cursor);
  }
  if (auto ddl = RunDdl(sql)) {
    return std::move(*ddl);
  }
  if (auto session = RunSessionStatement(sql)) {
    return std::move(*session);
  }
  CatalogSessionInfo info{database_, user_, pid_, &settings_};
  std::string rewritten = RewriteCatalogSql(sql, info);
  control_->Reset();
  auto table =
      config_->executor->RunInSession(executor_session_.get(), database_, rewritten, control_.get());
  if (control_->cancelled()) {
    out.status = Status::Cancelled("canceling statement due to user request");
    return out;
  }
  if (!table.ok()) {
    out.status = table.status();
    return out;
  }
  out.table = *table;
  return out;
}

void PgSession::SendErrorCode(std::string_view sqlstate, std::string_view message) {
  writer_.Error("ERROR", sqlstate, message);
  if (in_transaction_) {
    failed_transaction_ = true;
  }
}

void PgSession::SendError(const Status& status) {
  SendErrorCode(session_internal::SqlStateFor(status), status.message());
}

void PgSession::SendRowDescription(const arrow::Schema& schema,
                                   const std::vector<int16_t>& formats) {
  writer_.Begin('T');
  writer_.Int16(static_cast<int16_t>(schema.num_fields()));
  for (int i = 0; i < schema.num_fields(); ++i) {
    const auto& field = schema.field(i);
    PgTypeInfo info = PgTypeFor(*field->type());
    writer_.CString(field->name());
    writer_.Int32(0);  // table OID
    writer_.Int16(0);  // column number
    writer_.Int32(info.oid);
    writer_.Int16(info.typlen);
    writer_.Int32(-1);  // type modifier
    int16_t format = formats.empty() ? 0 : formats.size() == 1 ? formats[0] : formats[i];
    writer_.Int16(format);
  }
  writer_.End();
}

Result<int64_t> PgSession::SendRows(const arrow::Table& table,
                                    const std::vector<int16_t>& formats, int64_t* position,
                                    int64_t max_rows) {
  const int ncols = table.num_columns();
  std::vector<std::unique_ptr<PgColumnWriter>> writers;
  for (int i = 0; i < ncols; ++i) {
    int16_t format = formats.empty() ? 0 : formats.size() == 1 ? formats[0] : formats[i];
    RILL_ASSIGN_OR_RAISE(auto w, PgColumnWriter::Make(table.field(i)->type(), format));
    writers.push_back(std::move(w));
  }
  int64_t available = table.num_rows() - *position;
  int64_t count = max_rows > 0 ? std::min(max_rows, available) : available;
  if (count <= 0) {
    return 0;
  }
  auto slice = table.Slice(*position, count);
  arrow::TableBatchReader reader(*slice);
  std::shared_ptr<arrow::RecordBatch> batch;
  std::vector<std::shared_ptr<arrow::Array>> columns(static_cast<size_t>(ncols));
  constexpr int64_t kRowsPerFlushCheck = 1024;  // a power of two
  while (true) {
    RILL_RETURN_NOT_OK(reader.ReadNext(&batch));
    if (batch == nullptr) {
      break;
    }
    // The columns once per batch: RecordBatch::column() returns a shared_ptr
    // through an atomic load (a lock) and a reference count, per call.
    for (int c = 0; c < ncols; ++c) {
      columns[c] = batch->column(c);
    }
    const int64_t nrows = batch->num_rows();
    for (int64_t r = 0; r < nrows; ++r) {
      writer_.Begin('D');
      writer_.Int16(static_cast<int16_t>(ncols));
      for (int c = 0; c < ncols; ++c) {
        writers[c]->Append(*columns[c], r, &writer_.buffer());
      }
      writer_.End();
      // Flush within a large batch too, so the buffer stays small and reused
      // (no growth copies) and the client parses while we format.
      if ((r & (kRowsPerFlushCheck - 1)) == kRowsPerFlushCheck - 1) {
        RILL_RETURN_NOT_OK(MaybeFlush());
      }
    }
    RILL_RETURN_NOT_OK(MaybeFlush());
  }
  *position += count;
  return count;
}

void PgSession::SimpleQuery(const std::string& sql) {
  auto statements = SplitStatements(sql);
  if (statements.empty()) {
    writer_.EmptyQueryResponse();
  }
  for (const auto& statement : statements) {
    Outcome out = Run(statement);
    if (!out.status.ok()) {
      if (out.sqlstate.empty()) {
        SendError(out.status);
      } else {
        SendErrorCode(out.sqlstate, out.status.message());
      }
      break;
    }
    if (out.empty) {
      writer_.EmptyQueryResponse();
      continue;
    }
    if (out.table == nullptr) {
      writer_.CommandComplete(out.tag);
      continue;
    }
    SendRowDescription(*out.table->schema(), {});
    int64_t position = 0;
    auto sent = SendRows(*out.table, {}, &position, 0);
    if (!sent.ok()) {
      SendError(sent.status());
      break;
    }
    writer_.CommandComplete(out.tag.empty() ? "SELECT " + std::to_string(*sent) : out.tag);
  }
  writer_.ReadyForQuery(TransactionStatus());
}

}  // namespace rill::pgwire
