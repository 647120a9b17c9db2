#include "rill/common/arrow_json.h"

#include <charconv>
#include <cmath>
#include <cstdio>

#include <arrow/array.h>
#include <arrow/record_batch.h>
#include <arrow/scalar.h>
#include <arrow/type.h>
#include <arrow/util/utf8.h>

#include "rill/common/json_text.h"

namespace rill {

namespace {

template <typename T>
void AppendInteger(T value, std::string* out) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), value);
  out->append(buf, end);
}

template <typename ListArrayType>
Status AppendList(const ListArrayType& array, int64_t i, const ArrowJsonOptions& options,
                  std::string* out) {
  out->push_back('[');
  const arrow::Array& values = *array.values();
  const int64_t begin = array.value_offset(i);
  const int64_t end = begin + array.value_length(i);
  for (int64_t k = begin; k < end; ++k) {
    if (k > begin) out->push_back(',');
    RILL_RETURN_NOT_OK(AppendArrowJsonValue(values, k, options, out));
  }
  out->push_back(']');
  return Status::OK();
}

Status AppendStruct(const arrow::StructArray& array, int64_t i, const ArrowJsonOptions& options,
                    std::string* out) {
  out->push_back('{');
  for (int f = 0; f < array.num_fields(); ++f) {
    if (f > 0) out->push_back(',');
    AppendArrowJsonString(array.type()->field(f)->name(), options.replace_invalid_utf8, out);
    out->push_back(':');
    RILL_RETURN_NOT_OK(AppendArrowJsonValue(*array.field(f), i, options, out));
  }
  out->push_back('}');
  return Status::OK();
}

}  // namespace

void AppendArrowJsonString(std::string_view text, bool replace_invalid_utf8, std::string* out) {
  // ValidateUTF8 reads tables that InitializeUTF8 fills: before the first
  // call (made by Arrow's own utf8 kernels, so not always by then) it takes
  // every text for valid and invalid bytes reached the JSON.
  static const bool utf8_tables_ready = (arrow::util::InitializeUTF8(), true);
  if (!replace_invalid_utf8 || (utf8_tables_ready && arrow::util::ValidateUTF8(text))) {
    AppendJsonString(out, text);
    return;
  }
  // Replace each byte that does not start a valid sequence: simple and
  // lossless enough for display; raw bytes never reach a JSON parser.
  std::string clean;
  clean.reserve(text.size());
  for (char c : text) {
    if (static_cast<unsigned char>(c) < 0x80) {
      clean.push_back(c);
    } else {
      clean.append("\xEF\xBF\xBD");
    }
  }
  AppendJsonString(out, clean);
}

void AppendArrowJsonDouble(double value, JsonFloatFormat format, std::string* out) {
  if (!std::isfinite(value)) {
    out->append("null");
    return;
  }
  char buf[32];
  if (format == JsonFloatFormat::kShortest) {
    auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), value);
    out->append(buf, end);
    return;
  }
  if (value == std::floor(value) && std::fabs(value) < 1e15) {
    AppendInteger(static_cast<int64_t>(value), out);
    return;
  }
  const int n = std::snprintf(buf, sizeof(buf), "%.17g", value);
  out->append(buf, static_cast<size_t>(n));
}

Status AppendArrowJsonValue(const arrow::Array& array, int64_t i, const ArrowJsonOptions& options,
                            std::string* out) {
  if (array.IsNull(i)) {
    out->append("null");
    return Status::OK();
  }
  using arrow::Type;
  switch (array.type_id()) {
    case Type::NA:
      out->append("null");
      return Status::OK();
    case Type::BOOL:
      out->append(static_cast<const arrow::BooleanArray&>(array).Value(i) ? "true" : "false");
      return Status::OK();
#define RILL_INT_CASE(TYPE, ARRAY)                                          \
  case Type::TYPE:                                                          \
    AppendInteger(static_cast<const arrow::ARRAY&>(array).Value(i), out);   \
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
      AppendArrowJsonDouble(static_cast<const arrow::FloatArray&>(array).Value(i),
                            options.float_format, out);
      return Status::OK();
    case Type::DOUBLE:
      AppendArrowJsonDouble(static_cast<const arrow::DoubleArray&>(array).Value(i),
                            options.float_format, out);
      return Status::OK();
    case Type::STRING:
      AppendArrowJsonString(static_cast<const arrow::StringArray&>(array).GetView(i),
                            options.replace_invalid_utf8, out);
      return Status::OK();
    case Type::LARGE_STRING:
      AppendArrowJsonString(static_cast<const arrow::LargeStringArray&>(array).GetView(i),
                            options.replace_invalid_utf8, out);
      return Status::OK();
    case Type::STRING_VIEW:
      AppendArrowJsonString(static_cast<const arrow::StringViewArray&>(array).GetView(i),
                            options.replace_invalid_utf8, out);
      return Status::OK();
    case Type::DICTIONARY: {
      const auto& dict = static_cast<const arrow::DictionaryArray&>(array);
      return AppendArrowJsonValue(*dict.dictionary(), dict.GetValueIndex(i), options, out);
    }
    case Type::STRUCT:
      return AppendStruct(static_cast<const arrow::StructArray&>(array), i, options, out);
    case Type::LIST:
      return AppendList(static_cast<const arrow::ListArray&>(array), i, options, out);
    case Type::LARGE_LIST:
      return AppendList(static_cast<const arrow::LargeListArray&>(array), i, options, out);
    default: {
      RILL_ASSIGN_OR_RAISE(auto scalar, array.GetScalar(i));
      AppendArrowJsonString(scalar->ToString(), options.replace_invalid_utf8, out);
      return Status::OK();
    }
  }
}

Status AppendArrowJsonRow(const arrow::RecordBatch& batch, int64_t row,
                          const ArrowJsonOptions& options, std::string* out) {
  out->push_back('{');
  for (int c = 0; c < batch.num_columns(); ++c) {
    if (c > 0) out->push_back(',');
    AppendArrowJsonString(batch.schema()->field(c)->name(), options.replace_invalid_utf8, out);
    out->push_back(':');
    RILL_RETURN_NOT_OK(AppendArrowJsonValue(*batch.column(c), row, options, out));
  }
  out->push_back('}');
  return Status::OK();
}

}  // namespace rill
