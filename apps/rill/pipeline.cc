// Parsing of pipeline files (the YAML described in pipeline.h).
#include "pipeline.h"

#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include <arrow/api.h>
#include <yaml-cpp/yaml.h>

#include "rill/table/schema.h"

namespace rill::app {
namespace {

/// A YAML node with its key path, e.g. "tables[0].columns".
struct At {
  YAML::Node node;
  std::string path;
};

class Parser {
 public:
  explicit Parser(std::string file) : file_(std::move(file)) {}

  SourceRef Ref(const At& at) const {
    return SourceRef{file_, at.node.Mark().line + 1, at.path};
  }

  template <typename... Args>
  Status Error(const At& at, Args&&... args) const {
    return Ref(at).Wrap(Status::Invalid(std::forward<Args>(args)...));
  }

  At Child(const At& parent, const std::string& key) const {
    return At{parent.node[key], parent.path.empty() ? key : parent.path + "." + key};
  }

  /// Invalid unless `at` is a mapping whose keys are all in `allowed`.
  Status Keys(const At& at, std::initializer_list<const char*> allowed) const {
    if (!at.node.IsMap()) {
      return Error(at, "expected a mapping");
    }
    std::set<std::string> ok(allowed.begin(), allowed.end());
    for (const auto& kv : at.node) {
      const std::string key = kv.first.Scalar();
      if (ok.count(key) == 0) {
        std::string list;
        for (const char* a : allowed) {
          list += list.empty() ? a : std::string(", ") + a;
        }
        At bad{kv.first, (at.path.empty() ? "" : at.path + ".") + key};
        return Error(bad, "unknown key (expected one of: ", list, ")");
      }
    }
    return Status::OK();
  }

  Result<std::string> Str(const At& at) const {
    if (!at.node.IsScalar()) {
      return Error(at, "expected a string");
    }
    return at.node.Scalar();
  }
  Result<std::string> RequiredStr(const At& parent, const std::string& key) const {
    At at = Child(parent, key);
    if (!at.node.IsDefined() || at.node.IsNull()) {
      return Error(parent, "missing required key '", key, "'");
    }
    RILL_ASSIGN_OR_RAISE(std::string value, Str(at));
    if (value.empty()) {
      return Error(at, "must not be empty");
    }
    return value;
  }
  Result<double> Num(const At& at) const {
    double value = 0;
    if (!at.node.IsScalar() || !YAML::convert<double>::decode(at.node, value) ||
        !std::isfinite(value)) {
      return Error(at, "expected a number, got '", at.node.IsScalar() ? at.node.Scalar() : "",
                   "'");
    }
    return value;
  }
  Result<int64_t> Int(const At& at) const {
    int64_t value = 0;
    if (!at.node.IsScalar() || !YAML::convert<int64_t>::decode(at.node, value)) {
      return Error(at, "expected an integer, got '",
                   at.node.IsScalar() ? at.node.Scalar() : "", "'");
    }
    return value;
  }
  Result<bool> Bool(const At& at) const {
    bool value = false;
    if (!at.node.IsScalar() || !YAML::convert<bool>::decode(at.node, value)) {
      return Error(at, "expected true or false");
    }
    return value;
  }
  /// "a", "a,b" or [a, b].
  Result<std::vector<std::string>> Names(const At& at) const {
    if (at.node.IsScalar()) {
      return SplitKey(at.node.Scalar());
    }
    if (!at.node.IsSequence()) {
      return Error(at, "expected a name or a list of names");
    }
    std::vector<std::string> out;
    for (size_t i = 0; i < at.node.size(); ++i) {
      RILL_ASSIGN_OR_RAISE(std::string name, Str(Item(at, i)));
      out.push_back(std::move(name));
    }
    return out;
  }
  At Item(const At& at, size_t i) const {
    return At{at.node[i], at.path + "[" + std::to_string(i) + "]"};
  }
  bool Has(const At& parent, const char* key) const {
    YAML::Node n = parent.node[key];
    return n.IsDefined() && !n.IsNull();
  }

  /// Call `fn(item)` for each item of the list `key` of the top level.
  template <typename Fn>
  Status ForEach(const At& root, const char* key, Fn&& fn) const {
    if (!Has(root, key)) {
      return Status::OK();
    }
    At list = Child(root, key);
    if (!list.node.IsSequence()) {
      return Error(list, "expected a list");
    }
    for (size_t i = 0; i < list.node.size(); ++i) {
      RILL_RETURN_NOT_OK(fn(Item(list, i)));
    }
    return Status::OK();
  }

  Status ParseEngine(const At& at, Pipeline* p) const;
  Status ParseMetrics(const At& at, Pipeline* p) const;
  Status ParseServer(const At& at, Pipeline* p) const;
  Status ParseTable(const At& at, Pipeline* p) const;
  Status ParseConnector(const At& at, Pipeline* p) const;
  Status ParseGenerator(const At& at, const TableSpec& table, GeneratorSpec* spec) const;
  Status ParseTask(const At& at, Pipeline* p) const;
  Status ParseJoin(const At& at, JoinTaskSpec* spec) const;
  Status ParseKpi(const At& at, Pipeline* p) const;
  Status ParseRule(const At& at, Pipeline* p) const;
  Result<std::optional<RetentionPolicy>> ParseRetention(const At& at) const;
  Result<std::shared_ptr<arrow::Schema>> ParseColumns(const At& at) const;

 private:
  std::string file_;
};

Result<std::shared_ptr<arrow::DataType>> ParseType(std::string text) {
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

Status Parser::ParseEngine(const At& at, Pipeline* p) const {
  RILL_RETURN_NOT_OK(Keys(at, {"trigger_interval_ms", "memory_budget_mb", "max_reject_rows"}));
  if (Has(at, "trigger_interval_ms")) {
    At v = Child(at, "trigger_interval_ms");
    RILL_ASSIGN_OR_RAISE(p->engine.trigger_interval_ms, Int(v));
    if (p->engine.trigger_interval_ms < 1) return Error(v, "must be at least 1");
  }
  if (Has(at, "memory_budget_mb")) {
    At v = Child(at, "memory_budget_mb");
    RILL_ASSIGN_OR_RAISE(double mb, Num(v));
    if (mb < 0) return Error(v, "must not be negative");
    p->engine.memory_budget_bytes = static_cast<int64_t>(mb * 1024 * 1024);
  }
  if (Has(at, "max_reject_rows")) {
    RILL_ASSIGN_OR_RAISE(p->engine.max_reject_rows, Int(Child(at, "max_reject_rows")));
  }
  return Status::OK();
}

Status Parser::ParseMetrics(const At& at, Pipeline* p) const {
  RILL_RETURN_NOT_OK(Keys(at, {"path", "flush_interval_seconds", "telemetry_retention_seconds",
                               "alert_retention_seconds"}));
  if (Has(at, "path")) {
    RILL_ASSIGN_OR_RAISE(p->metrics.path, Str(Child(at, "path")));
    p->metrics_path_given = true;
  }
  struct {
    const char* key;
    double* value;
  } numbers[] = {{"flush_interval_seconds", &p->metrics.flush_interval_seconds},
                 {"telemetry_retention_seconds", &p->metrics.telemetry_retention_seconds},
                 {"alert_retention_seconds", &p->metrics.alert_retention_seconds}};
  for (auto& n : numbers) {
    if (Has(at, n.key)) {
      At v = Child(at, n.key);
      RILL_ASSIGN_OR_RAISE(*n.value, Num(v));
      if (*n.value <= 0) return Error(v, "must be positive");
    }
  }
  return Status::OK();
}

Status Parser::ParseServer(const At& at, Pipeline* p) const {
  RILL_RETURN_NOT_OK(Keys(at, {"listen", "token", "allow_private_webhooks"}));
  if (Has(at, "listen")) {
    RILL_ASSIGN_OR_RAISE(p->server.listen, Str(Child(at, "listen")));
  }
  if (at.node["token"].IsDefined()) {  // "" is meaningful: no auth (loopback only)
    At v = Child(at, "token");
    p->server.token = v.node.IsNull() ? "" : v.node.Scalar();
  }
  if (Has(at, "allow_private_webhooks")) {
    RILL_ASSIGN_OR_RAISE(p->server.allow_private_webhooks,
                         Bool(Child(at, "allow_private_webhooks")));
  }
  return Status::OK();
}

Result<std::shared_ptr<arrow::Schema>> Parser::ParseColumns(const At& at) const {
  arrow::FieldVector fields;
  std::set<std::string> seen;
  auto add = [&](const At& where, const std::string& name, const std::string& type_text,
                 bool nullable) -> Status {
    if (name.empty()) return Error(where, "column name must not be empty");
    if (IsSystemColumn(name)) return Error(where, "'", name, "' is a system column");
    if (!seen.insert(name).second) return Error(where, "duplicate column '", name, "'");
    auto type = ParseType(type_text);
    if (!type.ok()) return Ref(where).Wrap(type.status());
    fields.push_back(arrow::field(name, *type, nullable));
    return Status::OK();
  };
  if (at.node.IsMap()) {
    for (const auto& kv : at.node) {
      At where{kv.second, at.path + "." + kv.first.Scalar()};
      RILL_ASSIGN_OR_RAISE(std::string type, Str(where));
      RILL_RETURN_NOT_OK(add(where, kv.first.Scalar(), type, true));
    }
  } else if (at.node.IsSequence()) {
    for (size_t i = 0; i < at.node.size(); ++i) {
      At item = Item(at, i);
      RILL_RETURN_NOT_OK(Keys(item, {"name", "type", "nullable"}));
      RILL_ASSIGN_OR_RAISE(std::string name, RequiredStr(item, "name"));
      RILL_ASSIGN_OR_RAISE(std::string type, RequiredStr(item, "type"));
      bool nullable = true;
      if (Has(item, "nullable")) {
        RILL_ASSIGN_OR_RAISE(nullable, Bool(Child(item, "nullable")));
      }
      RILL_RETURN_NOT_OK(add(Child(item, "type"), name, type, nullable));
    }
  } else {
    return Error(at, "expected a list of {name, type} or a mapping of name: type");
  }
  if (fields.empty()) {
    return Error(at, "a table needs at least one column");
  }
  return arrow::schema(std::move(fields));
}

Result<std::optional<RetentionPolicy>> Parser::ParseRetention(const At& at) const {
  RILL_RETURN_NOT_OK(Keys(at, {"max_rows", "max_age_seconds", "time_column"}));
  RetentionPolicy policy;
  if (Has(at, "max_rows")) {
    RILL_ASSIGN_OR_RAISE(policy.max_rows, Int(Child(at, "max_rows")));
  }
  if (Has(at, "max_age_seconds")) {
    RILL_ASSIGN_OR_RAISE(policy.max_age_seconds, Num(Child(at, "max_age_seconds")));
  }
  if (Has(at, "time_column")) {
    RILL_ASSIGN_OR_RAISE(policy.time_column, Str(Child(at, "time_column")));
  }
  if (Status st = policy.Validate(); !st.ok()) {
    return Ref(at).Wrap(st);
  }
  return std::optional<RetentionPolicy>(policy);
}

Status Parser::ParseTable(const At& at, Pipeline* p) const {
  RILL_RETURN_NOT_OK(Keys(at, {"name", "columns", "schema", "primary_key", "mode", "retention"}));
  TableSpec spec;
  spec.where = Ref(at);
  RILL_ASSIGN_OR_RAISE(spec.name, RequiredStr(at, "name"));
  for (const TableSpec& other : p->tables) {
    if (other.name == spec.name) {
      return Error(Child(at, "name"), "table '", spec.name, "' is declared twice (first at line ",
                   other.where.line, ")");
    }
  }
  const char* columns_key = Has(at, "columns") ? "columns" : "schema";
  if (!Has(at, columns_key)) {
    return Error(at, "missing required key 'columns'");
  }
  RILL_ASSIGN_OR_RAISE(spec.schema, ParseColumns(Child(at, columns_key)));
  if (Has(at, "primary_key")) {
    At key = Child(at, "primary_key");
    RILL_ASSIGN_OR_RAISE(spec.options.primary_key, Names(key));
    for (const std::string& column : spec.options.primary_key) {
      if (spec.schema->GetFieldIndex(column) < 0) {
        return Error(key, "unknown column '", column, "'");
      }
    }
  }
  if (Has(at, "mode")) {
    At mode = Child(at, "mode");
    RILL_ASSIGN_OR_RAISE(std::string text, Str(mode));
    auto parsed = ParseTableMode(text);
    if (!parsed.ok()) return Ref(mode).Wrap(parsed.status());
    spec.options.mode = *parsed;
  }
  if (Has(at, "retention")) {
    RILL_ASSIGN_OR_RAISE(spec.options.retention, ParseRetention(Child(at, "retention")));
  }
  if (spec.options.mode == TableMode::kAppend &&
      !(spec.options.retention && spec.options.retention->enabled())) {
    return Error(at, "an append table needs retention with max_rows or max_age_seconds");
  }
  p->tables.push_back(std::move(spec));
  return Status::OK();
}

Status Parser::ParseGenerator(const At& at, const TableSpec& table, GeneratorSpec* spec) const {
  using Kind = GeneratorColumnSpec::Kind;
  if (Has(at, "rows_per_second")) {
    At v = Child(at, "rows_per_second");
    RILL_ASSIGN_OR_RAISE(spec->rows_per_second, Num(v));
    if (spec->rows_per_second <= 0) return Error(v, "must be positive");
  }
  if (Has(at, "interval_ms")) {
    At v = Child(at, "interval_ms");
    RILL_ASSIGN_OR_RAISE(spec->interval_ms, Int(v));
    if (spec->interval_ms < 1) return Error(v, "must be at least 1");
  }
  if (Has(at, "seed")) {
    RILL_ASSIGN_OR_RAISE(int64_t seed, Int(Child(at, "seed")));
    spec->seed = static_cast<uint64_t>(seed);
  }
  if (!Has(at, "columns")) {
    return Error(at, "a generator needs 'columns' (a spec per column)");
  }
  At columns = Child(at, "columns");
  if (!columns.node.IsMap()) {
    return Error(columns, "expected a mapping of column: spec");
  }
  for (const auto& kv : columns.node) {
    const std::string name = kv.first.Scalar();
    At c{kv.second, columns.path + "." + name};
    if (table.schema->GetFieldIndex(name) < 0) {
      return Error(c, "unknown column '", name, "' of table '", table.name, "'");
    }
    GeneratorColumnSpec col;
    if (c.node.IsScalar()) {
      if (c.node.Scalar() != "now" && c.node.Scalar() != "sequence") {
        return Error(c, "expected now, sequence or a mapping {sequence | random_int | "
                        "random_float | choice | constant: ...}");
      }
      col.kind = c.node.Scalar() == "now" ? Kind::kNow : Kind::kSequence;
      spec->columns[name] = col;
      continue;
    }
    RILL_RETURN_NOT_OK(Keys(c, {"sequence", "random_int", "random_float", "choice", "weights",
                                "constant", "now"}));
    auto range = [&](const char* key, Kind kind) -> Status {
      At r = Child(c, key);
      if (!r.node.IsSequence() || r.node.size() != 2) return Error(r, "expected [LO, HI]");
      RILL_ASSIGN_OR_RAISE(col.lo, Num(Item(r, 0)));
      RILL_ASSIGN_OR_RAISE(col.hi, Num(Item(r, 1)));
      if (col.hi < col.lo) return Error(r, "HI must not be below LO");
      col.kind = kind;
      return Status::OK();
    };
    if (Has(c, "sequence")) {
      col.kind = Kind::kSequence;
      At s = Child(c, "sequence");
      if (s.node.IsMap()) {
        RILL_RETURN_NOT_OK(Keys(s, {"start", "step"}));
        if (Has(s, "start")) {
          RILL_ASSIGN_OR_RAISE(col.start, Int(Child(s, "start")));
        }
        if (Has(s, "step")) {
          RILL_ASSIGN_OR_RAISE(col.step, Int(Child(s, "step")));
        }
      } else {
        RILL_ASSIGN_OR_RAISE(col.start, Int(s));
      }
    } else if (Has(c, "random_int")) {
      RILL_RETURN_NOT_OK(range("random_int", Kind::kRandomInt));
    } else if (Has(c, "random_float")) {
      RILL_RETURN_NOT_OK(range("random_float", Kind::kRandomFloat));
    } else if (Has(c, "choice")) {
      col.kind = Kind::kChoice;
      At list = Child(c, "choice");
      if (!list.node.IsSequence() || list.node.size() == 0) {
        return Error(list, "expected a non-empty list of values");
      }
      for (size_t i = 0; i < list.node.size(); ++i) {
        RILL_ASSIGN_OR_RAISE(std::string v, Str(Item(list, i)));
        col.choices.push_back(std::move(v));
      }
      if (Has(c, "weights")) {
        At w = Child(c, "weights");
        if (!w.node.IsSequence() || w.node.size() != col.choices.size()) {
          return Error(w, "expected one weight per choice (", col.choices.size(), ")");
        }
        for (size_t i = 0; i < w.node.size(); ++i) {
          RILL_ASSIGN_OR_RAISE(double weight, Num(Item(w, i)));
          if (weight < 0) return Error(Item(w, i), "weights must not be negative");
          col.weights.push_back(weight);
        }
      }
    } else if (Has(c, "constant")) {
      col.kind = Kind::kConstant;
      RILL_ASSIGN_OR_RAISE(std::string v, Str(Child(c, "constant")));
      col.choices.push_back(std::move(v));
    } else if (c.node["now"].IsDefined()) {
      col.kind = Kind::kNow;
    } else {
      return Error(c, "expected one of sequence, random_int, random_float, choice, constant");
    }
    spec->columns[name] = col;
  }
  for (const auto& field : table.schema->fields()) {
    if (!field->nullable() && spec->columns.count(field->name()) == 0) {
      return Error(columns, "no spec for non-nullable column '", field->name(), "'");
    }
  }
  return Status::OK();
}

Status Parser::ParseConnector(const At& at, Pipeline* p) const {
  RILL_RETURN_NOT_OK(Keys(at, {"name", "type", "table", "max_records", "max_bytes",
                               "on_overflow", "rows_per_second", "interval_ms", "seed",
                               "columns"}));
  ConnectorSpec spec;
  spec.where = Ref(at);
  RILL_ASSIGN_OR_RAISE(spec.table, RequiredStr(at, "table"));
  spec.name = spec.table;
  if (Has(at, "name")) {
    RILL_ASSIGN_OR_RAISE(spec.name, Str(Child(at, "name")));
  }
  RILL_ASSIGN_OR_RAISE(spec.type, RequiredStr(at, "type"));
  const TableSpec* table = nullptr;
  for (const TableSpec& t : p->tables) {
    if (t.name == spec.table) table = &t;
  }
  if (table == nullptr) {
    return Error(Child(at, "table"), "unknown table '", spec.table,
                 "' (declare it under 'tables')");
  }
  if (Has(at, "max_records")) {
    RILL_ASSIGN_OR_RAISE(spec.limits.max_records, Int(Child(at, "max_records")));
  }
  if (Has(at, "max_bytes")) {
    RILL_ASSIGN_OR_RAISE(spec.limits.max_bytes, Int(Child(at, "max_bytes")));
  }
  if (Has(at, "on_overflow")) {
    At v = Child(at, "on_overflow");
    RILL_ASSIGN_OR_RAISE(std::string text, Str(v));
    auto policy = ParseOverflowPolicy(text);
    if (!policy.ok()) return Ref(v).Wrap(policy.status());
    spec.limits.on_overflow = *policy;
  }
  if (spec.type == "generator") {
    RILL_RETURN_NOT_OK(ParseGenerator(at, *table, &spec.generator));
  } else if (spec.type == "memory") {
    for (const char* key : {"rows_per_second", "interval_ms", "seed", "columns"}) {
      if (at.node[key].IsDefined()) {
        return Error(Child(at, key), "only a generator connector takes '", key, "'");
      }
    }
  } else {
    return Error(Child(at, "type"), "unknown connector type '", spec.type,
                 "' (available: memory, generator)");
  }
  for (const ConnectorSpec& other : p->connectors) {
    if (other.name == spec.name) {
      return Error(at, "connector '", spec.name, "' is declared twice");
    }
  }
  p->connectors.push_back(std::move(spec));
  return Status::OK();
}

Status Parser::ParseJoin(const At& at, JoinTaskSpec* spec) const {
  JoinTaskOptions& o = spec->options;
  RILL_ASSIGN_OR_RAISE(o.left_table, RequiredStr(at, "left"));
  RILL_ASSIGN_OR_RAISE(o.right_table, RequiredStr(at, "right"));
  if (!Has(at, "keys")) return Error(at, "missing required key 'keys'");
  RILL_ASSIGN_OR_RAISE(o.keys, Names(Child(at, "keys")));
  if (Has(at, "right_keys")) {
    RILL_ASSIGN_OR_RAISE(o.right_keys, Names(Child(at, "right_keys")));
  }
  if (Has(at, "join_type")) {
    At v = Child(at, "join_type");
    RILL_ASSIGN_OR_RAISE(std::string text, Str(v));
    auto type = ParseJoinType(text);
    if (!type.ok()) return Ref(v).Wrap(type.status());
    o.join_type = *type;
  }
  if (Has(at, "group_by")) {
    RILL_ASSIGN_OR_RAISE(o.group_by, Names(Child(at, "group_by")));
  }
  if (Has(at, "aggregations")) {
    At aggs = Child(at, "aggregations");
    auto add = [&](const At& where, const std::string& column, const std::string& fn) -> Status {
      auto parsed = ParseAggregateFunction(fn);
      if (!parsed.ok()) return Ref(where).Wrap(parsed.status());
      o.aggregations.emplace_back(column, *parsed);
      return Status::OK();
    };
    if (aggs.node.IsMap()) {
      for (const auto& kv : aggs.node) {
        At where{kv.second, aggs.path + "." + kv.first.Scalar()};
        RILL_ASSIGN_OR_RAISE(std::string fn, Str(where));
        RILL_RETURN_NOT_OK(add(where, kv.first.Scalar(), fn));
      }
    } else if (aggs.node.IsSequence()) {
      for (size_t i = 0; i < aggs.node.size(); ++i) {
        At item = Item(aggs, i);
        RILL_RETURN_NOT_OK(Keys(item, {"column", "function"}));
        RILL_ASSIGN_OR_RAISE(std::string column, RequiredStr(item, "column"));
        RILL_ASSIGN_OR_RAISE(std::string fn, RequiredStr(item, "function"));
        RILL_RETURN_NOT_OK(add(Child(item, "function"), column, fn));
      }
    } else {
      return Error(aggs, "expected {column: function} or a list of {column, function}");
    }
  }
  if (Has(at, "incremental")) {
    RILL_ASSIGN_OR_RAISE(o.incremental, Bool(Child(at, "incremental")));
  }
  if (Has(at, "retention")) {
    RILL_ASSIGN_OR_RAISE(o.retention, ParseRetention(Child(at, "retention")));
  }
  return Status::OK();
}

Status Parser::ParseTask(const At& at, Pipeline* p) const {
  RILL_RETURN_NOT_OK(Keys(at, {"name", "type", "sql", "output", "interval_seconds",
                               "primary_key", "left", "right", "keys", "right_keys",
                               "join_type", "group_by", "aggregations", "incremental",
                               "retention"}));
  RILL_ASSIGN_OR_RAISE(std::string name, RequiredStr(at, "name"));
  std::string type = Has(at, "sql") ? "sql" : "join";
  if (Has(at, "type")) {
    RILL_ASSIGN_OR_RAISE(type, Str(Child(at, "type")));
  }
  std::string output = name;
  if (Has(at, "output")) {
    RILL_ASSIGN_OR_RAISE(output, Str(Child(at, "output")));
  }
  double interval = 1.0;
  if (Has(at, "interval_seconds")) {
    At v = Child(at, "interval_seconds");
    RILL_ASSIGN_OR_RAISE(interval, Num(v));
    if (interval <= 0) return Error(v, "must be positive");
  }
  std::vector<std::string> primary_key;
  if (Has(at, "primary_key")) {
    RILL_ASSIGN_OR_RAISE(primary_key, Names(Child(at, "primary_key")));
  }
  if (type == "sql") {
    for (const char* key : {"left", "right", "keys", "right_keys", "join_type", "group_by",
                            "aggregations", "incremental", "retention"}) {
      if (at.node[key].IsDefined()) {
        return Error(Child(at, key), "only a join task takes '", key, "'");
      }
    }
    SqlTaskSpec spec{Ref(at), name, "", output, interval, primary_key};
    RILL_ASSIGN_OR_RAISE(spec.sql, RequiredStr(at, "sql"));
    p->sql_tasks.push_back(std::move(spec));
  } else if (type == "join") {
    if (at.node["sql"].IsDefined()) return Error(Child(at, "sql"), "a join task takes no 'sql'");
    JoinTaskSpec spec;
    spec.where = Ref(at);
    spec.options.name = name;
    spec.options.output_table = output;
    spec.options.interval_seconds = interval;
    spec.options.primary_key = primary_key;
    RILL_RETURN_NOT_OK(ParseJoin(at, &spec));
    p->join_tasks.push_back(std::move(spec));
  } else {
    return Error(Child(at, "type"), "unknown task type '", type, "' (expected sql or join)");
  }
  return Status::OK();
}

Status Parser::ParseKpi(const At& at, Pipeline* p) const {
  RILL_RETURN_NOT_OK(
      Keys(at, {"name", "sql", "interval_seconds", "chart_type", "x_col", "y_col"}));
  KpiSpec spec;
  spec.where = Ref(at);
  RILL_ASSIGN_OR_RAISE(spec.query.name, RequiredStr(at, "name"));
  RILL_ASSIGN_OR_RAISE(spec.query.sql, RequiredStr(at, "sql"));
  if (Has(at, "interval_seconds")) {
    RILL_ASSIGN_OR_RAISE(spec.query.interval_seconds, Num(Child(at, "interval_seconds")));
  }
  if (Has(at, "chart_type")) {
    At v = Child(at, "chart_type");
    RILL_ASSIGN_OR_RAISE(std::string text, Str(v));
    auto chart = ParseChartType(text);
    if (!chart.ok()) return Ref(v).Wrap(chart.status());
    spec.query.chart_type = *chart;
  }
  if (Has(at, "x_col")) {
    RILL_ASSIGN_OR_RAISE(spec.query.x_col, Str(Child(at, "x_col")));
  }
  if (Has(at, "y_col")) {
    RILL_ASSIGN_OR_RAISE(spec.query.y_col, Str(Child(at, "y_col")));
  }
  if (Status st = spec.query.Validate(); !st.ok()) return spec.where.Wrap(st);
  p->kpis.push_back(std::move(spec));
  return Status::OK();
}

Status Parser::ParseRule(const At& at, Pipeline* p) const {
  RILL_RETURN_NOT_OK(Keys(at, {"name", "metric", "op", "threshold", "cooldown_seconds",
                               "severity", "message", "enabled", "webhook"}));
  RuleSpec spec;
  spec.where = Ref(at);
  AlertRule& r = spec.rule;
  RILL_ASSIGN_OR_RAISE(r.name, RequiredStr(at, "name"));
  RILL_ASSIGN_OR_RAISE(r.metric, RequiredStr(at, "metric"));
  RILL_ASSIGN_OR_RAISE(std::string op, RequiredStr(at, "op"));
  auto parsed_op = ParseCompareOp(op);
  if (!parsed_op.ok()) return Ref(Child(at, "op")).Wrap(parsed_op.status());
  r.op = *parsed_op;
  if (!Has(at, "threshold")) return Error(at, "missing required key 'threshold'");
  RILL_ASSIGN_OR_RAISE(r.threshold, Num(Child(at, "threshold")));
  if (Has(at, "cooldown_seconds")) {
    RILL_ASSIGN_OR_RAISE(r.cooldown_seconds, Num(Child(at, "cooldown_seconds")));
  }
  if (Has(at, "severity")) {
    At v = Child(at, "severity");
    RILL_ASSIGN_OR_RAISE(std::string text, Str(v));
    auto severity = ParseSeverity(text);
    if (!severity.ok()) return Ref(v).Wrap(severity.status());
    r.severity = *severity;
  }
  if (Has(at, "message")) {
    RILL_ASSIGN_OR_RAISE(r.message, Str(Child(at, "message")));
  }
  if (Has(at, "enabled")) {
    RILL_ASSIGN_OR_RAISE(r.enabled, Bool(Child(at, "enabled")));
  }
  if (Has(at, "webhook")) {
    At hook = Child(at, "webhook");
    std::string url;
    if (hook.node.IsScalar()) {
      url = hook.node.Scalar();
    } else {
      RILL_RETURN_NOT_OK(Keys(hook, {"url", "format"}));
      RILL_ASSIGN_OR_RAISE(url, RequiredStr(hook, "url"));
      if (Has(hook, "format")) {
        RILL_ASSIGN_OR_RAISE(r.webhook_format, Str(Child(hook, "format")));
      }
    }
    if (url.rfind("http://", 0) != 0 && url.rfind("https://", 0) != 0) {
      return Error(hook, "webhook url must start with http:// or https://");
    }
    r.webhook = url;
  }
  if (Status st = r.Validate(); !st.ok()) return spec.where.Wrap(st);
  for (const RuleSpec& other : p->rules) {
    if (other.rule.name == r.name) {
      return Error(Child(at, "name"), "alert rule '", r.name, "' is declared twice");
    }
  }
  p->rules.push_back(std::move(spec));
  return Status::OK();
}

}  // namespace

std::string SourceRef::ToString() const {
  return file + ":" + std::to_string(line) + ": " + key;
}

Status SourceRef::Wrap(const Status& status) const {
  if (status.ok()) {
    return status;
  }
  return status.WithMessage(ToString(), ": ", status.message());
}

Result<Pipeline> ParsePipeline(const std::string& yaml, const std::string& file) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml);
  } catch (const YAML::Exception& e) {
    return Status::Invalid(file, ":", e.mark.line + 1, ": YAML syntax error: ", e.msg);
  }
  Pipeline p;
  p.file = file;
  Parser parser(file);
  At top{root, ""};
  if (root.IsNull() || !root.IsDefined()) {
    return p;  // an empty file is an empty pipeline
  }
  try {
    RILL_RETURN_NOT_OK(parser.Keys(top, {"engine", "metrics", "server", "tables", "connectors",
                                         "tasks", "kpis", "alert_rules"}));
    if (parser.Has(top, "engine")) {
      RILL_RETURN_NOT_OK(parser.ParseEngine(parser.Child(top, "engine"), &p));
    }
    if (parser.Has(top, "metrics")) {
      RILL_RETURN_NOT_OK(parser.ParseMetrics(parser.Child(top, "metrics"), &p));
    }
    if (parser.Has(top, "server")) {
      RILL_RETURN_NOT_OK(parser.ParseServer(parser.Child(top, "server"), &p));
    }
    RILL_RETURN_NOT_OK(
        parser.ForEach(top, "tables", [&](const At& at) { return parser.ParseTable(at, &p); }));
    RILL_RETURN_NOT_OK(parser.ForEach(
        top, "connectors", [&](const At& at) { return parser.ParseConnector(at, &p); }));
    RILL_RETURN_NOT_OK(
        parser.ForEach(top, "tasks", [&](const At& at) { return parser.ParseTask(at, &p); }));
    RILL_RETURN_NOT_OK(
        parser.ForEach(top, "kpis", [&](const At& at) { return parser.ParseKpi(at, &p); }));
    RILL_RETURN_NOT_OK(parser.ForEach(top, "alert_rules",
                                      [&](const At& at) { return parser.ParseRule(at, &p); }));
  } catch (const YAML::Exception& e) {
    return Status::Invalid(file, ":", e.mark.line + 1, ": ", e.msg);
  }
  return p;
}

Result<Pipeline> LoadPipeline(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return Status::IOError("cannot read pipeline file '", path, "'");
  }
  std::stringstream text;
  text << in.rdbuf();
  return ParsePipeline(text.str(), path);
}

}  // namespace rill::app
