// Arrow -> PostgreSQL types and the binary COPY encoder (postgres_sink_internal.h).
#include <cstring>
#include <string_view>

#include <arrow/api.h>
#include <arrow/util/float16.h>

#include "rill/common/json_text.h"
#include "rill/sink/postgres_sink_internal.h"
#include "rill/table/change_feed.h"

namespace rill::postgres_sink_internal {

namespace {

// Days and microseconds between 1970-01-01 and PostgreSQL's epoch 2000-01-01.
constexpr int32_t kPgEpochDays = 10957;
constexpr int64_t kPgEpochMicros = int64_t{kPgEpochDays} * 86400 * 1000000;

void PutU16(std::string* out, uint16_t v) {
  v = __builtin_bswap16(v);
  out->append(reinterpret_cast<const char*>(&v), 2);
}
void PutU32(std::string* out, uint32_t v) {
  v = __builtin_bswap32(v);
  out->append(reinterpret_cast<const char*>(&v), 4);
}
void PutU64(std::string* out, uint64_t v) {
  v = __builtin_bswap64(v);
  out->append(reinterpret_cast<const char*>(&v), 8);
}
void PutNull(std::string* out) { PutU32(out, 0xFFFFFFFFu); }

int64_t FloorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

/// Microseconds per unit (>= 1), or the divisor for nanoseconds (negative).
int64_t ToMicros(int64_t value, arrow::TimeUnit::type unit) {
  switch (unit) {
    case arrow::TimeUnit::SECOND:
      return value * 1000000;
    case arrow::TimeUnit::MILLI:
      return value * 1000;
    case arrow::TimeUnit::MICRO:
      return value;
    case arrow::TimeUnit::NANO:
      return FloorDiv(value, 1000);
  }
  return value;
}

/// One column of a COPY row.
class FieldWriter {
 public:
  virtual ~FieldWriter() = default;
  virtual void Bind(const arrow::Array& array) { array_ = &array; }
  /// Append field `row` (length prefix and bytes, or NULL).
  void Append(int64_t row, std::string* out) {
    if (array_->IsNull(row)) {
      PutNull(out);
      return;
    }
    AppendValue(row, out);
  }

 protected:
  virtual void AppendValue(int64_t row, std::string* out) = 0;
  const arrow::Array* array_ = nullptr;
};

class NullWriter : public FieldWriter {
 protected:
  void AppendValue(int64_t, std::string* out) override { PutNull(out); }
};

template <typename ArrayType, typename PgInt>
class IntWriter : public FieldWriter {
 protected:
  void AppendValue(int64_t row, std::string* out) override {
    auto value = static_cast<PgInt>(static_cast<const ArrayType&>(*array_).Value(row));
    PutU32(out, sizeof(PgInt));
    if constexpr (sizeof(PgInt) == 2) {
      PutU16(out, static_cast<uint16_t>(value));
    } else if constexpr (sizeof(PgInt) == 4) {
      PutU32(out, static_cast<uint32_t>(value));
    } else {
      PutU64(out, static_cast<uint64_t>(value));
    }
  }
};

class BoolWriter : public FieldWriter {
 protected:
  void AppendValue(int64_t row, std::string* out) override {
    PutU32(out, 1);
    out->push_back(static_cast<const arrow::BooleanArray&>(*array_).Value(row) ? 1 : 0);
  }
};

template <typename ArrayType>
class FloatWriter : public FieldWriter {
 protected:
  void AppendValue(int64_t row, std::string* out) override {
    const auto& array = static_cast<const ArrayType&>(*array_);
    if constexpr (std::is_same_v<ArrayType, arrow::DoubleArray>) {
      double value = array.Value(row);
      uint64_t bits;
      std::memcpy(&bits, &value, 8);
      PutU32(out, 8);
      PutU64(out, bits);
    } else {
      float value;
      if constexpr (std::is_same_v<ArrayType, arrow::HalfFloatArray>) {
        value = arrow::util::Float16::FromBits(array.Value(row)).ToFloat();
      } else {
        value = array.Value(row);
      }
      uint32_t bits;
      std::memcpy(&bits, &value, 4);
      PutU32(out, 4);
      PutU32(out, bits);
    }
  }
};

/// text and bytea: the bytes as they are.
template <typename ArrayType>
class BytesWriter : public FieldWriter {
 protected:
  void AppendValue(int64_t row, std::string* out) override {
    std::string_view view = static_cast<const ArrayType&>(*array_).GetView(row);
    PutU32(out, static_cast<uint32_t>(view.size()));
    out->append(view.data(), view.size());
  }
};

/// timestamp / timestamptz: int64 microseconds since 2000-01-01 (UTC).
class TimestampWriter : public FieldWriter {
 public:
  explicit TimestampWriter(arrow::TimeUnit::type unit) : unit_(unit) {}

 protected:
  void AppendValue(int64_t row, std::string* out) override {
    int64_t value = static_cast<const arrow::TimestampArray&>(*array_).Value(row);
    PutU32(out, 8);
    PutU64(out, static_cast<uint64_t>(ToMicros(value, unit_) - kPgEpochMicros));
  }
  arrow::TimeUnit::type unit_;
};

/// time: int64 microseconds since midnight; interval: that, then days and months.
template <typename ArrayType>
class TimeWriter : public FieldWriter {
 public:
  TimeWriter(arrow::TimeUnit::type unit, bool interval) : unit_(unit), interval_(interval) {}

 protected:
  void AppendValue(int64_t row, std::string* out) override {
    int64_t value = static_cast<const ArrayType&>(*array_).Value(row);
    PutU32(out, interval_ ? 16 : 8);
    PutU64(out, static_cast<uint64_t>(ToMicros(value, unit_)));
    if (interval_) {
      PutU32(out, 0);
      PutU32(out, 0);
    }
  }
  arrow::TimeUnit::type unit_;
  bool interval_;
};

class Date32Writer : public FieldWriter {
 protected:
  void AppendValue(int64_t row, std::string* out) override {
    int32_t days = static_cast<const arrow::Date32Array&>(*array_).Value(row);
    PutU32(out, 4);
    PutU32(out, static_cast<uint32_t>(days - kPgEpochDays));
  }
};

class Date64Writer : public FieldWriter {
 protected:
  void AppendValue(int64_t row, std::string* out) override {
    int64_t ms = static_cast<const arrow::Date64Array&>(*array_).Value(row);
    PutU32(out, 4);
    PutU32(out, static_cast<uint32_t>(FloorDiv(ms, 86400000) - kPgEpochDays));
  }
};

/// Staged as text: uint64 and decimals (cast to numeric by the INSERT).
class TextFormatWriter : public FieldWriter {
 protected:
  void AppendValue(int64_t row, std::string* out) override {
    std::string text;
    switch (array_->type_id()) {
      case arrow::Type::UINT64:
        text = std::to_string(static_cast<const arrow::UInt64Array&>(*array_).Value(row));
        break;
      case arrow::Type::DECIMAL128:
        text = static_cast<const arrow::Decimal128Array&>(*array_).FormatValue(row);
        break;
      case arrow::Type::DECIMAL256:
        text = static_cast<const arrow::Decimal256Array&>(*array_).FormatValue(row);
        break;
      default:
        text = array_->GetScalar(row).ValueOrDie()->ToString();
    }
    PutU32(out, static_cast<uint32_t>(text.size()));
    out->append(text);
  }
};

/// jsonb: a version byte (1), then the JSON text.
class JsonbWriter : public FieldWriter {
 protected:
  void AppendValue(int64_t row, std::string* out) override {
    size_t length_at = out->size();
    PutU32(out, 0);
    out->push_back(1);
    AppendJsonValue(*array_, row, out);
    uint32_t length = __builtin_bswap32(static_cast<uint32_t>(out->size() - length_at - 4));
    std::memcpy(out->data() + length_at, &length, 4);
  }
};

/// Dictionary columns: the value writer over the dictionary, at each row's index.
class DictionaryWriter : public FieldWriter {
 public:
  explicit DictionaryWriter(std::unique_ptr<FieldWriter> values)
      : values_(std::move(values)) {}
  void Bind(const arrow::Array& array) override {
    FieldWriter::Bind(array);
    const auto& dict = static_cast<const arrow::DictionaryArray&>(array);
    dictionary_ = dict.dictionary();
    values_->Bind(*dictionary_);
  }

 protected:
  void AppendValue(int64_t row, std::string* out) override {
    values_->Append(static_cast<const arrow::DictionaryArray&>(*array_).GetValueIndex(row),
                    out);
  }
  std::unique_ptr<FieldWriter> values_;
  std::shared_ptr<arrow::Array> dictionary_;
};

Result<std::unique_ptr<FieldWriter>> MakeFieldWriter(const arrow::DataType& type,
                                                     const std::string& column) {
  using T = arrow::Type;
  switch (type.id()) {
    case T::NA:
      return std::make_unique<NullWriter>();
    case T::BOOL:
      return std::make_unique<BoolWriter>();
    case T::INT8:
      return std::make_unique<IntWriter<arrow::Int8Array, int16_t>>();
    case T::INT16:
      return std::make_unique<IntWriter<arrow::Int16Array, int16_t>>();
    case T::INT32:
      return std::make_unique<IntWriter<arrow::Int32Array, int32_t>>();
    case T::INT64:
      return std::make_unique<IntWriter<arrow::Int64Array, int64_t>>();
    case T::UINT8:
      return std::make_unique<IntWriter<arrow::UInt8Array, int16_t>>();
    case T::UINT16:
      return std::make_unique<IntWriter<arrow::UInt16Array, int32_t>>();
    case T::UINT32:
      return std::make_unique<IntWriter<arrow::UInt32Array, int64_t>>();
    case T::UINT64:
    case T::DECIMAL128:
    case T::DECIMAL256:
      return std::make_unique<TextFormatWriter>();
    case T::HALF_FLOAT:
      return std::make_unique<FloatWriter<arrow::HalfFloatArray>>();
    case T::FLOAT:
      return std::make_unique<FloatWriter<arrow::FloatArray>>();
    case T::DOUBLE:
      return std::make_unique<FloatWriter<arrow::DoubleArray>>();
    case T::STRING:
      return std::make_unique<BytesWriter<arrow::StringArray>>();
    case T::LARGE_STRING:
      return std::make_unique<BytesWriter<arrow::LargeStringArray>>();
    case T::STRING_VIEW:
      return std::make_unique<BytesWriter<arrow::StringViewArray>>();
    case T::BINARY:
      return std::make_unique<BytesWriter<arrow::BinaryArray>>();
    case T::LARGE_BINARY:
      return std::make_unique<BytesWriter<arrow::LargeBinaryArray>>();
    case T::BINARY_VIEW:
      return std::make_unique<BytesWriter<arrow::BinaryViewArray>>();
    case T::FIXED_SIZE_BINARY:
      return std::make_unique<BytesWriter<arrow::FixedSizeBinaryArray>>();
    case T::TIMESTAMP:
      return std::make_unique<TimestampWriter>(
          static_cast<const arrow::TimestampType&>(type).unit());
    case T::DATE32:
      return std::make_unique<Date32Writer>();
    case T::DATE64:
      return std::make_unique<Date64Writer>();
    case T::TIME32:
      return std::make_unique<TimeWriter<arrow::Time32Array>>(
          static_cast<const arrow::Time32Type&>(type).unit(), /*interval=*/false);
    case T::TIME64:
      return std::make_unique<TimeWriter<arrow::Time64Array>>(
          static_cast<const arrow::Time64Type&>(type).unit(), /*interval=*/false);
    case T::DURATION:
      return std::make_unique<TimeWriter<arrow::DurationArray>>(
          static_cast<const arrow::DurationType&>(type).unit(), /*interval=*/true);
    case T::LIST:
    case T::LARGE_LIST:
    case T::FIXED_SIZE_LIST:
    case T::STRUCT:
    case T::MAP:
      return std::make_unique<JsonbWriter>();
    case T::DICTIONARY: {
      RILL_ASSIGN_OR_RAISE(
          auto values,
          MakeFieldWriter(*static_cast<const arrow::DictionaryType&>(type).value_type(),
                          column));
      return std::make_unique<DictionaryWriter>(std::move(values));
    }
    default:
      return Status::NotImplemented("PostgreSQL sink: column '", column, "' has type ",
                                    type.ToString(), ", which has no PostgreSQL mapping");
  }
}

class CopyBinaryEncoderImpl : public CopyBinaryEncoder {
 public:
  CopyBinaryEncoderImpl(std::vector<int> columns,
                        std::vector<std::unique_ptr<FieldWriter>> writers)
      : columns_(std::move(columns)), writers_(std::move(writers)) {}

  Status Bind(const arrow::RecordBatch& batch) override {
    for (size_t i = 0; i < columns_.size(); ++i) {
      if (columns_[i] >= batch.num_columns()) {
        return Status::Invalid("PostgreSQL sink: a change batch has ", batch.num_columns(),
                               " columns, fewer than the table's");
      }
      writers_[i]->Bind(*batch.column(columns_[i]));
    }
    return Status::OK();
  }

  void AppendRows(int64_t begin, int64_t end, std::string* out) override {
    const auto count = static_cast<uint16_t>(writers_.size());
    for (int64_t row = begin; row < end; ++row) {
      PutU16(out, count);
      for (auto& writer : writers_) writer->Append(row, out);
    }
  }

 private:
  std::vector<int> columns_;
  std::vector<std::unique_ptr<FieldWriter>> writers_;
};

void AppendJsonList(const arrow::Array& values, int64_t offset, int64_t length,
                    std::string* out) {
  out->push_back('[');
  for (int64_t i = 0; i < length; ++i) {
    if (i > 0) out->push_back(',');
    AppendJsonValue(values, offset + i, out);
  }
  out->push_back(']');
}

}  // namespace

Result<PgColumnType> MapArrowType(const arrow::DataType& type, const std::string& column) {
  using T = arrow::Type;
  switch (type.id()) {
    case T::NA:
      return PgColumnType{"text", "text"};
    case T::BOOL:
      return PgColumnType{"boolean", "boolean"};
    case T::INT8:
    case T::INT16:
    case T::UINT8:
      return PgColumnType{"smallint", "smallint"};
    case T::INT32:
    case T::UINT16:
      return PgColumnType{"integer", "integer"};
    case T::INT64:
    case T::UINT32:
      return PgColumnType{"bigint", "bigint"};
    case T::UINT64:
      return PgColumnType{"numeric(20,0)", "text", /*cast=*/true};
    case T::HALF_FLOAT:
    case T::FLOAT:
      return PgColumnType{"real", "real"};
    case T::DOUBLE:
      return PgColumnType{"double precision", "double precision"};
    case T::STRING:
    case T::LARGE_STRING:
    case T::STRING_VIEW:
      return PgColumnType{"text", "text"};
    case T::BINARY:
    case T::LARGE_BINARY:
    case T::BINARY_VIEW:
    case T::FIXED_SIZE_BINARY:
      return PgColumnType{"bytea", "bytea"};
    case T::TIMESTAMP: {
      bool tz = !static_cast<const arrow::TimestampType&>(type).timezone().empty();
      std::string name = tz ? "timestamptz" : "timestamp";
      return PgColumnType{name, name};
    }
    case T::DATE32:
    case T::DATE64:
      return PgColumnType{"date", "date"};
    case T::TIME32:
    case T::TIME64:
      return PgColumnType{"time", "time"};
    case T::DURATION:
      return PgColumnType{"interval", "interval"};
    case T::DECIMAL128:
    case T::DECIMAL256: {
      const auto& decimal = static_cast<const arrow::DecimalType&>(type);
      return PgColumnType{"numeric(" + std::to_string(decimal.precision()) + "," +
                              std::to_string(decimal.scale()) + ")",
                          "text", /*cast=*/true};
    }
    case T::LIST:
    case T::LARGE_LIST:
    case T::FIXED_SIZE_LIST:
    case T::STRUCT:
    case T::MAP:
      return PgColumnType{"jsonb", "jsonb"};
    case T::DICTIONARY:
      return MapArrowType(*static_cast<const arrow::DictionaryType&>(type).value_type(),
                          column);
    default:
      return Status::NotImplemented("PostgreSQL sink: column '", column, "' has type ",
                                    type.ToString(), ", which has no PostgreSQL mapping");
  }
}

std::string QuoteIdentifier(const std::string& name) {
  std::string out = "\"";
  for (char c : name) {
    if (c == '"') out.push_back('"');
    out.push_back(c);
  }
  out.push_back('"');
  return out;
}

std::string QuoteQualifiedName(const std::string& name) {
  size_t dot = name.find('.');
  if (dot == std::string::npos) return QuoteIdentifier(name);
  return QuoteIdentifier(name.substr(0, dot)) + "." + QuoteIdentifier(name.substr(dot + 1));
}

Result<std::unique_ptr<CopyBinaryEncoder>> CopyBinaryEncoder::Make(
    const std::shared_ptr<arrow::Schema>& schema, const std::vector<int>& columns) {
  std::vector<std::unique_ptr<FieldWriter>> writers;
  for (int index : columns) {
    const auto& field = schema->field(index);
    if (field->name() == kChangeVersionColumn && field->type()->id() == arrow::Type::UINT64) {
      writers.push_back(std::make_unique<IntWriter<arrow::UInt64Array, int64_t>>());
      continue;
    }
    RILL_ASSIGN_OR_RAISE(auto writer, MakeFieldWriter(*field->type(), field->name()));
    writers.push_back(std::move(writer));
  }
  return std::make_unique<CopyBinaryEncoderImpl>(columns, std::move(writers));
}

void CopyBinaryEncoder::AppendHeader(std::string* out) {
  static constexpr char kSignature[] = "PGCOPY\n\377\r\n";
  out->append(kSignature, 11);  // the signature ends with a zero byte
  PutU32(out, 0);               // flags
  PutU32(out, 0);               // header extension length
}

void CopyBinaryEncoder::AppendTrailer(std::string* out) { PutU16(out, 0xFFFF); }

void AppendJsonValue(const arrow::Array& array, int64_t index, std::string* out) {
  using T = arrow::Type;
  if (array.IsNull(index)) {
    *out += "null";
    return;
  }
  switch (array.type_id()) {
    case T::BOOL:
      *out += static_cast<const arrow::BooleanArray&>(array).Value(index) ? "true" : "false";
      return;
    case T::INT8:
      *out += std::to_string(static_cast<const arrow::Int8Array&>(array).Value(index));
      return;
    case T::INT16:
      *out += std::to_string(static_cast<const arrow::Int16Array&>(array).Value(index));
      return;
    case T::INT32:
      *out += std::to_string(static_cast<const arrow::Int32Array&>(array).Value(index));
      return;
    case T::INT64:
      *out += std::to_string(static_cast<const arrow::Int64Array&>(array).Value(index));
      return;
    case T::UINT8:
      *out += std::to_string(static_cast<const arrow::UInt8Array&>(array).Value(index));
      return;
    case T::UINT16:
      *out += std::to_string(static_cast<const arrow::UInt16Array&>(array).Value(index));
      return;
    case T::UINT32:
      *out += std::to_string(static_cast<const arrow::UInt32Array&>(array).Value(index));
      return;
    case T::UINT64:
      *out += std::to_string(static_cast<const arrow::UInt64Array&>(array).Value(index));
      return;
    case T::FLOAT:
      AppendJsonNumber(out, static_cast<const arrow::FloatArray&>(array).Value(index));
      return;
    case T::DOUBLE:
      AppendJsonNumber(out, static_cast<const arrow::DoubleArray&>(array).Value(index));
      return;
    case T::DECIMAL128:
      *out += static_cast<const arrow::Decimal128Array&>(array).FormatValue(index);
      return;
    case T::STRING:
      AppendJsonString(out, static_cast<const arrow::StringArray&>(array).GetView(index));
      return;
    case T::LARGE_STRING:
      AppendJsonString(out,
                       static_cast<const arrow::LargeStringArray&>(array).GetView(index));
      return;
    case T::LIST:
    case T::MAP: {
      const auto& list = static_cast<const arrow::ListArray&>(array);
      AppendJsonList(*list.values(), list.value_offset(index), list.value_length(index), out);
      return;
    }
    case T::LARGE_LIST: {
      const auto& list = static_cast<const arrow::LargeListArray&>(array);
      AppendJsonList(*list.values(), list.value_offset(index), list.value_length(index), out);
      return;
    }
    case T::FIXED_SIZE_LIST: {
      const auto& list = static_cast<const arrow::FixedSizeListArray&>(array);
      AppendJsonList(*list.values(), list.value_offset(index), list.value_length(index), out);
      return;
    }
    case T::STRUCT: {
      const auto& record = static_cast<const arrow::StructArray&>(array);
      const auto& type = static_cast<const arrow::StructType&>(*array.type());
      out->push_back('{');
      for (int i = 0; i < record.num_fields(); ++i) {
        if (i > 0) out->push_back(',');
        AppendJsonString(out, type.field(i)->name());
        out->push_back(':');
        AppendJsonValue(*record.field(i), index, out);
      }
      out->push_back('}');
      return;
    }
    case T::DICTIONARY: {
      const auto& dict = static_cast<const arrow::DictionaryArray&>(array);
      AppendJsonValue(*dict.dictionary(), dict.GetValueIndex(index), out);
      return;
    }
    default: {
      auto scalar = array.GetScalar(index);
      AppendJsonString(out, scalar.ok() ? (*scalar)->ToString() : std::string());
    }
  }
}

}  // namespace rill::postgres_sink_internal
