// POST /api/v1/query and POST /api/v1/metrics/query: read-only SQL with the
// result as json (buffered, capped), ndjson, csv or an Arrow IPC stream
// (streamed in slices with chunked transfer encoding, not capped).
#include <chrono>

#include <arrow/csv/writer.h>
#include <arrow/io/interfaces.h>
#include <arrow/ipc/writer.h>
#include <arrow/record_batch.h>
#include <arrow/table.h>

#include "rill/engine/engine.h"
#include "rill/metrics/metrics_store.h"
#include "rill/server/json_body.h"
#include "rill/server/json_writer.h"
#include "rill/server/server_internal.h"
#include "rill/sql/sql_engine.h"

namespace rill::server {

namespace {

constexpr int64_t kRowsPerChunk = 8192;

/// An OutputStream appending to a string that the streaming loop drains.
class StringSink : public arrow::io::OutputStream {
 public:
  arrow::Status Close() override {
    closed_ = true;
    return arrow::Status::OK();
  }
  bool closed() const override { return closed_; }
  arrow::Result<int64_t> Tell() const override { return position_; }
  arrow::Status Write(const void* data, int64_t nbytes) override {
    buffer_.append(static_cast<const char*>(data), static_cast<size_t>(nbytes));
    position_ += nbytes;
    return arrow::Status::OK();
  }
  std::string Take() { return std::exchange(buffer_, {}); }

 private:
  std::string buffer_;
  int64_t position_ = 0;
  bool closed_ = false;
};

enum class Format { kJson, kNdjson, kCsv, kArrow };

Result<Format> ParseFormat(const std::optional<std::string>& text) {
  if (!text.has_value() || *text == "json") {
    return Format::kJson;
  }
  if (*text == "ndjson") return Format::kNdjson;
  if (*text == "csv") return Format::kCsv;
  if (*text == "arrow") return Format::kArrow;
  return Status::Invalid("unknown format '", *text, "': use json, ndjson, csv or arrow");
}

/// State of one streamed result: the table, a slice reader and the encoder.
struct ResultStream {
  std::shared_ptr<arrow::Table> table;
  std::unique_ptr<arrow::TableBatchReader> reader;
  Format format;
  std::shared_ptr<StringSink> sink = std::make_shared<StringSink>();
  std::shared_ptr<arrow::ipc::RecordBatchWriter> ipc;
  bool header_done = false;
  bool done = false;

  Result<std::optional<std::string>> Next() {
    if (done) {
      return std::nullopt;
    }
    if (format == Format::kArrow && ipc == nullptr) {
      RILL_ASSIGN_OR_RAISE(ipc, arrow::ipc::MakeStreamWriter(sink, table->schema()));
    }
    std::shared_ptr<arrow::RecordBatch> batch;
    RILL_RETURN_NOT_OK(reader->ReadNext(&batch));
    if (batch == nullptr) {
      done = true;
      if (format == Format::kArrow) {
        RILL_RETURN_NOT_OK(ipc->Close());
      } else if (format == Format::kCsv && !header_done) {
        RILL_RETURN_NOT_OK(WriteCsv(arrow::RecordBatch::MakeEmpty(table->schema()).ValueOrDie()));
      }
      std::string rest = sink->Take();
      if (rest.empty()) {
        return std::nullopt;
      }
      return rest;
    }
    switch (format) {
      case Format::kArrow:
        RILL_RETURN_NOT_OK(ipc->WriteRecordBatch(*batch));
        break;
      case Format::kCsv:
        RILL_RETURN_NOT_OK(WriteCsv(batch));
        break;
      default: {
        std::string text;
        for (int64_t r = 0; r < batch->num_rows(); ++r) {
          RILL_RETURN_NOT_OK(AppendJsonRow(*batch, r, &text));
          text.push_back('\n');
        }
        return text;
      }
    }
    return sink->Take();
  }

  Status WriteCsv(const std::shared_ptr<arrow::RecordBatch>& batch) {
    auto options = arrow::csv::WriteOptions::Defaults();
    options.include_header = !header_done;
    header_done = true;
    return arrow::csv::WriteCSV(*batch, options, sink.get());
  }
};

HttpReply ResultReply(ServerContext& ctx, std::shared_ptr<arrow::Table> table, Format format) {
  if (format == Format::kJson) {
    auto json = TableToJson(*table, ctx.options.max_json_result_bytes);
    if (!json.ok()) {
      return StatusReply(json.status());
    }
    return JsonReply(std::move(*json));
  }
  auto stream = std::make_shared<ResultStream>();
  stream->table = table;
  stream->reader = std::make_unique<arrow::TableBatchReader>(*table);
  stream->reader->set_chunksize(kRowsPerChunk);
  stream->format = format;
  HttpReply reply;
  reply.content_type = format == Format::kArrow    ? "application/vnd.apache.arrow.stream"
                       : format == Format::kCsv    ? "text/csv; charset=utf-8"
                                                   : "application/x-ndjson";
  reply.headers.emplace_back("X-Rill-Row-Count", std::to_string(table->num_rows()));
  reply.next_chunk = [stream] { return stream->Next(); };
  return reply;
}

struct QueryRequest {
  std::string sql;
  Format format;
};

Result<QueryRequest> ParseQueryRequest(const HttpRequest& request) {
  RILL_ASSIGN_OR_RAISE(auto obj, ParseJsonObject(request.body));
  RILL_ASSIGN_OR_RAISE(auto sql, GetString(obj, "sql"));
  if (!sql.has_value() || sql->empty()) {
    return Status::Invalid("field 'sql' is required");
  }
  RILL_ASSIGN_OR_RAISE(auto format_text, GetString(obj, "format"));
  RILL_ASSIGN_OR_RAISE(auto format, ParseFormat(format_text));
  return QueryRequest{std::move(*sql), format};
}

/// Run `sql` on the live tables with the query timeout.
Result<std::shared_ptr<arrow::Table>> RunLiveQuery(ServerContext& ctx, const std::string& sql) {
  QueryInterrupt interrupt;
  uint64_t timer = 0;
  double timeout = ctx.options.query_timeout_seconds;
  if (timeout > 0) {
    timer = ctx.watchdog.Schedule(timeout, [&interrupt] { interrupt.Interrupt(); });
  }
  auto result = ctx.engine->sql().Query(sql, &interrupt);
  if (timer != 0) {
    ctx.watchdog.Cancel(timer);
  }
  if (!result.ok() && interrupt.interrupted()) {
    ctx.counters.query_timeouts.fetch_add(1, std::memory_order_relaxed);
    return Status::Cancelled("the query ran longer than query_timeout_seconds (", timeout,
                             " s) and was interrupted");
  }
  return result;
}

HttpReply Query(ServerContext& ctx, const HttpRequest& request, bool metrics_db) {
  auto parsed = ParseQueryRequest(request);
  if (!parsed.ok()) {
    return StatusReply(parsed.status());
  }
  if (metrics_db && ctx.metrics == nullptr) {
    return ErrorReply(503, "this engine has no metrics database");
  }
  ctx.counters.queries.fetch_add(1, std::memory_order_relaxed);
  auto start = std::chrono::steady_clock::now();
  auto result = metrics_db ? ctx.metrics->QueryMetrics(parsed->sql)
                           : RunLiveQuery(ctx, parsed->sql);
  ctx.query_seconds.Observe(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  if (!result.ok()) {
    return StatusReply(result.status());
  }
  return ResultReply(ctx, std::move(*result), parsed->format);
}

}  // namespace

std::optional<HttpReply> RouteQuery(ServerContext& ctx, const HttpRequest& request) {
  bool live = request.path == "/api/v1/query";
  bool metrics = request.path == "/api/v1/metrics/query";
  if (!live && !metrics) {
    return std::nullopt;
  }
  if (request.method != "POST") {
    return ErrorReply(405, "use POST with a JSON body {\"sql\": ..., \"format\": ...}");
  }
  return Query(ctx, request, metrics);
}

}  // namespace rill::server
