#include "rill/server/pgwire/pg_types.h"

#include <charconv>
#include <cmath>
#include <cstring>

#include <arrow/array.h>
#include <arrow/extension_type.h>
#include <arrow/type.h>
#include <arrow/util/decimal.h>

#include "rill/server/pgwire/pg_values_internal.h"

namespace rill::pgwire {

using arrow::Type;
using internal::AppendBinaryValue;
using internal::HasBinary;

PgTypeInfo PgTypeFor(const arrow::DataType& type) {
  switch (type.id()) {
    case Type::BOOL:
      return {oid::kBool, 1};
    case Type::INT8:
    case Type::INT16:
    case Type::UINT8:
      return {oid::kInt2, 2};
    case Type::INT32:
    case Type::UINT16:
      return {oid::kInt4, 4};
    case Type::INT64:
    case Type::UINT32:
      return {oid::kInt8, 8};
    case Type::HALF_FLOAT:
    case Type::FLOAT:
      return {oid::kFloat4, 4};
    case Type::DOUBLE:
      return {oid::kFloat8, 8};
    case Type::UINT64:
    case Type::DECIMAL32:
    case Type::DECIMAL64:
    case Type::DECIMAL128:
    case Type::DECIMAL256:
      return {oid::kNumeric, -1};
    case Type::STRING:
    case Type::LARGE_STRING:
    case Type::STRING_VIEW:
      return {oid::kText, -1};
    case Type::BINARY:
    case Type::LARGE_BINARY:
    case Type::BINARY_VIEW:
    case Type::FIXED_SIZE_BINARY:
      return {oid::kBytea, -1};
    case Type::DATE32:
    case Type::DATE64:
      return {oid::kDate, 4};
    case Type::TIME32:
    case Type::TIME64:
      return {oid::kTime, 8};
    case Type::TIMESTAMP: {
      const auto& ts = static_cast<const arrow::TimestampType&>(type);
      return {ts.timezone().empty() ? oid::kTimestamp : oid::kTimestamptz, 8};
    }
    case Type::INTERVAL_MONTHS:
    case Type::INTERVAL_DAY_TIME:
    case Type::INTERVAL_MONTH_DAY_NANO:
    case Type::DURATION:
      return {oid::kInterval, 16};
    case Type::DICTIONARY:
      return PgTypeFor(*static_cast<const arrow::DictionaryType&>(type).value_type());
    case Type::LIST:
    case Type::LARGE_LIST:
    case Type::FIXED_SIZE_LIST:
    case Type::LIST_VIEW:
    case Type::LARGE_LIST_VIEW: {
      const auto& value_type = *type.field(0)->type();
      int32_t array_oid = PgArrayOidFor(PgTypeFor(value_type).oid);
      return {array_oid != 0 ? array_oid : oid::kText, -1};
    }
    default:
      return {oid::kText, -1};
  }
}

int32_t PgOidForDuckType(std::string_view t) {
  if (t.size() > 2 && t.substr(t.size() - 2) == "[]") {
    return PgArrayOidFor(PgOidForDuckType(t.substr(0, t.size() - 2)));
  }
  if (t.rfind("DECIMAL", 0) == 0) return oid::kNumeric;
  struct Name {
    std::string_view duck;
    int32_t oid;
  };
  static constexpr Name kNames[] = {
      {"BOOLEAN", oid::kBool},       {"TINYINT", oid::kInt2},
      {"SMALLINT", oid::kInt2},      {"UTINYINT", oid::kInt2},
      {"INTEGER", oid::kInt4},       {"USMALLINT", oid::kInt4},
      {"BIGINT", oid::kInt8},        {"UINTEGER", oid::kInt8},
      {"UBIGINT", oid::kNumeric},    {"HUGEINT", oid::kNumeric},
      {"UHUGEINT", oid::kNumeric},   {"FLOAT", oid::kFloat4},
      {"DOUBLE", oid::kFloat8},      {"VARCHAR", oid::kText},
      {"BLOB", oid::kBytea},         {"DATE", oid::kDate},
      {"TIME", oid::kTime},          {"TIMESTAMP", oid::kTimestamp},
      {"TIMESTAMP_S", oid::kTimestamp}, {"TIMESTAMP_MS", oid::kTimestamp},
      {"TIMESTAMP_NS", oid::kTimestamp}, {"TIMESTAMP WITH TIME ZONE", oid::kTimestamptz},
      {"INTERVAL", oid::kInterval},  {"UUID", oid::kUuid},
      {"JSON", oid::kJson},
  };
  for (const Name& n : kNames) {
    if (n.duck == t) return n.oid;
  }
  return 0;
}

std::string DuckTypeForOid(int32_t type_oid) {
  switch (type_oid) {
    case 0:
    case oid::kText:
    case oid::kVarchar:
    case oid::kBpchar:
    case oid::kName:
    case oid::kUnknown:
    case oid::kJson:
    case oid::kJsonb: return "VARCHAR";
    case oid::kBool: return "BOOLEAN";
    case oid::kInt2: return "SMALLINT";
    case oid::kInt4: return "INTEGER";
    case oid::kInt8:
    case oid::kOid: return "BIGINT";
    case oid::kFloat4: return "REAL";
    case oid::kFloat8: return "DOUBLE";
    case oid::kDate: return "DATE";
    case oid::kTime: return "TIME";
    case oid::kTimestamp: return "TIMESTAMP";
    case oid::kTimestamptz: return "TIMESTAMPTZ";
    case oid::kInterval: return "INTERVAL";
    case oid::kUuid: return "UUID";
    case oid::kBytea: return "BLOB";
    default: break;
  }
  for (int32_t element : {oid::kBool, oid::kInt2, oid::kInt4, oid::kInt8, oid::kFloat4,
                          oid::kFloat8, oid::kText, oid::kVarchar, oid::kDate,
                          oid::kTimestamp, oid::kTimestamptz, oid::kUuid, oid::kOid}) {
    if (PgArrayOidFor(element) == type_oid) return DuckTypeForOid(element) + "[]";
  }
  return "";
}

int32_t PgArrayOidFor(int32_t element_oid) {
  switch (element_oid) {
    case oid::kBool: return 1000;
    case oid::kBytea: return 1001;
    case oid::kInt2: return 1005;
    case oid::kInt4: return 1007;
    case oid::kText: return 1009;
    case oid::kVarchar: return 1015;
    case oid::kInt8: return 1016;
    case oid::kFloat4: return 1021;
    case oid::kFloat8: return 1022;
    case oid::kTimestamp: return 1115;
    case oid::kDate: return 1182;
    case oid::kTime: return 1183;
    case oid::kTimestamptz: return 1185;
    case oid::kInterval: return 1187;
    case oid::kNumeric: return 1231;
    case oid::kUuid: return 2951;
    case oid::kJson: return 199;
    case oid::kOid: return 1028;
    default: return 0;
  }
}

std::string_view PgTypeName(int32_t type_oid) {
  switch (type_oid) {
    case oid::kBool: return "bool";
    case oid::kBytea: return "bytea";
    case oid::kInt2: return "int2";
    case oid::kInt4: return "int4";
    case oid::kInt8: return "int8";
    case oid::kFloat4: return "float4";
    case oid::kFloat8: return "float8";
    case oid::kNumeric: return "numeric";
    case oid::kVarchar: return "varchar";
    case oid::kDate: return "date";
    case oid::kTime: return "time";
    case oid::kTimestamp: return "timestamp";
    case oid::kTimestamptz: return "timestamptz";
    case oid::kInterval: return "interval";
    case oid::kUuid: return "uuid";
    case oid::kJson: return "json";
    case oid::kJsonb: return "jsonb";
    default: return "text";
  }
}

namespace {

void PutInt32(int32_t v, char* p) {
  auto u = static_cast<uint32_t>(v);
  p[0] = static_cast<char>(u >> 24);
  p[1] = static_cast<char>((u >> 16) & 0xff);
  p[2] = static_cast<char>((u >> 8) & 0xff);
  p[3] = static_cast<char>(u & 0xff);
}

class ColumnWriter final : public PgColumnWriter {
 public:
  ColumnWriter(std::shared_ptr<arrow::DataType> type, int16_t format)
      : type_(std::move(type)), format_(format) {}

  void Append(const arrow::Array& array, int64_t row, std::string* out) const override {
    if (array.IsNull(row)) {
      out->append("\xff\xff\xff\xff", 4);
      return;
    }
    const size_t start = out->size();
    out->append(4, '\0');
    if (format_ == 0) {
      AppendText(array, row, out);
    } else {
      AppendBinaryValue(array, row, out);
    }
    PutInt32(static_cast<int32_t>(out->size() - start - 4), out->data() + start);
  }

 private:
  std::shared_ptr<arrow::DataType> type_;
  int16_t format_;
};

}  // namespace

Result<std::unique_ptr<PgColumnWriter>> PgColumnWriter::Make(
    std::shared_ptr<arrow::DataType> type, int16_t format) {
  if (format != 0 && format != 1) {
    return Status::Invalid("unknown result format code ", format);
  }
  if (format == 1 && !HasBinary(*type)) {
    return Status::NotImplemented("binary format is not supported for result type ",
                                  type->ToString(), "; request text format");
  }
  return std::make_unique<ColumnWriter>(std::move(type), format);
}

std::string QuoteLiteral(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out.push_back('\'');
  for (char c : s) {
    if (c == '\'') {
      out.push_back('\'');
    }
    out.push_back(c);
  }
  out.push_back('\'');
  return out;
}

}  // namespace rill::pgwire
