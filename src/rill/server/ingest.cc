#include "rill/server/ingest.h"

#include <chrono>
#include <cmath>
#include <mutex>
#include <thread>

#include <boost/json.hpp>

#include "rill/connector/avro_source.h"
#include "rill/connector/json_stream_connector.h"
#include "rill/engine/engine.h"
#include "rill/server/ingest_internal.h"
#include "rill/server/json_body.h"
#include "rill/table/live_table.h"
#include "rill/common/row_ops.h"

namespace rill::server {

namespace json = boost::json;

namespace {

constexpr std::string_view kIngestPrefix = "/api/v1/ingest/";
/// Tables the engine keeps for itself; ingest refuses them.
constexpr std::string_view kSystemTablePrefix = "rill_";
/// Rejects echoed in a reply (all of them are in rill_rejects).
constexpr int64_t kReplyRejects = 10;

bool TableKnown(Engine& engine, const std::string& table) {
  return engine.GetTable(table).ok() || engine.TableDeclaration(table).has_value();
}

std::shared_ptr<JsonStreamConnector> FindConnector(Engine& engine, const std::string& table) {
  std::shared_ptr<JsonStreamConnector> first;
  for (const auto& c : engine.Connectors()) {
    if (c->target_table() != table) continue;
    auto json = std::dynamic_pointer_cast<JsonStreamConnector>(c);
    if (!json) continue;
    if (json->name() == "http:" + table) return json;
    if (!first) first = json;
  }
  return first;
}

/// The connector rows for `table` go into, adding `http:<table>` when the
/// table has none. Serialized so that concurrent first requests add one.
Result<std::shared_ptr<JsonStreamConnector>> ConnectorFor(ServerContext& ctx,
                                                          const std::string& table) {
  if (auto found = FindConnector(*ctx.engine, table)) return found;
  static std::mutex create_mu;
  std::lock_guard<std::mutex> lock(create_mu);
  if (auto found = FindConnector(*ctx.engine, table)) return found;
  JsonStreamOptions options;
  options.name = "http:" + table;
  options.limits.max_records = ctx.options.ingest_max_buffer_records;
  options.limits.max_bytes = ctx.options.ingest_max_buffer_bytes;
  options.limits.on_overflow = OverflowPolicy::kError;
  RILL_ASSIGN_OR_RAISE(auto connector, JsonStreamConnector::Make(table, options));
  RILL_RETURN_NOT_OK(ctx.engine->AddConnector(connector));
  return connector;
}

/// Where the rows of one push went. A push holds the buffer positions
/// [first, end) (FIFO); the buffer's front advances by drains (rows the
/// engine took) and, under drop_oldest, by drops. Sampling the connector's
/// drained and dropped counters (read together, under the buffer's lock) and
/// intersecting each advance of the front with [first, end) tells how many of
/// the push's rows were dropped: exactly, unless one sampling interval holds
/// both drains and drops that touch the push (then `uncertain` counts the rows
/// that may have gone either way).
struct PushFate {
  int64_t first = 0;
  int64_t end = 0;
  int64_t front = 0;  // drained + dropped at the last sample
  int64_t drained = 0;
  int64_t dropped_total = 0;
  int64_t dropped = 0;    // rows of the push dropped for sure
  int64_t uncertain = 0;  // rows of the push that may have been dropped

  void Start(const ConnectorStats& before) {
    drained = before.drained_records;
    dropped_total = before.dropped_records;
    front = drained + dropped_total;
  }

  /// Account for the front's advance up to `now` (drop_oldest buffers only).
  void Sample(const ConnectorStats& now) {
    const int64_t drains = now.drained_records - drained;
    const int64_t drops = now.dropped_records - dropped_total;
    const int64_t next = front + drains + drops;
    const int64_t overlap = std::max<int64_t>(0, std::min(next, end) - std::max(front, first));
    if (overlap > 0 && drops > 0) {
      if (drains == 0) {
        dropped += overlap;
      } else {
        const int64_t at_least = std::max<int64_t>(0, overlap - drains);
        dropped += at_least;
        uncertain += std::min(overlap, drops) - at_least;
      }
    }
    front = next;
    drained = now.drained_records;
    dropped_total = now.dropped_records;
  }

  bool settled() const { return front >= end; }
};

/// Wait until the tick that drained the push `sequence` has published; false
/// on timeout. Ticks are counted after the tables publish (Engine::GetMetrics).
/// With `fate` (drop_oldest buffers), follow which rows of the push the buffer
/// dropped meanwhile.
bool WaitPublished(ServerContext& ctx, const JsonStreamConnector& connector,
                   int64_t sequence, double timeout_seconds, PushFate* fate) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(timeout_seconds));
  int64_t target = -1;
  while (true) {
    const int64_t ticks = ctx.engine->GetMetrics().ticks;
    if (target < 0) {
      bool settled = connector.IsSettled(sequence);
      if (fate != nullptr) {
        fate->Sample(connector.stats());
        settled = fate->settled();
      }
      // No tick completed between the two reads: the draining tick is at most
      // the one after `ticks` (the one running now, if any).
      if (settled && ctx.engine->GetMetrics().ticks == ticks) target = ticks + 1;
    } else if (ticks >= target) {
      return true;
    }
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

json::object ReceiptJson(const std::string& table, const JsonStreamConnector& connector,
                         const PushReceipt& receipt) {
  json::object out;
  out["table"] = table;
  out["connector"] = connector.name();
  out["records"] = receipt.records;
  out["accepted"] = receipt.accepted;
  out["rejected"] = receipt.rejected;
  out["dropped"] = receipt.dropped;
  json::array errors;
  for (const auto& r : receipt.first_rejects) {
    errors.push_back(json::object{{"position", r.position}, {"error", r.error}});
  }
  out["errors"] = std::move(errors);
  return out;
}

HttpReply BufferFull(ServerContext& ctx, const Status& status) {
  HttpReply reply = ErrorReply(429, status.message());
  const int64_t seconds = std::max<int64_t>(
      1, static_cast<int64_t>(std::ceil(ctx.engine->options().trigger_interval_ms / 1000.0)));
  reply.headers.emplace_back("Retry-After", std::to_string(seconds));
  return reply;
}

/// Decode an Arrow IPC or CSV body (JSON is decoded by the connector's push).
/// Invalid for a bad body, CapacityError when it inflates beyond the bound.
Result<std::vector<std::shared_ptr<arrow::RecordBatch>>> DecodeBatches(
    ServerContext& ctx, IngestFormat format, std::string_view body, const std::string& table) {
  if (format == IngestFormat::kCsv) {
    std::shared_ptr<arrow::Schema> schema;
    if (auto t = ctx.engine->GetTable(table); t.ok()) schema = (*t)->schema();
    return ReadCsvBody(body, schema);
  }
  return ReadIpcBody(body, ctx.options.max_ingest_decompressed_bytes);
}

/// Decode an Avro body: an object container file, or Confluent-framed records
/// one after another (with ServerOptions::schema_registry_url). Invalid (400)
/// for a body that cannot be read at all, IOError (502) when the registry
/// cannot be asked.
Result<AvroDecodeResult> DecodeAvroBody(ServerContext& ctx, std::string_view body,
                                        const std::string& table) {
  std::shared_ptr<AvroSource> source;
  const bool container = body.substr(0, 4) == std::string_view("Obj\x01", 4);
  if (!container) {
    if (ctx.options.schema_registry_url.empty()) {
      return Status::Invalid(
          "an Avro body that is not an object container file (\"Obj\\x01…\") is read in "
          "the Confluent wire format, which needs the server's schema_registry_url");
    }
    std::lock_guard<std::mutex> lock(ctx.avro_mu);
    if (!ctx.avro_source) {
      AvroSourceOptions o;
      o.schema_registry_url = ctx.options.schema_registry_url;
      o.schema_registry_user = ctx.options.schema_registry_user;
      o.schema_registry_password = ctx.options.schema_registry_password;
      RILL_ASSIGN_OR_RAISE(ctx.avro_source, AvroSource::Make(o));
    }
    source = ctx.avro_source;
  }
  AvroDecodeOptions options;
  if (auto t = ctx.engine->GetTable(table); t.ok()) options.schema = (*t)->schema();
  RILL_ASSIGN_OR_RAISE(auto decoder, AvroDecoder::Make(std::move(options)));
  return DecodeAvroInput(source.get(), decoder.get(), body);
}

}  // namespace

HttpReply Ingest(ServerContext& ctx, const IngestRequest& request) {
  if (request.table.rfind(kSystemTablePrefix, 0) == 0) {
    // rill_rejects, rill_alerts, rill_metrics ...: written by the engine only;
    // a client must not forge reject rows or alerts.
    return ErrorReply(403, "table '" + request.table + "' is a system table (rill_*): "
                           "only the engine writes to it");
  }
  if (!TableKnown(*ctx.engine, request.table)) {
    return ErrorReply(404, "no table named '" + request.table + "'");
  }
  auto format = IngestFormatOf(request.content_type);
  if (!format.ok()) return ErrorReply(415, format.status().message());
  std::string inflated;
  std::string_view body = request.body;
  if (request.gzip) {
    auto out = Gunzip(body, ctx.options.max_ingest_decompressed_bytes);
    if (!out.ok()) return StatusReply(out.status());  // 413 over the bound, 400 corrupt
    inflated = std::move(*out);
    body = inflated;
  }
  std::vector<std::shared_ptr<arrow::RecordBatch>> batches;
  std::vector<RejectedRecord> avro_rejects;
  if (*format != IngestFormat::kJson) {
    if (request.push_format.format != JsonFormat::kJson) {
      return ErrorReply(415, "format=debezium takes JSON bodies (NDJSON or a JSON array)");
    }
    if (*format == IngestFormat::kAvro) {
      auto decoded = DecodeAvroBody(ctx, body, request.table);
      if (!decoded.ok()) {
        // 502: the schema registry could not be asked.
        if (decoded.status().IsIOError()) return ErrorReply(502, decoded.status().message());
        return StatusReply(decoded.status());
      }
      if (decoded->batch) batches.push_back(decoded->batch);
      avro_rejects = std::move(decoded->rejects);
    } else {
      auto decoded = DecodeBatches(ctx, *format, body, request.table);
      // 400 for a body that cannot be read, 413 beyond the decompression bound.
      if (!decoded.ok()) return StatusReply(decoded.status());
      batches = std::move(*decoded);
    }
    if (!request.push_format.op_column.empty()) {
      for (auto& b : batches) {
        auto renamed = RenameOpColumn(b, request.push_format.op_column);
        if (!renamed.ok()) return StatusReply(renamed.status());
        b = std::move(*renamed);
      }
    }
  }
  auto connector = ConnectorFor(ctx, request.table);
  if (!connector.ok()) return StatusReply(connector.status());
  const bool drop_oldest = (*connector)->limits().on_overflow == OverflowPolicy::kDropOldest;
  PushFate fate;
  if (drop_oldest) fate.Start((*connector)->stats());
  auto receipt = *format != IngestFormat::kJson
                     ? (*connector)->PushBatches(batches, std::move(avro_rejects), kReplyRejects)
                 : request.has_push_format
                     ? (*connector)->Push(body, kReplyRejects, request.push_format)
                     : (*connector)->Push(body, kReplyRejects);
  if (!receipt.ok()) {
    if (receipt.status().IsCapacityError()) return BufferFull(ctx, receipt.status());
    return StatusReply(receipt.status());
  }
  if (drop_oldest) {
    // The push's rows are the last `accepted` ones pushed; the push itself may
    // have dropped some of them already (a push larger than the buffer).
    fate.end = receipt->sequence;
    fate.first = receipt->sequence - receipt->accepted;
    fate.Sample((*connector)->stats());
  }
  double timeout = 0;
  bool published = false;
  if (request.wait) {
    timeout = request.timeout_seconds > 0 ? request.timeout_seconds
                                          : ctx.options.ingest_wait_timeout_seconds;
    published = WaitPublished(ctx, **connector, receipt->sequence, timeout,
                              drop_oldest ? &fate : nullptr);
  }
  // Rows the buffer dropped (drop_newest at once, drop_oldest at once or
  // while waiting) are not accepted: records = accepted + rejected + dropped
  // (+ uncertain, rows that may be either when drains and drops interleaved).
  receipt->dropped += fate.dropped;
  receipt->accepted -= fate.dropped + fate.uncertain;
  json::object out = ReceiptJson(request.table, **connector, *receipt);
  if (fate.uncertain > 0) out["uncertain"] = fate.uncertain;
  if (!request.wait) {
    out["published"] = false;
    return JsonReply(json::serialize(out), 202);
  }
  // Published: every accepted row is in the table (a tick applied and
  // published it). Rows that may have been dropped make that unknowable.
  const bool waited = published;  // false: timed out
  published = published && fate.uncertain == 0;
  out["published"] = published;
  if (auto t = ctx.engine->GetTable(request.table); t.ok()) {
    out["version"] = (*t)->snapshot()->version();
  }
  if (!published) {
    out["message"] = waited
                         ? "the buffer dropped rows (drop_oldest) while the engine drained "
                           "this push: " + std::to_string(fate.uncertain) +
                               " rows may be in the table or dropped"
                         : "the rows are buffered but no tick published them within " +
                               std::to_string(timeout) + " s (is the engine running?)";
  } else if (receipt->dropped > 0) {
    out["message"] = "the buffer dropped " + std::to_string(receipt->dropped) +
                     " rows of this push (on_overflow " +
                     OverflowPolicyName((*connector)->limits().on_overflow) +
                     "); the accepted rows are published";
  }
  return JsonReply(json::serialize(out), waited ? 200 : 504);
}

std::optional<HttpReply> RouteIngest(ServerContext& ctx, const HttpRequest& request) {
  if (request.path.compare(0, kIngestPrefix.size(), kIngestPrefix) != 0) return std::nullopt;
  std::string table = request.path.substr(kIngestPrefix.size());
  if (table.empty() || table.find('/') != std::string::npos) {
    return ErrorReply(404, "use POST /api/v1/ingest/{table}");
  }
  if (request.method != "POST") return ErrorReply(405, "use POST");
  IngestRequest in;
  in.table = std::move(table);
  in.content_type = std::string(request.header("content-type"));
  in.body = request.body;
  std::string_view encoding = request.header("content-encoding");
  if (encoding == "gzip" || encoding == "x-gzip") {
    in.gzip = true;
  } else if (!encoding.empty() && encoding != "identity") {
    return ErrorReply(415, "unsupported Content-Encoding '" + std::string(encoding) +
                               "': use gzip or none");
  }
  auto wait = request.param("wait");
  in.wait = wait.has_value() && (*wait == "true" || *wait == "1");
  if (auto timeout = request.param("timeout"); timeout.has_value()) {
    char* end = nullptr;
    in.timeout_seconds = std::strtod(timeout->c_str(), &end);
    if (end != timeout->c_str() + timeout->size() || !(in.timeout_seconds > 0) ||
        in.timeout_seconds > 3600) {
      return ErrorReply(400, "query parameter 'timeout' must be seconds in (0, 3600]");
    }
  }
  if (auto f = request.param("format"); f.has_value()) {
    auto parsed = ParseJsonFormat(*f);
    if (!parsed.ok()) return ErrorReply(400, "query parameter 'format': " +
                                                 parsed.status().message());
    in.push_format.format = *parsed;
    in.has_push_format = true;
  }
  if (auto op = request.param("op_column"); op.has_value()) {
    if (op->empty()) return ErrorReply(400, "query parameter 'op_column' must name a column");
    in.push_format.op_column = *op;
    in.has_push_format = true;
  }
  if (auto ts = request.param("ts_ms_column"); ts.has_value()) {
    if (ts->empty()) return ErrorReply(400, "query parameter 'ts_ms_column' must name a column");
    in.push_format.ts_ms_column = *ts;
    in.has_push_format = true;
  }
  return Ingest(ctx, in);
}

std::string WsIngest(ServerContext& ctx, const json::object& message) {
  json::object ack{{"type", "ingest_ack"}};
  if (const json::value* id = message.if_contains("id")) ack["id"] = *id;
  auto fail = [&](int status, std::string_view text) {
    ack["status"] = status;
    ack["message"] = text;
    return json::serialize(ack);
  };
  auto table = GetString(message, "table");
  if (!table.ok() || !table->has_value()) return fail(400, "field 'table' (a string) is required");
  auto format = GetString(message, "format");
  auto wait = GetBool(message, "wait");
  if (!format.ok()) return fail(400, format.status().message());
  if (!wait.ok()) return fail(400, wait.status().message());
  std::string rows_text;
  IngestRequest in;
  in.table = **table;
  in.wait = wait->value_or(false);
  if (const json::value* data = message.if_contains("data"); data && data->is_string()) {
    in.body = std::string_view(data->as_string());
  } else if (const json::value* rows = message.if_contains("rows"); rows && rows->is_array()) {
    rows_text = json::serialize(*rows);  // a JSON array of objects
    in.body = rows_text;
  } else {
    return fail(400, "give the rows as 'data' (NDJSON or CSV text) or 'rows' (an array)");
  }
  std::string fmt = format->value_or("ndjson");
  if (fmt == "csv") {
    in.content_type = "text/csv";
  } else if (fmt == "debezium") {
    in.push_format.format = JsonFormat::kDebezium;
    in.has_push_format = true;
  } else if (fmt != "ndjson" && fmt != "json") {
    return fail(400, "field 'format' must be ndjson, json, csv or debezium");
  }
  auto op_column = GetString(message, "op_column");
  if (!op_column.ok()) return fail(400, op_column.status().message());
  if (op_column->has_value()) {
    in.push_format.op_column = **op_column;
    in.has_push_format = true;
  }
  HttpReply reply = Ingest(ctx, in);
  ack["status"] = reply.status;
  auto body = json::parse(reply.body);
  if (body.is_object()) {
    for (auto& [k, v] : body.as_object()) {
      if (k != "status") ack[k] = v;
    }
  }
  return json::serialize(ack);
}

}  // namespace rill::server
