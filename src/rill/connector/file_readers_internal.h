// Private to connector/: reading whole CSV, Parquet and Arrow IPC files with
// Arrow's readers (FileStreamConnector).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <arrow/type_fwd.h>

#include "rill/common/status.h"

namespace rill::file_internal {

enum class FileFormat { kJson, kCsv, kParquet, kIpc, kUnknown };

/// The format of a file by its extension (case-insensitive).
FileFormat FormatOf(const std::string& name);

/// Read all rows of a CSV, Parquet or IPC (file or stream format) file. For
/// CSV, columns named in `schema` (may be null) are read with its types.
Result<std::vector<std::shared_ptr<arrow::RecordBatch>>> ReadBatches(
    const std::string& path, FileFormat format, const std::shared_ptr<arrow::Schema>& schema);

}  // namespace rill::file_internal
