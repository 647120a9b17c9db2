#include "rill/pipeline/tasks.h"

#include "rill/pipeline/option_docs.h"

#include <cmath>
#include <optional>

#include "rill/engine/event.h"

namespace rill::pipeline {

namespace {

Status Positive(const char* what, double v) {
  if (!(v > 0)) return Status::Invalid(what, " must be > 0, got ", v);
  return Status::OK();
}
Status NonNegative(const char* what, double v) {
  if (!(v >= 0)) return Status::Invalid(what, " must be >= 0, got ", v);
  return Status::OK();
}
Status NotEmpty(const char* what, const std::string& v) {
  if (v.empty()) return Status::Invalid(what, " must not be empty");
  return Status::OK();
}

// A string option that must not be empty; `field` picks the string of the
// spec it sets.
template <typename Spec, typename Field>
OptionDef<Spec> TextOption(const char* name, std::string description, Field field,
                           bool required = false) {
  return {name, OptionType::kString, std::move(description),
          [name, field](const Converted& v, Spec* s) {
            RILL_RETURN_NOT_OK(NotEmpty(name, v.s));
            field(s) = v.s;
            return Status::OK();
          },
          required};
}
// The `name` and `sql` options (YAML only: the DDL's statement gives them).
template <typename Spec, typename Field>
OptionDef<Spec> NameOption(std::string description, Field field) {
  return TextOption<Spec>("name", std::move(description), field);
}
template <typename Spec, typename Field>
OptionDef<Spec> SqlOption(std::string description, Field field) {
  return TextOption<Spec>("sql", std::move(description), field);
}

// `options` without those a DDL statement gives (name; sql when `has_sql`),
// refusing one the statement gave that is among the options too.
Result<Options> SplitStatementOptions(const Options& options, const std::string& where,
                                      const std::string& name, const std::string& sql,
                                      bool has_sql = true) {
  Options given;
  for (const auto& [key, value] : options) {
    const bool statement_key = key == "name" || (has_sql && key == "sql");
    if ((key == "name" && !name.empty()) || (key == "sql" && !sql.empty())) {
      return options_internal::At(
          value.where.empty() ? where : value.where,
          DeclError(kSqlStateSyntax, "option '" + key + "' is given twice (" +
                                         (key == "name" ? "the statement names it"
                                                        : "AS gives the query") +
                                         ")"));
    }
    if (!statement_key) given.emplace_back(key, value);
  }
  return given;
}

Status Missing(const std::string& where, const std::string& option,
               const std::string& kind) {
  return options_internal::At(
      where, DeclError(kSqlStateSyntax,
                       "missing required option '" + option + "' of a " + kind));
}

// A check of the whole declaration (a model type's Validate) as a bad value.
Status BadDeclaration(const std::string& where, const Status& status) {
  if (status.ok()) return status;
  return options_internal::At(where, DeclError(kSqlStateBadValue, status.message()));
}

// Parse the scalar `text` of entry `key` of a mapping option as `type`.
Result<Converted> ConvertEntry(const std::string& map_name, const std::string& key,
                               const std::string& text, OptionType type) {
  auto converted = Convert(OptionValue::Scalar(text), type);
  if (!converted.ok()) {
    return DeclError(kSqlStateBadValue,
                     map_name + "." + key + ": " + converted.status().message());
  }
  return converted;
}

// The flat max_rows / max_age_seconds and retention's set the same limits:
// one of them may be given.
Status SetRetentionRows(int64_t rows, StreamViewDecl* s) {
  if (s->retention.max_rows) {
    return DeclError(kSqlStateSyntax, "max_rows is given twice (flat and in retention)");
  }
  s->retention.max_rows = rows;
  return Status::OK();
}

Status SetRetentionAge(double seconds, StreamViewDecl* s) {
  if (s->retention.max_age_seconds) {
    return DeclError(kSqlStateSyntax,
                     "max_age_seconds is given twice (flat and in retention)");
  }
  s->retention.max_age_seconds = seconds;
  return Status::OK();
}

OptionTable<MaterializedViewDecl> MakeMaterializedViewTable() {
  using Spec = MaterializedViewDecl;
  OptionTable<Spec> t{"materialized view", {}};
  t.defs.push_back(
      NameOption<Spec>("the view's name (required; SQL: `CREATE MATERIALIZED VIEW name`)",
                       [](Spec* s) -> std::string& { return s->name; }));
  t.defs.push_back(
      SqlOption<Spec>("the query over the live tables (required; SQL: `AS query`)",
                      [](Spec* s) -> std::string& { return s->sql; }));
  t.defs.push_back(TextOption<Spec>("output", "the table that holds the result (default: the name)",
                                    [](Spec* s) -> std::string& { return s->output; }));
  t.defs.push_back({"interval_seconds", OptionType::kNumber,
                    "seconds between runs (default 1)", [](const Converted& v, Spec* s) {
                      RILL_RETURN_NOT_OK(Positive("interval_seconds", v.d));
                      s->interval_seconds = v.d;
                      return Status::OK();
                    }});
  t.defs.push_back({"primary_key", OptionType::kNames,
                    "key columns of the output table ('a' or 'a, b' or a list)",
                    [](const Converted& v, Spec* s) {
                      s->primary_key = v.names;
                      return Status::OK();
                    }});
  t.defs.push_back({"scope", OptionType::kString,
                    "local (default): over this engine's tables | global: over every instance "
                    "of the application (an aggregate; docs/scale-out.md, \"Global views\")",
                    [](const Converted& v, Spec* s) {
                      if (v.s != "local" && v.s != "global") {
                        return Status::Invalid("scope must be local or global, got '", v.s,
                                               "'");
                      }
                      s->scope = v.s;
                      return Status::OK();
                    }});
  t.defs.push_back(TextOption<Spec>(
      "app_id",
      "scope global: read this application's view without being its instance "
      "(the query's table declared here with its columns)",
      [](Spec* s) -> std::string& { return s->app_id; }));
  t.defs.push_back(TextOption<Spec>(
      "bootstrap_servers", "with app_id: the application's Kafka cluster (host:port,...)",
      [](Spec* s) -> std::string& { return s->bootstrap_servers; }));
  // A string, not a boolean: it has a third value (YAML's true / false arrive
  // as their text and parse here alike).
  t.defs.push_back(
      {"incremental", OptionType::kString,
       "auto (default): maintained from the tables' changes when the query allows, "
       "else re-run (SHOW's `maintenance` counter says which and why) | true: always "
       "maintained; a query that cannot be is refused (SQLSTATE 0A000) | false: the "
       "query is re-run every interval",
       [](const Converted& v, Spec* s) {
         RILL_ASSIGN_OR_RAISE(s->incremental, ParseIncrementalMode(v.s));
         return Status::OK();
       }});
  return t;
}

OptionTable<StreamViewDecl> MakeStreamViewTable() {
  using Spec = StreamViewDecl;
  OptionTable<Spec> t{"stream view", {}};
  t.defs.push_back(
      NameOption<Spec>("the view's name (required; SQL: `CREATE STREAM VIEW name`)",
                       [](Spec* s) -> std::string& { return s->name; }));
  t.defs.push_back(SqlOption<Spec>(
      "the query; `source` names only the rows it received since the previous run "
      "(required; SQL: `AS query`)",
      [](Spec* s) -> std::string& { return s->sql; }));
  t.defs.push_back(TextOption<Spec>("source", "the table whose new rows the query reads",
                                    [](Spec* s) -> std::string& { return s->source; },
                                    /*required=*/true));
  t.defs.push_back(TextOption<Spec>("output",
                                    "the append table the results go to (default: the name)",
                                    [](Spec* s) -> std::string& { return s->output; }));
  t.defs.push_back(
      {"retention", OptionType::kStringMap,
       "{max_rows, max_age_seconds, time_column} of the output (or max_rows / "
       "max_age_seconds)",
       [](const Converted& v, Spec* s) {
         for (const auto& [key, text] : v.map) {
           if (key == "max_rows") {
             RILL_ASSIGN_OR_RAISE(auto c,
                                  ConvertEntry("retention", key, text, OptionType::kInt));
             RILL_RETURN_NOT_OK(SetRetentionRows(c.i, s));
           } else if (key == "max_age_seconds") {
             RILL_ASSIGN_OR_RAISE(
                 auto c, ConvertEntry("retention", key, text, OptionType::kNumber));
             RILL_RETURN_NOT_OK(SetRetentionAge(c.d, s));
           } else if (key == "time_column") {
             RILL_RETURN_NOT_OK(NotEmpty("retention.time_column", text));
             s->retention.time_column = text;
           } else {
             return DeclError(
                 kSqlStateSyntax,
                 "unknown retention option '" + key +
                     "' (expected one of: max_rows, max_age_seconds, time_column)");
           }
         }
         return Status::OK();
       }});
  t.defs.push_back(
      {"max_rows", OptionType::kInt, "keep at most this many output rows",
       [](const Converted& v, Spec* s) { return SetRetentionRows(v.i, s); }});
  t.defs.push_back({"max_age_seconds", OptionType::kNumber,
                    "drop output rows older than this",
                    [](const Converted& v, Spec* s) { return SetRetentionAge(v.d, s); }});
  t.defs.push_back({"interval_seconds", OptionType::kNumber,
                    "seconds between runs (default 0: every tick)",
                    [](const Converted& v, Spec* s) {
                      RILL_RETURN_NOT_OK(NonNegative("interval_seconds", v.d));
                      s->interval_seconds = v.d;
                      return Status::OK();
                    }});
  return t;
}

OptionTable<KpiDecl> MakeKpiTable() {
  using Spec = KpiDecl;
  OptionTable<Spec> t{"KPI", {}};
  t.defs.push_back(
      NameOption<Spec>("the KPI's name (required; SQL: `CREATE KPI name`)",
                       [](Spec* s) -> std::string& { return s->query.name; }));
  t.defs.push_back(
      SqlOption<Spec>("the query over the live tables (required; SQL: `AS query`)",
                      [](Spec* s) -> std::string& { return s->query.sql; }));
  // Checked with the whole query (KpiQuery::Validate, below).
  t.defs.push_back({"interval_seconds", OptionType::kNumber,
                    "seconds between runs (default 1)", [](const Converted& v, Spec* s) {
                      s->query.interval_seconds = v.d;
                      return Status::OK();
                    }});
  t.defs.push_back({"chart_type", OptionType::kString, "line (default) | bar | scatter",
                    [](const Converted& v, Spec* s) {
                      RILL_ASSIGN_OR_RAISE(s->query.chart_type, ParseChartType(v.s));
                      return Status::OK();
                    }});
  t.defs.push_back({"x_col", OptionType::kString,
                    "the chart's x column (default ts: the time of the result)",
                    [](const Converted& v, Spec* s) {
                      s->query.x_col = v.s;
                      return Status::OK();
                    }});
  t.defs.push_back({"y_col", OptionType::kString,
                    "the column holding the KPI value (default: the first numeric one)",
                    [](const Converted& v, Spec* s) {
                      s->query.y_col = v.s;
                      return Status::OK();
                    }});
  return t;
}

OptionTable<AlertRuleDecl> MakeAlertRuleTable() {
  using Spec = AlertRuleDecl;
  // "of a " + kind reads in messages (options.h), hence no bare "alert rule".
  OptionTable<Spec> t{"threshold alert rule", {}};
  t.defs.push_back(
      NameOption<Spec>("the rule's name (required; SQL: `CREATE ALERT RULE name`)",
                       [](Spec* s) -> std::string& { return s->rule.name; }));
  t.defs.push_back(TextOption<Spec>(
      "metric",
      "the value watched: a KPI, a business metric or a system metric "
      "(cpu_usage, table.NAME.rows, task.NAME.errors, ...)",
      [](Spec* s) -> std::string& { return s->rule.metric; }, /*required=*/true));
  t.defs.push_back({"op", OptionType::kString, "> | >= | < | <= | == | !=",
                    [](const Converted& v, Spec* s) {
                      RILL_ASSIGN_OR_RAISE(s->rule.op, ParseCompareOp(v.s));
                      return Status::OK();
                    },
                    true});
  t.defs.push_back({"threshold", OptionType::kNumber, "the value compared with",
                    [](const Converted& v, Spec* s) {
                      s->rule.threshold = v.d;
                      return Status::OK();
                    },
                    true});
  t.defs.push_back({"cooldown_seconds", OptionType::kNumber,
                    "silence after firing (default 60)", [](const Converted& v, Spec* s) {
                      RILL_RETURN_NOT_OK(NonNegative("cooldown_seconds", v.d));
                      s->rule.cooldown_seconds = v.d;
                      return Status::OK();
                    }});
  t.defs.push_back({"severity", OptionType::kString, "info | warning (default) | error",
                    [](const Converted& v, Spec* s) {
                      RILL_ASSIGN_OR_RAISE(s->rule.severity, ParseSeverity(v.s));
                      return Status::OK();
                    }});
  t.defs.push_back({"message", OptionType::kString,
                    "the alert's message (default: \"METRIC OP THRESHOLD (value V)\")",
                    [](const Converted& v, Spec* s) {
                      s->rule.message = v.s;
                      return Status::OK();
                    }});
  t.defs.push_back({"enabled", OptionType::kBool, "false: declared but never fires",
                    [](const Converted& v, Spec* s) {
                      s->rule.enabled = v.b;
                      return Status::OK();
                    }});
  t.defs.push_back({"webhook", OptionType::kString,
                    "an http:// or https:// URL the alert is POSTed to (YAML: also "
                    "{url, format})",
                    [](const Converted& v, Spec* s) {
                      if (v.s.rfind("http://", 0) != 0 && v.s.rfind("https://", 0) != 0) {
                        return Status::Invalid(
                            "webhook url must start with http:// or https://");
                      }
                      s->rule.webhook = v.s;
                      return Status::OK();
                    }});
  // Checked with the whole rule (AlertRule::Validate, below).
  t.defs.push_back({"webhook_format", OptionType::kString,
                    "the webhook message's shape: slack | google_chat | custom (default)",
                    [](const Converted& v, Spec* s) {
                      s->rule.webhook_format = v.s;
                      return Status::OK();
                    }});
  return t;
}

template <typename Spec>
std::string MarkdownTable(const std::string& heading, const OptionTable<Spec>& table) {
  return OptionTableMarkdown(table, "#### " + heading);
}

}  // namespace

const OptionTable<MaterializedViewDecl>& MaterializedViewOptionTable() {
  static const auto* table =
      new OptionTable<MaterializedViewDecl>(MakeMaterializedViewTable());
  return *table;
}

const OptionTable<StreamViewDecl>& StreamViewOptionTable() {
  static const auto* table = new OptionTable<StreamViewDecl>(MakeStreamViewTable());
  return *table;
}

const OptionTable<KpiDecl>& KpiOptionTable() {
  static const auto* table = new OptionTable<KpiDecl>(MakeKpiTable());
  return *table;
}

const OptionTable<AlertRuleDecl>& AlertRuleOptionTable() {
  static const auto* table = new OptionTable<AlertRuleDecl>(MakeAlertRuleTable());
  return *table;
}

Result<MaterializedViewDecl> ReadMaterializedView(const Options& options,
                                                  const std::string& where,
                                                  std::string name, std::string sql) {
  const auto& table = MaterializedViewOptionTable();
  RILL_ASSIGN_OR_RAISE(Options given, SplitStatementOptions(options, where, name, sql));
  MaterializedViewDecl decl;
  decl.name = std::move(name);
  decl.sql = std::move(sql);
  RILL_RETURN_NOT_OK(ReadOptions(table, options, where, &decl));
  if (decl.name.empty()) return Missing(where, "name", table.kind);
  if (decl.sql.empty()) return Missing(where, "sql", table.kind);
  if (decl.output.empty()) decl.output = decl.name;
  decl.given = std::move(given);
  return decl;
}

Result<StreamViewDecl> ReadStreamView(const Options& options, const std::string& where,
                                      std::string name, std::string sql) {
  const auto& table = StreamViewOptionTable();
  RILL_ASSIGN_OR_RAISE(Options given, SplitStatementOptions(options, where, name, sql));
  StreamViewDecl decl;
  decl.name = std::move(name);
  decl.sql = std::move(sql);
  RILL_RETURN_NOT_OK(ReadOptions(table, options, where, &decl));
  if (decl.name.empty()) return Missing(where, "name", table.kind);
  if (decl.sql.empty()) return Missing(where, "sql", table.kind);
  if (!decl.retention.enabled()) {
    return options_internal::At(
        where, DeclError(kSqlStateSyntax,
                         "a stream view's output is an append table: give max_rows or "
                         "max_age_seconds (or retention)"));
  }
  RILL_RETURN_NOT_OK(BadDeclaration(where, decl.retention.Validate()));
  if (decl.output.empty()) decl.output = decl.name;
  decl.given = std::move(given);
  return decl;
}

Result<KpiDecl> ReadKpi(const Options& options, const std::string& where,
                        std::string name, std::string sql) {
  const auto& table = KpiOptionTable();
  RILL_ASSIGN_OR_RAISE(Options given, SplitStatementOptions(options, where, name, sql));
  KpiDecl decl;
  decl.query.name = std::move(name);
  decl.query.sql = std::move(sql);
  RILL_RETURN_NOT_OK(ReadOptions(table, options, where, &decl));
  if (decl.query.name.empty()) return Missing(where, "name", table.kind);
  if (decl.query.sql.empty()) return Missing(where, "sql", table.kind);
  RILL_RETURN_NOT_OK(BadDeclaration(where, decl.query.Validate()));
  decl.given = std::move(given);
  return decl;
}

Result<AlertRuleDecl> ReadAlertRule(const Options& options, const std::string& where,
                                    std::string name) {
  const auto& table = AlertRuleOptionTable();
  // A rule has no query: an `sql` option is an unknown one (ReadOptions).
  RILL_ASSIGN_OR_RAISE(
      Options given, SplitStatementOptions(options, where, name, "", /*has_sql=*/false));
  AlertRuleDecl decl;
  decl.rule.name = std::move(name);
  RILL_RETURN_NOT_OK(ReadOptions(table, options, where, &decl));
  if (decl.rule.name.empty()) return Missing(where, "name", table.kind);
  RILL_RETURN_NOT_OK(BadDeclaration(where, decl.rule.Validate()));
  decl.given = std::move(given);
  return decl;
}

std::string TaskOptionsMarkdown() {
  return MarkdownTable("`CREATE MATERIALIZED VIEW` / `tasks:` (type: sql)",
                       MaterializedViewOptionTable()) +
         MarkdownTable("`CREATE STREAM VIEW` / `stream_tasks:`",
                       StreamViewOptionTable()) +
         MarkdownTable("`CREATE KPI` / `kpis:`", KpiOptionTable()) +
         MarkdownTable("`CREATE ALERT RULE` / `alert_rules:`", AlertRuleOptionTable());
}

Result<std::shared_ptr<ScheduledSqlTask>> MakeMaterializedView(
    const MaterializedViewDecl& decl) {
  if (decl.name.empty() || decl.sql.empty() || decl.output.empty()) {
    return Status::Invalid(
        "a materialized view needs a name, a query and an output table");
  }
  if (!std::isfinite(decl.interval_seconds) || decl.interval_seconds <= 0) {
    return Status::Invalid("materialized view '", decl.name,
                           "': interval_seconds must be > 0, got ",
                           decl.interval_seconds);
  }
  return std::make_shared<ScheduledSqlTask>(
      decl.name, decl.sql, decl.output, decl.interval_seconds, decl.primary_key,
      /*use_prepared_statements=*/true, /*retention=*/std::nullopt, decl.incremental);
}

Result<std::shared_ptr<StreamSqlTask>> MakeStreamView(const StreamViewDecl& decl,
                                                      Engine* engine) {
  return StreamSqlTask::Make(decl.name, decl.sql, engine, decl.source, decl.output,
                             decl.retention, decl.interval_seconds);
}

}  // namespace rill::pipeline
