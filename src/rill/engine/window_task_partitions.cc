// WindowTask's partitioned state (window_task.h, "Partitioned state"): one
// operator per input partition of a source held per partition, mirrored in
// the state table "<task>__state" that an application restores a moved
// partition's windows from.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <arrow/array.h>
#include <arrow/array/util.h>
#include <arrow/builder.h>
#include <arrow/record_batch.h>
#include <arrow/table.h>
#include <arrow/type.h>

#include "rill/engine/engine.h"
#include "rill/engine/window_operator_internal.h"
#include "rill/engine/window_task.h"
#include "rill/table/live_table.h"
#include "rill/table/schema.h"

namespace rill {
namespace {

constexpr char kPartition[] = "_partition";
constexpr char kTopic[] = "_topic";
constexpr char kOffset[] = "_offset";
constexpr char kWatermark[] = "_watermark";
/// The _offset of a partition's marker row.
constexpr int64_t kMarkerOffset = -1;

/// The rows of `batch` per value of its int32 `_partition` column (null: -1).
Result<std::map<int32_t, std::vector<int64_t>>> SplitByPartition(
    const arrow::RecordBatch& batch) {
  auto column = batch.GetColumnByName(kPartition);
  if (!column || column->type_id() != arrow::Type::INT32) {
    return Status::TypeError("the source's _partition column is not int32");
  }
  const auto& parts = static_cast<const arrow::Int32Array&>(*column);
  std::map<int32_t, std::vector<int64_t>> out;
  for (int64_t r = 0; r < parts.length(); ++r) {
    out[parts.IsNull(r) ? -1 : parts.Value(r)].push_back(r);
  }
  return out;
}

/// `batch`'s columns of `schema` in its order; a column it lacks is null.
Result<std::shared_ptr<arrow::RecordBatch>> ProjectTo(
    const std::shared_ptr<arrow::Schema>& schema,
    const std::shared_ptr<arrow::RecordBatch>& batch) {
  std::vector<std::shared_ptr<arrow::Array>> columns;
  for (const auto& f : schema->fields()) {
    auto c = batch->GetColumnByName(f->name());
    if (!c || !c->type()->Equals(*f->type())) {
      RILL_ASSIGN_OR_RAISE(c, arrow::MakeArrayOfNull(f->type(), batch->num_rows()));
    }
    columns.push_back(std::move(c));
  }
  return arrow::RecordBatch::Make(schema, batch->num_rows(), std::move(columns));
}

/// Of `rows` (a partition's kept rows), those in sessions still open at
/// `watermark` (seconds). A kept row can outlive its session: rows leave the
/// state table at the oldest open session's start, whatever their key. Its
/// session closed, so rebuilt alone it would be emitted again. Sessions of
/// one key are apart by at least the gap, so the kept rows of a closed
/// session never join an open one: they rebuild into sessions that end by
/// the watermark, which are left out here.
Result<std::vector<int64_t>> RowsOfOpenSessions(const arrow::RecordBatch& rows,
                                                const WindowSpec& spec, double watermark) {
  std::vector<int64_t> us;
  std::vector<uint8_t> valid;
  auto time = rows.GetColumnByName(spec.time_column);
  if (!time) return Status::KeyError("column '", spec.time_column, "' not in the state rows");
  RILL_RETURN_NOT_OK(window_internal::ReadTimes(*time, &us, &valid));
  // Row indices by key (encoded as the operator groups them), by time.
  std::vector<window_internal::InputColumn> keys;
  for (const auto& column : spec.group_by) {
    auto c = rows.GetColumnByName(column);
    if (!c) return Status::KeyError("column '", column, "' not in the state rows");
    RILL_ASSIGN_OR_RAISE(auto input, window_internal::MakeInputColumn(c));
    keys.push_back(std::move(input));
  }
  std::map<std::string, std::vector<int64_t>> by_key;
  for (int64_t r = 0; r < rows.num_rows(); ++r) {
    if (!valid[r]) continue;
    std::string key;
    window_internal::EncodeKey(keys, r, &key);
    by_key[key].push_back(r);
  }
  const auto gap_us = static_cast<int64_t>(std::llround(spec.gap_seconds * 1e6));
  const auto watermark_us = static_cast<int64_t>(std::llround(watermark * 1e6));
  std::vector<int64_t> keep;
  for (auto& [key, list] : by_key) {
    std::sort(list.begin(), list.end(), [&](int64_t x, int64_t y) { return us[x] < us[y]; });
    size_t first = 0;
    for (size_t i = 1; i <= list.size(); ++i) {
      if (i < list.size() && us[list[i]] - us[list[i - 1]] < gap_us) continue;
      // A session [first, i): open while its last row + gap is past the watermark.
      if (!std::isfinite(watermark) || us[list[i - 1]] + gap_us > watermark_us) {
        keep.insert(keep.end(), list.begin() + static_cast<std::ptrdiff_t>(first),
                    list.begin() + static_cast<std::ptrdiff_t>(i));
      }
      first = i;
    }
  }
  std::sort(keep.begin(), keep.end());
  return keep;
}

}  // namespace

Status WindowTask::DecideMode(const LiveTable& source) {
  if (mode_ != Mode::kUndecided) return Status::OK();
  Engine* engine = engine_.load();
  const auto schema = source.user_schema();
  if (!engine || schema->GetFieldIndex(kPartition) < 0 ||
      !engine->HeldPerPartition(source.name())) {
    mode_ = Mode::kSingle;
    return Status::OK();
  }
  partition_spec_ = options_.spec;
  auto& keys = partition_spec_.group_by;
  if (std::find(keys.begin(), keys.end(), kPartition) == keys.end()) keys.push_back(kPartition);
  const int topic = schema->GetFieldIndex(kTopic), offset = schema->GetFieldIndex(kOffset);
  // Processing-time windows keep no state table: their rows' time is when
  // this instance wrote them, which a restore elsewhere cannot keep.
  if (!options_.spec.time_column.empty() && topic >= 0 && offset >= 0 &&
      schema->field(topic)->type()->id() == arrow::Type::STRING &&
      schema->field(offset)->type()->id() == arrow::Type::INT64) {
    auto fields = schema->fields();
    for (auto& f : fields) f = f->WithNullable(true)->WithMetadata(nullptr);
    fields.push_back(arrow::field(kWatermark, arrow::float64()));
    state_schema_ = arrow::schema(fields);
    TableOptions options;
    options.mode = TableMode::kSnapshot;
    options.primary_key = {kTopic, kPartition, kOffset};
    const std::string state = name() + "__state";
    RILL_RETURN_NOT_OK(engine->GetOrCreateTable(state, state_schema_, options).status());
    state_table_ = state;
    engine->StateTableMade(state_table_, source.name());
  }
  mode_ = Mode::kPartitioned;
  return Status::OK();
}

Result<std::string> WindowTask::PartitionedStateTable(const std::string& table) {
  if (table != options_.source_table) return std::string();
  Engine* engine = engine_.load();
  if (!engine) return std::string();
  if (mode_ == Mode::kUndecided) {
    auto source = engine->GetTable(table);
    if (!source.ok()) return std::string();  // made by its first rows; no state before
    RILL_RETURN_NOT_OK(DecideMode(**source));
  }
  return mode_ == Mode::kPartitioned ? state_table_ : std::string();
}

Result<WindowTask::Partition*> WindowTask::PartitionOf(SqlEngine& sql, int32_t partition) {
  auto it = parts_.find(partition);
  if (it != parts_.end()) return &it->second;
  Engine* engine = engine_.load();
  RILL_ASSIGN_OR_RAISE(auto source, engine->GetTable(options_.source_table));
  RILL_ASSIGN_OR_RAISE(auto made, WindowOperator::Make(partition_spec_, source->schema(), &sql));
  Partition part;
  part.op = std::shared_ptr<WindowOperator>(std::move(made));
  // A partition new to the task is late by the instance's watermark.
  part.op->AdvanceWatermark(common_watermark_);
  auto [pos, added] = parts_.emplace(partition, std::move(part));
  PublishOperators();
  return &pos->second;
}

void WindowTask::PublishOperators() {
  std::vector<std::shared_ptr<WindowOperator>> ops;
  for (const auto& [p, part] : parts_) ops.push_back(part.op);
  std::lock_guard<std::mutex> lock(mu_);
  published_parts_ = std::move(ops);
  extra_.partitions = static_cast<int64_t>(parts_.size());
}

Status WindowTask::KeepRows(Partition& part, const std::shared_ptr<arrow::RecordBatch>& rows) {
  if (state_table_.empty() || rows->num_rows() == 0) return Status::OK();
  Engine* engine = engine_.load();
  const int64_t n = rows->num_rows();
  std::vector<std::shared_ptr<arrow::Array>> columns;
  for (const auto& f : state_schema_->fields()) {
    if (f->name() == kWatermark) {
      RILL_ASSIGN_OR_RAISE(auto nulls, arrow::MakeArrayOfNull(arrow::float64(), n));
      columns.push_back(nulls);
      continue;
    }
    auto c = rows->GetColumnByName(f->name());
    if (!c) return Status::KeyError("column '", f->name(), "' not in the source's rows");
    columns.push_back(c);
  }
  auto batch = arrow::RecordBatch::Make(state_schema_, n, columns);
  RILL_ASSIGN_OR_RAISE(auto table, engine->GetTable(state_table_));
  RILL_RETURN_NOT_OK(table->Write(batch).status());
  return IndexRows(part, rows);
}

Status WindowTask::IndexRows(Partition& part, const std::shared_ptr<arrow::RecordBatch>& rows) {
  // Remember each row by event time, to delete it once its windows closed.
  const int64_t n = rows->num_rows();
  std::vector<int64_t> us;
  std::vector<uint8_t> valid;
  RILL_RETURN_NOT_OK(window_internal::ReadTimes(
      *rows->GetColumnByName(options_.spec.time_column), &us, &valid));
  const auto& topics = static_cast<const arrow::StringArray&>(*rows->GetColumnByName(kTopic));
  const auto& offsets = static_cast<const arrow::Int64Array&>(*rows->GetColumnByName(kOffset));
  for (int64_t r = 0; r < n; ++r) {
    const std::string topic = topics.IsNull(r) ? std::string() : topics.GetString(r);
    auto t = std::find(topics_.begin(), topics_.end(), topic);
    if (t == topics_.end()) t = topics_.insert(topics_.end(), topic);
    part.kept.push(KeptRow{valid[r] ? us[r] : INT64_MIN,
                           static_cast<int32_t>(t - topics_.begin()),
                           offsets.IsNull(r) ? kMarkerOffset : offsets.Value(r)});
  }
  return Status::OK();
}

Status WindowTask::TrimState() {
  if (state_table_.empty()) return Status::OK();
  Engine* engine = engine_.load();
  arrow::StringBuilder del_topic;
  arrow::Int32Builder del_part;
  arrow::Int64Builder del_offset;
  std::vector<int32_t> marker_parts;
  std::vector<double> marker_values;
  for (auto& [p, part] : parts_) {
    const double horizon = part.op->StateHorizon();
    if (std::isfinite(horizon)) {
      const auto horizon_us = static_cast<int64_t>(std::llround(horizon * 1e6));
      while (!part.kept.empty() && part.kept.top().t_us < horizon_us) {
        const KeptRow row = part.kept.top();
        part.kept.pop();
        RILL_RETURN_NOT_OK(del_topic.Append(topics_[row.topic]));
        RILL_RETURN_NOT_OK(del_part.Append(p));
        RILL_RETURN_NOT_OK(del_offset.Append(row.offset));
      }
    }
    const double w = part.op->watermark();
    if (std::isfinite(w) && !(w == part.marker)) {
      marker_parts.push_back(p);
      marker_values.push_back(w);
      part.marker = w;
    }
  }
  RILL_ASSIGN_OR_RAISE(auto table, engine->GetTable(state_table_));
  if (del_part.length() > 0) {
    std::shared_ptr<arrow::Array> t, p, o;
    RILL_RETURN_NOT_OK(del_topic.Finish(&t));
    RILL_RETURN_NOT_OK(del_part.Finish(&p));
    RILL_RETURN_NOT_OK(del_offset.Finish(&o));
    auto schema = arrow::schema({arrow::field(kTopic, arrow::utf8()),
                                 arrow::field(kPartition, arrow::int32()),
                                 arrow::field(kOffset, arrow::int64())});
    const int64_t n = p->length();
    RILL_RETURN_NOT_OK(table->Delete(arrow::RecordBatch::Make(schema, n, {t, p, o})).status());
  }
  if (!marker_parts.empty()) {
    const auto n = static_cast<int64_t>(marker_parts.size());
    std::vector<std::shared_ptr<arrow::Array>> columns;
    for (const auto& f : state_schema_->fields()) {
      std::shared_ptr<arrow::Array> column;
      if (f->name() == kTopic) {
        arrow::StringBuilder b;
        for (int64_t i = 0; i < n; ++i) RILL_RETURN_NOT_OK(b.Append(""));
        RILL_RETURN_NOT_OK(b.Finish(&column));
      } else if (f->name() == kPartition) {
        arrow::Int32Builder b;
        RILL_RETURN_NOT_OK(b.AppendValues(marker_parts));
        RILL_RETURN_NOT_OK(b.Finish(&column));
      } else if (f->name() == kOffset) {
        arrow::Int64Builder b;
        for (int64_t i = 0; i < n; ++i) RILL_RETURN_NOT_OK(b.Append(kMarkerOffset));
        RILL_RETURN_NOT_OK(b.Finish(&column));
      } else if (f->name() == kWatermark) {
        arrow::DoubleBuilder b;
        RILL_RETURN_NOT_OK(b.AppendValues(marker_values));
        RILL_RETURN_NOT_OK(b.Finish(&column));
      } else {
        RILL_ASSIGN_OR_RAISE(column, arrow::MakeArrayOfNull(f->type(), n));
      }
      columns.push_back(std::move(column));
    }
    RILL_RETURN_NOT_OK(
        table->Write(arrow::RecordBatch::Make(state_schema_, n, columns)).status());
  }
  const int64_t rows = table->snapshot()->num_rows();
  std::lock_guard<std::mutex> lock(mu_);
  extra_.state_rows = rows;
  return Status::OK();
}

Result<TaskOutput> WindowTask::RunPartitioned(SqlEngine& sql, const LiveTable& source,
                                              double now) {
  RILL_ASSIGN_OR_RAISE(auto batches, ReadNewRows(source));
  Status late_status;
  for (const auto& batch : batches) {
    RILL_ASSIGN_OR_RAISE(auto split, SplitByPartition(*batch));
    for (const auto& [p, indices] : split) {
      std::shared_ptr<arrow::RecordBatch> rows = batch;
      if (static_cast<int64_t>(indices.size()) != batch->num_rows()) {
        RILL_ASSIGN_OR_RAISE(rows, TakeRows(batch, indices));
      }
      RILL_ASSIGN_OR_RAISE(Partition * part, PartitionOf(sql, p));
      LateRows late;
      RILL_RETURN_NOT_OK(part->op->Consume(rows, now, &late));
      if (!late.rows.empty()) {
        auto written = WriteLate(rows, late, now);
        if (!written.ok() && late_status.ok()) late_status = written;
      }
      if (state_table_.empty()) continue;
      std::shared_ptr<arrow::RecordBatch> on_time = rows;
      if (!late.rows.empty()) {
        std::vector<int64_t> keep;
        size_t next = 0;
        for (int64_t r = 0; r < rows->num_rows(); ++r) {
          if (next < late.rows.size() && late.rows[next] == r) {
            ++next;
            continue;
          }
          keep.push_back(r);
        }
        RILL_ASSIGN_OR_RAISE(on_time, TakeRows(rows, keep));
      }
      RILL_RETURN_NOT_OK(KeepRows(*part, on_time));
    }
  }
  // Every operator closes what the largest watermark among them closes, as
  // one operator over the instance's rows would.
  std::vector<std::shared_ptr<arrow::Table>> out;
  for (auto& [p, part] : parts_) {
    RILL_ASSIGN_OR_RAISE(auto emitted, part.op->Emit(now));
    if (emitted && emitted->num_rows() > 0) out.push_back(emitted);
    common_watermark_ = std::max(common_watermark_, part.op->watermark());
  }
  for (auto& [p, part] : parts_) {
    if (!(part.op->watermark() < common_watermark_)) continue;
    part.op->AdvanceWatermark(common_watermark_);
    RILL_ASSIGN_OR_RAISE(auto emitted, part.op->Emit(now));
    if (emitted && emitted->num_rows() > 0) out.push_back(emitted);
  }
  RILL_RETURN_NOT_OK(TrimState());
  {
    std::lock_guard<std::mutex> lock(mu_);
    extra_.cursor = cursor_;
    if (!batches.empty()) ++extra_.runs_with_rows;
  }
  if (!late_status.ok()) {
    engine_.load()->RecordEvent(EngineEvent::Engine(
        Severity::kError, name(),
        "Window task '" + name() + "' could not keep late rows in '" + options_.late_table +
            "' (they are counted)",
        late_status.ToString(), now));
  }
  TaskOutput output{nullptr, /*replace=*/false};
  if (partition_spec_.emit == EmitMode::kOnUpdate) {
    output.key = {"window_start", "window_end"};
    output.key.insert(output.key.end(), partition_spec_.group_by.begin(),
                      partition_spec_.group_by.end());
  }
  if (out.size() == 1) {
    output.table = out.front();
  } else if (!out.empty()) {
    RILL_ASSIGN_OR_RAISE(output.table, arrow::ConcatenateTables(out));
  }
  return output;
}

Status WindowTask::DropPartitions(const std::string& table,
                                  const std::vector<int32_t>& partitions) {
  if (table != options_.source_table || mode_ != Mode::kPartitioned) return Status::OK();
  for (int32_t p : partitions) parts_.erase(p);
  PublishOperators();
  return Status::OK();
}

Status WindowTask::RestorePartitions(const std::string& table,
                                     const std::vector<int32_t>& partitions, double now) {
  if (table != options_.source_table || mode_ != Mode::kPartitioned) return Status::OK();
  Engine* engine = engine_.load();
  SqlEngine& sql = sql_ ? *sql_ : engine->sql();
  for (int32_t p : partitions) parts_.erase(p);
  if (state_table_.empty()) {
    PublishOperators();
    return Status::OK();
  }
  std::set<int32_t> wanted(partitions.begin(), partitions.end());
  RILL_ASSIGN_OR_RAISE(auto source, engine->GetTable(options_.source_table));
  RILL_ASSIGN_OR_RAISE(auto state, engine->GetTable(state_table_));
  RILL_ASSIGN_OR_RAISE(auto rows, state->snapshot()->ToTable());
  RILL_ASSIGN_OR_RAISE(auto batch, rows->CombineChunksToBatch());
  RILL_ASSIGN_OR_RAISE(auto split, SplitByPartition(*batch));
  int64_t restored = 0;
  for (const auto& [p, indices] : split) {
    if (!wanted.count(p)) continue;
    RILL_ASSIGN_OR_RAISE(auto part_rows, TakeRows(batch, indices));
    const auto& offsets =
        static_cast<const arrow::Int64Array&>(*part_rows->GetColumnByName(kOffset));
    const auto& marks =
        static_cast<const arrow::DoubleArray&>(*part_rows->GetColumnByName(kWatermark));
    double watermark = -INFINITY;
    std::vector<int64_t> events;
    for (int64_t r = 0; r < part_rows->num_rows(); ++r) {
      if (!offsets.IsNull(r) && offsets.Value(r) == kMarkerOffset) {
        if (!marks.IsNull(r)) watermark = marks.Value(r);
      } else {
        events.push_back(r);
      }
    }
    RILL_ASSIGN_OR_RAISE(auto made,
                         WindowOperator::Make(partition_spec_, source->schema(), &sql));
    Partition part;
    part.op = std::shared_ptr<WindowOperator>(std::move(made));
    // The old owner's watermark: what it emitted stays emitted.
    part.op->AdvanceWatermark(watermark);
    part.marker = watermark;
    RILL_ASSIGN_OR_RAISE(auto taken, TakeRows(part_rows, events));
    // As the source's rows (its columns, in its order): an operator keeps
    // the batches of DuckDB aggregations, which must all look alike.
    RILL_ASSIGN_OR_RAISE(auto event_rows, ProjectTo(source->schema(), taken));
    auto consumed = event_rows;
    if (partition_spec_.kind == WindowKind::kSession) {
      RILL_ASSIGN_OR_RAISE(auto open, RowsOfOpenSessions(*event_rows, partition_spec_, watermark));
      if (static_cast<int64_t>(open.size()) != event_rows->num_rows()) {
        RILL_ASSIGN_OR_RAISE(consumed, TakeRows(event_rows, open));
      }
    }
    RILL_RETURN_NOT_OK(part.op->ConsumeRestored(consumed, now));
    restored += consumed->num_rows();
    auto [pos, added] = parts_.emplace(p, std::move(part));
    // Every kept row, those of closed sessions too: each leaves the state
    // table at its operator's horizon.
    RILL_RETURN_NOT_OK(IndexRows(pos->second, event_rows));
  }
  PublishOperators();
  std::lock_guard<std::mutex> lock(mu_);
  extra_.restored_rows += restored;
  return Status::OK();
}

}  // namespace rill
