#include "rill/engine/system_tables_internal.h"

#include <cmath>
#include <cstdio>
#include <cstring>

#include <arrow/array/util.h>
#include <arrow/buffer.h>
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
      // The seed's names for the two columns above (same values).
      arrow::field("pyarrow_allocated_bytes", arrow::int64()),
      arrow::field("pyarrow_max_memory", arrow::int64()),
      arrow::field("duckdb_memory_bytes", arrow::int64()),
      arrow::field("rejected_batches", arrow::int64()),
      arrow::field("rejected_records", arrow::int64()),
      arrow::field("engine_errors", arrow::int64()),
      arrow::field("memory_warnings", arrow::int64()),
      arrow::field("checkpoint_failures", arrow::int64()),
      arrow::field("shedding", arrow::int64()),  // 1 while memory_budget_policy "shed" holds input
      arrow::field("dropped_records", arrow::int64()),
      arrow::field("rejects_overflowed", arrow::int64()),
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
  // Once per tick: one allocation holds every fixed-width value, each column
  // is a slice of it (no builders; issue 16, the fixed cost of a tick).
  // In the order of MetricsSchema(); int64 and float64 share the 8-byte slot.
  union Slot {
    double f;
    int64_t i;
  };
  const Slot values[] = {
      {.f = m.timestamp},
      {.i = m.total_records_processed},
      {.i = m.last_batch_records},
      {.f = m.last_batch_latency_s * 1e3},
      {.f = m.avg_batch_latency_s * 1e3},
      {.f = m.max_batch_latency_s * 1e3},
      {.f = m.records_per_second},
      {.i = m.ticks},
      {.f = host.cpu_usage_percent},
      {.i = host.used_memory_bytes},
      {.i = host.total_memory_bytes},
      {.f = host.process_cpu_percent},
      {.i = host.process_rss_bytes},
      {.i = m.arrow_allocated_bytes},
      {.i = m.arrow_peak_allocated_bytes},
      {.i = m.arrow_allocated_bytes},
      {.i = m.arrow_peak_allocated_bytes},
      {.i = m.duckdb_memory_bytes},
      {.i = m.rejected_batches},
      {.i = m.rejected_records},
      {.i = m.errors},
      {.i = m.memory_warnings},
      {.i = m.checkpoint_failures},
      {.i = m.shedding ? 1 : 0},
      {.i = m.dropped_records},
      {.i = m.rejects_overflowed},
  };
  constexpr int kFixed = static_cast<int>(sizeof(values) / sizeof(values[0]));
  const auto& schema = MetricsSchema();
  const std::string json = BusinessMetricsJson(m.business_metrics);
  // Layout: the fixed values, then two int32 string offsets, then the JSON bytes.
  const int64_t json_at = kFixed * 8 + 8;
  RILL_ASSIGN_OR_RAISE(std::shared_ptr<arrow::Buffer> buf,
                       arrow::AllocateBuffer(json_at + static_cast<int64_t>(json.size())));
  uint8_t* data = buf->mutable_data();
  std::memcpy(data, values, sizeof(values));
  const int32_t offsets32[2] = {0, static_cast<int32_t>(json.size())};
  std::memcpy(data + kFixed * 8, offsets32, sizeof(offsets32));
  if (!json.empty()) std::memcpy(data + json_at, json.data(), json.size());
  std::vector<std::shared_ptr<arrow::Array>> columns;
  columns.reserve(schema->num_fields());
  for (int i = 0; i < kFixed; ++i) {
    columns.push_back(arrow::MakeArray(arrow::ArrayData::Make(
        schema->field(i)->type(), 1, {nullptr, arrow::SliceBuffer(buf, i * 8, 8)},
        /*null_count=*/0)));
  }
  columns.push_back(arrow::MakeArray(arrow::ArrayData::Make(
      arrow::utf8(), 1,
      {nullptr, arrow::SliceBuffer(buf, kFixed * 8, 8),
       arrow::SliceBuffer(buf, json_at, static_cast<int64_t>(json.size()))},
      /*null_count=*/0)));
  if (static_cast<int>(columns.size()) != schema->num_fields()) {
    return Status::Invalid("rill_metrics: ", columns.size(), " values for ",
                           schema->num_fields(), " columns");
  }
  auto batch = arrow::RecordBatch::Make(schema, 1, std::move(columns));
  return arrow::Table::FromRecordBatches(schema, {batch});
}

}  // namespace rill::engine_internal
