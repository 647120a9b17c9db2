// Calling Python from engine threads.
//
// Callbacks registered from Python (subscribers, memory warnings, business
// metrics, Python connectors) are stored in std::function objects owned by the
// C++ engine and run on the tick thread. Three rules keep that safe:
//  1. Python objects are held through PyRef, whose last release takes the GIL,
//     so C++ may copy and destroy callbacks without holding it.
//  2. Every call goes through CallPython, which takes the GIL, and turns a
//     Python exception into a report (log + engine event with the traceback)
//     instead of letting it cross into C++.
//  3. Once the interpreter is finalizing, no Python code runs (calls are
//     skipped, references are leaked).
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include <nanobind/nanobind.h>

namespace rill {
class Engine;
}

namespace rills {

namespace nb = nanobind;

/// A shared, GIL-safe reference to a Python object.
using PyRef = std::shared_ptr<nb::object>;

/// Return a PyRef to `obj`. Needs the GIL.
PyRef MakePyRef(nb::handle obj);

/// Return false once the interpreter is shutting down. Any thread.
bool PythonAlive();

/// Where errors raised by Python callbacks go: the "rills" logger and, while
/// an engine is attached, Engine::RecordEvent. Shared by the callbacks of one
/// engine (or one standalone table). Any thread.
class Reporter {
 public:
  /// Record events on `engine` from now on (nullptr: log only).
  void Attach(rill::Engine* engine);
  /// Stop recording events; returns after any report in progress. Call
  /// without the GIL.
  void Detach() { Attach(nullptr); }

  /// Log `error` with its traceback and record an error event for
  /// `component`. Needs the GIL; releases it while recording the event.
  void Report(const std::string& component, const std::string& what, nb::python_error& error);
  /// As Report, for a C++ exception thrown while handling a callback.
  void ReportText(const std::string& component, const std::string& message,
                  const std::string& detail);

 private:
  std::mutex mu_;
  rill::Engine* engine_ = nullptr;  // guarded by mu_; borrowed
};

using ReporterPtr = std::shared_ptr<Reporter>;

/// Marks the calling thread as running an engine callback for its lifetime.
class CallbackScope {
 public:
  CallbackScope() { ++depth_; }
  ~CallbackScope() { --depth_; }
  CallbackScope(const CallbackScope&) = delete;
  CallbackScope& operator=(const CallbackScope&) = delete;
  /// True while the calling thread runs a Python callback of an engine (where
  /// the engine must not be destroyed synchronously).
  static bool active() { return depth_ > 0; }

 private:
  static inline thread_local int depth_ = 0;
};

/// Return ("ExcType: message", formatted traceback) of `error`. Needs the GIL.
std::pair<std::string, std::string> DescribePythonError(nb::python_error& error);

/// Log `message` and `detail` as an error on the "rills" Python logger. Needs the GIL.
void LogPythonError(const std::string& component, const std::string& message,
                    const std::string& detail);

/// Run `fn` with the GIL held. A Python exception is reported against
/// `component` and false is returned; false also when Python is gone.
template <typename F>
bool CallPython(const ReporterPtr& reporter, const std::string& component,
                const std::string& what, F&& fn) {
  if (!PythonAlive()) {
    return false;
  }
  CallbackScope scope;
  nb::gil_scoped_acquire gil;
  try {
    std::forward<F>(fn)();
    return true;
  } catch (nb::python_error& error) {
    reporter->Report(component, what, error);
  } catch (const std::exception& error) {
    reporter->ReportText(component, what + ": " + error.what(), "");
  }
  return false;
}

}  // namespace rills
