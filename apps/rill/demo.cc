#include "demo.h"

#include "rill/metrics/metrics_store.h"
#include "rill/server/server.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <arrow/api.h>

#include "rill/connector/memory_connector.h"
#include "rill/engine/engine.h"
#include "rill/engine/task.h"
#include "rill/table/schema.h"

namespace rill::app {
namespace {

// Set by the signal handler; read by the demo loop. A lock-free atomic is
// async-signal-safe.
std::atomic<bool> g_stop_requested{false};

extern "C" void OnStopSignal(int /*signal*/) { g_stop_requested.store(true); }

/// Installs SIGINT/SIGTERM handlers for its lifetime, restoring the old ones.
class StopSignals {
 public:
  StopSignals() {
    struct sigaction action = {};
    action.sa_handler = OnStopSignal;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, &old_int_);
    sigaction(SIGTERM, &action, &old_term_);
  }
  ~StopSignals() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }

 private:
  struct sigaction old_int_ = {};
  struct sigaction old_term_ = {};
};

constexpr const char* kRegions[] = {"us-east", "us-west", "eu-west", "apac", "latam"};
constexpr const char* kProducts[] = {"widget", "gadget", "gizmo", "sprocket", "doohickey"};
constexpr const char* kStatuses[] = {"pending", "paid", "shipped", "delivered", "cancelled"};
constexpr int kDelivered = 3;
constexpr int kCancelled = 4;

constexpr char kRevenueSql[] =
    "SELECT region, count(*) AS orders, sum(price * quantity) AS revenue "
    "FROM orders WHERE status <> 'cancelled' GROUP BY region ORDER BY revenue DESC";

std::shared_ptr<arrow::Schema> OrdersSchema() {
  return arrow::schema({arrow::field("order_id", arrow::int64(), /*nullable=*/false),
                        arrow::field("customer_id", arrow::int64()),
                        arrow::field("region", arrow::utf8()),
                        arrow::field("product", arrow::utf8()),
                        arrow::field("quantity", arrow::int64()),
                        arrow::field("price", arrow::float64()),
                        arrow::field("status", arrow::utf8()),
                        arrow::field("event_ts", arrow::float64())});
}

/// The simulated order stream. Owned and used by the producer thread only.
class OrderGenerator {
 public:
  OrderGenerator(uint64_t seed, double update_fraction)
      : rng_(seed), update_fraction_(update_fraction), recent_(kRecent) {}

  /// Return `rows` events: new orders, and status updates of recent orders
  /// (full rows with the same order_id, so the snapshot table upserts them).
  arrow::Result<std::shared_ptr<arrow::RecordBatch>> Next(int64_t rows, double now) {
    arrow::Int64Builder id;
    arrow::Int64Builder customer;
    arrow::StringBuilder region;
    arrow::StringBuilder product;
    arrow::Int64Builder quantity;
    arrow::DoubleBuilder price;
    arrow::StringBuilder status;
    arrow::DoubleBuilder ts;
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    for (int64_t i = 0; i < rows; ++i) {
      Order* order = nullptr;
      if (next_id_ > 0 && unit(rng_) < update_fraction_) {
        int64_t window = std::min<int64_t>(next_id_, kRecent);
        Order& candidate = recent_[(next_id_ - 1 - rng_() % window) % kRecent];
        if (candidate.status != kDelivered && candidate.status != kCancelled) {
          candidate.status = unit(rng_) < 0.1 ? kCancelled : candidate.status + 1;
          order = &candidate;
        }
      }
      if (order == nullptr) {
        order = &recent_[next_id_ % kRecent];
        order->id = next_id_++;
        order->customer = static_cast<int64_t>(rng_() % 50000);
        order->region = static_cast<int>(rng_() % std::size(kRegions));
        order->product = static_cast<int>(rng_() % std::size(kProducts));
        order->quantity = static_cast<int64_t>(1 + rng_() % 5);
        order->price = 5.0 + static_cast<double>(rng_() % 20000) / 100.0;
        order->status = 0;
      }
      ARROW_RETURN_NOT_OK(id.Append(order->id));
      ARROW_RETURN_NOT_OK(customer.Append(order->customer));
      ARROW_RETURN_NOT_OK(region.Append(kRegions[order->region]));
      ARROW_RETURN_NOT_OK(product.Append(kProducts[order->product]));
      ARROW_RETURN_NOT_OK(quantity.Append(order->quantity));
      ARROW_RETURN_NOT_OK(price.Append(order->price));
      ARROW_RETURN_NOT_OK(status.Append(kStatuses[order->status]));
      ARROW_RETURN_NOT_OK(ts.Append(now));
    }
    std::vector<std::shared_ptr<arrow::Array>> columns(8);
    ARROW_RETURN_NOT_OK(id.Finish(&columns[0]));
    ARROW_RETURN_NOT_OK(customer.Finish(&columns[1]));
    ARROW_RETURN_NOT_OK(region.Finish(&columns[2]));
    ARROW_RETURN_NOT_OK(product.Finish(&columns[3]));
    ARROW_RETURN_NOT_OK(quantity.Finish(&columns[4]));
    ARROW_RETURN_NOT_OK(price.Finish(&columns[5]));
    ARROW_RETURN_NOT_OK(status.Finish(&columns[6]));
    ARROW_RETURN_NOT_OK(ts.Finish(&columns[7]));
    return arrow::RecordBatch::Make(OrdersSchema(), rows, std::move(columns));
  }

 private:
  struct Order {
    int64_t id = 0;
    int64_t customer = 0;
    int region = 0;
    int product = 0;
    int64_t quantity = 0;
    double price = 0;
    int status = 0;
  };
  static constexpr int64_t kRecent = 50000;  // orders that may still get updates

  std::mt19937_64 rng_;
  double update_fraction_;
  std::vector<Order> recent_;  // ring indexed by order_id % kRecent
  int64_t next_id_ = 0;
};

/// Return `v` with a k/M/G suffix.
std::string Human(double v) {
  char buf[32];
  double a = v < 0 ? -v : v;
  if (a >= 1e9) {
    std::snprintf(buf, sizeof(buf), "%.2fG", v / 1e9);
  } else if (a >= 1e6) {
    std::snprintf(buf, sizeof(buf), "%.2fM", v / 1e6);
  } else if (a >= 1e4) {
    std::snprintf(buf, sizeof(buf), "%.1fk", v / 1e3);
  } else {
    std::snprintf(buf, sizeof(buf), "%.0f", v);
  }
  return buf;
}

double NumberAt(const arrow::ChunkedArray& column, int64_t row) {
  auto scalar = column.GetScalar(row);
  if (!scalar.ok() || !(*scalar)->is_valid) {
    return 0;
  }
  auto as_double = (*scalar)->CastTo(arrow::float64());
  if (!as_double.ok()) {
    return 0;
  }
  return std::static_pointer_cast<arrow::DoubleScalar>(*as_double)->value;
}

/// Format the revenue table as "us-east $1.23M (4.3k) | ...".
std::string FormatRevenue(const arrow::Table& table) {
  auto region = table.GetColumnByName("region");
  auto orders = table.GetColumnByName("orders");
  auto revenue = table.GetColumnByName("revenue");
  if (!region || !orders || !revenue) {
    return "(unexpected columns: " + table.schema()->ToString() + ")";
  }
  std::string out;
  for (int64_t row = 0; row < table.num_rows(); ++row) {
    auto name = region->GetScalar(row);
    if (!out.empty()) {
      out += " | ";
    }
    out += (name.ok() ? (*name)->ToString() : "?") + " $" + Human(NumberAt(*revenue, row)) +
           " (" + Human(NumberAt(*orders, row)) + ")";
  }
  return out.empty() ? "(no rows yet)" : out;
}

/// Return the current revenue table as a line, or why there is none.
std::string RevenueLine(Engine& engine) {
  auto stats = engine.TaskStatistics();
  auto it = stats.find("revenue_by_region");
  if (it != stats.end() && it->second.errors > 0 && !it->second.last_error.empty()) {
    return "task error: " + it->second.last_error;
  }
  auto table = engine.GetTable("revenue_by_region");
  if (!table.ok()) {
    return "(waiting for the first run)";
  }
  auto rows = (*table)->snapshot()->ToTable();
  if (!rows.ok()) {
    return "error: " + rows.status().ToString();
  }
  return FormatRevenue(**rows);
}

/// Start the network server on options.listen (a free port on the same host
/// when that one is taken) and print where the dashboard is.
Result<std::unique_ptr<server::Server>> StartServer(Engine* engine, MetricsStore* metrics,
                                                    const DemoOptions& options) {
  server::ServerOptions server_options;
  server_options.listen = options.listen;
  if (!options.token.empty()) server_options.token = options.token;
  RILL_ASSIGN_OR_RAISE(auto server, server::Server::Make(engine, metrics, server_options));
  Status started = server->Start();
  if (!started.ok() && started.IsIOError()) {
    RILL_ASSIGN_OR_RAISE(auto hp, server::ParseListenAddress(options.listen));
    server_options.listen = hp.first + ":0";
    RILL_ASSIGN_OR_RAISE(server, server::Server::Make(engine, metrics, server_options));
    started = server->Start();
  }
  RILL_RETURN_NOT_OK(started);
  const std::string address = server->address();
  const size_t colon = address.rfind(':');
  std::printf("rill demo: serving on quack:%s (token %s)\n  dashboard: %s\n  psql:      "
              "PGPASSWORD=%s psql -h %s -p %s -U any -d rill\n",
              address.c_str(), server->token().c_str(), server->dashboard_url().c_str(),
              server->token().c_str(), address.substr(0, colon).c_str(),
              address.substr(colon + 1).c_str());
  return server;
}

Status Run(const DemoOptions& options) {
  EngineOptions engine_options;
  engine_options.trigger_interval_ms = options.interval_ms;
  RILL_ASSIGN_OR_RAISE(auto engine, Engine::Make(engine_options));

  TableOptions table_options;
  table_options.primary_key = {"order_id"};
  table_options.mode = TableMode::kSnapshot;
  RILL_ASSIGN_OR_RAISE(auto orders, engine->RegisterTable("orders", OrdersSchema(), table_options));

  BufferLimits limits;
  limits.max_records = std::max<int64_t>(100000, options.rate * 10);
  auto connector = std::make_shared<MemoryConnector>("orders", OrdersSchema(), limits, "orders_feed");
  RILL_RETURN_NOT_OK(engine->AddConnector(connector));
  RILL_RETURN_NOT_OK(engine->AddSqlTask(std::make_shared<ScheduledSqlTask>(
      "revenue_by_region", kRevenueSql, "revenue_by_region", /*interval_seconds=*/1.0,
      std::vector<std::string>{"region"})));
  // The dashboard's data: KPI queries, an alert rule and the server.
  MetricsOptions metrics_options;
  metrics_options.path = ":memory:";
  RILL_ASSIGN_OR_RAISE(auto metrics, MetricsStore::Make(engine.get(), metrics_options));
  RILL_RETURN_NOT_OK(metrics->AddKpiQuery(
      "total_revenue ($)",
      "SELECT round(sum(quantity * price), 2) AS revenue FROM orders WHERE status <> 'cancelled'",
      1.0, "line", "ts", "revenue"));
  RILL_RETURN_NOT_OK(metrics->AddKpiQuery(
      "max_order_amount ($)", "SELECT max(quantity * price) AS max_amount FROM orders", 1.0,
      "bar", "ts", "max_amount"));
  RILL_RETURN_NOT_OK(metrics->AddKpiQuery(
      "cancelled_ratio",
      "SELECT avg(CASE WHEN status = 'cancelled' THEN 1.0 ELSE 0.0 END) AS ratio FROM orders",
      1.0, "line", "ts", "ratio"));
  RILL_RETURN_NOT_OK(metrics->AddAlertRule("Big order", "max_order_amount ($)", ">", 950,
                                           /*cooldown_seconds=*/30, "warning"));
  RILL_RETURN_NOT_OK(engine->Start());
  RILL_RETURN_NOT_OK(metrics->Start());
  std::unique_ptr<server::Server> server;
  if (!options.listen.empty()) {
    RILL_ASSIGN_OR_RAISE(server, StartServer(engine.get(), metrics.get(), options));
  }

  std::printf("rill demo: simulated orders stream at %lld rows/s (%.0f%% status updates), "
              "tick every %lld ms; Ctrl-C to stop\n",
              static_cast<long long>(options.rate), options.update_fraction * 100,
              static_cast<long long>(options.interval_ms));
  std::printf("revenue_by_region every 1 s: %s\n", kRevenueSql);
  std::fflush(stdout);

  // Producer: pushes on its own thread, paced to `rate` rows per second.
  std::atomic<bool> producer_stop{false};
  std::atomic<int64_t> push_errors{0};
  std::thread producer([&] {
    uint64_t seed = options.seed != 0 ? options.seed : std::random_device{}();
    OrderGenerator generator(seed, options.update_fraction);
    auto start = std::chrono::steady_clock::now();
    int64_t sent = 0;
    while (!producer_stop.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      double elapsed =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      // Never burst more than one second's worth after a stall.
      int64_t due = std::min<int64_t>(static_cast<int64_t>(elapsed * options.rate) - sent,
                                      std::max<int64_t>(options.rate, 1));
      if (due <= 0) {
        continue;
      }
      auto batch = generator.Next(due, engine->Now());
      if (!batch.ok() || !connector->Push(*batch).ok()) {
        push_errors.fetch_add(1);
      }
      sent += due;
    }
  });

  auto start = std::chrono::steady_clock::now();
  auto next_print = start + std::chrono::seconds(1);
  int64_t last_records = 0;
  while (!g_stop_requested.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    auto now = std::chrono::steady_clock::now();
    double elapsed = std::chrono::duration<double>(now - start).count();
    if (options.duration_s > 0 && elapsed >= options.duration_s) {
      break;
    }
    if (now < next_print) {
      continue;
    }
    next_print += std::chrono::seconds(1);
    EngineMetrics m = engine->GetMetrics();
    if (static_cast<int64_t>(elapsed) % 20 == 5) {
      // Something for the dashboard's Alert Logs now and then.
      (void)metrics->Warn("demo: order backlog above 1,000 for a moment");
    }
    std::printf("[%5.0fs] orders %s rows | %s rows/s | +%s this s | tick %.2f ms (avg %.2f, max "
                "%.2f) | %s\n",
                elapsed, Human(static_cast<double>(orders->num_rows())).c_str(),
                Human(m.records_per_second).c_str(),
                Human(static_cast<double>(m.total_records_processed - last_records)).c_str(),
                m.last_batch_latency_s * 1e3, m.avg_batch_latency_s * 1e3,
                m.max_batch_latency_s * 1e3,
                RevenueLine(*engine).c_str());
    std::fflush(stdout);
    last_records = m.total_records_processed;
  }

  producer_stop.store(true);
  producer.join();
  if (server) server->Stop();
  engine->Stop();
  metrics->Stop();
  EngineMetrics m = engine->GetMetrics();
  ConnectorStats cs = connector->stats();
  std::printf("stopped: %lld ticks, %lld records processed, %lld orders in the table, "
              "%lld dropped by backpressure, %lld push errors, %lld engine errors\n",
              static_cast<long long>(m.ticks), static_cast<long long>(m.total_records_processed),
              static_cast<long long>(orders->num_rows()),
              static_cast<long long>(cs.dropped_records),
              static_cast<long long>(push_errors.load()), static_cast<long long>(m.errors));
  std::printf("final revenue_by_region: %s\n", RevenueLine(*engine).c_str());
  return Status::OK();
}

}  // namespace

int RunDemo(const DemoOptions& options) {
  StopSignals signals;
  g_stop_requested.store(false);
  Status status = Run(options);
  if (!status.ok()) {
    std::fprintf(stderr, "rill demo: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace rill::app
