// Parsing of the connectors, tasks, kpis and alert_rules sections of a
// pipeline file.
#include <algorithm>
#include <initializer_list>
#include <string_view>

#include <arrow/api.h>

#include "pipeline_parser_internal.h"
#include "rill/pipeline/tasks.h"

namespace rill::app::pipeline_internal {

namespace {

/// The entries of the YAML mapping `at` as declared options, leaving out the
/// keys in `skip` and those whose value is null (absent, as Parser::Has).
Result<pipeline::Options> MappingOptions(const Parser& parser, const At& at,
                                         std::initializer_list<const char*> skip) {
  if (!at.node.IsMap()) return parser.Error(at, "expected a mapping");
  pipeline::Options options;
  for (const auto& kv : at.node) {
    const std::string key = kv.first.Scalar();
    if (kv.second.IsNull() ||
        std::find(skip.begin(), skip.end(), std::string_view(key)) != skip.end()) {
      continue;
    }
    options.emplace_back(key, parser.ToOption(parser.Child(at, key)));
  }
  return options;
}

}  // namespace

Status Parser::ParseGeneratorColumn(const At& c, GeneratorColumnSpec* col) const {
  using Kind = GeneratorColumnSpec::Kind;
  if (c.node.IsScalar()) {
    if (c.node.Scalar() != "now" && c.node.Scalar() != "sequence") {
      return Error(c, "expected now, sequence or a mapping {sequence | random_int | "
                      "random_float | choice | constant: ...}");
    }
    col->kind = c.node.Scalar() == "now" ? Kind::kNow : Kind::kSequence;
    return Status::OK();
  }
  RILL_RETURN_NOT_OK(Keys(c, {"sequence", "random_int", "random_float", "choice", "weights",
                              "constant", "now"}));
  auto range = [&](const char* key, Kind kind) -> Status {
    At r = Child(c, key);
    if (!r.node.IsSequence() || r.node.size() != 2) return Error(r, "expected [LO, HI]");
    RILL_ASSIGN_OR_RAISE(col->lo, Num(Item(r, 0)));
    RILL_ASSIGN_OR_RAISE(col->hi, Num(Item(r, 1)));
    if (col->hi < col->lo) return Error(r, "HI must not be below LO");
    col->kind = kind;
    return Status::OK();
  };
  if (Has(c, "sequence")) {
    col->kind = Kind::kSequence;
    At s = Child(c, "sequence");
    if (s.node.IsMap()) {
      RILL_RETURN_NOT_OK(Keys(s, {"start", "step"}));
      if (Has(s, "start")) {
        RILL_ASSIGN_OR_RAISE(col->start, Int(Child(s, "start")));
      }
      if (Has(s, "step")) {
        RILL_ASSIGN_OR_RAISE(col->step, Int(Child(s, "step")));
      }
    } else {
      RILL_ASSIGN_OR_RAISE(col->start, Int(s));
    }
  } else if (Has(c, "random_int")) {
    RILL_RETURN_NOT_OK(range("random_int", Kind::kRandomInt));
  } else if (Has(c, "random_float")) {
    RILL_RETURN_NOT_OK(range("random_float", Kind::kRandomFloat));
  } else if (Has(c, "choice")) {
    col->kind = Kind::kChoice;
    At list = Child(c, "choice");
    if (!list.node.IsSequence() || list.node.size() == 0) {
      return Error(list, "expected a non-empty list of values");
    }
    for (size_t i = 0; i < list.node.size(); ++i) {
      RILL_ASSIGN_OR_RAISE(std::string v, Str(Item(list, i)));
      col->choices.push_back(std::move(v));
    }
    if (Has(c, "weights")) {
      At w = Child(c, "weights");
      if (!w.node.IsSequence() || w.node.size() != col->choices.size()) {
        return Error(w, "expected one weight per choice (", col->choices.size(), ")");
      }
      for (size_t i = 0; i < w.node.size(); ++i) {
        RILL_ASSIGN_OR_RAISE(double weight, Num(Item(w, i)));
        if (weight < 0) return Error(Item(w, i), "weights must not be negative");
        col->weights.push_back(weight);
      }
    }
  } else if (Has(c, "constant")) {
    col->kind = Kind::kConstant;
    RILL_ASSIGN_OR_RAISE(std::string v, Str(Child(c, "constant")));
    col->choices.push_back(std::move(v));
  } else if (c.node["now"].IsDefined()) {
    col->kind = Kind::kNow;
  } else {
    return Error(c, "expected one of sequence, random_int, random_float, choice, constant");
  }
  return Status::OK();
}

Status Parser::ParseGenerator(const At& at, const TableSpec& table, GeneratorSpec* spec) const {
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
    RILL_RETURN_NOT_OK(ParseGeneratorColumn(c, &spec->columns[name]));
  }
  for (const auto& field : table.schema->fields()) {
    if (!field->nullable() && spec->columns.count(field->name()) == 0) {
      return Error(columns, "no spec for non-nullable column '", field->name(), "'");
    }
  }
  return Status::OK();
}

// Connectors: `type` picks the kind. The generator is the binary's own (its
// keys are read here); every other kind reads its options through the kind's
// option table (src/rill/pipeline/sources.h), the one the SQL DDL's CREATE
// SOURCE uses too, so both accept the same names with the same checks.
Status Parser::ParseConnector(const At& at, Pipeline* p) const {
  if (!at.node.IsMap()) return Error(at, "expected a mapping");
  ConnectorSpec spec;
  spec.where = Ref(at);
  RILL_ASSIGN_OR_RAISE(spec.type, RequiredStr(at, "type"));
  const bool generator = spec.type == "generator";
  if (generator) {
    RILL_RETURN_NOT_OK(Keys(at, {"name", "type", "table", "max_records", "max_bytes",
                                 "on_overflow", "rows_per_second", "interval_ms", "seed",
                                 "columns"}));
    RILL_ASSIGN_OR_RAISE(spec.table, RequiredStr(at, "table"));
    spec.name = spec.table;
    if (Has(at, "name")) {
      RILL_ASSIGN_OR_RAISE(spec.name, Str(Child(at, "name")));
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
  } else {
    if (pipeline::SourceOptionTable(spec.type) == nullptr) {
      std::string kinds = "generator";
      for (const auto& k : pipeline::SourceKinds()) kinds += ", " + k;
      return Error(Child(at, "type"), "unknown connector type '", spec.type,
                   "' (available: ", kinds, ")");
    }
    pipeline::Options options;
    for (const auto& kv : at.node) {
      const std::string key = kv.first.Scalar();
      if (key == "type") continue;
      options.emplace_back(key, ToOption(At{kv.second, at.path + "." + key}));
    }
    RILL_ASSIGN_OR_RAISE(spec.source,
                         pipeline::ReadSource(spec.type, options, Ref(at).ToString()));
    spec.table = spec.source.target_table;
    spec.name = spec.source.name;
    spec.limits = spec.source.limits;
  }
  const TableSpec* table = nullptr;
  for (const TableSpec& t : p->tables) {
    if (t.name == spec.table) table = &t;
  }
  if (table == nullptr) {
    const char* key = Has(at, "target_table") ? "target_table" : "table";
    return Error(Child(at, key), "unknown table '", spec.table, "' (declare it under 'tables')");
  }
  if (generator) {
    RILL_RETURN_NOT_OK(ParseGenerator(at, *table, &spec.generator));
  }
  for (const ConnectorSpec& other : p->connectors) {
    if (other.name == spec.name) {
      return Error(at, "connector '", spec.name, "' is declared twice");
    }
  }
  p->connectors.push_back(std::move(spec));
  return Status::OK();
}

// Stream tasks, SQL tasks, KPIs and alert rules read their options through the
// kinds' option tables (src/rill/pipeline/tasks.h), the ones the DDL's CREATE
// STREAM VIEW / MATERIALIZED VIEW / KPI / ALERT RULE use too.
Status Parser::ParseStreamTask(const At& at, Pipeline* p) const {
  RILL_ASSIGN_OR_RAISE(pipeline::Options options, MappingOptions(*this, at, {}));
  RILL_ASSIGN_OR_RAISE(auto decl, pipeline::ReadStreamView(options, Ref(at).ToString()));
  for (const StreamTaskSpec& other : p->stream_tasks) {
    if (other.name == decl.name) {
      return Error(Child(at, "name"), "stream task '", decl.name, "' is declared twice");
    }
  }
  p->stream_tasks.push_back(StreamTaskSpec{Ref(at), decl.name, decl.sql, decl.source,
                                           decl.output, decl.retention,
                                           decl.interval_seconds, std::move(decl.given)});
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
    RILL_RETURN_NOT_OK(ForEachAggregation(
        aggs, "{column: function}",
        [&](const At& where, const std::string& column, const std::string& fn) {
          return add(where, column, fn);
        },
        [&](const At& item, const std::string& column, const std::string& fn) {
          return add(Child(item, "function"), column, fn);
        }));
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
  if (!at.node.IsMap()) return Error(at, "expected a mapping");
  std::string type = Has(at, "sql") ? "sql" : "join";
  if (Has(at, "type")) {
    RILL_ASSIGN_OR_RAISE(type, Str(Child(at, "type")));
  }
  if (type == "sql") {
    // `incremental` is a key of both (a join's boolean; a view's auto/true/false).
    for (const char* key : {"left", "right", "keys", "right_keys", "join_type", "group_by",
                            "aggregations", "retention"}) {
      if (at.node[key].IsDefined()) {
        return Error(Child(at, key), "only a join task takes '", key, "'");
      }
    }
    RILL_ASSIGN_OR_RAISE(pipeline::Options options, MappingOptions(*this, at, {"type"}));
    RILL_ASSIGN_OR_RAISE(auto decl,
                         pipeline::ReadMaterializedView(options, Ref(at).ToString()));
    p->sql_tasks.push_back(SqlTaskSpec{Ref(at), decl.name, decl.sql, decl.output,
                                       decl.interval_seconds, decl.primary_key,
                                       std::move(decl.given), decl.incremental, decl.scope,
                                       decl.app_id, decl.bootstrap_servers});
    return Status::OK();
  }
  RILL_RETURN_NOT_OK(
      Keys(at, {"name", "type", "sql", "output", "interval_seconds", "primary_key",
                "left", "right", "keys", "right_keys", "join_type", "group_by",
                "aggregations", "incremental", "retention"}));
  RILL_ASSIGN_OR_RAISE(std::string name, RequiredStr(at, "name"));
  if (type != "join") {
    return Error(Child(at, "type"), "unknown task type '", type, "' (expected sql or join)");
  }
  if (at.node["sql"].IsDefined()) {
    return Error(Child(at, "sql"), "a join task takes no 'sql'");
  }
  JoinTaskSpec spec;
  spec.where = Ref(at);
  spec.options.name = name;
  spec.options.output_table = name;
  if (Has(at, "output")) {
    RILL_ASSIGN_OR_RAISE(spec.options.output_table, Str(Child(at, "output")));
  }
  if (Has(at, "interval_seconds")) {
    At v = Child(at, "interval_seconds");
    RILL_ASSIGN_OR_RAISE(spec.options.interval_seconds, Num(v));
    if (spec.options.interval_seconds <= 0) return Error(v, "must be positive");
  }
  if (Has(at, "primary_key")) {
    RILL_ASSIGN_OR_RAISE(spec.options.primary_key, Names(Child(at, "primary_key")));
  }
  RILL_RETURN_NOT_OK(ParseJoin(at, &spec));
  p->join_tasks.push_back(std::move(spec));
  return Status::OK();
}

Status Parser::ParseKpi(const At& at, Pipeline* p) const {
  RILL_ASSIGN_OR_RAISE(pipeline::Options options, MappingOptions(*this, at, {}));
  RILL_ASSIGN_OR_RAISE(auto decl, pipeline::ReadKpi(options, Ref(at).ToString()));
  p->kpis.push_back(KpiSpec{Ref(at), std::move(decl.query), std::move(decl.given)});
  return Status::OK();
}

Status Parser::ParseRule(const At& at, Pipeline* p) const {
  RILL_ASSIGN_OR_RAISE(pipeline::Options options, MappingOptions(*this, at, {"webhook"}));
  // The mapping form of the webhook, {url, format}, is the options webhook and
  // webhook_format (the DDL's spelling).
  if (Has(at, "webhook")) {
    At hook = Child(at, "webhook");
    if (hook.node.IsMap()) {
      RILL_RETURN_NOT_OK(Keys(hook, {"url", "format"}));
      if (!Has(hook, "url")) return Error(hook, "missing required key 'url'");
      options.emplace_back("webhook", ToOption(Child(hook, "url")));
      if (Has(hook, "format")) {
        options.emplace_back("webhook_format", ToOption(Child(hook, "format")));
      }
    } else {
      options.emplace_back("webhook", ToOption(hook));
    }
  }
  RILL_ASSIGN_OR_RAISE(auto decl, pipeline::ReadAlertRule(options, Ref(at).ToString()));
  for (const RuleSpec& other : p->rules) {
    if (other.rule.name == decl.rule.name) {
      return Error(Child(at, "name"), "alert rule '", decl.rule.name,
                   "' is declared twice");
    }
  }
  p->rules.push_back(RuleSpec{Ref(at), std::move(decl.rule), std::move(decl.given)});
  return Status::OK();
}

}  // namespace rill::app::pipeline_internal
