// The PostgreSQL wire protocol on the server's one port: registers the
// "pgwire" protocol handler (protocol_handler.h) that hands connections whose
// first bytes are a PostgreSQL startup, SSLRequest, GSSENCRequest or
// CancelRequest to pgwire::PgService.
#include <memory>

#include "rill/common/logging.h"
#include "rill/server/pgwire/pg_connection.h"
#include "rill/server/pgwire/pg_executor.h"
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
    pgwire::PgServiceOptions options;
    options.idle_timeout_ms = static_cast<int64_t>(ctx.idle_timeout_seconds * 1000);
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

void RegisterPgWire() {
  // A handler registered earlier (a test's) stays.
  if (!FindProtocolHandler(kPgWireProtocol)) {
    RegisterProtocolHandler(kPgWireProtocol, &PgWireHandler::Make);
  }
}

}  // namespace rill::server
