// The one mapping from arrow::Status to Python exceptions.
//
// Invalid -> ValueError, KeyError -> KeyError, TypeError -> TypeError,
// CapacityError -> BufferError, IOError -> OSError, IndexError -> IndexError,
// OutOfMemory -> MemoryError, NotImplemented -> NotImplementedError,
// AlreadyExists -> ValueError, Cancelled / ExecutionError / others -> RuntimeError.
// The status message is kept intact.
//
// Threads: every function here needs the GIL.
#pragma once

#include <utility>

#include <arrow/result.h>
#include <arrow/status.h>
#include <nanobind/nanobind.h>

namespace rills {

namespace nb = nanobind;

/// Set the Python exception matching `status` and throw nb::python_error.
[[noreturn]] void RaiseStatus(const arrow::Status& status);

/// Raise if `status` is not OK.
inline void ThrowIfError(const arrow::Status& status) {
  if (!status.ok()) {
    RaiseStatus(status);
  }
}

/// Return the value of `result`, or raise its error.
template <typename T>
T ValueOrRaise(arrow::Result<T> result) {
  if (!result.ok()) {
    RaiseStatus(result.status());
  }
  return std::move(result).ValueUnsafe();
}

/// Raise `exc_type` (e.g. PyExc_ValueError) with `message`.
[[noreturn]] void Raise(PyObject* exc_type, const std::string& message);

}  // namespace rills
