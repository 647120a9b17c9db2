#include "py_status.h"

#include <string>

#include <nanobind/stl/string.h>

#include "rill/sql/sql_engine.h"

namespace rills {

namespace {

PyObject* ExceptionFor(arrow::StatusCode code) {
  switch (code) {
    case arrow::StatusCode::Invalid:
    case arrow::StatusCode::AlreadyExists:
    case arrow::StatusCode::SerializationError:
      return PyExc_ValueError;
    case arrow::StatusCode::KeyError:
      return PyExc_KeyError;
    case arrow::StatusCode::TypeError:
      return PyExc_TypeError;
    case arrow::StatusCode::CapacityError:
      return PyExc_BufferError;
    case arrow::StatusCode::IOError:
      return PyExc_OSError;
    case arrow::StatusCode::IndexError:
      return PyExc_IndexError;
    case arrow::StatusCode::OutOfMemory:
      return PyExc_MemoryError;
    case arrow::StatusCode::NotImplemented:
      return PyExc_NotImplementedError;
    default:
      return PyExc_RuntimeError;
  }
}

}  // namespace

void Raise(PyObject* exc_type, const std::string& message) {
  PyErr_SetString(exc_type, message.c_str());
  throw nb::python_error();
}

// Raise the rills.errors exception for a query DuckDB refused: a ValueError
// subclass naming DuckDB's error class (CatalogError, ParserError, ...).
[[noreturn]] void RaiseSqlError(const arrow::Status& status, const std::string& error_type) {
  nb::object error = nb::module_::import_("rills.errors")
                         .attr("_sql_error")(status.message(), error_type);
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(error.ptr())), error.ptr());
  throw nb::python_error();
}

void RaiseStatus(const arrow::Status& status) {
  if (const std::string type = rill::SqlErrorType(status); !type.empty()) {
    RaiseSqlError(status, type);
  }
  std::string message = status.message();
  if (status.detail() != nullptr) {
    message += " (" + status.detail()->ToString() + ")";
  }
  Raise(ExceptionFor(status.code()), message);
}

}  // namespace rills
