// The `rill` binary: command-line wiring only; the work happens in librill.
//
//   rill demo [--duration S] [--rate N] [--interval-ms MS]   console demo
//   rill serve PIPELINE.yaml                                  (not available yet)
//   rill query SQL                                            (not available yet)
#include <cstdio>
#include <string>

#include <CLI/CLI.hpp>

#include "demo.h"

#ifndef RILL_VERSION
#define RILL_VERSION "unknown"
#endif

namespace {

// Exit code of commands that exist in the CLI but not yet in the engine.
constexpr int kNotAvailable = 2;

int NotAvailable(const char* command) {
  std::fprintf(stderr, "rill %s: not available yet (network server issue)\n", command);
  return kNotAvailable;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Rill: a single-node streaming analytics engine over live Arrow tables "
               "with SQL by DuckDB.",
               "rill"};
  app.set_version_flag("--version", std::string("rill ") + RILL_VERSION);
  app.require_subcommand(1);

  rill::app::DemoOptions demo_options;
  CLI::App* demo = app.add_subcommand("demo", "Run the built-in live console demo");
  demo->footer(
      "A producer thread pushes simulated orders (new orders and status updates of "
      "existing order ids) into a MemoryConnector feeding the snapshot table `orders` "
      "(primary key order_id); a ScheduledSqlTask computes revenue by region every "
      "second. One line per second: rows, rows/s, tick latency and the SQL result. "
      "Stops on Ctrl-C / SIGTERM or after --duration.");
  demo->add_option("--duration", demo_options.duration_s,
                   "Seconds to run (default: until Ctrl-C)")
      ->check(CLI::NonNegativeNumber);
  demo->add_option("--rate", demo_options.rate, "Rows per second pushed by the producer")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  demo->add_option("--interval-ms", demo_options.interval_ms, "Engine tick interval")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{60000}));
  demo->add_option("--update-fraction", demo_options.update_fraction,
                   "Fraction of rows that update an existing order's status")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  demo->add_option("--seed", demo_options.seed, "Random seed (0: random)");

  std::string pipeline;
  std::string listen;
  CLI::App* serve = app.add_subcommand(
      "serve", "Run a declared pipeline with the network server and dashboard");
  serve->add_option("pipeline", pipeline, "Pipeline YAML file");
  serve->add_option("--listen", listen, "Address to serve on (HOST:PORT or quack:HOST:PORT)");

  std::string sql;
  std::string server;
  CLI::App* query = app.add_subcommand("query", "Run SQL against a running rill server");
  query->add_option("sql", sql, "SQL text");
  query->add_option("--server", server, "Server address (HOST:PORT)");

  CLI11_PARSE(app, argc, argv);

  if (demo->parsed()) {
    return rill::app::RunDemo(demo_options);
  }
  if (serve->parsed()) {
    return NotAvailable("serve");
  }
  if (query->parsed()) {
    return NotAvailable("query");
  }
  return 1;
}
