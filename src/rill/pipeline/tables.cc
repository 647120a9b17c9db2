#include "rill/pipeline/tables.h"

#include <cctype>
#include <map>
#include <set>

#include <arrow/type.h>

#include "rill/pipeline/option_docs.h"
#include "rill/table/retention.h"
#include "rill/table/schema.h"

namespace rill::pipeline {

namespace {

/// The checks of a table's options as a whole (the key's columns, an append
/// table's retention), with `key` the PRIMARY KEY clause's columns.
Status CheckTable(std::vector<std::string> key, TableDecl* decl);

RetentionPolicy& Retention(TableDecl* t) {
  if (!t->options.retention) t->options.retention = RetentionPolicy{};
  return *t->options.retention;
}

}  // namespace

const OptionTable<TableDecl>& TableOptionTable() {
  static const OptionTable<TableDecl> kTable = {
      "table",
      {
          {"mode", OptionType::kString,
           "snapshot (upsert by primary key) | append (a log; needs max_rows or max_age_seconds)",
           [](const Converted& v, TableDecl* t) -> Status {
             RILL_ASSIGN_OR_RAISE(TableMode mode, ParseTableMode(v.s));
             t->options.mode = mode;
             return Status::OK();
           }},
          {"primary_key", OptionType::kNames,
           "key columns (as the PRIMARY KEY clause): upserts replace the row of the same key",
           [](const Converted& v, TableDecl* t) -> Status {
             if (!t->options.primary_key.empty()) {
               return DeclError(kSqlStateSyntax, "the primary key is given twice");
             }
             t->options.primary_key = v.names;
             return Status::OK();
           }},
          {"max_rows", OptionType::kInt, "retention: keep at most this many rows (oldest go)",
           [](const Converted& v, TableDecl* t) -> Status {
             if (v.i < 0) return Status::Invalid("max_rows must be >= 0, got ", v.i);
             Retention(t).max_rows = v.i;
             return Status::OK();
           }},
          {"max_age_seconds", OptionType::kNumber,
           "retention: rows older than this (by time_column) go",
           [](const Converted& v, TableDecl* t) -> Status {
             if (!(v.d >= 0)) return Status::Invalid("max_age_seconds must be >= 0, got ", v.d);
             Retention(t).max_age_seconds = v.d;
             return Status::OK();
           }},
          {"time_column", OptionType::kString,
           "the column max_age_seconds reads (default z_insert_ts, the arrival time)",
           [](const Converted& v, TableDecl* t) -> Status {
             if (v.s.empty()) return Status::Invalid("time_column must not be empty");
             Retention(t).time_column = v.s;
             return Status::OK();
           }},
          {"retention", OptionType::kAny,
           "a mapping {max_rows, max_age_seconds, time_column} (the pipeline file's form of "
           "the three options above)",
           [](const Converted& v, TableDecl* t) -> Status {
             const OptionValue& raw = *v.raw;
             if (raw.kind != OptionValue::Kind::kMap) {
               return DeclError(kSqlStateBadValue, raw.where + ": expected a mapping "
                                                   "{max_rows, max_age_seconds, time_column}");
             }
             Options entries;
             for (const OptionValue& e : raw.items) entries.emplace_back(e.key, e);
             static const OptionTable<TableDecl> kRetention = {
                 "retention",
                 {TableOptionTable().defs[2], TableOptionTable().defs[3],
                  TableOptionTable().defs[4]}};
             return ReadOptions(kRetention, entries, raw.where, t);
           }},
      }};
  return kTable;
}

Result<std::shared_ptr<arrow::DataType>> ParseColumnType(std::string text) {
  for (char& c : text) {
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  static const std::map<std::string, std::shared_ptr<arrow::DataType>> kTypes = {
      {"int8", arrow::int8()},       {"int16", arrow::int16()},
      {"int32", arrow::int32()},     {"int64", arrow::int64()},
      {"uint8", arrow::uint8()},     {"uint16", arrow::uint16()},
      {"uint32", arrow::uint32()},   {"uint64", arrow::uint64()},
      {"float32", arrow::float32()}, {"float", arrow::float32()},
      {"float64", arrow::float64()}, {"double", arrow::float64()},
      {"bool", arrow::boolean()},    {"boolean", arrow::boolean()},
      {"string", arrow::utf8()},     {"utf8", arrow::utf8()},
      {"str", arrow::utf8()},        {"large_string", arrow::large_utf8()},
      {"binary", arrow::binary()},   {"date32", arrow::date32()},
      {"date", arrow::date32()},     {"timestamp", arrow::timestamp(arrow::TimeUnit::MICRO)},
  };
  if (auto it = kTypes.find(text); it != kTypes.end()) {
    return it->second;
  }
  // timestamp[UNIT] or timestamp[UNIT, TZ]
  if (text.rfind("timestamp[", 0) == 0 && text.back() == ']') {
    std::string inner = text.substr(10, text.size() - 11);
    std::string unit = inner.substr(0, inner.find(','));
    std::string tz = inner.find(',') == std::string::npos ? "" : inner.substr(inner.find(',') + 1);
    tz.erase(0, tz.find_first_not_of(' '));
    static const std::map<std::string, arrow::TimeUnit::type> kUnits = {
        {"s", arrow::TimeUnit::SECOND},
        {"ms", arrow::TimeUnit::MILLI},
        {"us", arrow::TimeUnit::MICRO},
        {"ns", arrow::TimeUnit::NANO}};
    if (auto it = kUnits.find(unit); it != kUnits.end()) {
      if (tz == "utc") tz = "UTC";
      return arrow::timestamp(it->second, tz);
    }
  }
  return Status::Invalid("unknown type '", text,
                         "' (expected int8..int64, uint8..uint64, float32, float64, bool, "
                         "string, large_string, binary, date32, timestamp[s|ms|us|ns])");
}

std::string SqlTypeOf(const arrow::DataType& type) {
  switch (type.id()) {
    case arrow::Type::INT8: return "TINYINT";
    case arrow::Type::INT16: return "SMALLINT";
    case arrow::Type::INT32: return "INTEGER";
    case arrow::Type::INT64: return "BIGINT";
    case arrow::Type::UINT8: return "UTINYINT";
    case arrow::Type::UINT16: return "USMALLINT";
    case arrow::Type::UINT32: return "UINTEGER";
    case arrow::Type::UINT64: return "UBIGINT";
    case arrow::Type::FLOAT: return "REAL";
    case arrow::Type::DOUBLE: return "DOUBLE";
    case arrow::Type::BOOL: return "BOOLEAN";
    case arrow::Type::STRING:
    case arrow::Type::LARGE_STRING: return "TEXT";
    case arrow::Type::BINARY:
    case arrow::Type::LARGE_BINARY: return "BYTEA";
    case arrow::Type::DATE32: return "DATE";
    case arrow::Type::TIMESTAMP: {
      const auto& ts = static_cast<const arrow::TimestampType&>(type);
      return ts.timezone().empty() ? "TIMESTAMP" : "TIMESTAMP WITH TIME ZONE";
    }
    default: return "TEXT";
  }
}

std::string PipelineTypeName(const arrow::DataType& type) {
  switch (type.id()) {
    case arrow::Type::FLOAT: return "float32";
    case arrow::Type::DOUBLE: return "float64";
    case arrow::Type::STRING: return "string";
    case arrow::Type::LARGE_STRING: return "large_string";
    case arrow::Type::BOOL: return "bool";
    case arrow::Type::TIMESTAMP: {
      const auto& ts = static_cast<const arrow::TimestampType&>(type);
      static const char* kUnits[] = {"s", "ms", "us", "ns"};
      std::string out = std::string("timestamp[") + kUnits[static_cast<int>(ts.unit())];
      if (!ts.timezone().empty()) out += ", " + ts.timezone();
      return out + "]";
    }
    default: return type.ToString();  // int64, uint8, binary, date32
  }
}

Result<TableDecl> ReadTable(std::string name, const std::vector<DdlColumn>& columns,
                            std::vector<std::string> primary_key, const Options& options,
                            const std::string& where) {
  TableDecl decl;
  decl.name = std::move(name);
  decl.columns = columns;
  decl.given = options;
  if (columns.empty()) {
    return DeclError(kSqlStateSyntax, "table \"" + decl.name + "\" needs at least one column");
  }
  arrow::FieldVector fields;
  std::set<std::string> seen;
  for (const DdlColumn& c : columns) {
    if (IsSystemColumn(c.name)) {
      return DeclError(kSqlStateBadValue, "column \"" + c.name + "\" is a system column");
    }
    if (!seen.insert(c.name).second) {
      return DeclError("42701", "column \"" + c.name + "\" specified more than once");
    }
    auto type = ParseColumnType(c.type);
    if (!type.ok()) return DeclError(kSqlStateUndefined, type.status().message());
    fields.push_back(arrow::field(c.name, *type, !c.not_null));
  }
  decl.schema = arrow::schema(std::move(fields));
  decl.options.primary_key = std::move(primary_key);  // the PRIMARY KEY clause
  RILL_RETURN_NOT_OK(ReadTableOptions(options, where, &decl));
  return decl;
}

Status ReadTableOptions(const Options& options, const std::string& where, TableDecl* decl_ptr) {
  TableDecl& decl = *decl_ptr;
  std::vector<std::string> key = std::move(decl.options.primary_key);
  decl.options.primary_key.clear();
  decl.given = options;
  RILL_RETURN_NOT_OK(ReadOptions(TableOptionTable(), options, where, &decl));
  Status checked = CheckTable(std::move(key), &decl);
  if (checked.ok()) return checked;
  // A key column that is not a column: at the primary_key option when given.
  std::string at = where;
  for (const auto& [name, value] : options) {
    if (name == "primary_key" && SqlStateOf(checked) == "42703" && !value.where.empty()) {
      at = value.where;
    }
  }
  return PrefixError(checked, at);
}

namespace {

Status CheckTable(std::vector<std::string> key, TableDecl* decl_ptr) {
  TableDecl& decl = *decl_ptr;
  if (!key.empty()) {
    if (!decl.options.primary_key.empty()) {
      return DeclError(kSqlStateSyntax,
                       "the primary key is given twice (PRIMARY KEY and primary_key)");
    }
    decl.options.primary_key = std::move(key);
  }
  for (const std::string& column : decl.options.primary_key) {
    if (decl.schema->GetFieldIndex(column) < 0) {
      return DeclError("42703", "column \"" + column + "\" named in key does not exist");
    }
  }
  if (decl.options.retention) {
    if (Status st = decl.options.retention->Validate(); !st.ok()) {
      return DeclError(kSqlStateBadValue, st.message());
    }
  }
  TableMode mode = decl.options.mode.value_or(TableMode::kSnapshot);
  if (Status st = CheckAppendRetention(decl.name, mode, decl.options.retention); !st.ok()) {
    return DeclError(kSqlStateBadValue, st.message());
  }
  return Status::OK();
}

}  // namespace

std::string TableOptionsMarkdown() {
  return OptionTableMarkdown(TableOptionTable(), "#### `CREATE TABLE ... WITH (...)`");
}

}  // namespace rill::pipeline
