#include "rill/server/json_writer.h"

#include <arrow/record_batch.h>
#include <arrow/table.h>
#include <arrow/type.h>

#include "rill/common/arrow_json.h"

namespace rill::server {

namespace {

constexpr int64_t kRowsPerSlice = 4096;

// The server's JSON: strings made valid UTF-8, floats with 17 digits (what
// the dashboard and the HTTP clients have always read).
constexpr ArrowJsonOptions kServerJson{/*replace_invalid_utf8=*/true,
                                       JsonFloatFormat::kSeventeenDigits};

}  // namespace

void AppendJsonString(std::string_view text, std::string* out) {
  AppendArrowJsonString(text, kServerJson.replace_invalid_utf8, out);
}

void AppendJsonNumber(double value, std::string* out) {
  AppendArrowJsonDouble(value, kServerJson.float_format, out);
}

Status AppendJsonRow(const arrow::RecordBatch& batch, int64_t row, std::string* out) {
  return AppendArrowJsonRow(batch, row, kServerJson, out);
}

void AppendJsonColumns(const arrow::Schema& schema, std::string* out) {
  out->push_back('[');
  for (int c = 0; c < schema.num_fields(); ++c) {
    if (c > 0) {
      out->push_back(',');
    }
    out->append("{\"name\":");
    AppendJsonString(schema.field(c)->name(), out);
    out->append(",\"type\":");
    AppendJsonString(schema.field(c)->type()->ToString(), out);
    out->push_back('}');
  }
  out->push_back(']');
}

Result<std::string> TableToJson(const arrow::Table& table, int64_t max_bytes) {
  std::string out = "{\"columns\":";
  AppendJsonColumns(*table.schema(), &out);
  out.append(",\"rows\":[");
  arrow::TableBatchReader reader(table);
  reader.set_chunksize(kRowsPerSlice);
  bool first = true;
  while (true) {
    std::shared_ptr<arrow::RecordBatch> batch;
    RILL_RETURN_NOT_OK(reader.ReadNext(&batch));
    if (batch == nullptr) {
      break;
    }
    for (int64_t r = 0; r < batch->num_rows(); ++r) {
      if (!first) {
        out.push_back(',');
      }
      first = false;
      RILL_RETURN_NOT_OK(AppendJsonRow(*batch, r, &out));
    }
    if (max_bytes > 0 && static_cast<int64_t>(out.size()) > max_bytes) {
      return Status::CapacityError(
          "the JSON result exceeds max_json_result_bytes (", max_bytes,
          " bytes); ask for format ndjson, csv or arrow, which stream, or add a LIMIT");
    }
  }
  out.append("],\"row_count\":");
  out.append(std::to_string(table.num_rows()));
  out.push_back('}');
  return out;
}

}  // namespace rill::server
