// The `rill` binary: command-line wiring only; the work happens in librill.
//
//   rill demo [--duration S] [--rate N] [--interval-ms MS]   console demo
//   rill serve [--listen ADDR] [--token T] [--metrics PATH] [--queue-db PATH]
//              [--app-id APP] [--instance-id ID]
//              [PIPELINE.yaml]
//   rill query [--server ADDR] [--token T] [--format table|csv|json] SQL
//   rill pipeline options [--format yaml|sql]     the declarable options (Markdown)
//   rill pipeline dump [--server ADDR] [--token T] [--format yaml|sql]
//                                                 the running catalog
#include <cstdio>
#include <cstdlib>
#include <string>

#include <CLI/CLI.hpp>

#include "rill/pipeline/catalog.h"

#include "demo.h"
#include "query.h"
#include "serve.h"

#ifndef RILL_VERSION
#define RILL_VERSION "unknown"
#endif

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
  demo->add_option("--listen", demo_options.listen,
                   "Serve the API, psql and the dashboard here (HOST:PORT; \"\" for none)")
      ->capture_default_str();
  demo->add_option("--token", demo_options.token, "Server token (default: generated)");

  rill::app::ServeOptions serve_options;
  std::string listen;
  std::string token;
  std::string metrics_path;
  CLI::App* serve = app.add_subcommand(
      "serve", "Run a declared pipeline with the network server and dashboard");
  serve->add_option("pipeline", serve_options.pipeline,
                    "Pipeline YAML file (tables, connectors, tasks, KPIs, alert rules; see "
                    "examples/pipelines/orders.yaml)")
      ->check(CLI::ExistingFile);
  CLI::Option* listen_opt = serve->add_option(
      "--listen", listen, "Address to serve on: HOST:PORT or quack:HOST:PORT (port 0 picks "
                          "one; default: the file's server.listen, else 127.0.0.1:9494)");
  CLI::Option* token_opt = serve->add_option(
      "--token", token, "Bearer token clients must send (default: generated and printed; \"\" "
                        "disables auth, allowed on loopback only)");
  CLI::Option* metrics_opt = serve->add_option(
      "--metrics", metrics_path, "Metrics database file (default rill_metrics.db; :memory:)");
  std::string queue_db;
  CLI::Option* queue_db_opt = serve->add_option(
      "--queue-db", queue_db,
      "SQLite file the queues of /api/v1/queues persist in, across restarts (default: the "
      "file's server.queue_db, else in memory)");
  std::string admin_token;
  CLI::Option* admin_token_opt = serve->add_option(
      "--admin-token", admin_token,
      "The admin credential: with it (psql user \"admin\", or the bearer token of POST "
      "/api/v1/sql) clients may CREATE and DROP pipeline objects (default: the file's "
      "server.admin_token, else none: DDL is off; the ordinary token stays read-only)");
  std::string checkpoint_dir;
  CLI::Option* checkpoint_dir_opt = serve->add_option(
      "--checkpoint-dir", checkpoint_dir,
      "Checkpoint directory: tables, source positions and the catalog (also what was created "
      "over SQL) are restored from it at start and written periodically and at stop (default: "
      "the file's checkpoint.dir, else no checkpoints)");
  double checkpoint_interval = 0;
  CLI::Option* checkpoint_interval_opt =
      serve->add_option("--checkpoint-interval", checkpoint_interval,
                        "Seconds between checkpoints (default: the file's, else 60)")
          ->check(CLI::PositiveNumber);
  std::string instance_id;
  CLI::Option* instance_id_opt = serve->add_option(
      "--instance-id", instance_id,
      "Run as this instance of the pipeline's application (overrides cluster.instance_id; "
      "stable per instance: static membership of the application's Kafka consumer group)");
  std::string app_id;
  CLI::Option* app_id_opt = serve->add_option(
      "--app-id", app_id,
      "The application (Kafka consumer group) this process is an instance of (overrides "
      "cluster.app_id)");
  serve->add_flag("--leave-on-stop", serve_options.leave_on_stop,
                  "Leave the application's consumer group at stop (its partitions go to the other "
                  "instances at once; default: keep them for the session timeout, so that a "
                  "restart causes no rebalance)");
  serve->add_flag("--allow-private-webhooks", serve_options.allow_private_webhooks,
                  "Let webhooks reach loopback and private addresses (local receivers)");
  serve->add_option("--duration", serve_options.duration_s,
                    "Seconds to run (default: until Ctrl-C / SIGTERM)")
      ->check(CLI::NonNegativeNumber);

  rill::app::QueryOptions query_options;
  CLI::App* query = app.add_subcommand("query", "Run SQL against a running rill server");
  query->add_option("sql", query_options.sql, "SQL text")->required();
  query->add_option("--server", query_options.server, "Server address (HOST:PORT)")
      ->capture_default_str();
  CLI::Option* query_token = query->add_option(
      "--token", query_options.token, "Bearer token (default: the RILL_TOKEN environment variable)");
  query->add_option("--app", query_options.app,
                    "Ask every instance of this scaled-out application (fan-out; an "
                    "aggregate over a table with _partition)");
  query->add_option("--bootstrap-servers", query_options.bootstrap_servers,
                    "The application's Kafka cluster (with --app)");
  query->add_option("--format", query_options.format, "Output: table, csv or json")
      ->capture_default_str()
      ->check(CLI::IsMember({"table", "csv", "json"}));
  query->add_option("--timeout", query_options.timeout_seconds, "Seconds to wait for the result")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  query->footer("Exit status: 0 on success, 1 when the server refused the query (its message "
                "is printed), 2 when the server could not be reached.");

  CLI::App* pipeline = app.add_subcommand("pipeline", "Inspect declared pipelines");
  pipeline->require_subcommand(1);
  CLI::App* pipeline_options = pipeline->add_subcommand(
      "options", "Print every kind's options as Markdown: the pipeline file's connectors "
                 "(docs/pipelines.md) or, with --format sql, every statement's WITH options "
                 "(docs/sql.md)");
  std::string options_format = "yaml";
  pipeline_options->add_option("--format", options_format, "yaml or sql")
      ->capture_default_str()
      ->check(CLI::IsMember({"yaml", "sql"}));
  rill::app::DumpOptions dump_options;
  CLI::App* pipeline_dump = pipeline->add_subcommand(
      "dump", "Print the running server's catalog (everything declared, by its pipeline file "
              "or over SQL) as a pipeline file or as SQL; either, fed back, recreates it");
  pipeline_dump->add_option("--server", dump_options.server, "Server address (HOST:PORT)")
      ->capture_default_str();
  CLI::Option* dump_token = pipeline_dump->add_option(
      "--token", dump_options.token,
      "The admin token (default: the RILL_ADMIN_TOKEN, else RILL_TOKEN environment variable)");
  pipeline_dump->add_option("--format", dump_options.format, "yaml or sql")
      ->capture_default_str()
      ->check(CLI::IsMember({"yaml", "sql"}));

  CLI11_PARSE(app, argc, argv);

  if (pipeline_options->parsed()) {
    std::fputs(options_format == "sql" ? rill::pipeline::DdlOptionsMarkdown().c_str()
                                       : rill::pipeline::PipelineFileOptionsMarkdown().c_str(),
               stdout);
    return 0;
  }
  if (pipeline_dump->parsed()) {
    if (dump_token->count() == 0) {
      const char* env = std::getenv("RILL_ADMIN_TOKEN");
      if (env == nullptr) env = std::getenv("RILL_TOKEN");
      if (env != nullptr) dump_options.token = env;
    }
    std::string out;
    std::string err;
    const int rc = rill::app::RunDump(dump_options, &out, &err);
    if (rc != 0) {
      std::fprintf(stderr, "rill pipeline dump: %s\n", err.c_str());
      return rc;
    }
    std::fputs(out.c_str(), stdout);
    return 0;
  }

  if (demo->parsed()) {
    return rill::app::RunDemo(demo_options);
  }
  if (serve->parsed()) {
    if (listen_opt->count() > 0) serve_options.listen = listen;
    if (token_opt->count() > 0) serve_options.token = token;
    if (metrics_opt->count() > 0) serve_options.metrics_path = metrics_path;
    if (queue_db_opt->count() > 0) serve_options.queue_db = queue_db;
    if (admin_token_opt->count() > 0) serve_options.admin_token = admin_token;
    if (checkpoint_dir_opt->count() > 0) serve_options.checkpoint_dir = checkpoint_dir;
    if (instance_id_opt->count() > 0) serve_options.instance_id = instance_id;
    if (app_id_opt->count() > 0) serve_options.app_id = app_id;
    if (checkpoint_interval_opt->count() > 0) {
      serve_options.checkpoint_interval_seconds = checkpoint_interval;
    }
    return rill::app::RunServe(serve_options);
  }
  if (query->parsed()) {
    if (query_token->count() == 0) {
      if (const char* env = std::getenv("RILL_TOKEN")) query_options.token = env;
    }
    std::string out;
    std::string err;
    const int rc = query_options.app.empty()
                       ? rill::app::RunQuery(query_options, &out, &err)
                       : rill::app::RunAppQuery(query_options, &out, &err);
    std::fputs(out.c_str(), stdout);
    if (rc != 0) {
      std::fprintf(stderr, "rill query: %s\n", err.c_str());
    }
    return rc;
  }
  return 1;
}
