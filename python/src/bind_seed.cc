// Bindings behind the seed's remaining API: the C++ log queue drained into
// Python's logging, one task run on demand (DuckDBBridge.run_due_tasks), and
// alert rules with every option (message, enabled).
//
// Threads: take_log_records waits without the GIL, so the tick thread and
// every other C++ thread log without ever waiting for Python.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include "bind_common.h"
#include "py_status.h"
#include "rill/common/logging.h"
#include "rill/engine/engine.h"
#include "rill/engine/event.h"
#include "rill/metrics/alert_rule.h"
#include "rill/metrics/metrics_store.h"

namespace rills {

namespace {

// Python logging levels (logging.DEBUG, ...) of spdlog's levels; trace is 5.
int PythonLevel(spdlog::level::level_enum level) {
  switch (level) {
    case spdlog::level::trace:
      return 5;
    case spdlog::level::debug:
      return 10;
    case spdlog::level::info:
      return 20;
    case spdlog::level::warn:
      return 30;
    case spdlog::level::err:
      return 40;
    case spdlog::level::critical:
      return 50;
    default:
      return 60;
  }
}

// The most verbose spdlog level a Python level lets through.
spdlog::level::level_enum SpdlogLevel(int python_level) {
  if (python_level <= 5) return spdlog::level::trace;
  if (python_level <= 10) return spdlog::level::debug;
  if (python_level <= 20) return spdlog::level::info;
  if (python_level <= 30) return spdlog::level::warn;
  if (python_level <= 40) return spdlog::level::err;
  if (python_level <= 50) return spdlog::level::critical;
  return spdlog::level::off;
}

void BindLogQueue(nb::module_& m) {
  m.def("enable_log_queue", &rill::EnableLogQueue, nb::arg("capacity"),
        "Send every rill logger's records to the log queue instead of stderr.");
  m.def("disable_log_queue", &rill::DisableLogQueue,
        "Send every rill logger's records to stderr again.");
  m.def(
      "take_log_records",
      [](double wait_seconds) {
        std::vector<rill::LogRecord> records;
        {
          nb::gil_scoped_release release;
          records = rill::TakeLogRecords(wait_seconds);
        }
        nb::list out;
        for (auto& r : records) {
          out.append(nb::make_tuple(r.logger, PythonLevel(r.level), r.message, r.time, r.thread));
        }
        return out;
      },
      nb::arg("wait_seconds"),
      "Return queued records as (logger, python_level, message, unix_time, thread_id), "
      "waiting up to wait_seconds for the first (GIL released).");
  m.def(
      "wait_log_records",
      [](double wait_seconds) {
        nb::gil_scoped_release release;
        return rill::WaitForLogRecords(wait_seconds);
      },
      nb::arg("wait_seconds"),
      "Wait up to wait_seconds (GIL released) for a queued record; return whether one is.");
  m.def("wake_log_waiters", &rill::WakeLogWaiters);
  m.def("dropped_log_records", &rill::DroppedLogRecords);
  m.def(
      "set_log_level", [](int python_level) { rill::SetLogLevel(SpdlogLevel(python_level)); },
      nb::arg("python_level"), "Set every rill logger's level from a Python logging level.");
}

}  // namespace

void BindSeed(nb::module_& m) {
  BindLogQueue(m);
  m.def(
      "run_task_now",
      [](nb::handle engine, const std::string& name) {
        rill::Engine& e = CoreEngine(engine);
        rill::Status status;
        {
          nb::gil_scoped_release release;
          status = e.RunTaskNow(name);
        }
        ThrowIfError(status);
      },
      nb::arg("engine"), nb::arg("name"), "Run a task of the engine now (see Engine::RunTaskNow).");
  m.def(
      "add_alert_rule",
      [](nb::handle engine, const std::string& name, const std::string& metric,
         const std::string& op, double threshold, double cooldown_seconds,
         const std::string& severity, std::optional<std::string> webhook,
         std::optional<std::string> message, bool enabled) {
        EngineAccess access = AccessEngine(engine);
        if (access.metrics == nullptr) {
          Raise(PyExc_RuntimeError, "the metrics store is not open");
        }
        rill::AlertRule rule;
        rule.name = name;
        rule.metric = metric;
        rule.op = ValueOrRaise(rill::ParseCompareOp(op));
        rule.threshold = threshold;
        rule.cooldown_seconds = cooldown_seconds;
        rule.severity = ValueOrRaise(rill::ParseSeverity(severity));
        rule.webhook = std::move(webhook);
        rule.message = message.value_or("");
        rule.enabled = enabled;
        rill::MetricsStore* store = access.metrics;
        rill::Status status;
        {
          nb::gil_scoped_release release;
          status = store->AddAlertRule(std::move(rule));
        }
        ThrowIfError(status);
      },
      nb::arg("engine"), nb::arg("name"), nb::arg("metric"), nb::arg("op"),
      nb::arg("threshold"), nb::arg("cooldown_seconds"), nb::arg("severity"),
      nb::arg("webhook").none(), nb::arg("message").none(), nb::arg("enabled"),
      "Add (or replace) an alert rule with every option of rill::AlertRule.");
}

}  // namespace rills
