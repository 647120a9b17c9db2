#include "rill/pipeline/sources.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <arrow/type.h>

#include "rill/connector/memory_connector.h"
#include "rill/pipeline/option_docs.h"

namespace rill::pipeline {

namespace {

using Def = OptionDef<SourceDecl>;
using Table = OptionTable<SourceDecl>;

Status Positive(const char* what, double v) {
  if (!(v > 0)) return Status::Invalid(what, " must be > 0, got ", v);
  return Status::OK();
}
Status NonNegative(const char* what, int64_t v) {
  if (v < 0) return Status::Invalid(what, " must be >= 0, got ", v);
  return Status::OK();
}
Status NotEmpty(const char* what, const std::string& v) {
  if (v.empty()) return Status::Invalid(what, " must not be empty");
  return Status::OK();
}

// The options every kind takes.
void AddCommon(std::vector<Def>* defs, bool cdc) {
  defs->push_back({"name", OptionType::kString, "unique connector name (default: the target table)",
                   [](const Converted& v, SourceDecl* s) {
                     RILL_RETURN_NOT_OK(NotEmpty("name", v.s));
                     s->name = v.s;
                     return Status::OK();
                   }});
  defs->push_back({"target_table", OptionType::kString, "the Rill table the rows go to",
                   [](const Converted& v, SourceDecl* s) {
                     RILL_RETURN_NOT_OK(NotEmpty("target_table", v.s));
                     s->target_table = v.s;
                     return Status::OK();
                   },
                   false, cdc ? "" : "table"});
  defs->push_back({"max_buffer_records", OptionType::kInt,
                   "rows buffered before the overflow policy applies (0: unlimited)",
                   [](const Converted& v, SourceDecl* s) {
                     RILL_RETURN_NOT_OK(NonNegative("max_buffer_records", v.i));
                     s->limits.max_records = v.i;
                     return Status::OK();
                   },
                   false, "max_records"});
  if (cdc) return;
  defs->push_back({"max_buffer_bytes", OptionType::kInt,
                   "bytes buffered before the overflow policy applies (0: unlimited)",
                   [](const Converted& v, SourceDecl* s) {
                     RILL_RETURN_NOT_OK(NonNegative("max_buffer_bytes", v.i));
                     s->limits.max_bytes = v.i;
                     return Status::OK();
                   },
                   false, "max_bytes"});
  defs->push_back({"on_overflow", OptionType::kString,
                   "drop_oldest | drop_newest | error (backpressure)",
                   [](const Converted& v, SourceDecl* s) {
                     RILL_ASSIGN_OR_RAISE(s->limits.on_overflow, ParseOverflowPolicy(v.s));
                     return Status::OK();
                   }});
}

// The decoding options of the JSON-reading kinds.
void AddDecoding(std::vector<Def>* defs, bool avro) {
  defs->push_back(
      {"format", OptionType::kString,
       avro ? "json | debezium (the Debezium change-event envelope) | avro"
            : "json | debezium (the Debezium change-event envelope)",
       [avro](const Converted& v, SourceDecl* s) {
         if (avro && v.s == "avro") {
           s->kafka.format = "avro";
           return Status::OK();
         }
         auto f = ParseJsonFormat(v.s);
         if (!f.ok()) {
           return Status::Invalid("format must be json or debezium", avro ? " or avro" : "",
                                  ", got '", v.s, "'");
         }
         s->decode.format = *f;
         return Status::OK();
       }});
  defs->push_back({"op_column", OptionType::kString,
                   "a field of the records naming each row's operation (insert, update, delete, "
                   "truncate or c, u, d, r, t)",
                   [](const Converted& v, SourceDecl* s) {
                     RILL_RETURN_NOT_OK(NotEmpty("op_column", v.s));
                     s->decode.op_column = v.s;
                     return Status::OK();
                   }});
  defs->push_back({"ts_ms_column", OptionType::kString,
                   "format debezium: the column receiving each event's source.ts_ms",
                   [](const Converted& v, SourceDecl* s) {
                     RILL_RETURN_NOT_OK(NotEmpty("ts_ms_column", v.s));
                     s->decode.ts_ms_column = v.s;
                     return Status::OK();
                   }});
  defs->push_back({"unexpected_field_behavior", OptionType::kString,
                   "ignore (counted) | error (the record is rejected): fields not in the table",
                   [](const Converted& v, SourceDecl* s) {
                     if (v.s == "ignore" || v.s == "infer") {
                       s->decode.unknown_fields = UnknownFieldPolicy::kIgnore;
                     } else if (v.s == "error") {
                       s->decode.unknown_fields = UnknownFieldPolicy::kReject;
                     } else {
                       return Status::Invalid(
                           "unexpected_field_behavior must be ignore or error, got '", v.s, "'");
                     }
                     return Status::OK();
                   }});
}

Table MakeMemory() {
  Table t{"memory source", {}};
  AddCommon(&t.defs, false);
  t.defs.push_back({"op_column", OptionType::kString,
                    "a column of the pushed batches naming each row's operation",
                    [](const Converted& v, SourceDecl* s) {
                      RILL_RETURN_NOT_OK(NotEmpty("op_column", v.s));
                      s->op_column = v.s;
                      return Status::OK();
                    }});
  return t;
}

Table MakeJsonStream() {
  Table t{"json_stream source", {}};
  AddCommon(&t.defs, false);
  AddDecoding(&t.defs, false);
  t.defs.push_back({"block_size", OptionType::kInt, "the largest record (bytes)",
                    [](const Converted& v, SourceDecl* s) {
                      RILL_RETURN_NOT_OK(Positive("block_size", static_cast<double>(v.i)));
                      s->decode.max_record_bytes = v.i;
                      return Status::OK();
                    }});
  t.defs.push_back({"max_reject_bytes", OptionType::kInt,
                    "raw bytes kept per rejected record (default 4096)",
                    [](const Converted& v, SourceDecl* s) {
                      RILL_RETURN_NOT_OK(NonNegative("max_reject_bytes", v.i));
                      s->decode.max_raw_bytes = v.i;
                      return Status::OK();
                    }});
  return t;
}

Table MakeFile() {
  Table t{"file source", {}};
  AddCommon(&t.defs, false);
  AddDecoding(&t.defs, false);
  t.defs.push_back({"watch_path", OptionType::kString, "the folder to read files from",
                    [](const Converted& v, SourceDecl* s) {
                      RILL_RETURN_NOT_OK(NotEmpty("watch_path", v.s));
                      s->file.watch_path = v.s;
                      return Status::OK();
                    },
                    true});
  t.defs.push_back({"file_pattern", OptionType::kString,
                    "shell pattern of the file names (default *)",
                    [](const Converted& v, SourceDecl* s) {
                      RILL_RETURN_NOT_OK(NotEmpty("file_pattern", v.s));
                      s->file.file_pattern = v.s;
                      return Status::OK();
                    }});
  t.defs.push_back({"delete_after_process", OptionType::kBool,
                    "delete each file once its rows are applied",
                    [](const Converted& v, SourceDecl* s) {
                      s->file.delete_after_process = v.b;
                      return Status::OK();
                    }});
  t.defs.push_back({"tail", OptionType::kBool, "follow lines appended to NDJSON files",
                    [](const Converted& v, SourceDecl* s) {
                      s->file.tail = v.b;
                      return Status::OK();
                    }});
  t.defs.push_back({"poll_interval_seconds", OptionType::kNumber, "rescan period (default 0.2)",
                    [](const Converted& v, SourceDecl* s) {
                      RILL_RETURN_NOT_OK(Positive("poll_interval_seconds", v.d));
                      s->file.poll_interval_ms = std::max<int64_t>(1, std::llround(v.d * 1000));
                      return Status::OK();
                    }});
  t.defs.push_back({"stable_seconds", OptionType::kNumber,
                    "a file unchanged this long is complete (default 1)",
                    [](const Converted& v, SourceDecl* s) {
                      if (v.d < 0) return Status::Invalid("stable_seconds must be >= 0");
                      s->file.stable_ms = std::llround(v.d * 1000);
                      return Status::OK();
                    }});
  t.defs.push_back({"use_inotify", OptionType::kBool, "false: polling only",
                    [](const Converted& v, SourceDecl* s) {
                      s->file.use_inotify = v.b;
                      return Status::OK();
                    }});
  return t;
}

Table MakeWebSocket() {
  Table t{"websocket source", {}};
  AddCommon(&t.defs, false);
  AddDecoding(&t.defs, false);
  t.defs.push_back({"uri", OptionType::kString, "ws://HOST[:PORT]/PATH or wss://...",
                    [](const Converted& v, SourceDecl* s) {
                      RILL_RETURN_NOT_OK(NotEmpty("uri", v.s));
                      s->uri = v.s;
                      return Status::OK();
                    },
                    true});
  t.defs.push_back({"headers", OptionType::kStringMap, "extra handshake headers",
                    [](const Converted& v, SourceDecl* s) {
                      s->websocket.headers = v.map;
                      return Status::OK();
                    }});
  t.defs.push_back({"reconnect_initial_seconds", OptionType::kNumber,
                    "first reconnect backoff (default 1)",
                    [](const Converted& v, SourceDecl* s) {
                      RILL_RETURN_NOT_OK(Positive("reconnect_initial_seconds", v.d));
                      s->websocket.reconnect_initial_seconds = v.d;
                      return Status::OK();
                    }});
  t.defs.push_back({"reconnect_max_seconds", OptionType::kNumber,
                    "largest reconnect backoff (default 30)",
                    [](const Converted& v, SourceDecl* s) {
                      RILL_RETURN_NOT_OK(Positive("reconnect_max_seconds", v.d));
                      s->websocket.reconnect_max_seconds = v.d;
                      return Status::OK();
                    }});
  t.defs.push_back({"connect_timeout_seconds", OptionType::kNumber,
                    "connect + TLS + handshake deadline (default 10)",
                    [](const Converted& v, SourceDecl* s) {
                      RILL_RETURN_NOT_OK(Positive("connect_timeout_seconds", v.d));
                      s->websocket.connect_timeout_seconds = v.d;
                      return Status::OK();
                    }});
  t.defs.push_back({"max_message_bytes", OptionType::kInt,
                    "a larger message becomes a reject (default 64 MiB)",
                    [](const Converted& v, SourceDecl* s) {
                      RILL_RETURN_NOT_OK(Positive("max_message_bytes", static_cast<double>(v.i)));
                      s->websocket.max_message_bytes = v.i;
                      return Status::OK();
                    }});
  t.defs.push_back({"tls_verify", OptionType::kBool, "wss://: verify the certificate (default true)",
                    [](const Converted& v, SourceDecl* s) {
                      s->websocket.tls_verify = v.b;
                      return Status::OK();
                    }});
  t.defs.push_back({"ca_file", OptionType::kString, "wss://: extra CA certificates (PEM)",
                    [](const Converted& v, SourceDecl* s) {
                      s->websocket.ca_file = v.s;
                      return Status::OK();
                    }});
  return t;
}

Table MakeKafka() {
  Table t{"kafka source", {}, "kafka_config"};
  AddCommon(&t.defs, false);
  AddDecoding(&t.defs, true);
  t.defs.push_back({"topics", OptionType::kNames, "topic names ('a' or 'a, b' or a list)",
                    [](const Converted& v, SourceDecl* s) {
                      s->kafka.topics = v.names;
                      return Status::OK();
                    },
                    true, "topic"});
  t.defs.push_back({"kafka_config", OptionType::kStringMap,
                    "librdkafka properties (bootstrap.servers, group.id, security.*, ...); "
                    "dotted names among the options are gathered here",
                    [](const Converted& v, SourceDecl* s) {
                      for (const auto& [k, value] : v.map) s->kafka.config[k] = value;
                      return Status::OK();
                    }});
  t.defs.push_back({"start", OptionType::kString,
                    "committed (default) | earliest | latest | timestamp",
                    [](const Converted& v, SourceDecl* s) {
                      RILL_ASSIGN_OR_RAISE(s->kafka.start, ParseKafkaStart(v.s));
                      return Status::OK();
                    }});
  t.defs.push_back({"start_timestamp_ms", OptionType::kInt,
                    "start = timestamp: the first offset at or after this time",
                    [](const Converted& v, SourceDecl* s) {
                      s->kafka.start_timestamp_ms = v.i;
                      return Status::OK();
                    }});
  t.defs.push_back({"metadata_columns", OptionType::kBool,
                    "add _topic, _partition, _offset, _key, _timestamp",
                    [](const Converted& v, SourceDecl* s) {
                      s->kafka.metadata_columns = v.b;
                      return Status::OK();
                    }});
  t.defs.push_back({"application_group", OptionType::kBool,
                    "on an application's instance, read through the application's consumer "
                    "group (default true; false: a consumer of its own, every partition)",
                    [](const Converted& v, SourceDecl* s) {
                      s->kafka.application_group = v.b;
                      return Status::OK();
                    }});
  t.defs.push_back({"key_columns", OptionType::kNames,
                    "the columns the message key holds (tombstones delete them)",
                    [](const Converted& v, SourceDecl* s) {
                      s->kafka.key_columns = v.names;
                      return Status::OK();
                    }});
  t.defs.push_back({"key_format", OptionType::kString,
                    "json (default) | string (the key bytes are the one key column)",
                    [](const Converted& v, SourceDecl* s) {
                      RILL_ASSIGN_OR_RAISE(s->kafka.key_format, ParseKafkaKeyFormat(v.s));
                      return Status::OK();
                    }});
  t.defs.push_back({"schema_registry_url", OptionType::kString,
                    "format avro: the Confluent wire format, schemas from this registry",
                    [](const Converted& v, SourceDecl* s) {
                      s->kafka.avro.schema_registry_url = v.s;
                      return Status::OK();
                    }});
  t.defs.push_back({"schema_registry_user", OptionType::kString, "registry basic-auth user",
                    [](const Converted& v, SourceDecl* s) {
                      s->kafka.avro.schema_registry_user = v.s;
                      return Status::OK();
                    }});
  t.defs.push_back({"schema_registry_password", OptionType::kString,
                    "registry basic-auth password",
                    [](const Converted& v, SourceDecl* s) {
                      s->kafka.avro.schema_registry_password = v.s;
                      return Status::OK();
                    }});
  t.defs.push_back({"avro_schema", OptionType::kString,
                    "format avro without a registry: the writer schema (JSON text)",
                    [](const Converted& v, SourceDecl* s) {
                      s->kafka.avro.avro_schema = v.s;
                      return Status::OK();
                    }});
  return t;
}

Table MakePostgresCdc() {
  Table t{"postgres_cdc source", {}};
  AddCommon(&t.defs, true);
  t.defs.push_back({"dsn", OptionType::kString, "libpq connection string of the source",
                    [](const Converted& v, SourceDecl* s) {
                      RILL_RETURN_NOT_OK(NotEmpty("dsn", v.s));
                      s->postgres_cdc.dsn = v.s;
                      return Status::OK();
                    },
                    true});
  t.defs.push_back({"table", OptionType::kString, "the PostgreSQL table (name or schema.name)",
                    [](const Converted& v, SourceDecl* s) {
                      RILL_RETURN_NOT_OK(NotEmpty("table", v.s));
                      s->postgres_cdc.table = v.s;
                      return Status::OK();
                    },
                    true});
  t.defs.push_back({"slot_name", OptionType::kString, "the logical replication slot",
                    [](const Converted& v, SourceDecl* s) {
                      RILL_RETURN_NOT_OK(NotEmpty("slot_name", v.s));
                      s->postgres_cdc.slot_name = v.s;
                      return Status::OK();
                    },
                    true});
  t.defs.push_back({"publication", OptionType::kString,
                    "the publication (default rill_<slot_name>, created)",
                    [](const Converted& v, SourceDecl* s) {
                      s->postgres_cdc.publication = v.s;
                      return Status::OK();
                    }});
  t.defs.push_back({"snapshot", OptionType::kBool,
                    "take the initial snapshot when no position is checkpointed (default true)",
                    [](const Converted& v, SourceDecl* s) {
                      s->postgres_cdc.snapshot = v.b;
                      return Status::OK();
                    }});
  t.defs.push_back({"numeric_as", OptionType::kString, "decimal (default) | float64",
                    [](const Converted& v, SourceDecl* s) {
                      if (v.s != "decimal" && v.s != "float64") {
                        return Status::Invalid("numeric_as must be decimal or float64, got '",
                                               v.s, "'");
                      }
                      s->postgres_cdc.numeric_as = v.s;
                      return Status::OK();
                    }});
  t.defs.push_back({"status_interval_ms", OptionType::kInt,
                    "standby status updates and lag queries (default 1000)",
                    [](const Converted& v, SourceDecl* s) {
                      RILL_RETURN_NOT_OK(Positive("status_interval_ms", static_cast<double>(v.i)));
                      s->postgres_cdc.status_interval_ms = v.i;
                      return Status::OK();
                    }});
  t.defs.push_back({"lag_alert_bytes", OptionType::kInt,
                    "alert when the slot's lag passes this (0: never; default 1 GiB)",
                    [](const Converted& v, SourceDecl* s) {
                      RILL_RETURN_NOT_OK(NonNegative("lag_alert_bytes", v.i));
                      s->postgres_cdc.lag_alert_bytes = v.i;
                      return Status::OK();
                    }});
  return t;
}

const std::map<std::string, Table, std::less<>>& Tables() {
  static const auto* tables = new std::map<std::string, Table, std::less<>>{
      {"memory", MakeMemory()},       {"json_stream", MakeJsonStream()},
      {"file", MakeFile()},           {"websocket", MakeWebSocket()},
      {"kafka", MakeKafka()},         {"postgres_cdc", MakePostgresCdc()},
  };
  return *tables;
}

}  // namespace

const std::vector<std::string>& SourceKinds() {
  static const std::vector<std::string> kinds = {"memory",    "json_stream", "file",
                                                 "websocket", "kafka",       "postgres_cdc"};
  return kinds;
}

const OptionTable<SourceDecl>* SourceOptionTable(std::string_view kind) {
  auto it = Tables().find(kind);
  return it == Tables().end() ? nullptr : &it->second;
}

Result<SourceDecl> ReadSource(std::string_view kind, const Options& options,
                              const std::string& where, std::string target_table) {
  const OptionTable<SourceDecl>* table = SourceOptionTable(kind);
  if (table == nullptr) {
    std::string kinds;
    for (const auto& k : SourceKinds()) kinds += (kinds.empty() ? "" : ", ") + k;
    return options_internal::At(where, DeclError(kSqlStateBadValue,
                                                 "unknown connector '" + std::string(kind) +
                                                     "' (expected one of: " + kinds + ")"));
  }
  SourceDecl decl;
  decl.kind = std::string(kind);
  decl.target_table = std::move(target_table);
  if (kind == "postgres_cdc") decl.limits.on_overflow = OverflowPolicy::kError;
  RILL_RETURN_NOT_OK(ReadOptions(*table, options, where, &decl));
  if (decl.target_table.empty()) {
    return options_internal::At(
        where, DeclError(kSqlStateSyntax, "missing required option 'target_table' of a " +
                                              table->kind));
  }
  if (decl.name.empty()) decl.name = decl.target_table;
  decl.given = options;
  // Cross-option checks, as the Python classes make them.
  auto bad = [&](const std::string& message) {
    return options_internal::At(where, DeclError(kSqlStateBadValue, message));
  };
  if (!decl.decode.ts_ms_column.empty() && decl.decode.format != JsonFormat::kDebezium) {
    return bad("ts_ms_column needs format = 'debezium'");
  }
  if (kind == "kafka") {
    const bool avro = decl.kafka.format == "avro";
    const auto& a = decl.kafka.avro;
    if (avro && a.schema_registry_url.empty() == a.avro_schema.empty()) {
      return bad(
          "format 'avro' needs exactly one of schema_registry_url (the Confluent wire format) "
          "and avro_schema (plain Avro binary)");
    }
    if (!avro && (!a.schema_registry_url.empty() || !a.avro_schema.empty())) {
      return bad("schema_registry_url and avro_schema need format = 'avro'");
    }
    if (decl.kafka.start == KafkaStart::kTimestamp && decl.kafka.start_timestamp_ms == 0) {
      return bad("start = 'timestamp' needs start_timestamp_ms");
    }
  }
  return decl;
}

std::string SourceOptionsMarkdown() {
  std::string out;
  for (const std::string& kind : SourceKinds()) {
    out += OptionTableMarkdown(*SourceOptionTable(kind), "#### `type: " + kind + "`");
  }
  return out;
}

Result<std::shared_ptr<Connector>> MakeSource(const SourceDecl& decl,
                                              const std::shared_ptr<arrow::Schema>& schema) {
  const std::string& k = decl.kind;
  // The decoding kinds take the table's schema from the engine when added
  // (Connector::SetTargetSchema), as the Python classes do without one.
  const JsonDecodeOptions& decode = decl.decode;
  if (k == "memory") {
    auto c = std::make_shared<MemoryConnector>(decl.target_table, schema, decl.limits, decl.name);
    if (!decl.op_column.empty()) c->set_op_column(decl.op_column);
    return c;
  }
  if (k == "json_stream") {
    JsonStreamOptions o = decl.json_stream;
    o.decode = decode;
    o.limits = decl.limits;
    o.name = decl.name;
    RILL_ASSIGN_OR_RAISE(auto c, JsonStreamConnector::Make(decl.target_table, std::move(o)));
    return c;
  }
  if (k == "file") {
    FileStreamOptions o = decl.file;
    o.decode = decode;
    o.limits = decl.limits;
    o.name = decl.name;
    RILL_ASSIGN_OR_RAISE(auto c, FileStreamConnector::Make(decl.target_table, std::move(o)));
    return c;
  }
  if (k == "websocket") {
#ifdef RILL_NO_WEBSOCKET_CLIENT
    return Status::NotImplemented("this build (the fuzz preset) has no WebSocket client");
#else
    WebSocketOptions o = decl.websocket;
    o.decode = decode;
    o.limits = decl.limits;
    o.name = decl.name;
    RILL_ASSIGN_OR_RAISE(auto c, WebSocketConnector::Make(decl.target_table, decl.uri, std::move(o)));
    return c;
#endif
  }
  if (k == "kafka") {
    KafkaOptions o = decl.kafka;
    o.decode = decode;
    o.limits = decl.limits;
    o.name = decl.name;
    RILL_ASSIGN_OR_RAISE(auto c, KafkaConnector::Make(decl.target_table, std::move(o)));
    return c;
  }
  if (k == "postgres_cdc") {
    PostgresCDCOptions o = decl.postgres_cdc;
    o.max_buffer_records = decl.limits.max_records > 0 ? decl.limits.max_records
                                                       : o.max_buffer_records;
    o.name = decl.name;
    RILL_ASSIGN_OR_RAISE(auto c, PostgresCDCConnector::Make(decl.target_table, std::move(o)));
    return c;
  }
  return Status::Invalid("unknown connector kind '", k, "'");
}

}  // namespace rill::pipeline
