// `rill serve [--listen ADDR] [--token T] [--admin-token A] [--metrics PATH]
// [--queue-db PATH] [--checkpoint-dir DIR] [pipeline.yaml]`:
// run an engine, its metrics store, the declared pipeline and the network
// server until SIGINT / SIGTERM.
#pragma once

#include <optional>
#include <string>

namespace rill::app {

struct ServeOptions {
  /// Pipeline file; empty runs an empty engine (tables come over the API).
  std::string pipeline;
  /// Override the pipeline's `server.listen` (default 127.0.0.1:9494).
  std::optional<std::string> listen;
  /// Override the pipeline's `server.token`; unset and absent there: the
  /// server generates one and it is printed.
  std::optional<std::string> token;
  /// Override the pipeline's `server.admin_token`: the credential that may run
  /// DDL (pgwire user `admin`, bearer token of POST /api/v1/sql). Unset and
  /// absent there: no DDL over the network.
  std::optional<std::string> admin_token;
  /// Override the pipeline's `checkpoint.dir` (a pipeline without one gets
  /// checkpoints with the default interval): the tables' rows, the sources'
  /// positions and the catalog (everything declared, also over SQL) are
  /// restored from it at start and written periodically and at stop.
  std::optional<std::string> checkpoint_dir;
  /// Override `checkpoint.interval_seconds`.
  std::optional<double> checkpoint_interval_seconds;
  /// Override the pipeline's `metrics.path` (default rill_metrics.db).
  std::optional<std::string> metrics_path;
  /// Override the pipeline's `server.queue_db`: the SQLite file (WAL) the
  /// queues of /api/v1/queues persist in; unset and absent there: in memory.
  std::optional<std::string> queue_db;
  /// Override the pipeline's `cluster.instance_id` / `cluster.app_id`: run as
  /// this instance of the application (an --app-id without a `cluster:`
  /// section makes one; bootstrap_servers then come from the first Kafka
  /// source).
  std::optional<std::string> instance_id;
  std::optional<std::string> app_id;
  /// Set cluster.leave_on_stop: leave the group at stop (partitions handed
  /// over at once) instead of keeping them for a restart.
  bool leave_on_stop = false;
  /// Lift the webhook SSRF guard for local receivers.
  bool allow_private_webhooks = false;
  /// Seconds to run; 0 runs until a signal (tests use a duration).
  double duration_s = 0;
};

/// Run as the file comment says on the calling thread; return the process
/// exit code: 0 after a clean stop, 1 for a bad pipeline or a failure to
/// start (the message, naming file, line and key, goes to stderr). Prints the
/// address, the token and the dashboard URL once at start. Installs SIGINT and
/// SIGTERM handlers for its lifetime.
int RunServe(const ServeOptions& options);

}  // namespace rill::app
