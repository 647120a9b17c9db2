// The PostgreSQL wire protocol on the server's one port: registers the
// "pgwire" protocol handler (protocol_handler.h) that hands connections whose
// first bytes are a PostgreSQL startup, SSLRequest, GSSENCRequest or
// CancelRequest to pgwire::PgService.
#include <chrono>
#include <memory>

#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>

#include "rill/common/logging.h"
#include "rill/server/pgwire/pg_connection.h"
#include "rill/server/pgwire/pg_executor.h"
#include "rill/server/pgwire/pg_messages.h"
#include "rill/server/pgwire_handler.h"
#include "rill/server/protocol_handler.h"

namespace rill::server {

namespace {

class PgWireHandler : public ProtocolHandler {
 public:
  static std::unique_ptr<ProtocolHandler> Make(const ProtocolContext& ctx) {
    auto handler = std::unique_ptr<PgWireHandler>(new PgWireHandler());
    handler->executor_ = std::make_unique<pgwire::EnginePgExecutor>(
        ctx.engine, ctx.metrics, static_cast<int64_t>(ctx.query_timeout_seconds * 1000));
    Status st = handler->executor_->Init();
    if (!st.ok()) {
      Logger("server")->error("pgwire: catalog layer failed to install: {}", st.ToString());
      return nullptr;
    }
    pgwire::PgServerConfig config;
    config.executor = handler->executor_.get();
    config.token = ctx.token;
    config.admin_token = ctx.admin_token;
    pgwire::PgServiceOptions options;
    // Idle sessions stay open (as PostgreSQL's); idle transactions get the
    // server's idle timeout, authentication its login deadline.
    options.idle_in_transaction_timeout_ms =
        static_cast<int64_t>(ctx.idle_timeout_seconds * 1000);
    options.login_timeout_ms = static_cast<int64_t>(ctx.login_timeout_seconds * 1000);
    options.max_unauthenticated_connections = ctx.max_unauthenticated_connections;
    auto service = pgwire::PgService::Make(std::move(config), options);
    if (!service.ok()) {
      Logger("server")->error("pgwire: {}", service.status().ToString());
      return nullptr;
    }
    handler->service_ = std::move(service).ValueUnsafe();
    return handler;
  }

  void Accept(boost::asio::ip::tcp::socket socket, std::string initial,
              std::shared_ptr<void> done) override {
    service_->HandOver(std::move(socket), std::move(initial), std::move(done));
  }

  void Stop() override { service_->Shutdown(); }

  ~PgWireHandler() override {
    if (service_) service_->Shutdown();
  }

 private:
  PgWireHandler() = default;
  std::unique_ptr<pgwire::EnginePgExecutor> executor_;
  std::unique_ptr<pgwire::PgService> service_;
};

}  // namespace

namespace {

/// Reads one startup-phase packet after another until a startup (or cancel)
/// packet, answering SSL/GSSENC requests 'N'; then sends the refusal.
class PgRefusal : public std::enable_shared_from_this<PgRefusal> {
 public:
  PgRefusal(std::shared_ptr<boost::asio::ip::tcp::socket> socket, char first)
      : socket_(std::move(socket)), timer_(socket_->get_executor()) {
    header_[0] = first;
  }

  void Start() {
    auto self = shared_from_this();
    timer_.expires_after(std::chrono::seconds(2));
    timer_.async_wait([self](boost::system::error_code ec) {
      if (!ec) self->socket_->cancel(ec);
    });
    ReadHeader(1);
  }

 private:
  static constexpr uint32_t kSslCode = 80877103;
  static constexpr uint32_t kGssCode = 80877104;

  static uint32_t Be32(const unsigned char* p) {
    return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
  }

  // Read the 8-byte header (length, code), of which `have` bytes are there.
  void ReadHeader(size_t have) {
    auto self = shared_from_this();
    boost::asio::async_read(
        *socket_, boost::asio::buffer(header_ + have, sizeof(header_) - have),
        [self](boost::system::error_code ec, size_t) {
          if (ec) return self->Close();
          const uint32_t length = Be32(self->header_);
          const uint32_t code = Be32(self->header_ + 4);
          if (length == 8 && (code == kSslCode || code == kGssCode)) {
            static const char kNo = 'N';
            boost::asio::async_write(*self->socket_, boost::asio::buffer(&kNo, 1),
                                     [self](boost::system::error_code e, size_t) {
                                       if (e) return self->Close();
                                       self->ReadHeader(0);
                                     });
            return;
          }
          if (length < 8 || length > 10000) return self->Reply();
          self->body_.resize(length - 8);
          boost::asio::async_read(*self->socket_, boost::asio::buffer(self->body_),
                                  [self](boost::system::error_code, size_t) { self->Reply(); });
        });
  }

  void Reply() {
    static const std::string reply = [] {
      pgwire::PgWriter writer;
      writer.Error("FATAL", "53300",
                   "sorry, too many clients already (the server's max_connections)");
      return writer.buffer();
    }();
    auto self = shared_from_this();
    boost::asio::async_write(*socket_, boost::asio::buffer(reply),
                             [self](boost::system::error_code, size_t) { self->Close(); });
  }

  void Close() {
    boost::system::error_code ignored;
    timer_.cancel();
    socket_->shutdown(boost::asio::ip::tcp::socket::shutdown_both, ignored);
    socket_->close(ignored);
  }

  std::shared_ptr<boost::asio::ip::tcp::socket> socket_;
  boost::asio::steady_timer timer_;
  unsigned char header_[8] = {};
  std::string body_;
};

}  // namespace

void RefusePgConnection(std::shared_ptr<boost::asio::ip::tcp::socket> socket, char first) {
  std::make_shared<PgRefusal>(std::move(socket), first)->Start();
}

void RegisterPgWire() {
  // A handler registered earlier (a test's) stays.
  if (!FindProtocolHandler(kPgWireProtocol)) {
    RegisterProtocolHandler(kPgWireProtocol, &PgWireHandler::Make);
  }
}

}  // namespace rill::server
