#include "rill/pipeline/sinks.h"

#include "rill/pipeline/option_docs.h"

#include <map>
#include <utility>

#include <arrow/type.h>

#include "rill/engine/engine.h"

namespace rill::pipeline {

namespace {

using Def = OptionDef<SinkDecl>;
using Table = OptionTable<SinkDecl>;

/// PostgreSQL's undefined_column (options.h has no constant for it).
constexpr char kSqlStateUndefinedColumn[] = "42703";

// Setter messages leave out the option's name: ReadOptions puts the value's
// place ("p.yaml:3: sinks[0].roll_rows" or "option 'roll_rows'") in front.
Status Positive(double v) {
  if (!(v > 0)) return Status::Invalid("must be positive, got ", v);
  return Status::OK();
}
Status NonNegative(int64_t v) {
  if (v < 0) return Status::Invalid("must not be negative, got ", v);
  return Status::OK();
}
Status NotEmpty(const std::string& v) {
  if (v.empty()) return Status::Invalid("must not be empty");
  return Status::OK();
}

// A string option stored into `field` of the spec, not empty.
template <typename Field>
Def StringOption(std::string name, std::string description, Field field,
                 bool required = false) {
  return {std::move(name), OptionType::kString, std::move(description),
          [field](const Converted& v, SinkDecl* s) {
            RILL_RETURN_NOT_OK(NotEmpty(v.s));
            field(s) = v.s;
            return Status::OK();
          },
          required};
}

// A number option stored into `field`, > 0.
template <typename Field>
Def PositiveNumber(std::string name, std::string description, Field field) {
  return {std::move(name), OptionType::kNumber, std::move(description),
          [field](const Converted& v, SinkDecl* s) {
            RILL_RETURN_NOT_OK(Positive(v.d));
            field(s) = v.d;
            return Status::OK();
          }};
}

// The options every kind takes (SinkOptions).
void AddCommon(std::vector<Def>* defs, const char* default_mode) {
  defs->push_back(
      StringOption("name", "unique sink name (the DDL's CREATE SINK name)",
                   [](SinkDecl* s) -> std::string& { return s->options.name; }));
  defs->push_back(
      StringOption("table", "the table whose changes are written (the DDL's FROM table)",
                   [](SinkDecl* s) -> std::string& { return s->options.table; }));
  defs->push_back(
      {"mode", OptionType::kString,
       std::string("changelog (every change, with _op and _version) | upsert (the "
                   "current row per key) | append (inserts only); default ") +
           default_mode,
       [](const Converted& v, SinkDecl* s) {
         RILL_ASSIGN_OR_RAISE(s->options.mode, ParseSinkMode(v.s));
         return Status::OK();
       }});
  defs->push_back(PositiveNumber(
      "interval_seconds", "write at least this often when there are changes (default 1)",
      [](SinkDecl* s) -> double& { return s->options.interval_seconds; }));
  defs->push_back({"max_batch_rows", OptionType::kInt,
                   "write as soon as this many change rows are pending (0: no bound; "
                   "default 100000)",
                   [](const Converted& v, SinkDecl* s) {
                     RILL_RETURN_NOT_OK(NonNegative(v.i));
                     s->options.max_batch_rows = v.i;
                     return Status::OK();
                   }});
  defs->push_back({"on_error", OptionType::kString,
                   "retry (with backoff and a bounded backlog, then backpressure) | drop",
                   [](const Converted& v, SinkDecl* s) {
                     RILL_ASSIGN_OR_RAISE(s->options.on_error, ParseSinkErrorPolicy(v.s));
                     return Status::OK();
                   }});
  defs->push_back(PositiveNumber(
      "retry_initial_seconds", "first wait between retries (doubling; default 0.1)",
      [](SinkDecl* s) -> double& { return s->options.retry_initial_seconds; }));
  defs->push_back(PositiveNumber(
      "retry_max_seconds", "longest wait between retries (default 10)",
      [](SinkDecl* s) -> double& { return s->options.retry_max_seconds; }));
  defs->push_back({"max_backlog_rows", OptionType::kInt,
                   "change rows held while the target fails, before backpressure "
                   "(default 1000000)",
                   [](const Converted& v, SinkDecl* s) {
                     RILL_RETURN_NOT_OK(Positive(static_cast<double>(v.i)));
                     s->options.max_backlog_rows = v.i;
                     return Status::OK();
                   }});
  defs->push_back({"emit_retention_deletes", OptionType::kBool,
                   "also write rows removed by the table's retention, as deletes",
                   [](const Converted& v, SinkDecl* s) {
                     s->options.emit_retention_deletes = v.b;
                     return Status::OK();
                   }});
}

Table MakeKafka() {
  Table t{"kafka sink", {}, "kafka_config"};
  AddCommon(&t.defs, "changelog");
  t.defs.push_back(StringOption(
      "topic", "the topic written to",
      [](SinkDecl* s) -> std::string& { return s->kafka.topic; },
      /*required=*/true));
  t.defs.push_back(
      {"kafka_config", OptionType::kStringMap,
       "librdkafka properties (bootstrap.servers, required; compression.type, "
       "security.*, ...); dotted names among the options are gathered here",
       [](const Converted& v, SinkDecl* s) {
         for (const auto& [k, value] : v.map) s->kafka.kafka_config[k] = value;
         return Status::OK();
       }});
  t.defs.push_back(
      {"format", OptionType::kString,
       "json (default) | avro (Confluent wire format; needs schema_registry_url)",
       [](const Converted& v, SinkDecl* s) {
         if (v.s != "json" && v.s != "avro") {
           return Status::Invalid("expected json or avro, got '", v.s, "'");
         }
         s->kafka.format = v.s;
         return Status::OK();
       }});
  t.defs.push_back({"key_columns", OptionType::kNames,
                    "the columns of the message key (default: the table's primary key)",
                    [](const Converted& v, SinkDecl* s) {
                      s->kafka.key_columns = v.names;
                      return Status::OK();
                    }});
  t.defs.push_back({"key_format", OptionType::kString,
                    "json (default: an object) | string (the one key column's value)",
                    [](const Converted& v, SinkDecl* s) {
                      if (v.s != "json" && v.s != "string") {
                        return Status::Invalid("expected json or string, got '", v.s,
                                               "'");
                      }
                      s->kafka.key_format = v.s;
                      return Status::OK();
                    }});
  t.defs.push_back({"exactly_once", OptionType::kBool,
                    "a transactional producer committing once per checkpoint",
                    [](const Converted& v, SinkDecl* s) {
                      s->kafka.exactly_once = v.b;
                      return Status::OK();
                    }});
  t.defs.push_back(StringOption(
      "transactional_id", "the producer's transactional.id (default rill-<name>)",
      [](SinkDecl* s) -> std::string& { return s->kafka.transactional_id; }));
  t.defs.push_back(StringOption(
      "schema_registry_url", "format avro: the schema registry (http(s)://host:port)",
      [](SinkDecl* s) -> std::string& { return s->kafka.schema_registry_url; }));
  t.defs.push_back(StringOption(
      "schema_registry_user", "registry basic-auth user",
      [](SinkDecl* s) -> std::string& { return s->kafka.schema_registry_user; }));
  t.defs.push_back(StringOption(
      "schema_registry_password", "registry basic-auth password",
      [](SinkDecl* s) -> std::string& { return s->kafka.schema_registry_password; }));
  return t;
}

Table MakePostgres() {
  Table t{"postgres sink", {}};
  AddCommon(&t.defs, "upsert");
  t.defs.push_back(StringOption(
      "dsn", "libpq connection string or URI of the target",
      [](SinkDecl* s) -> std::string& { return s->postgres.dsn; },
      /*required=*/true));
  t.defs.push_back(StringOption(
      "target_table", "the PostgreSQL table (name or schema.name)",
      [](SinkDecl* s) -> std::string& { return s->postgres.target_table; },
      /*required=*/true));
  t.defs.push_back(
      {"create_table", OptionType::kBool,
       "create the target table when missing (upsert: with the key as PRIMARY KEY)",
       [](const Converted& v, SinkDecl* s) {
         s->postgres.create_table = v.b;
         return Status::OK();
       }});
  t.defs.push_back(PositiveNumber(
      "connect_timeout_seconds", "libpq's connect_timeout (default 10)",
      [](SinkDecl* s) -> double& { return s->postgres.connect_timeout_seconds; }));
  return t;
}

Table MakeFile() {
  Table t{"file sink", {}};
  AddCommon(&t.defs, "changelog; never upsert");
  t.defs.push_back(StringOption(
      "path", "the output directory (created if missing)",
      [](SinkDecl* s) -> std::string& { return s->file.path; },
      /*required=*/true));
  t.defs.push_back(
      {"format", OptionType::kString, "parquet (default) | ndjson | csv | arrow",
       [](const Converted& v, SinkDecl* s) {
         if (v.s != "parquet" && v.s != "ndjson" && v.s != "csv" && v.s != "arrow") {
           return Status::Invalid("expected parquet, ndjson, csv or arrow, got '", v.s,
                                  "'");
         }
         s->file.format = v.s;
         return Status::OK();
       }});
  t.defs.push_back({"partition_by", OptionType::kNames,
                    "Hive partition columns, outermost first",
                    [](const Converted& v, SinkDecl* s) {
                      s->file.partition_by = v.names;
                      return Status::OK();
                    }});
  t.defs.push_back({"roll_rows", OptionType::kInt,
                    "rows per file at most (default 1000000)",
                    [](const Converted& v, SinkDecl* s) {
                      if (v.i < 1)
                        return Status::Invalid("must be at least 1, got ", v.i);
                      s->file.roll_rows = v.i;
                      return Status::OK();
                    }});
  t.defs.push_back(PositiveNumber(
      "roll_seconds", "a file older than this is closed at the next write (default 60)",
      [](SinkDecl* s) -> double& { return s->file.roll_seconds; }));
  return t;
}

const std::map<std::string, Table, std::less<>>& Tables() {
  static const auto* tables = new std::map<std::string, Table, std::less<>>{
      {"kafka", MakeKafka()}, {"postgres", MakePostgres()}, {"file", MakeFile()}};
  return *tables;
}

// The place of option `name` as given, else `fallback` (the declaration's).
const std::string& WhereOf(const Options& options, std::string_view name,
                           const std::string& fallback) {
  for (const auto& [n, value] : options) {
    if (n == name && !value.where.empty()) return value.where;
  }
  return fallback;
}

// `given` (the parameter) and the option of the same name must agree; the
// option fills an empty parameter.
Status Merge(const char* option, const std::string& given, std::string* value,
             const Options& options, const std::string& where, const std::string& kind) {
  if (given.empty()) {
    if (value->empty()) {
      return options_internal::At(
          where, DeclError(kSqlStateSyntax, std::string("missing required option '") +
                                                option + "' of a " + kind));
    }
    return Status::OK();
  }
  if (!value->empty() && *value != given) {
    return options_internal::At(
        WhereOf(options, option, where),
        DeclError(kSqlStateSyntax, std::string("option '") + option + "' is '" + *value +
                                       "' but the statement says '" + given + "'"));
  }
  *value = given;
  return Status::OK();
}

// The checks of options that go together (each names the option at fault).
Status CheckTogether(const SinkDecl& decl, const Options& options,
                     const std::string& where) {
  auto bad = [&](std::string_view option, const std::string& message) {
    return options_internal::At(WhereOf(options, option, where),
                                DeclError(kSqlStateBadValue, message));
  };
  const SinkOptions& o = decl.options;
  if (o.retry_max_seconds < o.retry_initial_seconds) {
    return bad("retry_max_seconds",
               "retry_max_seconds must not be below retry_initial_seconds");
  }
  if (decl.kind == "file" && o.mode == SinkMode::kUpsert) {
    return bad(
        "mode",
        "a file sink cannot upsert (a file cannot replace a key's earlier row); use "
        "changelog or append");
  }
  if (decl.kind == "kafka") {
    const KafkaSinkOptions& k = decl.kafka;
    auto servers = k.kafka_config.find("bootstrap.servers");
    if (servers == k.kafka_config.end() || servers->second.empty()) {
      return options_internal::At(
          WhereOf(options, "kafka_config", where),
          DeclError(
              kSqlStateSyntax,
              "missing required option 'bootstrap.servers' of a kafka sink (among the "
              "options or in kafka_config)"));
    }
    if (k.format == "avro" && k.schema_registry_url.empty()) {
      return bad(
          "format",
          "avro needs schema_registry_url (the registry the schema is registered in)");
    }
    if (k.key_format == "string" && k.key_columns.size() > 1) {
      return bad("key_format", "'string' needs one key column, key_columns has " +
                                   std::to_string(k.key_columns.size()));
    }
  }
  return Status::OK();
}

Result<std::unique_ptr<SinkWriter>> MakeWriter(const SinkDecl& decl) {
  if (decl.kind == "kafka") return MakeKafkaSinkWriter(decl.kafka);
  if (decl.kind == "postgres") return MakePostgresSinkWriter(decl.postgres);
  if (decl.kind == "file") return MakeFileSinkWriter(decl.file);
  return DeclError(kSqlStateBadValue, "unknown sink kind '" + decl.kind + "'");
}

// A status without SQLSTATE as a bad value (22023), prefixed with the sink.
Status AsDeclError(const Status& st, const std::string& name) {
  if (st.ok()) return st;
  Status coded = SqlStateOf(st).empty() ? DeclError(kSqlStateBadValue, st.message()) : st;
  return PrefixError(coded, "sink '" + name + "'");
}

}  // namespace

const std::vector<std::string>& SinkKinds() {
  static const std::vector<std::string> kinds = {"kafka", "postgres", "file"};
  return kinds;
}

const OptionTable<SinkDecl>* SinkOptionTable(std::string_view kind) {
  auto it = Tables().find(kind);
  return it == Tables().end() ? nullptr : &it->second;
}

Result<SinkDecl> ReadSink(std::string_view kind, const Options& options,
                          const std::string& where, std::string name, std::string table) {
  const OptionTable<SinkDecl>* option_table = SinkOptionTable(kind);
  if (option_table == nullptr) {
    std::string kinds;
    for (const auto& k : SinkKinds()) kinds += (kinds.empty() ? "" : ", ") + k;
    return options_internal::At(
        where,
        DeclError(kSqlStateBadValue, "unknown sink connector '" + std::string(kind) +
                                         "' (expected one of: " + kinds + ")"));
  }
  SinkDecl decl;
  decl.kind = std::string(kind);
  if (kind == "postgres")
    decl.options.mode = SinkMode::kUpsert;  // rills.sinks.PostgresSink's
  RILL_RETURN_NOT_OK(ReadOptions(*option_table, options, where, &decl));
  RILL_RETURN_NOT_OK(
      Merge("name", name, &decl.options.name, options, where, option_table->kind));
  RILL_RETURN_NOT_OK(
      Merge("table", table, &decl.options.table, options, where, option_table->kind));
  RILL_RETURN_NOT_OK(CheckTogether(decl, options, where));
  if (kind == "kafka" && decl.kafka.transactional_id.empty()) {
    // Stable across restarts (exactly_once fences an earlier producer of the id).
    decl.kafka.transactional_id = "rill-" + decl.options.name;
  }
  if (kind == "postgres") {
    decl.postgres.sink_name = decl.options.name;
    decl.postgres.mode = decl.options.mode;
  }
  decl.given = options;
  return decl;
}

std::string SinkOptionsMarkdown() {
  std::string out;
  for (const std::string& kind : SinkKinds()) {
    out += OptionTableMarkdown(*SinkOptionTable(kind), "#### `type: " + kind + "`");
  }
  return out;
}

Result<std::shared_ptr<Sink>> StartSink(const SinkDecl& decl, Engine* engine) {
  const SinkOptions& o = decl.options;
  auto found = engine->GetTable(o.table);
  if (!found.ok()) {
    return DeclError(kSqlStateUndefined,
                     "sink '" + o.name + "': table '" + o.table + "' does not exist");
  }
  const LiveTable& table = **found;
  SinkSet& sinks = SinkSet::For(engine);
  if (sinks.Find(o.name) != nullptr) {
    return DeclError(kSqlStateDuplicate, "sink '" + o.name + "' exists");
  }
  const bool file = decl.kind == "file";
  const std::vector<std::string>& columns =
      file ? decl.file.partition_by : decl.kafka.key_columns;
  if (file || decl.kind == "kafka") {
    for (const std::string& column : columns) {
      if (table.user_schema()->GetFieldIndex(column) < 0) {
        return DeclError(kSqlStateUndefinedColumn,
                         "sink '" + o.name +
                             "': " + (file ? "partition_by" : "key_columns") +
                             ": no column '" + column + "' in table '" + o.table + "'");
      }
    }
  }
  if (o.mode == SinkMode::kUpsert && table.primary_key().empty()) {
    return DeclError(kSqlStateBadValue,
                     "sink '" + o.name +
                         "': mode upsert needs a table with a primary key; '" + o.table +
                         "' has none (use changelog or append)");
  }
  auto writer = MakeWriter(decl);
  RILL_RETURN_NOT_OK(AsDeclError(writer.status(), o.name));
  auto sink = sinks.Add(o, std::move(writer).ValueUnsafe());
  // Add prefixes its own messages with the sink's name.
  if (!sink.ok()) {
    const Status& st = sink.status();
    return SqlStateOf(st).empty() ? DeclError(kSqlStateBadValue, st.message()) : st;
  }
  return sink;
}

}  // namespace rill::pipeline
