// Decoding ingest bodies that are not JSON (Arrow IPC, CSV) and inflating gzip
// bodies. Private to src/rill/server (ingest.cc, tests).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <arrow/type_fwd.h>

#include "rill/common/status.h"

namespace rill::server {

/// The body formats of POST /api/v1/ingest/{table}.
enum class IngestFormat { kJson, kArrowIpc, kCsv, kAvro };

/// The format of a Content-Type ("application/x-ndjson; charset=utf-8" ...);
/// "" is JSON. Invalid naming the accepted types otherwise.
Result<IngestFormat> IngestFormatOf(std::string_view content_type);

/// Inflate a gzip body (one or more members) into at most `max_bytes` bytes:
/// CapacityError beyond, Invalid for a corrupt stream.
Result<std::string> Gunzip(std::string_view data, int64_t max_bytes);

/// Read every batch of an Arrow IPC stream (or file) held in `data`, each
/// checked with ValidateFull (Invalid naming the batch otherwise). Compressed
/// buffers (LZ4_FRAME, ZSTD) may inflate to at most `max_decompressed_bytes`
/// in all: CapacityError beyond, refused before the allocation. Any thread.
Result<std::vector<std::shared_ptr<arrow::RecordBatch>>> ReadIpcBody(
    std::string_view data, int64_t max_decompressed_bytes);

/// Read a CSV body with a header line; columns named in `schema` (may be null)
/// get its types.
Result<std::vector<std::shared_ptr<arrow::RecordBatch>>> ReadCsvBody(
    std::string_view data, const std::shared_ptr<arrow::Schema>& schema);

}  // namespace rill::server
