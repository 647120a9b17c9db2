// Column summaries as DuckDB statistics. Only value-preserving type pairs get
// statistics: a bound on Arrow values is a bound on DuckDB's only when the arrow
// scan copies the values unchanged.
#include "rill/sql/duck_statistics_internal.h"

#include <cstring>
#include <limits>

#include <arrow/type.h>
#include <arrow/util/endian.h>

namespace rill::sql_internal {
namespace {

// True when DuckDB's arrow scan turns values of `arrow_type` into values of
// `type` without changing them (so bounds of the ones bound the others).
bool SameValues(const arrow::DataType& arrow_type, const duckdb::LogicalType& type) {
  using Id = duckdb::LogicalTypeId;
  const Id id = type.id();
  switch (arrow_type.id()) {
    case arrow::Type::INT8:
      return id == Id::TINYINT;
    case arrow::Type::INT16:
      return id == Id::SMALLINT;
    case arrow::Type::INT32:
      return id == Id::INTEGER;
    case arrow::Type::INT64:
      return id == Id::BIGINT;
    case arrow::Type::UINT8:
      return id == Id::UTINYINT;
    case arrow::Type::UINT16:
      return id == Id::USMALLINT;
    case arrow::Type::UINT32:
      return id == Id::UINTEGER;
    case arrow::Type::UINT64:
      return id == Id::UBIGINT;
    case arrow::Type::FLOAT:
      return id == Id::FLOAT;
    case arrow::Type::DOUBLE:
      return id == Id::DOUBLE;
    case arrow::Type::DATE32:
      return id == Id::DATE;
    case arrow::Type::TIMESTAMP: {
      const auto& ts = static_cast<const arrow::TimestampType&>(arrow_type);
      if (!ts.timezone().empty()) {
        // DuckDB rescales other units to microseconds.
        return ts.unit() == arrow::TimeUnit::MICRO && id == Id::TIMESTAMP_TZ;
      }
      switch (ts.unit()) {
        case arrow::TimeUnit::SECOND:
          return id == Id::TIMESTAMP_SEC;
        case arrow::TimeUnit::MILLI:
          return id == Id::TIMESTAMP_MS;
        case arrow::TimeUnit::MICRO:
          return id == Id::TIMESTAMP;
        case arrow::TimeUnit::NANO:
          return id == Id::TIMESTAMP_NS;
      }
      return false;
    }
    case arrow::Type::STRING:
    case arrow::Type::LARGE_STRING:
      return id == Id::VARCHAR;
    default:
      return false;
  }
}

// `v` as a DuckDB value of `type`, one of the integer-backed types SameValues
// accepts for a kSigned summary.
duckdb::Value SignedValue(int64_t v, const duckdb::LogicalType& type) {
  using Id = duckdb::LogicalTypeId;
  switch (type.id()) {
    case Id::TINYINT:
      return duckdb::Value::TINYINT(static_cast<int8_t>(v));
    case Id::SMALLINT:
      return duckdb::Value::SMALLINT(static_cast<int16_t>(v));
    case Id::INTEGER:
      return duckdb::Value::INTEGER(static_cast<int32_t>(v));
    case Id::DATE:
      return duckdb::Value::DATE(duckdb::date_t(static_cast<int32_t>(v)));
    case Id::TIMESTAMP_SEC:
      return duckdb::Value::TIMESTAMPSEC(duckdb::timestamp_sec_t(v));
    case Id::TIMESTAMP_MS:
      return duckdb::Value::TIMESTAMPMS(duckdb::timestamp_ms_t(v));
    case Id::TIMESTAMP:
      return duckdb::Value::TIMESTAMP(duckdb::timestamp_t(v));
    case Id::TIMESTAMP_NS:
      return duckdb::Value::TIMESTAMPNS(duckdb::timestamp_ns_t(v));
    case Id::TIMESTAMP_TZ:
      return duckdb::Value::TIMESTAMPTZ(duckdb::timestamp_tz_t(v));
    default:
      return duckdb::Value::BIGINT(v);
  }
}

duckdb::Value UnsignedValue(uint64_t v, const duckdb::LogicalType& type) {
  using Id = duckdb::LogicalTypeId;
  switch (type.id()) {
    case Id::UTINYINT:
      return duckdb::Value::UTINYINT(static_cast<uint8_t>(v));
    case Id::USMALLINT:
      return duckdb::Value::USMALLINT(static_cast<uint16_t>(v));
    case Id::UINTEGER:
      return duckdb::Value::UINTEGER(static_cast<uint32_t>(v));
    default:
      return duckdb::Value::UBIGINT(v);
  }
}

duckdb::Value FloatValue(double v, const duckdb::LogicalType& type) {
  // A FLOAT summary's bounds are floats widened to double: exact back.
  return type.id() == duckdb::LogicalTypeId::FLOAT
             ? duckdb::Value::FLOAT(static_cast<float>(v))
             : duckdb::Value::DOUBLE(v);
}

duckdb::string_t PrefixString(uint64_t prefix, char (&buffer)[8]) {
  const uint64_t bytes = arrow::bit_util::ToBigEndian(prefix);
  std::memcpy(buffer, &bytes, sizeof(bytes));
  return duckdb::string_t(buffer, sizeof(buffer));
}

// DuckDB statistics saying exactly what `s` says about a column DuckDB reads
// as `type`.
duckdb::unique_ptr<duckdb::BaseStatistics> ToDuckStatistics(const ColumnSummary& s,
                                                            const duckdb::LogicalType& type) {
  using duckdb::BaseStatistics;
  const bool bounded = s.has_valid && s.has_bounds;
  BaseStatistics stats = BaseStatistics::CreateUnknown(type);
  if (s.kind == ColumnSummary::Kind::kString) {
    if (bounded) {
      // Empty string statistics claim nothing (no values, no nulls, ASCII);
      // each claim below widens them.
      stats = duckdb::StringStats::CreateEmpty(type);
      char buffer[8];
      duckdb::StringStats::SetMin(stats, PrefixString(s.min_prefix, buffer));
      duckdb::StringStats::SetMax(stats, PrefixString(s.max_prefix, buffer));
      if (s.max_length < std::numeric_limits<uint32_t>::max()) {
        duckdb::StringStats::SetMaxStringLength(stats, static_cast<uint32_t>(s.max_length));
      } else {
        duckdb::StringStats::ResetMaxStringLength(stats);
      }
      if (s.non_ascii) {
        duckdb::StringStats::SetContainsUnicode(stats);
      }
      stats.SetHasNoNull();
      if (s.has_null) {
        stats.SetHasNull();
      }
      return stats.ToUnique();
    }
  } else if (bounded) {
    switch (s.kind) {
      case ColumnSummary::Kind::kSigned:
        duckdb::NumericStats::SetMin(stats, SignedValue(s.min_signed, type));
        duckdb::NumericStats::SetMax(stats, SignedValue(s.max_signed, type));
        break;
      case ColumnSummary::Kind::kUnsigned:
        duckdb::NumericStats::SetMin(stats, UnsignedValue(s.min_unsigned, type));
        duckdb::NumericStats::SetMax(stats, UnsignedValue(s.max_unsigned, type));
        break;
      case ColumnSummary::Kind::kFloat:
        duckdb::NumericStats::SetMin(stats, FloatValue(s.min_float, type));
        duckdb::NumericStats::SetMax(stats, FloatValue(s.max_float, type));
        break;
      case ColumnSummary::Kind::kString:
        break;
    }
  }
  // Unknown statistics allow nulls and non-nulls; only the absence of nulls is
  // worth stating.
  if (!s.has_null) {
    stats.Set(duckdb::StatsInfo::CANNOT_HAVE_NULL_VALUES);
  }
  return stats.ToUnique();
}

}  // namespace

duckdb::unique_ptr<duckdb::BaseStatistics> DuckStatistics(const ColumnSummary& summary,
                                                          const arrow::DataType& arrow_type,
                                                          const duckdb::LogicalType& type) {
  if (!SameValues(arrow_type, type)) {
    return nullptr;
  }
  return ToDuckStatistics(summary, type);
}

}  // namespace rill::sql_internal
