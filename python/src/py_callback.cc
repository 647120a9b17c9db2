#include "py_callback.h"

#include <nanobind/stl/string.h>

#include "rill/engine/engine.h"
#include "rill/engine/event.h"

namespace rills {

namespace {

bool Finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing() != 0;
#else
  return _Py_IsFinalizing() != 0;
#endif
}

struct PyRefDeleter {
  void operator()(nb::object* obj) const noexcept {
    if (!PythonAlive()) {
      obj->release();  // leak: the interpreter is going away
      delete obj;
      return;
    }
    nb::gil_scoped_acquire gil;
    delete obj;
  }
};

std::string FormatTraceback(nb::python_error& error) {
  try {
    nb::object lines = nb::module_::import_("traceback")
                           .attr("format_exception")(error.type(), error.value(),
                                                     error.traceback());
    return nb::cast<std::string>(nb::str("").attr("join")(lines));
  } catch (nb::python_error& nested) {
    nested.restore();
    PyErr_Clear();
    return error.what();
  }
}

}  // namespace

void LogPythonError(const std::string& component, const std::string& message,
                    const std::string& detail) {
  try {
    nb::object logger = nb::module_::import_("logging").attr("getLogger")("rills");
    logger.attr("error")("%s: %s\n%s", component, message, detail);
  } catch (nb::python_error& nested) {
    nested.restore();
    PyErr_Clear();
  }
}

bool PythonAlive() { return Py_IsInitialized() != 0 && !Finalizing(); }

PyRef MakePyRef(nb::handle obj) {
  return PyRef(new nb::object(nb::borrow(obj)), PyRefDeleter());
}

void Reporter::Attach(rill::Engine* engine) {
  std::lock_guard<std::mutex> lock(mu_);
  engine_ = engine;
}

std::pair<std::string, std::string> DescribePythonError(nb::python_error& error) {
  std::string summary;
  try {
    summary = nb::cast<std::string>(nb::str(error.type().attr("__name__"))) + ": " +
              nb::cast<std::string>(nb::str(error.value()));
  } catch (nb::python_error& nested) {
    nested.restore();
    PyErr_Clear();
    summary = error.what();
  }
  return {summary, FormatTraceback(error)};
}

void Reporter::Report(const std::string& component, const std::string& what,
                      nb::python_error& error) {
  bool interrupted = error.matches(PyExc_KeyboardInterrupt);
  auto [summary, traceback] = DescribePythonError(error);
  ReportText(component, what + ": " + summary, traceback);
  if (interrupted) {
    // Ctrl-C landed inside a callback on the main thread: deliver it again so
    // the script sees KeyboardInterrupt once control is back in Python.
    PyErr_SetInterrupt();
  }
}

void Reporter::ReportText(const std::string& component, const std::string& message,
                          const std::string& detail) {
  LogPythonError(component, message, detail);
  rill::EngineEvent event;
  event.severity = rill::Severity::kError;
  event.source = rill::EventSource::kEngine;
  event.component = component;
  event.message = message;
  event.detail = detail;
  nb::gil_scoped_release release;
  std::lock_guard<std::mutex> lock(mu_);
  if (engine_ != nullptr) {
    event.ts = engine_->Now();
    engine_->RecordEvent(std::move(event));
  }
}

}  // namespace rills
