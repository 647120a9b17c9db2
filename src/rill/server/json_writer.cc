#include "rill/server/json_writer.h"

#include <cmath>
#include <cstdio>

#include <arrow/array.h>
#include <arrow/record_batch.h>
#include <arrow/scalar.h>
#include <arrow/table.h>
#include <arrow/type.h>
#include <arrow/util/utf8.h>

namespace rill::server {

namespace {

constexpr int64_t kRowsPerSlice = 4096;

void AppendEscaped(std::string_view text, std::string* out) {
  static const char* kHex = "0123456789abcdef";
  for (unsigned char c : text) {
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      default:
        if (c < 0x20) {
          out->append("\\u00");
          out->push_back(kHex[c >> 4]);
          out->push_back(kHex[c & 15]);
        } else {
          out->push_back(static_cast<char>(c));
        }
    }
  }
}

Status AppendValue(const arrow::Array& array, int64_t i, std::string* out);

Status AppendStruct(const arrow::StructArray& array, int64_t i, std::string* out) {
  out->push_back('{');
  for (int f = 0; f < array.num_fields(); ++f) {
    if (f > 0) {
      out->push_back(',');
    }
    AppendJsonString(array.type()->field(f)->name(), out);
    out->push_back(':');
    RILL_RETURN_NOT_OK(AppendValue(*array.field(f), i, out));
  }
  out->push_back('}');
  return Status::OK();
}

template <typename ListArrayType>
Status AppendList(const ListArrayType& array, int64_t i, std::string* out) {
  out->push_back('[');
  auto values = array.values();
  for (int64_t k = array.value_offset(i); k < array.value_offset(i) + array.value_length(i);
       ++k) {
    if (k > array.value_offset(i)) {
      out->push_back(',');
    }
    RILL_RETURN_NOT_OK(AppendValue(*values, k, out));
  }
  out->push_back(']');
  return Status::OK();
}

Status AppendValue(const arrow::Array& array, int64_t i, std::string* out) {
  if (array.IsNull(i)) {
    out->append("null");
    return Status::OK();
  }
  using arrow::Type;
  switch (array.type_id()) {
    case Type::BOOL:
      out->append(static_cast<const arrow::BooleanArray&>(array).Value(i) ? "true" : "false");
      return Status::OK();
#define RILL_INT_CASE(TYPE, ARRAY)                                                      \
  case Type::TYPE:                                                                      \
    out->append(std::to_string(static_cast<const arrow::ARRAY&>(array).Value(i))); \
    return Status::OK();
      RILL_INT_CASE(INT8, Int8Array)
      RILL_INT_CASE(INT16, Int16Array)
      RILL_INT_CASE(INT32, Int32Array)
      RILL_INT_CASE(INT64, Int64Array)
      RILL_INT_CASE(UINT8, UInt8Array)
      RILL_INT_CASE(UINT16, UInt16Array)
      RILL_INT_CASE(UINT32, UInt32Array)
      RILL_INT_CASE(UINT64, UInt64Array)
#undef RILL_INT_CASE
    case Type::FLOAT:
      AppendJsonNumber(static_cast<const arrow::FloatArray&>(array).Value(i), out);
      return Status::OK();
    case Type::DOUBLE:
      AppendJsonNumber(static_cast<const arrow::DoubleArray&>(array).Value(i), out);
      return Status::OK();
    case Type::STRING:
      AppendJsonString(static_cast<const arrow::StringArray&>(array).GetView(i), out);
      return Status::OK();
    case Type::LARGE_STRING:
      AppendJsonString(static_cast<const arrow::LargeStringArray&>(array).GetView(i), out);
      return Status::OK();
    case Type::STRING_VIEW:
      AppendJsonString(static_cast<const arrow::StringViewArray&>(array).GetView(i), out);
      return Status::OK();
    case Type::DICTIONARY: {
      const auto& dict = static_cast<const arrow::DictionaryArray&>(array);
      return AppendValue(*dict.dictionary(), dict.GetValueIndex(i), out);
    }
    case Type::STRUCT:
      return AppendStruct(static_cast<const arrow::StructArray&>(array), i, out);
    case Type::LIST:
      return AppendList(static_cast<const arrow::ListArray&>(array), i, out);
    case Type::LARGE_LIST:
      return AppendList(static_cast<const arrow::LargeListArray&>(array), i, out);
    default: {
      RILL_ASSIGN_OR_RAISE(auto scalar, array.GetScalar(i));
      AppendJsonString(scalar->ToString(), out);
      return Status::OK();
    }
  }
}

}  // namespace

void AppendJsonString(std::string_view text, std::string* out) {
  out->push_back('"');
  if (arrow::util::ValidateUTF8(text)) {
    AppendEscaped(text, out);
  } else {
    // Replace each byte that does not start a valid sequence: simple and
    // lossless enough for display; raw bytes never reach the client.
    std::string clean;
    for (size_t k = 0; k < text.size(); ++k) {
      unsigned char c = static_cast<unsigned char>(text[k]);
      if (c < 0x80) {
        clean.push_back(static_cast<char>(c));
      } else {
        clean.append("\xEF\xBF\xBD");
      }
    }
    AppendEscaped(clean, out);
  }
  out->push_back('"');
}

void AppendJsonNumber(double value, std::string* out) {
  if (!std::isfinite(value)) {
    out->append("null");
    return;
  }
  if (value == std::floor(value) && std::fabs(value) < 1e15) {
    out->append(std::to_string(static_cast<int64_t>(value)));
    return;
  }
  char buf[32];
  int n = std::snprintf(buf, sizeof(buf), "%.17g", value);
  out->append(buf, static_cast<size_t>(n));
}

Status AppendJsonRow(const arrow::RecordBatch& batch, int64_t row, std::string* out) {
  out->push_back('{');
  for (int c = 0; c < batch.num_columns(); ++c) {
    if (c > 0) {
      out->push_back(',');
    }
    AppendJsonString(batch.schema()->field(c)->name(), out);
    out->push_back(':');
    RILL_RETURN_NOT_OK(AppendValue(*batch.column(c), row, out));
  }
  out->push_back('}');
  return Status::OK();
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
