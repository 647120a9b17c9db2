// Change rows as Avro binary values (format="avro"): the Arrow -> Avro value
// encoding of ArrowToAvroSchemaJson's schemas (every field a union [null, T]).
#include <arrow/array.h>
#include <arrow/type.h>
#include <arrow/util/decimal.h>

#include "rill/sink/kafka_sink_internal.h"

namespace rill::kafka_sink_internal {

namespace {

void PutLong(int64_t v, std::string* out) {
  uint64_t z = (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
  while (z >= 0x80) {
    out->push_back(static_cast<char>((z & 0x7f) | 0x80));
    z >>= 7;
  }
  out->push_back(static_cast<char>(z));
}

void PutBytes(std::string_view b, std::string* out) {
  PutLong(static_cast<int64_t>(b.size()), out);
  out->append(b);
}

int64_t FloorDiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-(a + 1)) / b) - 1; }

/// The unscaled value as minimal big-endian two's-complement bytes.
void PutDecimal(const arrow::Decimal128& d, std::string* out) {
  uint8_t le[16];
  d.ToBytes(le);
  int n = 16;
  // Drop leading sign bytes while the next byte keeps the sign.
  while (n > 1) {
    const uint8_t top = le[n - 1], next = le[n - 2];
    if ((top == 0x00 && !(next & 0x80)) || (top == 0xff && (next & 0x80))) {
      --n;
    } else {
      break;
    }
  }
  PutLong(n, out);
  for (int i = n - 1; i >= 0; --i) out->push_back(static_cast<char>(le[i]));
}

Status PutValue(const arrow::Array& a, int64_t i, std::string* out);

/// Items [begin, end) of `values` as one Avro array / map block.
Status PutItems(const arrow::Array* keys, const arrow::Array& values, int64_t begin, int64_t end,
                std::string* out) {
  if (end > begin) {
    PutLong(end - begin, out);
    for (int64_t k = begin; k < end; ++k) {
      if (keys) {
        RILL_RETURN_NOT_OK(PutValue(*keys, k, out));  // keys are not nullable: no union
      } else {
        RILL_RETURN_NOT_OK(AppendAvroField(values, k, out));
      }
      if (keys) RILL_RETURN_NOT_OK(AppendAvroField(values, k, out));
    }
  }
  PutLong(0, out);
  return Status::OK();
}

/// One non-null value of `a` (no union branch).
Status PutValue(const arrow::Array& a, int64_t i, std::string* out) {
  using arrow::Type;
  switch (a.type_id()) {
    case Type::BOOL:
      out->push_back(static_cast<const arrow::BooleanArray&>(a).Value(i) ? 1 : 0);
      return Status::OK();
#define RILL_INT(ID, ARRAY)                                        \
  case Type::ID:                                                   \
    PutLong(static_cast<int64_t>(static_cast<const arrow::ARRAY&>(a).Value(i)), out); \
    return Status::OK();
      RILL_INT(INT8, Int8Array)
      RILL_INT(INT16, Int16Array)
      RILL_INT(INT32, Int32Array)
      RILL_INT(INT64, Int64Array)
      RILL_INT(UINT8, UInt8Array)
      RILL_INT(UINT16, UInt16Array)
      RILL_INT(UINT32, UInt32Array)
      RILL_INT(DATE32, Date32Array)
#undef RILL_INT
    case Type::UINT64: {
      const uint64_t v = static_cast<const arrow::UInt64Array&>(a).Value(i);
      if (v > static_cast<uint64_t>(INT64_MAX)) {
        return Status::Invalid("uint64 ", v, " does not fit an Avro long");
      }
      PutLong(static_cast<int64_t>(v), out);
      return Status::OK();
    }
    case Type::DATE64:
      PutLong(FloorDiv(static_cast<const arrow::Date64Array&>(a).Value(i), 86400000), out);
      return Status::OK();
    case Type::TIMESTAMP: {
      const int64_t v = static_cast<const arrow::TimestampArray&>(a).Value(i);
      switch (static_cast<const arrow::TimestampType&>(*a.type()).unit()) {
        case arrow::TimeUnit::SECOND: PutLong(v * 1000, out); break;
        case arrow::TimeUnit::MILLI:
        case arrow::TimeUnit::MICRO: PutLong(v, out); break;
        case arrow::TimeUnit::NANO: PutLong(FloorDiv(v, 1000), out); break;
      }
      return Status::OK();
    }
    case Type::FLOAT: {
      const float f = static_cast<const arrow::FloatArray&>(a).Value(i);
      out->append(reinterpret_cast<const char*>(&f), 4);
      return Status::OK();
    }
    case Type::DOUBLE: {
      const double d = static_cast<const arrow::DoubleArray&>(a).Value(i);
      out->append(reinterpret_cast<const char*>(&d), 8);
      return Status::OK();
    }
    case Type::STRING:
      PutBytes(static_cast<const arrow::StringArray&>(a).GetView(i), out);
      return Status::OK();
    case Type::LARGE_STRING:
      PutBytes(static_cast<const arrow::LargeStringArray&>(a).GetView(i), out);
      return Status::OK();
    case Type::BINARY:
      PutBytes(static_cast<const arrow::BinaryArray&>(a).GetView(i), out);
      return Status::OK();
    case Type::LARGE_BINARY:
      PutBytes(static_cast<const arrow::LargeBinaryArray&>(a).GetView(i), out);
      return Status::OK();
    case Type::FIXED_SIZE_BINARY:
      PutBytes(static_cast<const arrow::FixedSizeBinaryArray&>(a).GetView(i), out);
      return Status::OK();
    case Type::DECIMAL128:
      PutDecimal(arrow::Decimal128(static_cast<const arrow::Decimal128Array&>(a).GetValue(i)), out);
      return Status::OK();
    case Type::DICTIONARY: {
      const auto& dict = static_cast<const arrow::DictionaryArray&>(a);
      return PutValue(*dict.dictionary(), dict.GetValueIndex(i), out);
    }
    case Type::STRUCT: {
      const auto& s = static_cast<const arrow::StructArray&>(a);
      for (int f = 0; f < s.num_fields(); ++f) {
        RILL_RETURN_NOT_OK(AppendAvroField(*s.field(f), i, out));
      }
      return Status::OK();
    }
    case Type::LIST: {
      const auto& l = static_cast<const arrow::ListArray&>(a);
      return PutItems(nullptr, *l.values(), l.value_offset(i), l.value_offset(i + 1), out);
    }
    case Type::LARGE_LIST: {
      const auto& l = static_cast<const arrow::LargeListArray&>(a);
      return PutItems(nullptr, *l.values(), l.value_offset(i), l.value_offset(i + 1), out);
    }
    case Type::MAP: {
      const auto& m = static_cast<const arrow::MapArray&>(a);
      return PutItems(m.keys().get(), *m.items(), m.value_offset(i), m.value_offset(i + 1), out);
    }
    default:
      return Status::NotImplemented("no Avro encoding for Arrow ", a.type()->ToString());
  }
}

}  // namespace

Status AppendAvroField(const arrow::Array& array, int64_t row, std::string* out) {
  if (array.IsNull(row)) {
    PutLong(0, out);  // the union's "null" branch
    return Status::OK();
  }
  PutLong(1, out);
  return PutValue(array, row, out);
}

}  // namespace rill::kafka_sink_internal
