// What a session may run on the network thread (FeedInline): messages that
// never wait for a query that reads data, so a slow statement of one
// connection cannot hold up the others that share the io thread. Everything
// else goes to the query pool, as before.
#include <algorithm>

#include <arrow/table.h>

#include "rill/pipeline/ddl.h"
#include "rill/server/pgwire/pg_catalog.h"
#include "rill/server/pgwire/pg_session.h"
#include "rill/server/pgwire/pg_session_internal.h"
#include "rill/server/pgwire/pg_sql.h"

namespace rill::pgwire {
namespace {

// A portal's rows left to send at most for Execute to run inline.
constexpr int64_t kMaxInlineRows = 256;
// A message's bytes at most for it to run inline: lexing a long statement
// (or checking long parameters) takes the io thread too long.
constexpr size_t kMaxInlineMessageBytes = 16 * 1024;

bool IsOneOf(const std::string& word, std::initializer_list<const char*> words) {
  return std::any_of(words.begin(), words.end(), [&](const char* w) { return word == w; });
}

}  // namespace

Status PgSession::FeedInline(const char* data, size_t size, bool* deferred) {
  *deferred = false;
  decoder_.Append(data, size);
  if (phase_ != Phase::kReady || deferred_frame_.has_value()) {
    *deferred = phase_ != Phase::kClosed;
    return Status::OK();
  }
  while (phase_ == Phase::kReady) {
    if (writer_.size() > kMaxInlineOutputBytes) {
      *deferred = true;  // the pool sends it (a client that does not read blocks a pool thread)
      return Status::OK();
    }
    auto frame = decoder_.Next();
    if (!frame.ok()) {
      return Fatal(session_internal::kProtocolViolation, frame.status());
    }
    if (!frame->has_value()) {
      break;
    }
    if (!IsCheapFrame(**frame)) {
      deferred_frame_ = std::move(**frame);
      *deferred = true;
      return Status::OK();
    }
    inline_ = true;
    Status handled = HandleFrame(**frame);
    inline_ = false;
    RILL_RETURN_NOT_OK(handled);
  }
  return Status::OK();
}

bool PgSession::IsCheapFrame(const PgFrame& frame) {
  // Until Sync, extended-protocol messages are only looked at.
  if (discard_until_sync_ && frame.type != 'Q') {
    return true;
  }
  if (frame.body.size() > kMaxInlineMessageBytes) {
    return false;
  }
  switch (frame.type) {
    case 'Q': {
      auto sql = ParseQuery(frame.body);
      if (!sql.ok() || !IsValidUtf8(*sql)) {
        return true;  // an error answer
      }
      auto statements = SplitStatements(*sql);
      return std::all_of(statements.begin(), statements.end(),
                         [&](const std::string& s) { return IsCheapStatement(s); });
    }
    case 'B': {
      auto m = ParseBind(frame.body);
      if (!m.ok()) {
        return true;
      }
      auto it = statements_.find(m->statement);
      if (it == statements_.end() || it->second->inferred) {
        return true;
      }
      // A binary value of an unspecified type asks the database for the type.
      const Statement& statement = *it->second;
      for (size_t i = 0; i < m->params.size() && i < statement.param_types.size(); ++i) {
        const int16_t format = m->param_formats.empty()       ? 0
                               : m->param_formats.size() == 1 ? m->param_formats[0]
                               : i < m->param_formats.size()  ? m->param_formats[i]
                                                              : 0;
        if (format == 1 && statement.param_types[i] == 0) {
          return false;
        }
      }
      return true;
    }
    case 'D':
    case 'E': {
      std::string name;
      if (frame.type == 'D') {
        auto m = ParseDescribeOrClose(frame.body, "Describe");
        if (!m.ok()) {
          return true;
        }
        if (m->kind == 'S') {
          // Describing a statement runs it without rows, unless it is unknown.
          return statements_.count(m->name) == 0;
        }
        name = m->name;
      } else {
        auto m = ParseExecute(frame.body);
        if (!m.ok()) {
          return true;
        }
        name = m->portal;
      }
      auto it = portals_.find(name);
      if (it == portals_.end()) {
        return true;
      }
      const Portal& portal = *it->second;
      if (!portal.executed) {
        return IsCheapStatement(portal.sql);
      }
      return frame.type == 'D' || portal.result == nullptr ||
             portal.result->num_rows() - portal.position <= kMaxInlineRows;
    }
    case 'P':  // Parse only lexes
    case 'C':
    case 'S':
    case 'H':
    case 'X':
      return true;
    default:
      return false;
  }
}

bool PgSession::IsCheapStatement(const std::string& sql) {
  if (TrimStatement(sql).empty()) {
    return true;
  }
  auto words = LeadingWords(sql, 3);
  const std::string w0 = words.empty() ? "" : words[0];
  if (failed_transaction_ && !IsOneOf(w0, {"ROLLBACK", "ABORT", "COMMIT", "END"})) {
    return true;  // refused (25P02)
  }
  // Cursors run or slice a query; pipeline DDL goes to the engine's catalog.
  if (IsOneOf(w0, {"DECLARE", "FETCH", "MOVE"})) {
    return false;
  }
  if (database_ != kMetricsDatabase && pipeline::IsDdl(sql)) {
    return false;
  }
  if (IsOneOf(w0, {"BEGIN", "START", "SAVEPOINT", "RELEASE", "ROLLBACK", "COMMIT", "END",
                   "ABORT", "SET", "RESET", "DISCARD", "DEALLOCATE", "LISTEN", "UNLISTEN"}) ||
      (w0 == "CLOSE" && words.size() > 1)) {
    return true;
  }
  if (w0 == "SHOW") {
    // The session's settings; DuckDB's SHOW TABLES and the like go to the pool.
    std::string name = words.size() > 1 ? words[1] : "";
    std::transform(name.begin(), name.end(), name.begin(), ::tolower);
    const std::string w2 = words.size() > 2 ? words[2] : "";
    if (name == "time" && w2 == "ZONE") name = "timezone";
    if (name == "transaction" && w2 == "ISOLATION") name = "transaction_isolation";
    return name == "all" || settings_.count(name) > 0;
  }
  if (session_internal::IsWriteKeyword(w0)) {
    return true;  // refused (25006)
  }
  CatalogSessionInfo info{database_, user_, pid_, &settings_};
  return config_->executor->IsCheap(executor_session_.get(), RewriteCatalogSql(sql, info));
}

}  // namespace rill::pgwire
