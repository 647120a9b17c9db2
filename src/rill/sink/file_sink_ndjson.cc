// Arrow record batches as NDJSON text (the file sink's "ndjson" format).
//
// Rows are written straight into one string: per column the object key is
// escaped once per batch, and columns whose text is Arrow's cast to utf8
// (timestamps, dates, decimals, ...) are cast once per batch, not per value.
#include <vector>

#include <arrow/array.h>
#include <arrow/compute/cast.h>
#include <arrow/record_batch.h>
#include <arrow/type.h>

#include "rill/common/arrow_json.h"
#include "rill/sink/file_sink_internal.h"

namespace rill::file_sink_internal {

namespace {

// The file sink's JSON: string bytes copied as they are, floats in their
// shortest round-trip text.
constexpr ArrowJsonOptions kFileJson{/*replace_invalid_utf8=*/false, JsonFloatFormat::kShortest};

bool IsTextCast(arrow::Type::type id) {
  switch (id) {
    case arrow::Type::DATE32:
    case arrow::Type::DATE64:
    case arrow::Type::TIMESTAMP:
    case arrow::Type::TIME32:
    case arrow::Type::TIME64:
    case arrow::Type::DURATION:
    case arrow::Type::DECIMAL128:
    case arrow::Type::DECIMAL256:
    case arrow::Type::HALF_FLOAT:
    case arrow::Type::INTERVAL_MONTHS:
    case arrow::Type::INTERVAL_DAY_TIME:
    case arrow::Type::INTERVAL_MONTH_DAY_NANO:
      return true;
    default:
      return false;
  }
}

}  // namespace

Status AppendNdjson(const arrow::RecordBatch& batch, std::string* out) {
  const int num_columns = batch.num_columns();
  std::vector<std::string> keys(num_columns);
  std::vector<std::shared_ptr<arrow::Array>> columns(num_columns);
  for (int c = 0; c < num_columns; ++c) {
    AppendArrowJsonString(batch.schema()->field(c)->name(), kFileJson.replace_invalid_utf8,
                          &keys[c]);
    keys[c].insert(0, c == 0 ? "{" : ",");
    keys[c].push_back(':');
    columns[c] = batch.column(c);
    if (IsTextCast(columns[c]->type_id())) {
      // One vectorized cast per batch; a type Arrow cannot cast keeps the
      // per-value text fallback.
      auto text = arrow::compute::Cast(*columns[c], arrow::utf8());
      if (text.ok()) columns[c] = *text;
    }
  }
  out->reserve(out->size() + static_cast<size_t>(batch.num_rows()) * 16 * num_columns);
  for (int64_t row = 0; row < batch.num_rows(); ++row) {
    for (int c = 0; c < num_columns; ++c) {
      out->append(keys[c]);
      RILL_RETURN_NOT_OK(AppendArrowJsonValue(*columns[c], row, kFileJson, out));
    }
    out->append(num_columns == 0 ? "{}\n" : "}\n");
  }
  return Status::OK();
}

}  // namespace rill::file_sink_internal
