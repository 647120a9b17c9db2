// PgSession: one PostgreSQL connection's protocol state machine, independent
// of any transport. Feed it the bytes received; it appends the bytes to send
// to its output and calls the executor for SQL.
//
//   startup:  SSLRequest / GSSENCRequest → 'N', then the startup message;
//             CancelRequest → cancel the matching session, then close;
//             SCRAM-SHA-256 (or, as an option, cleartext) with the token;
//             ParameterStatus ..., BackendKeyData, ReadyForQuery.
//   queries:  simple query (several statements, empty queries) and the
//             extended protocol (Parse/Bind/Describe/Execute/Close/Sync/Flush,
//             portals with row limits, errors discard until Sync).
//
// Session statements (SET, RESET, SHOW, BEGIN, COMMIT, ROLLBACK, DISCARD,
// DEALLOCATE) are answered here; statements that write get SQLSTATE 25006;
// everything else goes to the executor after the catalog rewrite (pg_catalog.h).
//
// Threads: a session is used by one thread at a time (Feed blocks while a
// query runs; FeedInline does not). Cancellation arrives through the
// PgCancelRegistry from another connection's thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <arrow/type_fwd.h>

#include "rill/common/status.h"
#include "rill/server/pgwire/pg_cancel.h"
#include "rill/server/pgwire/pg_executor.h"
#include "rill/server/pgwire/pg_messages.h"
#include "rill/server/pgwire/scram.h"

namespace rill::pgwire {

enum class PgAuthMethod {
  kScramSha256,  ///< default: the token never crosses the wire
  kCleartext,    ///< explicit option: the token is sent in clear
};

/// What every session of a server shares. Immutable once serving starts.
struct PgServerConfig {
  PgAuthMethod auth = PgAuthMethod::kScramSha256;
  /// The engine's token (the password). Empty: no authentication at all.
  std::string token;
  /// SCRAM keys of `token` (see MakeScramVerifier); required for SCRAM.
  std::shared_ptr<const ScramVerifier> scram;
  /// The admin credential: the user `admin` logs in with this password and may
  /// run DDL (CREATE / DROP, pipeline/ddl.h); every other session is read-only
  /// (DDL gets 42501). Empty: no session may run DDL.
  std::string admin_token;
  /// SCRAM keys of `admin_token` (PrepareServerConfig fills them).
  std::shared_ptr<const ScramVerifier> admin_scram;
  /// Cap of one message once authenticated (bytes, length word included).
  /// Before, a message is at most kMaxPreAuthMessageBytes (startup packets
  /// at most kMaxStartupPacket).
  int64_t max_message_bytes = kDefaultMaxMessageBytes;
  /// Reported as server_version (a 16.x string, as clients parse it).
  std::string server_version = "16.4 (Rill)";
  std::string time_zone = "UTC";
  /// Runs SQL; must outlive every session.
  PgExecutor* executor = nullptr;
  /// Where sessions register for CancelRequest; must outlive every session.
  PgCancelRegistry* cancel_registry = &PgCancelRegistry::Global();
};

/// The user name that logs in with PgServerConfig::admin_token.
inline constexpr char kAdminUser[] = "admin";

/// Fill `config.scram` from `config.token` (and `admin_scram` from `admin_token`).
Status PrepareServerConfig(PgServerConfig* config);

class PgSession {
 public:
  /// `config` must outlive the session.
  explicit PgSession(const PgServerConfig* config);
  ~PgSession();
  PgSession(const PgSession&) = delete;
  PgSession& operator=(const PgSession&) = delete;

  /// Consume received bytes: run every complete message. Output accumulates
  /// in output(). A non-OK status means a protocol violation: the error was
  /// written to the output (send it, then close).
  Status Feed(const char* data, size_t size);
  /// As Feed, for a thread that must not block (the network thread): run
  /// messages only while each is cheap (Sync, Parse, Bind, Close, session
  /// statements such as SET / SHOW / BEGIN, empty queries, errors, and
  /// statements whose cached plan reads no table, PgExecutor::IsCheap; each
  /// message at most 16 KiB), and while the output stays under
  /// kMaxInlineOutputBytes. At the first other
  /// message, set *deferred and return: Feed (with no new bytes) runs it and
  /// the rest. Before authentication everything is deferred.
  Status FeedInline(const char* data, size_t size, bool* deferred);
  /// Output FeedInline produces at most before it defers the rest.
  static constexpr size_t kMaxInlineOutputBytes = 64 * 1024;

  /// Bytes to send. The caller sends and clears it.
  std::string& output() { return writer_.buffer(); }
  /// Called while a large result is produced, whenever output() grows beyond
  /// about 1 MiB, so results stream instead of piling up. Returning an error
  /// stops the result (the connection is going away).
  void set_flush(std::function<Status(std::string&)> flush) { flush_ = std::move(flush); }

  /// True once the connection should close (Terminate, a CancelRequest,
  /// failed authentication, protocol violation) after output() is sent.
  bool closed() const { return phase_ == Phase::kClosed; }
  /// What the session is waiting for between messages (the connection picks
  /// its idle timeout from it).
  enum class Waiting { kAuthentication, kIdle, kIdleInTransaction };
  Waiting waiting() const;
  /// True once authentication succeeded (and until the session closes).
  bool authenticated() const { return phase_ == Phase::kReady; }
  /// End the session from outside (a timeout): append a FATAL ErrorResponse
  /// with `sqlstate` and `message` to output() and mark the session closed.
  void Terminate(std::string_view sqlstate, std::string_view message);

  /// The startup's database and user ("" before startup).
  const std::string& database() const { return database_; }
  const std::string& user() const { return user_; }

 private:
  enum class Phase { kStartup, kAuthScramFirst, kAuthScramFinal, kAuthCleartext, kReady, kClosed };

  struct Statement {
    std::string sql;  ///< as the client sent it
    /// As the client declared them (0 = unspecified), then with the
    /// unspecified ones the database binds filled in (InferParameterTypes).
    std::vector<int32_t> param_types;
    bool inferred = false;  ///< InferParameterTypes ran
  };
  struct Portal {
    std::shared_ptr<Statement> statement;
    std::string sql;  ///< parameters substituted
    std::vector<int16_t> result_formats;
    bool executed = false;
    std::shared_ptr<arrow::Table> result;  ///< set once run (or described)
    std::string tag;                       ///< command tag for non-row results
    bool empty = false;                    ///< empty query
    bool fetch = false;                    ///< a FETCH: tag "FETCH n"
    bool hold = false;                     ///< survives the end of its transaction
    int64_t position = 0;                  ///< rows already sent
  };
  struct Outcome;  // what running one statement produced (pg_statements.cc)

  Status HandleFrame(const PgFrame& frame);
  // Whether a frame / one statement runs in microseconds here (pg_inline.cc).
  bool IsCheapFrame(const PgFrame& frame);
  bool IsCheapStatement(const std::string& sql);
  Status HandleStartup(const PgFrame& frame);
  Status HandleAuth(const PgFrame& frame);
  void FinishStartup();
  Status Fatal(std::string_view sqlstate, const Status& status);

  // Simple query.
  void SimpleQuery(const std::string& sql);
  // Extended protocol (pg_extended.cc).
  Status ExtendedMessage(const PgFrame& frame);
  Status OnParse(std::string_view body);
  Status OnBind(std::string_view body);
  Status OnDescribe(std::string_view body);
  Status OnExecute(std::string_view body);
  Status OnClose(std::string_view body);
  /// Run the portal's statement unless it ran; on error send it and return false.
  bool EnsurePortalRun(Portal& portal);
  void DescribeStatement(Statement& statement);
  /// Fill the unspecified parameter types of `statement` with the types the
  /// database binds for them (once; 0 stays where it cannot tell).
  void InferParameterTypes(Statement& statement);
  void ClosePortalsAtTransactionEnd();
  void ExtendedError(std::string_view sqlstate, const Status& status);

  // Cursors: DECLARE / FETCH / MOVE / CLOSE (pg_extended.cc).
  std::optional<Outcome> RunCursorStatement(const std::string& sql);

  // Statements (pg_statements.cc).
  Outcome Run(const std::string& sql);
  std::optional<Outcome> RunSessionStatement(const std::string& sql);
  /// CREATE / DROP / SHOW of declared pipelines (pg_ddl.cc); nullopt for
  /// any other statement.
  std::optional<Outcome> RunDdl(const std::string& sql);
  Outcome RunShow(const std::string& name);
  Outcome RunSet(const std::string& sql, const std::vector<std::string>& words);
  void SendError(const Status& status);
  void SendErrorCode(std::string_view sqlstate, std::string_view message);
  void SendRowDescription(const arrow::Schema& schema, const std::vector<int16_t>& formats);
  /// Send up to `max_rows` (0 = all) rows from `*position`; return the count.
  Result<int64_t> SendRows(const arrow::Table& table, const std::vector<int16_t>& formats,
                           int64_t* position, int64_t max_rows);
  Status MaybeFlush();
  char TransactionStatus() const;

  const PgServerConfig* config_;
  /// Copied from the config: the destructor uses it, and a session may be
  /// destroyed after its service (a connection whose read was still queued on
  /// the server's io_context when the server stopped goes with the io_context).
  PgCancelRegistry* cancel_registry_;
  PgFrameDecoder decoder_;
  PgWriter writer_;
  std::function<Status(std::string&)> flush_;
  Phase phase_ = Phase::kStartup;
  std::unique_ptr<ScramExchange> scram_;

  std::string user_;
  /// Logged in as kAdminUser with the admin credential: DDL allowed.
  bool admin_ = false;
  std::string database_;
  std::map<std::string, std::string> settings_;  ///< lower-case name → value
  std::map<std::string, std::string> startup_settings_;
  bool in_transaction_ = false;
  bool failed_transaction_ = false;
  bool discard_until_sync_ = false;

  std::map<std::string, std::shared_ptr<Statement>> statements_;
  std::map<std::string, std::shared_ptr<Portal>> portals_;

  /// The executor's state for this session (a warm connection, cached plans).
  std::unique_ptr<PgExecutorSession> executor_session_;
  /// A frame FeedInline left for Feed.
  std::optional<PgFrame> deferred_frame_;
  /// FeedInline is running: output is not flushed (the caller sends it).
  bool inline_ = false;

  std::shared_ptr<PgQueryControl> control_;
  int32_t pid_ = 0;
  int encryption_requests_ = 0;  ///< SSLRequest/GSSENCRequest packets seen
};

}  // namespace rill::pgwire
