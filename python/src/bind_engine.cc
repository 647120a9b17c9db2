// Bindings of rill::Engine: tables, connectors, tasks, observers, SQL, loop.
//
// Every call that may wait for the tick (or for a lock the tick holds)
// releases the GIL first: the tick thread takes the GIL to run Python
// callbacks, so holding it here could deadlock.
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <arrow/table.h>
#include <arrow/type.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bind_common.h"
#include "py_arrow.h"
#include "py_callback.h"
#include "py_status.h"
#include "rill/cluster/application.h"
#include "rill/common/reaper.h"
#include "rill/engine/engine.h"
#include "rill/sql/sql_engine.h"
#include "rill/engine/event.h"
#include "rill/engine/task.h"
#include "rill/metrics/metrics_store.h"
#include "rill/pipeline/catalog.h"

namespace rills {

namespace {

using rill::Engine;
using rill::LiveTable;

/// Set the MetricsOptions named in `extra` (rills.MetricsStoreOptions fields).
/// ValueError for an unknown name.
void SetMetricsOptions(nb::dict extra, rill::MetricsOptions* o) {
  for (auto [key, value] : extra) {
    const std::string name = nb::cast<std::string>(key);
    if (name == "telemetry_retention_seconds") {
      o->telemetry_retention_seconds = nb::cast<double>(value);
    } else if (name == "alert_retention_seconds") {
      o->alert_retention_seconds = nb::cast<double>(value);
    } else if (name == "rate_limit_window_seconds") {
      o->rate_limit_window_seconds = nb::cast<double>(value);
    } else if (name == "event_queue_capacity") {
      o->event_queue_capacity = nb::cast<int64_t>(value);
    } else if (name == "write_queue_capacity") {
      o->write_queue_capacity = nb::cast<int64_t>(value);
    } else if (name == "latency_window_seconds") {
      o->latency_window_seconds = nb::cast<double>(value);
    } else if (name == "max_kpi_history_rows") {
      o->max_kpi_history_rows = nb::cast<int64_t>(value);
    } else if (name == "restore_alert_rules") {
      o->restore_alert_rules = nb::cast<bool>(value);
    } else {
      Raise(PyExc_ValueError, "unknown metrics store option '" + name + "'");
    }
  }
}

/// Owns one Engine and the Reporter its Python callbacks share.
class PyEngine {
 public:
  PyEngine(int64_t trigger_interval_ms, int64_t memory_budget_bytes,
           nb::handle on_memory_warning, int64_t auto_compact_chunks, int sql_threads,
           int64_t max_records_per_tick, const std::string& memory_budget_policy)
      : reporter_(std::make_shared<Reporter>()) {
    rill::EngineOptions options;
    options.memory_budget_policy =
        ValueOrRaise(rill::ParseMemoryBudgetPolicy(memory_budget_policy));
    options.trigger_interval_ms = trigger_interval_ms;
    options.memory_budget_bytes = memory_budget_bytes;
    options.auto_compact_chunks = auto_compact_chunks;
    options.sql_threads = sql_threads;
    options.max_records_per_tick = max_records_per_tick;
    if (!on_memory_warning.is_none()) {
      PyRef cb = MakePyRef(on_memory_warning);
      ReporterPtr reporter = reporter_;
      options.on_memory_warning = [cb, reporter](int64_t allocated, int64_t budget) {
        CallPython(reporter, "memory_budget", "on_memory_warning raised",
                   [&] { (*cb)(allocated, budget); });
      };
    }
    rill::Result<std::unique_ptr<Engine>> made;
    {
      nb::gil_scoped_release release;
      made = Engine::Make(std::move(options));
    }
    engine_ = ValueOrRaise(std::move(made));
    reporter_->Attach(engine_.get());
  }

  ~PyEngine() { Close(); }

  /// Stop and destroy the checkpointer, the server, the metrics store and the
  /// engine, in that order. Idempotent. Needs the GIL (released inside).
  /// From one of the engine's callbacks (its tick thread, or a thread inside
  /// step()), the tick that runs the callback must end first: the loop is asked
  /// to stop and the rest is done on the reaper thread (rill/common/reaper.h);
  /// rills._core.wait_for_deferred_closes() waits for it.
  void Close() {
    if (!engine_) {
      return;
    }
    auto parts = std::make_shared<Parts>();
    parts->checkpointer = std::move(checkpointer_);
    parts->server = std::move(server_);
    parts->store = std::move(store_);
    parts->engine = std::move(engine_);
    parts->reporter = reporter_;
    nb::gil_scoped_release release;
    if (CallbackScope::active()) {
      parts->engine->Stop();  // inside a tick: only asks the loop to end after it
      rill::DeferDestruction([parts = std::move(parts)]() mutable { parts.reset(); });
      return;
    }
    parts.reset();
  }
  /// Open the metrics database at `path` and start its threads. Once.
  void OpenMetrics(const std::string& path, double flush_interval_seconds, nb::dict extra) {
    Engine& e = engine();
    if (store_) {
      Raise(PyExc_RuntimeError, "the metrics store is already open");
    }
    rill::MetricsOptions options;
    options.path = path;
    options.flush_interval_seconds = flush_interval_seconds;
    SetMetricsOptions(extra, &options);
    rill::Result<std::unique_ptr<rill::MetricsStore>> made;
    {
      nb::gil_scoped_release release;
      made = rill::MetricsStore::Make(&e, std::move(options));
      if (made.ok()) {
        auto status = (*made)->Start();
        if (!status.ok()) {
          made = status;
        }
      }
    }
    store_ = ValueOrRaise(std::move(made));
  }

  rill::MetricsStore& store() {
    engine();
    if (!store_) {
      Raise(PyExc_RuntimeError, "the metrics store is not open");
    }
    return *store_;
  }
  bool metrics_open() const { return store_ != nullptr; }

  Engine& engine() {
    if (!engine_) {
      Raise(PyExc_RuntimeError, "the engine is closed");
    }
    return *engine_;
  }
  const ReporterPtr& reporter() const { return reporter_; }
  bool open() const { return engine_ != nullptr; }
  rill::MetricsStore* store_or_null() { return store_.get(); }
  std::shared_ptr<void>* server_slot() { return &server_; }
  std::shared_ptr<void>* checkpointer_slot() { return &checkpointer_; }

 private:
  /// What Close() destroys; its destructor keeps the order.
  struct Parts {
    std::shared_ptr<void> checkpointer;
    std::shared_ptr<void> server;
    std::unique_ptr<rill::MetricsStore> store;
    std::unique_ptr<Engine> engine;
    ReporterPtr reporter;
    ~Parts() {
      checkpointer.reset();  // stops its writer; before the store its section reads
      server.reset();  // the network server goes before the store and the engine
      reporter->Detach();
      store.reset();  // the store must go before its engine
      engine.reset();
    }
  };

  ReporterPtr reporter_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<rill::MetricsStore> store_;  // destroyed before engine_
  std::shared_ptr<void> server_;  // a rill::server::Server (bind_server.cc); closed first
  std::shared_ptr<void> checkpointer_;  // a rill::Checkpointer (bind_checkpoint.cc); first of all
};

/// Run `fn` (returning Status or Result) without the GIL, then raise its error.
template <typename F>
auto WithoutGil(F&& fn) {
  using R = decltype(fn());
  R result;
  {
    nb::gil_scoped_release release;
    result = fn();
  }
  if constexpr (std::is_same_v<R, arrow::Status>) {
    ThrowIfError(result);
  } else {
    return ValueOrRaise(std::move(result));
  }
}

std::shared_ptr<arrow::Schema> SchemaOrNull(nb::handle schema) {
  if (schema.is_none()) {
    return nullptr;
  }
  return ValueOrRaise(ImportSchema(schema));
}

std::optional<rill::RetentionPolicy> MakeRetention(std::optional<int64_t> max_rows,
                                                   std::optional<double> max_age_seconds,
                                                   const std::optional<std::string>& column) {
  if (!max_rows.has_value() && !max_age_seconds.has_value()) {
    return std::nullopt;
  }
  rill::RetentionPolicy policy;
  policy.max_rows = max_rows;
  policy.max_age_seconds = max_age_seconds;
  if (column.has_value()) {
    policy.time_column = *column;
  }
  ThrowIfError(policy.Validate());
  return policy;
}

nb::dict EventToDict(const rill::EngineEvent& event) {
  nb::dict d;
  d["ts"] = event.ts;
  d["severity"] = rill::SeverityName(event.severity);
  d["source"] = rill::EventSourceName(event.source);
  d["component"] = event.component;
  d["message"] = event.message;
  d["detail"] = event.detail;
  d["rule"] = event.rule;
  return d;
}

nb::dict MetricsToDict(const rill::EngineMetrics& m) {
  nb::dict d;
  d["timestamp"] = m.timestamp;
  d["ticks"] = m.ticks;
  d["total_records_processed"] = m.total_records_processed;
  d["last_batch_records"] = m.last_batch_records;
  d["last_batch_latency_s"] = m.last_batch_latency_s;
  d["avg_batch_latency_s"] = m.avg_batch_latency_s;
  d["max_batch_latency_s"] = m.max_batch_latency_s;
  d["records_per_second"] = m.records_per_second;
  d["rejected_batches"] = m.rejected_batches;
  d["rejected_records"] = m.rejected_records;
  d["errors"] = m.errors;
  d["memory_warnings"] = m.memory_warnings;
  d["checkpoint_failures"] = m.checkpoint_failures;
  d["shedding"] = m.shedding;
  d["arrow_allocated_bytes"] = m.arrow_allocated_bytes;
  d["arrow_peak_allocated_bytes"] = m.arrow_peak_allocated_bytes;
  d["duckdb_memory_bytes"] = m.duckdb_memory_bytes;
  nb::dict business;
  for (const auto& metric : m.business_metrics) {
    nb::dict entry;
    entry["value"] = metric.value;
    entry["ok"] = metric.ok;
    entry["error"] = metric.error;
    business[nb::str(metric.name.c_str())] = entry;
  }
  d["business_metrics"] = business;
  return d;
}

nb::dict DeclarationToDict(const rill::TableOptions& options) {
  nb::dict d;
  d["primary_key"] = options.primary_key;
  d["mode"] = options.mode ? nb::cast(std::string(rill::TableModeName(*options.mode)))
                           : nb::none();
  d["retention"] = RetentionToTuple(options.retention);
  return d;
}

/// A task's definition as the keyword arguments of its Python class.
nb::dict TaskToDict(const rill::Task& task) {
  nb::dict d;
  d["name"] = task.name();
  d["output_table"] = task.output_table();
  d["interval_seconds"] = task.interval_seconds();
  d["primary_key"] = task.primary_key();
  if (auto* sql = dynamic_cast<const rill::ScheduledSqlTask*>(&task)) {
    d["kind"] = "sql";
    d["query"] = sql->query();
    d["use_prepared_statements"] = sql->use_prepared_statements();
    d["incremental"] = std::string(rill::IncrementalModeName(sql->incremental()));
    return d;
  }
  const auto& o = static_cast<const rill::TableJoinTask&>(task).options();
  d["kind"] = "join";
  d["left_table"] = o.left_table;
  d["right_table"] = o.right_table;
  d["keys"] = o.keys;
  d["right_keys"] = o.right_keys;
  d["join_type"] = std::string(rill::JoinTypeName(o.join_type));
  d["group_by"] = o.group_by;
  nb::list aggregations;
  for (const auto& [column, fn] : o.aggregations) {
    aggregations.append(nb::make_tuple(column, std::string(rill::AggregateFunctionName(fn))));
  }
  d["aggregations"] = aggregations;
  d["incremental"] = o.incremental;
  d["retention"] = RetentionToTuple(o.retention);
  return d;
}

nb::list TasksOfKind(Engine& engine, const char* kind) {
  nb::list out;
  for (const auto& task : engine.Tasks()) {
    nb::dict d = TaskToDict(*task);
    if (nb::cast<std::string>(d["kind"]) == kind) {
      out.append(d);
    }
  }
  return out;
}

nb::dict TaskStatsToDict(const rill::TaskStats& s) {
  nb::dict d;
  d["runs"] = s.runs;
  d["errors"] = s.errors;
  d["last_duration_s"] = s.last_duration_s;
  d["total_duration_s"] = s.total_duration_s;
  d["last_run_at"] = s.last_run_at;
  d["last_error"] = s.last_error;
  d["maintenance"] = s.maintenance;
  d["state_bytes"] = s.state_bytes;
  d["changes_read"] = s.changes_read;
  d["rows_upserted"] = s.rows_upserted;
  d["rows_deleted"] = s.rows_deleted;
  return d;
}

}  // namespace

rill::Engine& CoreEngine(nb::handle engine) { return nb::cast<PyEngine&>(engine).engine(); }
EngineAccess AccessEngine(nb::handle core) {
  PyEngine& e = nb::cast<PyEngine&>(core);
  EngineAccess access;
  access.engine = &e.engine();
  access.metrics = e.store_or_null();
  access.server_slot = e.server_slot();
  access.checkpointer_slot = e.checkpointer_slot();
  return access;
}

void BindEngine(nb::module_& m) {
  using Table = std::shared_ptr<LiveTable>;
  nb::class_<PyEngine>(m, "Engine", "The C++ engine (see rills.RillEngine).")
      .def(nb::init<int64_t, int64_t, nb::handle, int64_t, int, int64_t, const std::string&>(),
           nb::arg("trigger_interval_ms"), nb::arg("memory_budget_bytes"),
           nb::arg("on_memory_warning").none(), nb::arg("auto_compact_chunks"),
           nb::arg("sql_threads") = 0, nb::arg("max_records_per_tick") = 0,
           nb::arg("memory_budget_policy") = "warn")
      .def("close", &PyEngine::Close)
      .def_prop_ro("reporter", [](PyEngine& e) { return e.reporter(); })
      .def_prop_ro("closed", [](PyEngine& e) { return !e.open(); })
      // Tables ------------------------------------------------------------
      .def(
          "register_table",
          [](PyEngine& e, const std::string& name, nb::handle schema,
             const std::vector<std::string>& primary_key, std::optional<std::string> mode,
             std::optional<int64_t> max_rows, std::optional<double> max_age_seconds,
             std::optional<std::string> time_column, bool get_or_create) {
            auto arrow_schema = SchemaOrNull(schema);
            auto options = MakeTableOptions(primary_key, mode, max_rows, max_age_seconds,
                                            time_column, std::nullopt);
            options.auto_compact_chunks = e.engine().options().auto_compact_chunks;
            Engine& engine = e.engine();
            return WithoutGil([&]() -> rill::Result<Table> {
              if (get_or_create) {
                return engine.GetOrCreateTable(name, arrow_schema, options);
              }
              return engine.RegisterTable(name, arrow_schema, options);
            });
          },
          nb::arg("name"), nb::arg("schema").none(), nb::arg("primary_key"),
          nb::arg("mode").none() = nb::none(), nb::arg("max_rows").none() = nb::none(),
          nb::arg("max_age_seconds").none() = nb::none(), nb::arg("time_column").none() = nb::none(),
          nb::arg("get_or_create") = false)
      .def(
          "get_table",
          [](PyEngine& e, const std::string& name) -> std::optional<Table> {
            auto result = e.engine().GetTable(name);
            if (result.status().IsKeyError()) {
              return std::nullopt;
            }
            return ValueOrRaise(std::move(result));
          },
          nb::arg("name"))
      .def("table_names", [](PyEngine& e) { return e.engine().TableNames(); })
      .def(
          "declare_table",
          [](PyEngine& e, const std::string& name, const std::vector<std::string>& primary_key,
             std::optional<std::string> mode, std::optional<int64_t> max_rows,
             std::optional<double> max_age_seconds, std::optional<std::string> time_column) {
            auto options = MakeTableOptions(primary_key, mode, max_rows, max_age_seconds,
                                            time_column, std::nullopt);
            options.auto_compact_chunks = e.engine().options().auto_compact_chunks;
            Engine& engine = e.engine();
            WithoutGil([&] { return engine.DeclareTable(name, options); });
          },
          nb::arg("name"), nb::arg("primary_key"), nb::arg("mode").none() = nb::none(),
          nb::arg("max_rows").none() = nb::none(), nb::arg("max_age_seconds").none() = nb::none(),
          nb::arg("time_column").none() = nb::none())
      .def(
          "table_declaration",
          [](PyEngine& e, const std::string& name) -> nb::object {
            auto declared = e.engine().TableDeclaration(name);
            return declared ? nb::object(DeclarationToDict(*declared)) : nb::none();
          },
          nb::arg("name"))
      .def("declared_table_names", [](PyEngine& e) { return e.engine().DeclaredTableNames(); })
      .def(
          "table_for_write",
          [](PyEngine& e, const std::string& name, nb::handle schema) {
            auto arrow_schema = SchemaOrNull(schema);
            Engine& engine = e.engine();
            return WithoutGil([&] { return engine.TableForWrite(name, arrow_schema); });
          },
          nb::arg("name"), nb::arg("schema").none())
      .def(
          "subscribe",
          [](PyEngine& e, const std::string& table, nb::handle callback) {
            auto subscriber = MakeSubscriber(callback, e.reporter(), table);
            Engine& engine = e.engine();
            return WithoutGil([&] { return engine.Subscribe(table, std::move(subscriber)); });
          },
          nb::arg("table"), nb::arg("callback"))
      .def(
          "unsubscribe",
          [](PyEngine& e, const std::string& table, uint64_t id) {
            Engine& engine = e.engine();
            WithoutGil([&] { return engine.Unsubscribe(table, id); });
          },
          nb::arg("table"), nb::arg("id"))
      .def(
          "drop_table",
          [](PyEngine& e, const std::string& name) {
            Engine& engine = e.engine();
            WithoutGil([&] { return engine.DropTable(name); });
          },
          nb::arg("name"))
      // Connectors ----------------------------------------------------------
      .def(
          "add_connector",
          [](PyEngine& e, std::shared_ptr<rill::Connector> connector) {
            Engine& engine = e.engine();
            WithoutGil([&] { return engine.AddConnector(connector); });
          },
          nb::arg("connector"))
      .def(
          "remove_connector",
          [](PyEngine& e, const std::string& name) {
            Engine& engine = e.engine();
            WithoutGil([&] { return engine.RemoveConnector(name); });
          },
          nb::arg("name"))
      .def("connectors", [](PyEngine& e) { return e.engine().Connectors(); })
      .def("connector_stats",
           [](PyEngine& e) {
             nb::dict d;
             for (const auto& c : e.engine().Connectors()) {
               d[nb::str(c->name().c_str())] = StatsToDict(c->stats());
             }
             return d;
           })
      // Tasks -------------------------------------------------------------
      .def(
          "add_sql_task",
          [](PyEngine& e, const std::string& name, const std::string& query,
             const std::string& output_table, double interval_seconds,
             const std::vector<std::string>& primary_key, bool use_prepared_statements,
             const std::string& incremental) {
            const rill::IncrementalMode mode =
                ValueOrRaise(rill::ParseIncrementalMode(incremental));
            auto task = std::make_shared<rill::ScheduledSqlTask>(
                name, query, output_table, interval_seconds, primary_key,
                use_prepared_statements, std::nullopt, mode);
            Engine& engine = e.engine();
            WithoutGil([&]() -> arrow::Status {
              if (mode == rill::IncrementalMode::kOn) {
                // Refused now, naming the part of the plan that cannot be maintained.
                arrow::Status st =
                    rill::ScheduledSqlTask::CheckIncremental(engine.sql(), query);
                if (!st.ok()) {
                  return st.WithMessage(
                      "ScheduledSQLTask '", name,
                      "': incremental=True, but the query cannot be maintained "
                      "incrementally: ",
                      st.message(),
                      " (incremental=\"auto\" or False re-runs it instead)");
                }
              }
              return engine.AddSqlTask(task);
            });
          },
          nb::arg("name"), nb::arg("query"), nb::arg("output_table"),
          nb::arg("interval_seconds"), nb::arg("primary_key"),
          nb::arg("use_prepared_statements") = true, nb::arg("incremental") = "auto")
      .def(
          "remove_sql_task",
          [](PyEngine& e, const std::string& name) {
            Engine& engine = e.engine();
            WithoutGil([&] { return engine.RemoveSqlTask(name); });
          },
          nb::arg("name"))
      .def(
          "add_join_task",
          [](PyEngine& e, const std::string& name, const std::string& left_table,
             const std::string& right_table, const std::vector<std::string>& keys,
             const std::vector<std::string>& right_keys, const std::string& output_table,
             const std::string& join_type, const std::vector<std::string>& group_by,
             const std::vector<std::pair<std::string, std::string>>& aggregations,
             const std::vector<std::string>& primary_key, bool incremental,
             std::optional<int64_t> max_rows, std::optional<double> max_age_seconds,
             std::optional<std::string> time_column, double interval_seconds) {
            rill::JoinTaskOptions options;
            options.name = name;
            options.left_table = left_table;
            options.right_table = right_table;
            options.keys = keys;
            options.right_keys = right_keys;
            options.output_table = output_table;
            options.join_type = ValueOrRaise(rill::ParseJoinType(join_type));
            options.group_by = group_by;
            for (const auto& [column, fn] : aggregations) {
              options.aggregations.emplace_back(column,
                                                ValueOrRaise(rill::ParseAggregateFunction(fn)));
            }
            options.primary_key = primary_key;
            options.incremental = incremental;
            options.retention = MakeRetention(max_rows, max_age_seconds, time_column);
            options.interval_seconds = interval_seconds;
            auto task = ValueOrRaise(rill::TableJoinTask::Make(std::move(options)));
            Engine& engine = e.engine();
            WithoutGil([&] { return engine.AddJoinTask(task); });
          },
          nb::arg("name"), nb::arg("left_table"), nb::arg("right_table"), nb::arg("keys"),
          nb::arg("right_keys"), nb::arg("output_table"), nb::arg("join_type"),
          nb::arg("group_by"), nb::arg("aggregations"), nb::arg("primary_key"),
          nb::arg("incremental"), nb::arg("max_rows").none() = nb::none(),
          nb::arg("max_age_seconds").none() = nb::none(), nb::arg("time_column").none() = nb::none(),
          nb::arg("interval_seconds") = 0.0)
      .def(
          "remove_join_task",
          [](PyEngine& e, const std::string& name) {
            Engine& engine = e.engine();
            WithoutGil([&] { return engine.RemoveJoinTask(name); });
          },
          nb::arg("name"))
      .def("sql_tasks", [](PyEngine& e) { return TasksOfKind(e.engine(), "sql"); })
      .def("join_tasks", [](PyEngine& e) { return TasksOfKind(e.engine(), "join"); })
      .def("task_stats",
           [](PyEngine& e) {
             nb::dict d;
             for (const auto& [name, stats] : e.engine().TaskStatistics()) {
               d[nb::str(name.c_str())] = TaskStatsToDict(stats);
             }
             return d;
           })
      // Observers ---------------------------------------------------------
      .def(
          "register_business_metric",
          [](PyEngine& e, const std::string& name, nb::handle evaluator) {
            PyRef cb = MakePyRef(evaluator);
            std::string component = "metric:" + name;
            // Errors go back to the engine as a Status carrying the traceback;
            // the engine records the event (once), we only log.
            Engine::BusinessMetric metric = [cb, component, name]() -> rill::Result<double> {
              double value = std::numeric_limits<double>::quiet_NaN();
              if (!PythonAlive()) {
                return arrow::Status::Cancelled("the Python interpreter is shutting down");
              }
              CallbackScope scope;
              nb::gil_scoped_acquire gil;
              try {
                nb::object result = (*cb)();
                if (!result.is_none()) {
                  value = nb::cast<double>(result);
                }
              } catch (nb::python_error& error) {
                auto [summary, traceback] = DescribePythonError(error);
                LogPythonError(component, "business metric raised: " + summary, traceback);
                if (error.matches(PyExc_KeyboardInterrupt)) {
                  PyErr_SetInterrupt();
                }
                return arrow::Status::ExecutionError(summary, "\n", traceback);
              } catch (const std::exception& error) {
                return arrow::Status::ExecutionError("business metric '", name,
                                                     "' returned a non-number: ", error.what());
              }
              return value;
            };
            Engine& engine = e.engine();
            WithoutGil([&] { return engine.RegisterBusinessMetric(name, std::move(metric)); });
          },
          nb::arg("name"), nb::arg("evaluator"))
      .def(
          "unregister_business_metric",
          [](PyEngine& e, const std::string& name) {
            Engine& engine = e.engine();
            WithoutGil([&] { return engine.UnregisterBusinessMetric(name); });
          },
          nb::arg("name"))
      // Events ------------------------------------------------------------
      .def(
          "record_event",
          [](PyEngine& e, const std::string& severity, const std::string& source,
             const std::string& component, const std::string& message,
             const std::string& detail) {
            rill::EngineEvent event;
            event.severity = ValueOrRaise(rill::ParseSeverity(severity));
            event.source = ValueOrRaise(rill::ParseEventSource(source));
            event.component = component;
            event.message = message;
            event.detail = detail;
            Engine& engine = e.engine();
            event.ts = engine.Now();
            nb::gil_scoped_release release;
            engine.RecordEvent(std::move(event));
          },
          nb::arg("severity"), nb::arg("source"), nb::arg("component"), nb::arg("message"),
          nb::arg("detail"))
      .def("recent_events",
           [](PyEngine& e) {
             nb::list out;
             for (const auto& event : e.engine().RecentEvents()) {
               out.append(EventToDict(event));
             }
             return out;
           })
      // SQL ---------------------------------------------------------------
      .def(
          "set_sql_threads",
          [](PyEngine& e, int threads) {
            Engine& engine = e.engine();
            WithoutGil([&] { return engine.sql().SetThreads(threads); });
          },
          nb::arg("threads"))
      .def("sql_threads", [](PyEngine& e) { return e.engine().sql().Threads(); })
      // Scale-out (cluster/application.h) -----------------------------------
      .def(
          "start_application",
          [](PyEngine& e, const std::string& app_id, const std::string& instance_id,
             const std::string& bootstrap_servers, int partitions_per_table,
             int64_t commit_interval_ms, int64_t session_timeout_ms,
             const std::map<std::string, std::string>& kafka_config, bool leave_on_stop,
             bool exactly_once) {
            rill::cluster::ClusterOptions o;
            o.leave_on_stop = leave_on_stop;
            o.exactly_once = exactly_once;
            o.app_id = app_id;
            o.instance_id = instance_id;
            o.bootstrap_servers = bootstrap_servers;
            o.partitions_per_table = partitions_per_table;
            o.commit_interval_ms = commit_interval_ms;
            o.session_timeout_ms = session_timeout_ms;
            o.kafka_config = kafka_config;
            Engine* engine = &e.engine();
            WithoutGil([&] { return rill::cluster::Application::Start(engine, o).status(); });
          },
          nb::arg("app_id"), nb::arg("instance_id"), nb::arg("bootstrap_servers") = "",
          nb::arg("partitions_per_table") = 0, nb::arg("commit_interval_ms") = 100,
          nb::arg("session_timeout_ms") = 10000,
          nb::arg("kafka_config") = std::map<std::string, std::string>{},
          nb::arg("leave_on_stop") = false, nb::arg("exactly_once") = true)
      .def(
          "leave_application",
          [](PyEngine& e, double timeout_seconds) {
            rill::cluster::Application* app = rill::cluster::Application::For(&e.engine());
            if (app == nullptr) return;
            WithoutGil([&] { return app->Leave(timeout_seconds); });
          },
          nb::arg("timeout_seconds") = 10.0)
      .def("cluster_status_json",
           [](PyEngine& e) -> std::string {
             rill::cluster::Application* app = rill::cluster::Application::For(&e.engine());
             if (app == nullptr) return "null";
             nb::gil_scoped_release release;
             return rill::cluster::ClusterStatusJson(*app);
           })
      .def(
          "query",
          [](PyEngine& e, const std::string& sql) {
            Engine& engine = e.engine();
            auto table = WithoutGil([&] { return engine.Query(sql); });
            return ExportTable(table);
          },
          nb::arg("sql"))
      .def(
          "execute_ddl",
          [](PyEngine& e, const std::string& sql) {
            // {"command", "notice", "rows" (SHOW: an Arrow stream capsule)} per
            // statement, or {"error", "sqlstate"} at the first that fails.
            Engine& engine = e.engine();
            rill::pipeline::Catalog& catalog = rill::pipeline::Catalog::For(&engine);
            if (rill::MetricsStore* store = e.store_or_null()) catalog.SetMetricsStore(store);
            nb::list out;
            for (const std::string& statement : rill::pipeline::SplitStatements(sql)) {
              rill::Result<rill::pipeline::DdlResult> done;
              {
                nb::gil_scoped_release release;
                done = catalog.Execute(statement);
              }
              nb::dict d;
              if (!done.ok()) {
                d["error"] = done.status().message();
                d["sqlstate"] = rill::pipeline::SqlStateOf(done.status());
                out.append(d);
                break;
              }
              d["command"] = done->tag;
              d["notice"] = done->notice;
              if (done->rows != nullptr) {
                d["rows"] = ExportTable(done->rows);
              }
              out.append(d);
            }
            return out;
          },
          nb::arg("sql"))
      // Loop --------------------------------------------------------------
      .def("step",
           [](PyEngine& e) {
             Engine& engine = e.engine();
             return WithoutGil([&] { return engine.Step(); });
           })
      .def("start",
           [](PyEngine& e) {
             Engine& engine = e.engine();
             WithoutGil([&] { return engine.Start(); });
           })
      .def("stop",
           [](PyEngine& e) {
             Engine& engine = e.engine();
             nb::gil_scoped_release release;
             engine.Stop();
           })
      .def_prop_ro("running", [](PyEngine& e) { return e.engine().running(); })
      .def("now", [](PyEngine& e) { return e.engine().Now(); })
      // Metrics and memory --------------------------------------------------
      .def("metrics",
           [](PyEngine& e) {
             Engine& engine = e.engine();
             rill::EngineMetrics metrics;
             {
               nb::gil_scoped_release release;
               metrics = engine.GetMetrics();
             }
             return MetricsToDict(metrics);
           })
      .def("check_memory_budget",
           [](PyEngine& e) {
             Engine& engine = e.engine();
             nb::gil_scoped_release release;
             return engine.CheckMemoryBudget();
           })
      .def("allocated_bytes",
           [](PyEngine& e) {
             Engine& engine = e.engine();
             nb::gil_scoped_release release;
             return engine.AllocatedBytes();
           })
      .def(
          "compact_all",
          [](PyEngine& e, bool full) {
            Engine& engine = e.engine();
            WithoutGil([&] { return engine.CompactAll(full); });
          },
          nb::arg("full") = false)
      // Metrics store (alerts, KPI queries, metrics database) ------------------
      .def("open_metrics", &PyEngine::OpenMetrics, nb::arg("path"),
           nb::arg("flush_interval_seconds") = 1.0, nb::arg("options") = nb::dict())
      .def_prop_ro("metrics_open", &PyEngine::metrics_open)
      .def(
          "push_alert",
          [](PyEngine& e, const std::string& message, const std::string& severity,
             const std::string& detail) {
            rill::MetricsStore& store = e.store();
            WithoutGil([&] { return store.PushAlert(message, severity, detail); });
          },
          nb::arg("message"), nb::arg("severity"), nb::arg("detail"))
      .def(
          "query_metrics",
          [](PyEngine& e, const std::string& sql) {
            rill::MetricsStore& store = e.store();
            auto table = WithoutGil([&] { return store.QueryMetrics(sql); });
            return ExportTable(table);
          },
          nb::arg("sql"))
      .def("flush_metrics",
           [](PyEngine& e) {
             rill::MetricsStore& store = e.store();
             WithoutGil([&] { return store.Flush(); });
           })
      .def(
          "add_kpi_query",
          [](PyEngine& e, const std::string& name, const std::string& sql,
             double interval_seconds, const std::string& chart_type, const std::string& x_col,
             const std::string& y_col) {
            rill::MetricsStore& store = e.store();
            WithoutGil([&] {
              return store.AddKpiQuery(name, sql, interval_seconds, chart_type, x_col, y_col);
            });
          },
          nb::arg("name"), nb::arg("sql"), nb::arg("interval_seconds"), nb::arg("chart_type"),
          nb::arg("x_col"), nb::arg("y_col"))
      .def(
          "remove_kpi_query",
          [](PyEngine& e, const std::string& name) {
            rill::MetricsStore& store = e.store();
            WithoutGil([&] { return store.RemoveKpiQuery(name); });
          },
          nb::arg("name"))
      .def(
          "add_alert_rule",
          [](PyEngine& e, const std::string& name, const std::string& metric,
             const std::string& op, double threshold, double cooldown_seconds,
             const std::string& severity, std::optional<std::string> webhook) {
            rill::MetricsStore& store = e.store();
            WithoutGil([&] {
              return store.AddAlertRule(name, metric, op, threshold, cooldown_seconds, severity,
                                        webhook);
            });
          },
          nb::arg("name"), nb::arg("metric"), nb::arg("op"), nb::arg("threshold"),
          nb::arg("cooldown_seconds"), nb::arg("severity"), nb::arg("webhook").none())
      .def(
          "remove_alert_rule",
          [](PyEngine& e, const std::string& name) {
            rill::MetricsStore& store = e.store();
            WithoutGil([&] { return store.RemoveAlertRule(name); });
          },
          nb::arg("name"))
      .def("latest_kpis", [](PyEngine& e) {
        rill::MetricsStore& store = e.store();
        std::vector<rill::KpiSnapshot> kpis;
        {
          nb::gil_scoped_release release;
          kpis = store.LatestKpis();
        }
        nb::dict out;
        for (const auto& k : kpis) {
          nb::dict d;
          d["sql"] = k.query.sql;
          d["chart_type"] = std::string(rill::ChartTypeName(k.query.chart_type));
          d["x_col"] = k.query.x_col;
          d["y_col"] = k.query.y_col;
          d["value"] = k.value ? nb::cast(*k.value) : nb::none();
          d["last_run_at"] = k.last_run_at ? nb::cast(*k.last_run_at) : nb::none();
          d["last_error"] = k.last_error;
          d["runs"] = k.runs;
          d["errors"] = k.errors;
          out[nb::str(k.query.name.c_str())] = d;
        }
        return out;
      });
}

}  // namespace rills
