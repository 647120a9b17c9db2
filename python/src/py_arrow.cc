#include "py_arrow.h"

#include <dlfcn.h>

#include <string>

#include <arrow/c/abi.h>
#include <arrow/c/bridge.h>
#include <arrow/memory_pool.h>
#include <arrow/record_batch.h>
#include <arrow/table.h>
#include <arrow/type.h>
#include <nanobind/stl/string.h>

namespace rills {

namespace {

std::string TypeName(nb::handle obj) {
  return nb::cast<std::string>(nb::str(nb::handle(obj.type()).attr("__name__")));
}

template <typename T>
T* CapsulePointer(nb::handle capsule, const char* name) {
  void* ptr = PyCapsule_GetPointer(capsule.ptr(), name);
  if (ptr == nullptr) {
    throw nb::python_error();
  }
  return static_cast<T*>(ptr);
}

void ReleaseStream(void* ptr) noexcept {
  auto* stream = static_cast<ArrowArrayStream*>(ptr);
  if (stream->release != nullptr) {
    stream->release(stream);
  }
  delete stream;
}

void ReleaseSchema(void* ptr) noexcept {
  auto* schema = static_cast<ArrowSchema*>(ptr);
  if (schema->release != nullptr) {
    schema->release(schema);
  }
  delete schema;
}

// pyarrow's own C API (pyarrow.lib.__pyx_capi__, what pyarrow_api.h loads):
// hands over the std::shared_ptr a pyarrow RecordBatch holds, with no C data
// export and import (issue 16: that round trip was most of a small push).
// Used only when pyarrow's libarrow is the one this module runs on, so the
// object is ours to share; otherwise pushes go through the C data interface.
struct PyarrowBatches {
  PyTypeObject* type = nullptr;  // pyarrow.lib.RecordBatch
  std::shared_ptr<arrow::RecordBatch> (*unwrap)(PyObject*) = nullptr;
};

bool SameLibrary(const void* a, const void* b) {
  Dl_info ia, ib;
  if (dladdr(a, &ia) == 0 || dladdr(b, &ib) == 0) return false;
  return ia.dli_fbase == ib.dli_fbase;
}

PyarrowBatches LoadPyarrowBatches() {
  PyarrowBatches out;
  try {
    nb::module_ lib = nb::module_::import_("pyarrow.lib");
    nb::object capi = lib.attr("__pyx_capi__");
    nb::object unwrap = capi["pyarrow_unwrap_batch"];
    void* fn = PyCapsule_GetPointer(unwrap.ptr(), PyCapsule_GetName(unwrap.ptr()));
    // pyarrow.lib calls arrow::default_memory_pool of the libarrow it runs
    // on; it must be the one linked here.
    nb::object lib_path = lib.attr("__file__");
    void* pyarrow_handle = dlopen(nb::cast<std::string>(lib_path).c_str(), RTLD_NOW | RTLD_NOLOAD);
    void* theirs = pyarrow_handle ? dlsym(pyarrow_handle, "_ZN5arrow19default_memory_poolEv") : nullptr;
    if (pyarrow_handle) dlclose(pyarrow_handle);
    const void* ours = reinterpret_cast<const void*>(&arrow::default_memory_pool);
    if (fn == nullptr || theirs == nullptr || !SameLibrary(theirs, ours)) {
      PyErr_Clear();
      return out;
    }
    out.type = reinterpret_cast<PyTypeObject*>(lib.attr("RecordBatch").ptr());
    out.unwrap = reinterpret_cast<std::shared_ptr<arrow::RecordBatch> (*)(PyObject*)>(fn);
  } catch (const nb::python_error&) {
    PyErr_Clear();
  }
  return out;
}

const PyarrowBatches& Pyarrow() {
  static const PyarrowBatches batches = LoadPyarrowBatches();  // first call holds the GIL
  return batches;
}

}  // namespace

void InitPyarrowInterop() { Pyarrow(); }

int64_t ImportedBatches::num_rows() const {
  int64_t rows = 0;
  for (const auto& batch : batches) {
    rows += batch->num_rows();
  }
  return rows;
}

rill::Result<ImportedBatches> ImportBatches(nb::handle obj) {
  ImportedBatches out;
  const PyarrowBatches& pyarrow = Pyarrow();
  if (pyarrow.unwrap != nullptr && Py_TYPE(obj.ptr()) == pyarrow.type) {
    std::shared_ptr<arrow::RecordBatch> batch = pyarrow.unwrap(obj.ptr());
    if (batch) {
      out.schema = batch->schema();
      out.batches.push_back(std::move(batch));
      return out;
    }
    PyErr_Clear();
  }
  // A RecordBatch offers both; its array export is the cheaper one (no reader).
  if (nb::hasattr(obj, "__arrow_c_array__")) {
    nb::object pair = obj.attr("__arrow_c_array__")();
    nb::handle schema_capsule = pair[0];
    nb::handle array_capsule = pair[1];
    auto* c_schema = CapsulePointer<ArrowSchema>(schema_capsule, "arrow_schema");
    auto* c_array = CapsulePointer<ArrowArray>(array_capsule, "arrow_array");
    ARROW_ASSIGN_OR_RAISE(auto batch, arrow::ImportRecordBatch(c_array, c_schema));
    out.schema = batch->schema();
    out.batches.push_back(std::move(batch));
    return out;
  }
  if (nb::hasattr(obj, "__arrow_c_stream__")) {
    nb::object capsule = obj.attr("__arrow_c_stream__")();
    auto* stream = CapsulePointer<ArrowArrayStream>(capsule, "arrow_array_stream");
    // Import moves the stream out of the capsule (its release becomes null).
    ARROW_ASSIGN_OR_RAISE(auto reader, arrow::ImportRecordBatchReader(stream));
    out.schema = reader->schema();
    ARROW_ASSIGN_OR_RAISE(out.batches, reader->ToRecordBatches());
    return out;
  }
  return arrow::Status::TypeError(
      "expected Arrow data (an object with __arrow_c_stream__ or __arrow_c_array__, "
      "such as a pyarrow Table or RecordBatch), got ",
      TypeName(obj));
}

rill::Result<std::shared_ptr<arrow::Table>> ImportTable(nb::handle obj) {
  ARROW_ASSIGN_OR_RAISE(auto imported, ImportBatches(obj));
  return arrow::Table::FromRecordBatches(imported.schema, imported.batches);
}

rill::Result<std::shared_ptr<arrow::Schema>> ImportSchema(nb::handle obj) {
  if (!nb::hasattr(obj, "__arrow_c_schema__")) {
    return arrow::Status::TypeError("expected a pyarrow.Schema, got ", TypeName(obj));
  }
  nb::object capsule = obj.attr("__arrow_c_schema__")();
  auto* c_schema = CapsulePointer<ArrowSchema>(capsule, "arrow_schema");
  return arrow::ImportSchema(c_schema);
}

nb::object ExportReader(std::shared_ptr<arrow::RecordBatchReader> reader) {
  auto stream = std::make_unique<ArrowArrayStream>();
  auto status = arrow::ExportRecordBatchReader(std::move(reader), stream.get());
  if (!status.ok()) {
    PyErr_SetString(PyExc_RuntimeError, status.ToString().c_str());
    throw nb::python_error();
  }
  return nb::capsule(stream.release(), "arrow_array_stream", &ReleaseStream);
}

nb::object ExportTable(const std::shared_ptr<arrow::Table>& table) {
  return ExportReader(std::make_shared<arrow::TableBatchReader>(table));
}

nb::object ExportBatches(std::vector<std::shared_ptr<arrow::RecordBatch>> batches,
                         std::shared_ptr<arrow::Schema> schema) {
  auto reader = arrow::RecordBatchReader::Make(std::move(batches), std::move(schema));
  if (!reader.ok()) {
    PyErr_SetString(PyExc_RuntimeError, reader.status().ToString().c_str());
    throw nb::python_error();
  }
  return ExportReader(*std::move(reader));
}

nb::object ExportSchema(const arrow::Schema& schema) {
  auto c_schema = std::make_unique<ArrowSchema>();
  auto status = arrow::ExportSchema(schema, c_schema.get());
  if (!status.ok()) {
    PyErr_SetString(PyExc_RuntimeError, status.ToString().c_str());
    throw nb::python_error();
  }
  return nb::capsule(c_schema.release(), "arrow_schema", &ReleaseSchema);
}

}  // namespace rills
