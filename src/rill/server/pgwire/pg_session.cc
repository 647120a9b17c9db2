// Startup, authentication and message dispatch of a pgwire session.
#include "rill/server/pgwire/pg_session.h"

#include <algorithm>

#include "rill/server/pgwire/pg_session_internal.h"
#include "rill/server/pgwire/pg_sql.h"

namespace rill::pgwire {

Status PrepareServerConfig(PgServerConfig* config) {
  if (config->executor == nullptr) {
    return Status::Invalid("pgwire: no executor configured");
  }
  if (config->cancel_registry == nullptr) {
    config->cancel_registry = &PgCancelRegistry::Global();
  }
  if (!config->token.empty() && config->scram == nullptr) {
    RILL_ASSIGN_OR_RAISE(config->scram, ScramVerifier::Make(config->token));
  }
  if (!config->admin_token.empty() && config->admin_scram == nullptr) {
    RILL_ASSIGN_OR_RAISE(config->admin_scram, ScramVerifier::Make(config->admin_token));
  }
  return Status::OK();
}

PgSession::PgSession(const PgServerConfig* config)
    : config_(config),
      cancel_registry_(config->cancel_registry),
      // Until authentication completes, messages are small (kMaxPreAuthMessageBytes).
      decoder_(std::min(config->max_message_bytes, kMaxPreAuthMessageBytes)),
      control_(std::make_shared<PgQueryControl>()) {}

PgSession::~PgSession() {
  if (pid_ != 0) {
    cancel_registry_->Unregister(pid_);
  }
}

Status PgSession::Feed(const char* data, size_t size) {
  if (phase_ == Phase::kClosed) {
    return Status::OK();
  }
  decoder_.Append(data, size);
  if (deferred_frame_.has_value()) {
    PgFrame frame = std::move(*deferred_frame_);
    deferred_frame_.reset();
    RILL_RETURN_NOT_OK(HandleFrame(frame));
  }
  while (phase_ != Phase::kClosed) {
    auto frame = decoder_.Next();
    if (!frame.ok()) {
      return Fatal(session_internal::kProtocolViolation, frame.status());
    }
    if (!frame->has_value()) {
      break;
    }
    RILL_RETURN_NOT_OK(HandleFrame(**frame));
  }
  return Status::OK();
}

Status PgSession::Fatal(std::string_view sqlstate, const Status& status) {
  writer_.Error("FATAL", sqlstate, status.message());
  phase_ = Phase::kClosed;
  return status;
}

PgSession::Waiting PgSession::waiting() const {
  if (phase_ != Phase::kReady) {
    return Waiting::kAuthentication;
  }
  return in_transaction_ ? Waiting::kIdleInTransaction : Waiting::kIdle;
}

void PgSession::Terminate(std::string_view sqlstate, std::string_view message) {
  if (phase_ != Phase::kClosed) {
    writer_.Error("FATAL", sqlstate, message);
    phase_ = Phase::kClosed;
  }
}

Status PgSession::HandleFrame(const PgFrame& frame) {
  switch (phase_) {
    case Phase::kStartup:
      return HandleStartup(frame);
    case Phase::kAuthScramFirst:
    case Phase::kAuthScramFinal:
    case Phase::kAuthCleartext:
      return HandleAuth(frame);
    case Phase::kClosed:
      return Status::OK();
    case Phase::kReady:
      break;
  }
  if (frame.type == 'X') {  // Terminate
    phase_ = Phase::kClosed;
    return Status::OK();
  }
  if (frame.type == 'Q') {
    // A simple query ends any extended-protocol error state.
    discard_until_sync_ = false;
    auto sql = ParseQuery(frame.body);
    if (!sql.ok()) {
      return Fatal(session_internal::kProtocolViolation, sql.status());
    }
    if (!IsValidUtf8(*sql)) {
      SendErrorCode("22021", "invalid byte sequence for encoding \"UTF8\" in query");
      writer_.ReadyForQuery(TransactionStatus());
      return Status::OK();
    }
    SimpleQuery(*sql);
    return Status::OK();
  }
  return ExtendedMessage(frame);
}

Status PgSession::HandleStartup(const PgFrame& frame) {
  auto packet = ParseStartupPacket(frame.body);
  if (!packet.ok()) {
    return Fatal(session_internal::kProtocolViolation, packet.status());
  }
  switch (packet->kind) {
    case StartupPacket::Kind::kSslRequest:
    case StartupPacket::Kind::kGssEncRequest:
      // A client asks for TLS and GSS encryption at most once each (libpq
      // does both); more would make the server write answers nobody reads.
      if (++encryption_requests_ > 2) {
        return Fatal(session_internal::kProtocolViolation,
                     Status::Invalid("more than two SSLRequest/GSSENCRequest packets"));
      }
      // No TLS/GSS here: the client goes on in clear with a startup message.
      writer_.Byte('N');
      return Status::OK();
    case StartupPacket::Kind::kCancel:
      cancel_registry_->Cancel(packet->cancel_pid, packet->cancel_secret);
      phase_ = Phase::kClosed;  // PostgreSQL answers nothing and closes
      return Status::OK();
    case StartupPacket::Kind::kStartup:
      break;
  }
  for (auto& [name, value] : packet->parameters) {
    if (name == "user") {
      user_ = value;
    } else if (name == "database") {
      database_ = value;
    } else if (name != "options" && name != "replication") {
      std::string lower = name;
      std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
      startup_settings_[lower] = value;
    }
  }
  if (user_.empty()) {
    return Fatal("28000", Status::Invalid("no PostgreSQL user name specified in startup packet"));
  }
  if (database_.empty()) {
    database_ = user_;
  }
  decoder_.set_startup_phase(false);
  // The user `admin` logs in with the admin credential (and may run DDL).
  admin_ = user_ == kAdminUser && !config_->admin_token.empty();
  if (!admin_ && config_->token.empty()) {
    FinishStartup();
  } else if (config_->auth == PgAuthMethod::kCleartext) {
    writer_.AuthenticationCleartext();
    phase_ = Phase::kAuthCleartext;
  } else {
    writer_.AuthenticationSasl("SCRAM-SHA-256");
    scram_ = std::make_unique<ScramExchange>(admin_ ? config_->admin_scram : config_->scram);
    phase_ = Phase::kAuthScramFirst;
  }
  return Status::OK();
}

Status PgSession::HandleAuth(const PgFrame& frame) {
  if (frame.type != 'p') {
    return Fatal(session_internal::kProtocolViolation,
                 Status::Invalid("expected a password message during authentication, got '",
                                 std::string(1, frame.type), "'"));
  }
  const Status bad_password = Status::Invalid("password authentication failed for user \"",
                                              user_, "\"");
  if (phase_ == Phase::kAuthCleartext) {
    auto password = ParsePasswordMessage(frame.body);
    if (!password.ok()) {
      return Fatal(session_internal::kProtocolViolation, password.status());
    }
    if (!ConstantTimeEquals(*password, admin_ ? config_->admin_token : config_->token)) {
      return Fatal("28P01", bad_password);
    }
    FinishStartup();
    return Status::OK();
  }
  if (phase_ == Phase::kAuthScramFirst) {
    auto initial = ParseSaslInitialResponse(frame.body);
    if (!initial.ok()) {
      return Fatal(session_internal::kProtocolViolation, initial.status());
    }
    if (initial->mechanism != "SCRAM-SHA-256") {
      return Fatal("28000", Status::Invalid("unsupported SASL mechanism '",
                                            initial->mechanism, "'"));
    }
    auto server_first = scram_->ServerFirst(initial->data);
    if (!server_first.ok()) {
      return Fatal("08P01", server_first.status());
    }
    writer_.AuthenticationSaslContinue(*server_first);
    phase_ = Phase::kAuthScramFinal;
    return Status::OK();
  }
  auto server_final = scram_->ServerFinal(frame.body);
  if (!server_final.ok()) {
    return Fatal("08P01", server_final.status());
  }
  if (server_final->empty()) {
    return Fatal("28P01", bad_password);
  }
  writer_.AuthenticationSaslFinal(*server_final);
  scram_.reset();
  FinishStartup();
  return Status::OK();
}

void PgSession::FinishStartup() {
  writer_.AuthenticationOk();
  decoder_.set_max_message_bytes(config_->max_message_bytes);
  settings_ = session_internal::DefaultSettings(*config_);
  for (auto& [name, value] : startup_settings_) {
    settings_[name] = value;
  }
  for (const char* name : session_internal::kReportedSettings) {
    auto it = settings_.find(name);
    std::string value = it == settings_.end() ? "" : it->second;
    writer_.ParameterStatus(session_internal::DisplayName(name), value);
  }
  auto key = cancel_registry_->Register(control_);
  if (key.ok()) {
    pid_ = key->first;
    writer_.BackendKeyData(key->first, key->second);
  }
  executor_session_ = config_->executor->OpenSession(database_);
  phase_ = Phase::kReady;
  writer_.ReadyForQuery('I');
}

char PgSession::TransactionStatus() const {
  if (failed_transaction_) {
    return 'E';
  }
  return in_transaction_ ? 'T' : 'I';
}

Status PgSession::MaybeFlush() {
  if (flush_ && !inline_ && writer_.size() >= (1u << 20)) {
    return flush_(writer_.buffer());
  }
  return Status::OK();
}

}  // namespace rill::pgwire
