// A standalone pgwire listener for tests: an Engine with an `orders` table,
// served on 127.0.0.1 (port 0 unless --port). Prints "PORT <n>" and
// "TOKEN <token>", then reads commands on stdin:
//   push <n>   append n orders (ids continue) and run one tick; prints "ok"
//   quit       exit
// Options: --token T, --port N, --auth scram|cleartext|none, --rows N, --timeout-ms N,
// --idle-timeout-ms N.
#include <iostream>
#include <string>
#include <thread>

#include <arrow/api.h>
#include <boost/asio.hpp>

#include "rill/common/arrow_init.h"
#include "rill/connector/memory_connector.h"
#include "rill/engine/engine.h"
#include "rill/metrics/metrics_store.h"
#include "rill/server/pgwire/pg_connection.h"

namespace {

using boost::asio::ip::tcp;

std::shared_ptr<arrow::Schema> OrdersSchema() {
  return arrow::schema({arrow::field("order_id", arrow::int64()),
                        arrow::field("customer", arrow::utf8()),
                        arrow::field("amount", arrow::float64()),
                        arrow::field("quantity", arrow::int32()),
                        arrow::field("paid", arrow::boolean()),
                        arrow::field("created_at", arrow::timestamp(arrow::TimeUnit::MICRO))});
}

std::shared_ptr<arrow::RecordBatch> Orders(int64_t first, int64_t n) {
  arrow::Int64Builder id;
  arrow::StringBuilder customer;
  arrow::DoubleBuilder amount;
  arrow::Int32Builder quantity;
  arrow::BooleanBuilder paid;
  arrow::TimestampBuilder created(arrow::timestamp(arrow::TimeUnit::MICRO),
                                  arrow::default_memory_pool());
  for (int64_t i = first; i < first + n; ++i) {
    (void)id.Append(i);
    (void)customer.Append("customer_" + std::to_string(i % 7));
    (void)amount.Append(static_cast<double>(i) * 1.25);
    (void)quantity.Append(static_cast<int32_t>(i % 5 + 1));
    (void)paid.Append(i % 2 == 0);
    (void)created.Append(1700000000000000LL + i * 1000000LL);
  }
  std::vector<std::shared_ptr<arrow::Array>> arrays(6);
  (void)id.Finish(&arrays[0]);
  (void)customer.Finish(&arrays[1]);
  (void)amount.Finish(&arrays[2]);
  (void)quantity.Finish(&arrays[3]);
  (void)paid.Finish(&arrays[4]);
  (void)created.Finish(&arrays[5]);
  return arrow::RecordBatch::Make(OrdersSchema(), n, arrays);
}

void Accept(tcp::acceptor& acceptor, rill::pgwire::PgService& service) {
  acceptor.async_accept([&](const boost::system::error_code& ec, tcp::socket socket) {
    if (ec) {
      return;
    }
    // Like the real listener: read the first bytes, then hand them over.
    auto sock = std::make_shared<tcp::socket>(std::move(socket));
    auto buf = std::make_shared<std::array<char, 8>>();
    sock->async_read_some(boost::asio::buffer(*buf),
                          [&service, sock, buf](const boost::system::error_code& e, size_t n) {
                            if (!e) {
                              service.HandOver(std::move(*sock), std::string(buf->data(), n));
                            }
                          });
    Accept(acceptor, service);
  });
}

}  // namespace

int main(int argc, char** argv) {
  std::string token = "rill-test-token", auth = "scram";
  int port = 0;
  int64_t rows = 100;
  int64_t timeout_ms = 0;
  int64_t idle_timeout_ms = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string arg = argv[i];
    if (arg == "--token") token = argv[i + 1];
    if (arg == "--port") port = std::stoi(argv[i + 1]);
    if (arg == "--auth") auth = argv[i + 1];
    if (arg == "--rows") rows = std::stoll(argv[i + 1]);
    if (arg == "--timeout-ms") timeout_ms = std::stoll(argv[i + 1]);
    if (arg == "--idle-timeout-ms") idle_timeout_ms = std::stoll(argv[i + 1]);
  }
  (void)rill::InitializeArrowCompute();
  auto engine = rill::Engine::Make().ValueOrDie();
  rill::TableOptions options;
  options.primary_key = {"order_id"};
  auto orders = engine->RegisterTable("orders", OrdersSchema(), options).ValueOrDie();
  auto connector = std::make_shared<rill::MemoryConnector>("orders", OrdersSchema());
  if (auto st = engine->AddConnector(connector); !st.ok()) {
    std::cerr << st.ToString() << std::endl;
    return 1;
  }
  if (rows > 0) {
    (void)orders->Write(Orders(0, rows)).ValueOrDie();
  }
  rill::MetricsOptions metrics_options;
  metrics_options.path = ":memory:";
  auto metrics = rill::MetricsStore::Make(engine.get(), metrics_options).ValueOrDie();
  (void)metrics->Flush();

  rill::pgwire::EnginePgExecutor executor(engine.get(), metrics.get(), timeout_ms);
  if (auto st = executor.Init(); !st.ok()) {
    std::cerr << st.ToString() << std::endl;
    return 1;
  }
  rill::pgwire::PgServerConfig config;
  config.executor = &executor;
  config.token = auth == "none" ? "" : token;
  config.auth = auth == "cleartext" ? rill::pgwire::PgAuthMethod::kCleartext
                                    : rill::pgwire::PgAuthMethod::kScramSha256;
  rill::pgwire::PgServiceOptions service_options;
  service_options.idle_in_transaction_timeout_ms = idle_timeout_ms;
  service_options.idle_session_timeout_ms = idle_timeout_ms;
  auto service = rill::pgwire::PgService::Make(config, service_options).ValueOrDie();

  boost::asio::io_context io;
  tcp::acceptor acceptor(io, tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"),
                                           static_cast<unsigned short>(port)));
  Accept(acceptor, *service);
  std::thread io_thread([&] { io.run(); });
  std::cout << "PORT " << acceptor.local_endpoint().port() << "\nTOKEN " << token << std::endl;

  int64_t next_id = rows;
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.rfind("push ", 0) == 0) {
      int64_t n = std::stoll(line.substr(5));
      // Through a connector and one tick, as live data arrives.
      auto st = connector->Push(Orders(next_id, n));
      next_id += n;
      auto tick = engine->Step();
      std::cout << (st.ok() && tick.ok() ? "ok" : "error") << std::endl;
    } else if (line == "quit") {
      break;
    }
  }
  acceptor.close();
  service->Shutdown();
  io.stop();
  io_thread.join();
  return 0;
}
