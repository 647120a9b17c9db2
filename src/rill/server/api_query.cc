// POST /api/v1/query and POST /api/v1/metrics/query: read-only SQL with the
// result as json (buffered, capped), ndjson, csv or an Arrow IPC stream
// (streamed with chunked transfer encoding, not capped: live queries batch by
// batch as DuckDB produces them, metrics-database results in slices).
#include <chrono>
#include <memory>

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

// api_metrics.cc: a metrics-database query with the server's query timeout.
Result<std::shared_ptr<arrow::Table>> RunMetricsQuery(ServerContext& ctx,
                                                      const std::string& sql);

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

/// Where a streamed result's batches come from: a DuckDB streaming result of
/// the live tables (read as the client takes the pieces), or a materialized
/// table (the metrics database) read in slices.
class BatchSource {
 public:
  virtual ~BatchSource() = default;
  virtual std::shared_ptr<arrow::Schema> schema() const = 0;
  /// The next batch, or null at the end.
  virtual Result<std::shared_ptr<arrow::RecordBatch>> Next() = 0;
};

class TableSource final : public BatchSource {
 public:
  explicit TableSource(std::shared_ptr<arrow::Table> table)
      : table_(std::move(table)), reader_(*table_) {
    reader_.set_chunksize(kRowsPerChunk);
  }
  std::shared_ptr<arrow::Schema> schema() const override { return table_->schema(); }
  Result<std::shared_ptr<arrow::RecordBatch>> Next() override {
    std::shared_ptr<arrow::RecordBatch> batch;
    RILL_RETURN_NOT_OK(reader_.ReadNext(&batch));
    return batch;
  }

 private:
  std::shared_ptr<arrow::Table> table_;
  arrow::TableBatchReader reader_;
};

/// A live query streamed from DuckDB. query_timeout_seconds bounds the time
/// spent producing the result (DuckDB running the query and converting its
/// chunks), not the time the client takes to read it: the watchdog is armed
/// for the remaining budget around each fetch.
class LiveSource final : public BatchSource {
 public:
  LiveSource(ServerContext& ctx, std::shared_ptr<QueryInterrupt> interrupt,
             std::unique_ptr<SqlResultStream> stream, double remaining_seconds)
      : ctx_(ctx),
        interrupt_(std::move(interrupt)),
        stream_(std::move(stream)),
        remaining_(remaining_seconds) {}
  std::shared_ptr<arrow::Schema> schema() const override { return stream_->schema(); }
  Result<std::shared_ptr<arrow::RecordBatch>> Next() override {
    const double timeout = ctx_.options.query_timeout_seconds;
    uint64_t timer = 0;
    if (timeout > 0) {
      if (remaining_ <= 0) {
        interrupt_->Interrupt();
      } else {
        timer = ctx_.watchdog.Schedule(remaining_,
                                       [interrupt = interrupt_] { interrupt->Interrupt(); });
      }
    }
    const auto start = std::chrono::steady_clock::now();
    auto batch = stream_->Next();
    if (timer != 0) ctx_.watchdog.Cancel(timer);
    remaining_ -= std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!batch.ok() && interrupt_->interrupted()) {
      ctx_.counters.query_timeouts.fetch_add(1, std::memory_order_relaxed);
      return Status::Cancelled("the query ran longer than query_timeout_seconds (", timeout,
                               " s) and was interrupted");
    }
    return batch;
  }

 private:
  ServerContext& ctx_;
  // Declared before the stream: the stream (which holds the hook) goes first.
  std::shared_ptr<QueryInterrupt> interrupt_;
  std::unique_ptr<SqlResultStream> stream_;
  double remaining_;
};

/// State of one streamed result: its batch source and the encoder. One
/// batch is converted per piece, so at most one batch (and its encoding) is
/// held at a time, whatever the size of the result.
struct ResultStream {
  std::unique_ptr<BatchSource> source;
  std::shared_ptr<arrow::RecordBatch> first;  // read before the status line went out
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
      RILL_ASSIGN_OR_RAISE(ipc, arrow::ipc::MakeStreamWriter(sink, source->schema()));
    }
    std::shared_ptr<arrow::RecordBatch> batch = std::move(first);
    first = nullptr;
    if (batch == nullptr) {
      RILL_ASSIGN_OR_RAISE(batch, source->Next());
    }
    if (batch == nullptr) {
      done = true;
      if (format == Format::kArrow) {
        RILL_RETURN_NOT_OK(ipc->Close());
      } else if (format == Format::kCsv && !header_done) {
        RILL_ASSIGN_OR_RAISE(auto empty, arrow::RecordBatch::MakeEmpty(source->schema()));
        RILL_RETURN_NOT_OK(WriteCsv(empty));
      }
      source.reset();  // the query's connection and table versions go now
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

const char* ContentType(Format format) {
  return format == Format::kArrow  ? "application/vnd.apache.arrow.stream"
         : format == Format::kCsv  ? "text/csv; charset=utf-8"
                                   : "application/x-ndjson";
}

/// A chunked reply streaming `source`. Its first batch is read now, so an
/// error while the query starts running still gets an error status.
HttpReply StreamReply(std::unique_ptr<BatchSource> source, Format format) {
  auto stream = std::make_shared<ResultStream>();
  auto first = source->Next();
  if (!first.ok()) {
    return StatusReply(first.status());
  }
  stream->first = std::move(*first);
  stream->source = std::move(source);
  stream->format = format;
  HttpReply reply;
  reply.content_type = ContentType(format);
  reply.next_chunk = [stream] { return stream->Next(); };
  return reply;
}

HttpReply ResultReply(ServerContext& ctx, std::shared_ptr<arrow::Table> table, Format format) {
  if (format == Format::kJson) {
    auto json = TableToJson(*table, ctx.options.max_json_result_bytes);
    if (!json.ok()) {
      return StatusReply(json.status());
    }
    return JsonReply(std::move(*json));
  }
  return StreamReply(std::make_unique<TableSource>(std::move(table)), format);
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
  return RunWithQueryTimeout(ctx,
                             [&](QueryInterrupt* interrupt) {
                               return ctx.engine->sql().Query(sql, interrupt);
                             });
}

/// Start `sql` on the live tables as a streaming result (ndjson, csv, arrow).
HttpReply StreamLiveQuery(ServerContext& ctx, const std::string& sql, Format format) {
  auto interrupt = std::make_shared<QueryInterrupt>();
  const double timeout = ctx.options.query_timeout_seconds;
  uint64_t timer = 0;
  const auto start = std::chrono::steady_clock::now();
  if (timeout > 0) {
    timer = ctx.watchdog.Schedule(timeout, [interrupt] { interrupt->Interrupt(); });
  }
  auto stream = ctx.engine->sql().QueryStream(sql, interrupt.get(), kRowsPerChunk);
  if (timer != 0) {
    ctx.watchdog.Cancel(timer);
  }
  const double spent =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ctx.query_seconds.Observe(spent);
  if (!stream.ok()) {
    if (interrupt->interrupted()) {
      ctx.counters.query_timeouts.fetch_add(1, std::memory_order_relaxed);
      return StatusReply(Status::Cancelled("the query ran longer than query_timeout_seconds (",
                                           timeout, " s) and was interrupted"));
    }
    return StatusReply(stream.status());
  }
  return StreamReply(std::make_unique<LiveSource>(ctx, std::move(interrupt),
                                                  std::move(*stream), timeout - spent),
                     format);
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
  if (!metrics_db && parsed->format != Format::kJson) {
    return StreamLiveQuery(ctx, parsed->sql, parsed->format);
  }
  auto start = std::chrono::steady_clock::now();
  auto result = metrics_db ? RunMetricsQuery(ctx, parsed->sql)
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
