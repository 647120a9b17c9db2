#include "py_arrow.h"

#include <string>

#include <arrow/c/abi.h>
#include <arrow/c/bridge.h>
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

}  // namespace

int64_t ImportedBatches::num_rows() const {
  int64_t rows = 0;
  for (const auto& batch : batches) {
    rows += batch->num_rows();
  }
  return rows;
}

rill::Result<ImportedBatches> ImportBatches(nb::handle obj) {
  ImportedBatches out;
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
