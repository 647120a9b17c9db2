#include "rill/engine/system_tables_internal.h"

#include <cmath>
#include <cstdio>

#include <arrow/builder.h>
#include <arrow/io/memory.h>
#include <arrow/ipc/writer.h>
#include <arrow/record_batch.h>
#include <arrow/table.h>
#include <arrow/type.h>
#include <fmt/format.h>

#include "rill/engine/engine.h"

namespace rill::engine_internal {
namespace {

std::string JsonEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out;
}

// {"name": value, ...}; null for failed or non-finite values.
std::string BusinessMetricsJson(const std::vector<BusinessMetricValue>& values) {
  std::string json = "{";
  for (const auto& v : values) {
    if (json.size() > 1) json += ",";
    json += '"';
    json += JsonEscape(v.name);
    json += "\":";
    json += v.ok && std::isfinite(v.value) ? fmt::format("{}", v.value) : "null";
  }
  return json + "}";
}

Result<std::string> SerializeIpc(const std::shared_ptr<arrow::RecordBatch>& batch) {
  RILL_ASSIGN_OR_RAISE(auto sink, arrow::io::BufferOutputStream::Create());
  RILL_ASSIGN_OR_RAISE(auto writer, arrow::ipc::MakeStreamWriter(sink, batch->schema()));
  RILL_RETURN_NOT_OK(writer->WriteRecordBatch(*batch));
  RILL_RETURN_NOT_OK(writer->Close());
  RILL_ASSIGN_OR_RAISE(auto buffer, sink->Finish());
  return buffer->ToString();
}

// Appends one-element arrays, one per column, in schema order.
class RowBuilder {
 public:
  Status F64(double v) { return Finish(f64_.Append(v), &f64_); }
  Status I64(int64_t v) { return Finish(i64_.Append(v), &i64_); }
  Status Str(const std::string& v) { return Finish(str_.Append(v), &str_); }
  Status Bin(const Result<std::string>& v) {
    return Finish(v.ok() ? bin_.Append(*v) : bin_.AppendNull(), &bin_);
  }
  std::vector<std::shared_ptr<arrow::Array>>& columns() { return columns_; }

 private:
  // Finish() resets a builder, so one builder per type serves every column.
  Status Finish(const Status& appended, arrow::ArrayBuilder* builder) {
    RILL_RETURN_NOT_OK(appended);
    std::shared_ptr<arrow::Array> array;
    RILL_RETURN_NOT_OK(builder->Finish(&array));
    columns_.push_back(std::move(array));
    return Status::OK();
  }

  arrow::DoubleBuilder f64_;
  arrow::Int64Builder i64_;
  arrow::StringBuilder str_;
  arrow::BinaryBuilder bin_;
  std::vector<std::shared_ptr<arrow::Array>> columns_;
};

}  // namespace

std::shared_ptr<arrow::Schema> RejectsSchema() {
  static const auto schema = arrow::schema({
      arrow::field("ts", arrow::float64()),
      arrow::field("table_name", arrow::utf8()),
      arrow::field("source", arrow::utf8()),
      arrow::field("reason", arrow::utf8()),
      arrow::field("rows", arrow::int64()),
      arrow::field("data", arrow::binary()),  // the rejected batch as an Arrow IPC stream
      arrow::field("position", arrow::utf8()),  // a rejected record: where it was
      arrow::field("raw", arrow::binary()),     // a rejected record: its bytes (truncated)
  });
  return schema;
}

std::shared_ptr<arrow::Schema> MetricsSchema() {
  // Documented in engine/README.md ("rill_metrics"); keep the two in step.
  static const auto schema = arrow::schema({
      arrow::field("timestamp", arrow::float64()),
      arrow::field("total_records_processed", arrow::int64()),
      arrow::field("last_batch_records", arrow::int64()),
      arrow::field("last_batch_latency_ms", arrow::float64()),
      arrow::field("avg_batch_latency_ms", arrow::float64()),
      arrow::field("max_batch_latency_ms", arrow::float64()),
      arrow::field("records_per_second", arrow::float64()),
      arrow::field("ticks", arrow::int64()),
      arrow::field("cpu_usage", arrow::float64()),
      arrow::field("used_memory", arrow::int64()),
      arrow::field("total_memory", arrow::int64()),
      arrow::field("process_cpu_percent", arrow::float64()),
      arrow::field("process_rss_bytes", arrow::int64()),
      arrow::field("arrow_allocated_bytes", arrow::int64()),
      arrow::field("arrow_peak_allocated_bytes", arrow::int64()),
      arrow::field("duckdb_memory_bytes", arrow::int64()),
      arrow::field("rejected_batches", arrow::int64()),
      arrow::field("rejected_records", arrow::int64()),
      arrow::field("engine_errors", arrow::int64()),
      arrow::field("memory_warnings", arrow::int64()),
      arrow::field("business_metrics", arrow::utf8()),  // JSON object name -> value
  });
  return schema;
}

Result<std::shared_ptr<arrow::RecordBatch>> MakeRejectRow(
    double now, const std::string& table, const std::string& source, const Status& reason,
    const std::shared_ptr<arrow::RecordBatch>& batch) {
  RowBuilder row;
  RILL_RETURN_NOT_OK(row.F64(now));
  RILL_RETURN_NOT_OK(row.Str(table));
  RILL_RETURN_NOT_OK(row.Str(source));
  RILL_RETURN_NOT_OK(row.Str(reason.message()));
  RILL_RETURN_NOT_OK(row.I64(batch->num_rows()));
  RILL_RETURN_NOT_OK(row.Bin(SerializeIpc(batch)));
  RILL_RETURN_NOT_OK(row.Str(""));  // position and raw: only for per-record rejects
  RILL_RETURN_NOT_OK(row.Bin(Status::Invalid("whole batch")));
  std::vector<std::shared_ptr<arrow::Array>> cols = std::move(row.columns());
  RILL_ASSIGN_OR_RAISE(cols[6], arrow::MakeArrayOfNull(arrow::utf8(), 1));
  return arrow::RecordBatch::Make(RejectsSchema(), 1, std::move(cols));
}

Result<std::shared_ptr<arrow::Table>> MakeMetricsRow(const EngineMetrics& m,
                                                     const HostSample& host) {
  RowBuilder row;
  // In the order of MetricsSchema().
  RILL_RETURN_NOT_OK(row.F64(m.timestamp));
  RILL_RETURN_NOT_OK(row.I64(m.total_records_processed));
  RILL_RETURN_NOT_OK(row.I64(m.last_batch_records));
  RILL_RETURN_NOT_OK(row.F64(m.last_batch_latency_s * 1e3));
  RILL_RETURN_NOT_OK(row.F64(m.avg_batch_latency_s * 1e3));
  RILL_RETURN_NOT_OK(row.F64(m.max_batch_latency_s * 1e3));
  RILL_RETURN_NOT_OK(row.F64(m.records_per_second));
  RILL_RETURN_NOT_OK(row.I64(m.ticks));
  RILL_RETURN_NOT_OK(row.F64(host.cpu_usage_percent));
  RILL_RETURN_NOT_OK(row.I64(host.used_memory_bytes));
  RILL_RETURN_NOT_OK(row.I64(host.total_memory_bytes));
  RILL_RETURN_NOT_OK(row.F64(host.process_cpu_percent));
  RILL_RETURN_NOT_OK(row.I64(host.process_rss_bytes));
  RILL_RETURN_NOT_OK(row.I64(m.arrow_allocated_bytes));
  RILL_RETURN_NOT_OK(row.I64(m.arrow_peak_allocated_bytes));
  RILL_RETURN_NOT_OK(row.I64(m.duckdb_memory_bytes));
  RILL_RETURN_NOT_OK(row.I64(m.rejected_batches));
  RILL_RETURN_NOT_OK(row.I64(m.rejected_records));
  RILL_RETURN_NOT_OK(row.I64(m.errors));
  RILL_RETURN_NOT_OK(row.I64(m.memory_warnings));
  RILL_RETURN_NOT_OK(row.Str(BusinessMetricsJson(m.business_metrics)));
  auto batch = arrow::RecordBatch::Make(MetricsSchema(), 1, std::move(row.columns()));
  return arrow::Table::FromRecordBatches({batch});
}

}  // namespace rill::engine_internal
