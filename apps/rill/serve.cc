#include "serve.h"

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <memory>
#include <thread>

#include "pipeline.h"
#include "rill/engine/checkpoint.h"
#include "rill/engine/engine.h"
#include "rill/metrics/metrics_checkpoint.h"
#include "rill/metrics/metrics_store.h"
#include "rill/pipeline/catalog.h"

#if __has_include("rill/server/server.h")
#include "rill/server/server.h"
#include "rill/toolkit/toolkit.h"
#define RILL_HAVE_SERVER 1
#else
#define RILL_HAVE_SERVER 0
#endif

namespace rill::app {
namespace {

// Set by the signal handler; a lock-free atomic is async-signal-safe.
std::atomic<bool> g_stop{false};

extern "C" void OnServeSignal(int /*signal*/) { g_stop.store(true); }

/// Installs SIGINT/SIGTERM handlers for its lifetime, restoring the old ones.
class ServeSignals {
 public:
  ServeSignals() {
    struct sigaction action = {};
    action.sa_handler = OnServeSignal;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, &old_int_);
    sigaction(SIGTERM, &action, &old_term_);
  }
  ~ServeSignals() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }

 private:
  struct sigaction old_int_ = {};
  struct sigaction old_term_ = {};
};

/// What `rill serve` runs, destroyed in reverse order of construction.
struct Running {
  std::unique_ptr<Engine> engine;
  std::unique_ptr<MetricsStore> metrics;
  std::unique_ptr<Checkpointer> checkpointer;  // with the pipeline's `checkpoint:`
#if RILL_HAVE_SERVER
  std::unique_ptr<server::Server> server;
#endif

  void Stop() {
#if RILL_HAVE_SERVER
    if (server) server->Stop();
#endif
    // cluster.leave_on_stop: hand the partitions over while the engine still
    // applies what it polled.
    if (cluster::Application* app = engine ? cluster::Application::For(engine.get()) : nullptr;
        app && app->options().leave_on_stop) {
      Status st = app->Leave(10);
      if (!st.ok()) std::fprintf(stderr, "rill serve: leaving the group: %s\n", st.message().c_str());
    }
    if (engine) engine->Stop();
    if (checkpointer && checkpointer->started()) {
      // A final checkpoint after the last tick (as RillEngine.stop() writes).
      checkpointer->Stop();
      auto saved = checkpointer->Save();
      if (saved.ok()) {
        std::printf("rill serve: final checkpoint %llu (%lld rows)\n",
                    static_cast<unsigned long long>(saved->id),
                    static_cast<long long>(saved->rows));
      } else {
        std::fprintf(stderr, "rill serve: the final checkpoint failed: %s\n",
                     saved.status().message().c_str());
      }
    }
    checkpointer.reset();  // before the engine it borrows
    if (metrics) metrics->Stop();
  }
};

/// Start the network server (the one call that needs server.h) and print
/// the address, token and dashboard URL.
Status StartServer(Running* run, const std::string& listen,
                   const std::optional<std::string>& token, const std::string& admin_token,
                   bool allow_private_webhooks, const std::string& queue_db) {
#if RILL_HAVE_SERVER
  server::ServerOptions options;
  options.listen = listen;
  options.token = token;
  options.admin_token = admin_token;
  options.allow_private_webhooks = allow_private_webhooks;
  toolkit::ToolkitOptions toolkit_options;
  toolkit_options.queue_db = queue_db;
  RILL_ASSIGN_OR_RAISE(options.toolkit, toolkit::Toolkit::Make(std::move(toolkit_options)));
  RILL_ASSIGN_OR_RAISE(run->server,
                       server::Server::Make(run->engine.get(), run->metrics.get(), options));
  RILL_RETURN_NOT_OK(run->server->Start());
  std::printf("rill serve: listening on %s\n", run->server->address().c_str());
  if (cluster::Application* app = cluster::Application::For(run->engine.get())) {
    // `rill query --app` finds this instance's server on "<app_id>-members".
    Status st = app->PublishMember("http://" + run->server->address());
    if (!st.ok()) std::printf("rill serve: not announced to rill query --app: %s\n",
                              st.ToString().c_str());
  }
  std::printf("  token:     %s\n",
              run->server->token().empty() ? "(none: authentication disabled on loopback)"
                                           : run->server->token().c_str());
  std::printf("  dashboard: %s\n", run->server->dashboard_url().c_str());
  if (!queue_db.empty()) std::printf("  queues:    %s\n", queue_db.c_str());
  std::printf("  admin:     %s\n",
              admin_token.empty()
                  ? "(no admin token: DDL is off; --admin-token enables CREATE / DROP)"
                  : "psql user \"admin\" or POST /api/v1/sql with the admin token: DDL");
  std::printf("  query:     rill query --server %s --token <token> \"SELECT 1\"\n",
              run->server->address().c_str());
#else
  (void)run;
  (void)token;
  (void)admin_token;
  (void)allow_private_webhooks;
  (void)queue_db;
  std::printf("rill serve: this build has no network server; running the pipeline only "
              "(requested address %s)\n",
              listen.c_str());
#endif
  std::fflush(stdout);
  return Status::OK();
}

/// Print one line per change-data-capture connector whose initial snapshot
/// runs (rows copied, estimate, rate, ETA), as a user expects of a long load.
void PrintSnapshotProgress(Engine& engine) {
  for (const auto& c : engine.Connectors()) {
    const ConnectorStats s = c->stats();
    if (s.snapshot_done != 0) continue;
    std::printf("rill serve: %s: snapshot %lld of ~%lld rows, %lld rows/s, ETA %lld s\n",
                c->name().c_str(), static_cast<long long>(s.snapshot_rows),
                static_cast<long long>(s.snapshot_rows_total),
                static_cast<long long>(s.snapshot_rows_per_s),
                static_cast<long long>(s.snapshot_eta_seconds));
    std::fflush(stdout);
  }
}

Status Serve(const ServeOptions& options, Running* run) {
  Pipeline pipeline;
  if (!options.pipeline.empty()) {
    RILL_ASSIGN_OR_RAISE(pipeline, LoadPipeline(options.pipeline));
  }
  RILL_ASSIGN_OR_RAISE(run->engine, Engine::Make(pipeline.engine));
  MetricsOptions metrics_options = pipeline.metrics;
  if (options.metrics_path) {
    metrics_options.path = *options.metrics_path;
  }
  RILL_ASSIGN_OR_RAISE(run->metrics, MetricsStore::Make(run->engine.get(), metrics_options));

  const std::string listen =
      options.listen.value_or(pipeline.server.listen.value_or("127.0.0.1:9494"));
  const std::optional<std::string> token = options.token ? options.token : pipeline.server.token;
  const std::string admin_token =
      options.admin_token.value_or(pipeline.server.admin_token.value_or(""));
  const bool allow_private =
      options.allow_private_webhooks || pipeline.server.allow_private_webhooks.value_or(false);

  // Alert-rule webhooks (rules from the file and from the API) are delivered
  // by the server (Server::Start makes the sender and the rule relay).

  // An instance of a scaled-out application: the Kafka sources the pipeline
  // adds read as one member of the application's consumer group.
  std::optional<cluster::ClusterOptions> cluster_options = pipeline.cluster;
  if (options.app_id) {
    if (!cluster_options) cluster_options = cluster::ClusterOptions{};
    cluster_options->app_id = *options.app_id;
  }
  if (options.instance_id) {
    if (!cluster_options) {
      return Status::Invalid("--instance-id needs a `cluster:` section with app_id, or --app-id");
    }
    cluster_options->instance_id = *options.instance_id;
  }
  if (options.leave_on_stop) {
    if (!cluster_options) return Status::Invalid("--leave-on-stop needs a cluster (app_id)");
    cluster_options->leave_on_stop = true;
  }
  if (cluster_options) {
    RILL_ASSIGN_OR_RAISE(cluster::Application * app,
                         cluster::Application::Start(run->engine.get(), *cluster_options));
    std::printf("rill serve: instance '%s' of application '%s'\n",
                app->options().instance_id.c_str(), app->options().app_id.c_str());
  }
  pipeline::Catalog& catalog = pipeline::Catalog::For(run->engine.get());
  catalog.SetMetricsStore(run->metrics.get());
  RILL_RETURN_NOT_OK(ApplyPipeline(pipeline, *run->engine, run->metrics.get()));
  std::optional<CheckpointOptions> checkpoint = pipeline.checkpoint;
  if (options.checkpoint_dir) {
    if (!checkpoint) checkpoint = CheckpointOptions{};
    checkpoint->dir = *options.checkpoint_dir;
  }
  if (checkpoint && options.checkpoint_interval_seconds) {
    checkpoint->interval_seconds = *options.checkpoint_interval_seconds;
  }
  if (checkpoint) {
    // Restore the newest checkpoint before the first tick, then checkpoint
    // periodically (the engine's connectors commit what checkpoints hold).
    RILL_ASSIGN_OR_RAISE(run->checkpointer, Checkpointer::Make(run->engine.get(), *checkpoint));
    MetricsStore* store = run->metrics.get();
    AddMetricsCheckpointSection(*run->checkpointer, [store] { return store; });
    catalog.AttachCheckpointer(run->checkpointer.get());
    // What was declared over SQL comes back first, so the restore finds its
    // tables, sources (their positions) and sinks.
    RILL_ASSIGN_OR_RAISE(auto saved, run->checkpointer->ReadSection("catalog"));
    if (saved) RILL_RETURN_NOT_OK(catalog.Replay(*saved));
    RILL_ASSIGN_OR_RAISE(auto restored, run->checkpointer->Restore());
    if (restored) {
      std::printf("rill serve: restored checkpoint %llu (%zu tables, %lld rows, %zu declared "
                  "objects) from %s\n",
                  static_cast<unsigned long long>(restored->id), restored->tables.size(),
                  static_cast<long long>(restored->rows), catalog.Entries().size(),
                  checkpoint->dir.c_str());
    }
  }
  RILL_RETURN_NOT_OK(run->engine->Start());
  if (run->checkpointer) RILL_RETURN_NOT_OK(run->checkpointer->Start());
  RILL_RETURN_NOT_OK(run->metrics->Start());
  if (!options.pipeline.empty()) {
    std::printf("rill serve: pipeline %s: %zu tables, %zu connectors, %zu tasks, %zu KPI "
                "queries, %zu alert rules, %zu sinks; metrics in %s\n",
                options.pipeline.c_str(), pipeline.tables.size(), pipeline.connectors.size(),
                pipeline.sql_tasks.size() + pipeline.join_tasks.size() + pipeline.stream_tasks.size(),
                pipeline.kpis.size(),
                pipeline.rules.size(), pipeline.sinks.size(), metrics_options.path.c_str());
  }
  const std::string queue_db = options.queue_db.value_or(pipeline.server.queue_db.value_or(""));
  RILL_RETURN_NOT_OK(StartServer(run, listen, token, admin_token, allow_private, queue_db));

  const auto start = std::chrono::steady_clock::now();
  double next_progress = 5;  // seconds: the console's line per running initial snapshot
  while (!g_stop.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (elapsed >= next_progress) {
      PrintSnapshotProgress(*run->engine);
      next_progress = elapsed + 5;
    }
    if (options.duration_s > 0 && elapsed >= options.duration_s) {
      break;
    }
  }
  return Status::OK();
}

}  // namespace

int RunServe(const ServeOptions& options) {
  ServeSignals signals;
  g_stop.store(false);
  Running run;
  Status status = Serve(options, &run);
  run.Stop();
  if (!status.ok()) {
    std::fprintf(stderr, "rill serve: %s\n", status.message().c_str());
    return 1;
  }
  if (run.engine) {
    EngineMetrics m = run.engine->GetMetrics();
    std::printf("rill serve: stopped after %lld ticks, %lld records processed\n",
                static_cast<long long>(m.ticks), static_cast<long long>(m.total_records_processed));
  }
  return 0;
}

}  // namespace rill::app
