// Parsing of pipeline files (the YAML described in pipeline.h).
#include "pipeline.h"
#include "pipeline_parser_internal.h"
#include "rill/pipeline/tables.h"

#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include <arrow/api.h>
#include <yaml-cpp/yaml.h>

#include "rill/table/schema.h"

namespace rill::app {
namespace pipeline_internal {
namespace {

Result<std::shared_ptr<arrow::DataType>> ParseType(std::string text) {
  return pipeline::ParseColumnType(std::move(text));
}

}  // namespace

Status Parser::ParseEngine(const At& at, Pipeline* p) const {
  RILL_RETURN_NOT_OK(Keys(at, {"trigger_interval_ms", "memory_budget_mb", "max_reject_rows",
                               "max_records_per_tick", "memory_budget_policy"}));
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
  if (Has(at, "memory_budget_policy")) {
    At v = Child(at, "memory_budget_policy");
    RILL_ASSIGN_OR_RAISE(std::string policy, Str(v));
    auto parsed = ParseMemoryBudgetPolicy(policy);
    if (!parsed.ok()) return Error(v, "must be 'warn' or 'shed', got '" + policy + "'");
    p->engine.memory_budget_policy = *parsed;
    if (*parsed == MemoryBudgetPolicy::kShed && p->engine.memory_budget_bytes <= 0) {
      return Error(v, "'shed' needs engine.memory_budget_mb > 0");
    }
  }
  if (Has(at, "max_reject_rows")) {
    RILL_ASSIGN_OR_RAISE(p->engine.max_reject_rows, Int(Child(at, "max_reject_rows")));
  }
  if (Has(at, "max_records_per_tick")) {
    At v = Child(at, "max_records_per_tick");
    RILL_ASSIGN_OR_RAISE(p->engine.max_records_per_tick, Int(v));
    if (p->engine.max_records_per_tick < 0) return Error(v, "must not be negative (0: no limit)");
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
  RILL_RETURN_NOT_OK(
      Keys(at, {"listen", "token", "admin_token", "allow_private_webhooks", "queue_db"}));
  if (Has(at, "admin_token")) {
    RILL_ASSIGN_OR_RAISE(p->server.admin_token, Str(Child(at, "admin_token")));
  }
  if (Has(at, "queue_db")) {
    RILL_ASSIGN_OR_RAISE(p->server.queue_db, Str(Child(at, "queue_db")));
  }
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

// checkpoint: {dir, interval_seconds, format, keep} — RillEngine's
// checkpoint_dir / checkpoint_interval_seconds (docs/checkpoints.md).
Status Parser::ParseCheckpoint(const At& at, Pipeline* p) const {
  RILL_RETURN_NOT_OK(Keys(at, {"dir", "interval_seconds", "format", "keep"}));
  CheckpointOptions o;
  RILL_ASSIGN_OR_RAISE(o.dir, RequiredStr(at, "dir"));
  if (Has(at, "interval_seconds")) {
    At v = Child(at, "interval_seconds");
    RILL_ASSIGN_OR_RAISE(o.interval_seconds, Num(v));
    if (!(o.interval_seconds > 0)) return Error(v, "must be > 0");
  }
  if (Has(at, "format")) {
    At v = Child(at, "format");
    RILL_ASSIGN_OR_RAISE(std::string text, Str(v));
    auto format = ParseCheckpointFormat(text);
    if (!format.ok()) return Ref(v).Wrap(format.status());
    o.format = *format;
  }
  if (Has(at, "keep")) {
    At v = Child(at, "keep");
    RILL_ASSIGN_OR_RAISE(int64_t keep, Int(v));
    if (keep < 1) return Error(v, "must be >= 1");
    o.keep = static_cast<int>(keep);
  }
  p->checkpoint = std::move(o);
  return Status::OK();
}

// cluster: {app_id, instance_id, bootstrap_servers, partitions_per_table,
// commit_interval_ms, session_timeout_ms, kafka_config} — RillEngine's
// app_id / instance_id / ... (docs/scale-out.md).
Status Parser::ParseCluster(const At& at, Pipeline* p) const {
  RILL_RETURN_NOT_OK(Keys(at, {"app_id", "instance_id", "bootstrap_servers",
                               "partitions_per_table", "commit_interval_ms",
                               "session_timeout_ms", "kafka_config", "leave_on_stop",
                               "exactly_once"}));
  cluster::ClusterOptions o;
  RILL_ASSIGN_OR_RAISE(o.app_id, RequiredStr(at, "app_id"));
  if (Has(at, "instance_id")) {
    RILL_ASSIGN_OR_RAISE(o.instance_id, Str(Child(at, "instance_id")));
  }
  if (Has(at, "bootstrap_servers")) {
    RILL_ASSIGN_OR_RAISE(o.bootstrap_servers, Str(Child(at, "bootstrap_servers")));
  }
  auto integer = [&](const char* key, auto* out) -> Status {
    if (!Has(at, key)) return Status::OK();
    RILL_ASSIGN_OR_RAISE(int64_t v, Int(Child(at, key)));
    *out = static_cast<std::remove_pointer_t<decltype(out)>>(v);
    return Status::OK();
  };
  RILL_RETURN_NOT_OK(integer("partitions_per_table", &o.partitions_per_table));
  RILL_RETURN_NOT_OK(integer("commit_interval_ms", &o.commit_interval_ms));
  RILL_RETURN_NOT_OK(integer("session_timeout_ms", &o.session_timeout_ms));
  if (Has(at, "exactly_once")) {
    RILL_ASSIGN_OR_RAISE(o.exactly_once, Bool(Child(at, "exactly_once")));
  }
  if (Has(at, "leave_on_stop")) {
    RILL_ASSIGN_OR_RAISE(o.leave_on_stop, Bool(Child(at, "leave_on_stop")));
  }
  if (Has(at, "kafka_config")) {
    At config = Child(at, "kafka_config");
    if (!config.node.IsMap()) return Error(config, "expected a mapping");
    for (const auto& kv : config.node) {
      RILL_ASSIGN_OR_RAISE(o.kafka_config[kv.first.Scalar()],
                           Str(Child(config, kv.first.Scalar())));
    }
  }
  // instance_id may come from `rill serve --instance-id` (checked at start).
  if (!o.instance_id.empty()) {
    Status st = cluster::ValidateClusterOptions(o);
    if (!st.ok()) return Error(at, st.message());
  }
  p->cluster = std::move(o);
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
  std::vector<std::string> keys = {"name", "columns", "schema"};
  for (const auto& d : pipeline::TableOptionTable().defs) keys.push_back(d.name);
  RILL_RETURN_NOT_OK(Keys(at, keys));
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
  // The rest through the tables' option table (src/rill/pipeline/tables.h),
  // shared with CREATE TABLE.
  pipeline::Options options;
  for (const auto& kv : at.node) {
    const std::string key = kv.first.Scalar();
    if (key == "name" || key == "columns" || key == "schema" || kv.second.IsNull()) continue;
    options.emplace_back(key, ToOption(Child(at, key)));
  }
  pipeline::TableDecl decl;
  decl.name = spec.name;
  decl.schema = spec.schema;
  RILL_RETURN_NOT_OK(pipeline::ReadTableOptions(options, spec.where.ToString(), &decl));
  spec.options = decl.options;
  p->tables.push_back(std::move(spec));
  return Status::OK();
}

}  // namespace pipeline_internal

using pipeline_internal::At;
using pipeline_internal::Parser;

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
    RILL_RETURN_NOT_OK(parser.Keys(top, {"engine", "metrics", "server", "checkpoint", "cluster", "tables",
                                         "connectors", "tasks", "stream_tasks", "windows", "kpis",
                                         "alert_rules", "sinks"}));
    if (parser.Has(top, "engine")) {
      RILL_RETURN_NOT_OK(parser.ParseEngine(parser.Child(top, "engine"), &p));
    }
    if (parser.Has(top, "metrics")) {
      RILL_RETURN_NOT_OK(parser.ParseMetrics(parser.Child(top, "metrics"), &p));
    }
    if (parser.Has(top, "server")) {
      RILL_RETURN_NOT_OK(parser.ParseServer(parser.Child(top, "server"), &p));
    }
    if (parser.Has(top, "cluster")) {
      RILL_RETURN_NOT_OK(parser.ParseCluster(parser.Child(top, "cluster"), &p));
    }
    if (parser.Has(top, "checkpoint")) {
      RILL_RETURN_NOT_OK(parser.ParseCheckpoint(parser.Child(top, "checkpoint"), &p));
    }
    RILL_RETURN_NOT_OK(
        parser.ForEach(top, "tables", [&](const At& at) { return parser.ParseTable(at, &p); }));
    RILL_RETURN_NOT_OK(parser.ForEach(
        top, "connectors", [&](const At& at) { return parser.ParseConnector(at, &p); }));
    RILL_RETURN_NOT_OK(
        parser.ForEach(top, "tasks", [&](const At& at) { return parser.ParseTask(at, &p); }));
    RILL_RETURN_NOT_OK(parser.ForEach(
        top, "stream_tasks", [&](const At& at) { return parser.ParseStreamTask(at, &p); }));
    RILL_RETURN_NOT_OK(parser.ForEach(
        top, "windows", [&](const At& at) { return parser.ParseWindow(at, &p); }));
    RILL_RETURN_NOT_OK(
        parser.ForEach(top, "kpis", [&](const At& at) { return parser.ParseKpi(at, &p); }));
    RILL_RETURN_NOT_OK(parser.ForEach(top, "alert_rules",
                                      [&](const At& at) { return parser.ParseRule(at, &p); }));
    // After tables and tasks: a sink names one of their tables.
    RILL_RETURN_NOT_OK(
        parser.ForEach(top, "sinks", [&](const At& at) { return parser.ParseSink(at, &p); }));
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