// Arrow data in and out of Python without copying, through the Arrow
// PyCapsule interface (__arrow_c_stream__, __arrow_c_array__, __arrow_c_schema__).
//
// Imported arrays keep the producer's buffers (pyarrow's memory stays alive
// through the C data interface's release callbacks); exported capsules hand
// the engine's buffers to pyarrow the same way.
//
// Threads: every function here needs the GIL (it calls Python methods or
// creates Python objects).
#pragma once

#include <memory>
#include <vector>

#include <arrow/type_fwd.h>
#include <nanobind/nanobind.h>

#include "rill/common/status.h"

namespace rills {

namespace nb = nanobind;

/// Record batches imported from Python, with their schema.
struct ImportedBatches {
  std::shared_ptr<arrow::Schema> schema;
  std::vector<std::shared_ptr<arrow::RecordBatch>> batches;
  int64_t num_rows() const;
};

/// Import `obj`: anything with __arrow_c_stream__ (pyarrow Table, RecordBatch,
/// RecordBatchReader, ...) or __arrow_c_array__ (a RecordBatch). TypeError
/// naming the type for anything else.
rill::Result<ImportedBatches> ImportBatches(nb::handle obj);

/// Look up pyarrow's C API for ImportBatches' fast path (importing pyarrow).
/// Called once at module import; ImportBatches would otherwise do it itself.
void InitPyarrowInterop();

/// Import `obj` (as ImportBatches) as one table.
rill::Result<std::shared_ptr<arrow::Table>> ImportTable(nb::handle obj);

/// Import a schema from an object with __arrow_c_schema__ (pyarrow Schema).
rill::Result<std::shared_ptr<arrow::Schema>> ImportSchema(nb::handle obj);

/// Return an "arrow_array_stream" capsule that streams `reader`.
nb::object ExportReader(std::shared_ptr<arrow::RecordBatchReader> reader);
/// Return an "arrow_array_stream" capsule over `table`'s batches.
nb::object ExportTable(const std::shared_ptr<arrow::Table>& table);
/// Return an "arrow_array_stream" capsule over `batches`.
nb::object ExportBatches(std::vector<std::shared_ptr<arrow::RecordBatch>> batches,
                         std::shared_ptr<arrow::Schema> schema);
/// Return an "arrow_schema" capsule.
nb::object ExportSchema(const arrow::Schema& schema);

}  // namespace rills
