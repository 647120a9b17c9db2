#include "generator.h"

#include <algorithm>
#include <chrono>
#include <random>

#include <arrow/api.h>
#include <arrow/compute/api.h>

#include "rill/common/arrow_init.h"

namespace rill::app {

struct GeneratorConnector::State {
  std::mt19937_64 rng;
  std::map<std::string, int64_t> next_sequence;
  /// Per choice column: the choices already cast to the column type.
  std::map<std::string, std::shared_ptr<arrow::Array>> choice_values;
  std::map<std::string, std::discrete_distribution<size_t>> choice_pick;
};

namespace {

using Kind = GeneratorColumnSpec::Kind;

Result<std::shared_ptr<arrow::Array>> CastTo(const std::shared_ptr<arrow::Array>& array,
                                             const std::shared_ptr<arrow::DataType>& type) {
  if (array->type()->Equals(*type)) {
    return array;
  }
  RILL_ASSIGN_OR_RAISE(arrow::Datum out,
                       arrow::compute::Cast(array, type, arrow::compute::CastOptions::Unsafe()));
  return out.make_array();
}

/// Ticks per second of a timestamp unit.
int64_t TicksPerSecond(arrow::TimeUnit::type unit) {
  switch (unit) {
    case arrow::TimeUnit::SECOND:
      return 1;
    case arrow::TimeUnit::MILLI:
      return 1000;
    case arrow::TimeUnit::MICRO:
      return 1000000;
    case arrow::TimeUnit::NANO:
      return 1000000000;
  }
  return 1;
}

/// Build the `now` column: seconds as float64, or ticks for timestamps, or
/// days for dates.
Result<std::shared_ptr<arrow::Array>> NowColumn(const arrow::DataType& type, int64_t rows,
                                                double now) {
  if (type.id() == arrow::Type::TIMESTAMP) {
    const auto& ts = static_cast<const arrow::TimestampType&>(type);
    arrow::Int64Builder b;
    RILL_RETURN_NOT_OK(b.AppendValues(
        std::vector<int64_t>(rows, static_cast<int64_t>(now * TicksPerSecond(ts.unit())))));
    return b.Finish();
  }
  if (type.id() == arrow::Type::DATE32) {
    arrow::Int32Builder b;
    RILL_RETURN_NOT_OK(
        b.AppendValues(std::vector<int32_t>(rows, static_cast<int32_t>(now / 86400))));
    return b.Finish();
  }
  arrow::DoubleBuilder b;
  RILL_RETURN_NOT_OK(b.AppendValues(std::vector<double>(rows, now)));
  return b.Finish();
}

}  // namespace

GeneratorConnector::GeneratorConnector(std::string name, std::string table,
                                       std::shared_ptr<arrow::Schema> schema,
                                       GeneratorSpec spec, BufferLimits limits, Clock clock)
    : MemoryConnector(std::move(table), schema, limits, std::move(name)),
      schema_(std::move(schema)),
      spec_(std::move(spec)),
      clock_(OrSystemClock(std::move(clock))),
      state_(std::make_unique<State>()) {}

GeneratorConnector::~GeneratorConnector() { Stop(); }

Result<std::shared_ptr<GeneratorConnector>> GeneratorConnector::Make(
    std::string name, std::string table, std::shared_ptr<arrow::Schema> schema,
    GeneratorSpec spec, BufferLimits limits, Clock clock) {
  RILL_RETURN_NOT_OK(InitializeArrowCompute());
  if (!(spec.rows_per_second > 0) || spec.interval_ms < 1) {
    return Status::Invalid("generator needs rows_per_second > 0 and interval_ms >= 1");
  }
  for (const auto& [column, col_spec] : spec.columns) {
    if (schema->GetFieldIndex(column) < 0) {
      return Status::Invalid("generator column '", column, "' is not a column of table '",
                             table, "'");
    }
  }
  for (const auto& field : schema->fields()) {
    if (!field->nullable() && spec.columns.count(field->name()) == 0) {
      return Status::Invalid("generator has no spec for non-nullable column '", field->name(),
                             "'");
    }
  }
  std::shared_ptr<GeneratorConnector> out(new GeneratorConnector(
      std::move(name), std::move(table), schema, std::move(spec), limits, std::move(clock)));
  State& state = *out->state_;
  state.rng.seed(out->spec_.seed != 0 ? out->spec_.seed : std::random_device{}());
  for (const auto& [column, col_spec] : out->spec_.columns) {
    const auto& type = schema->GetFieldByName(column)->type();
    if (col_spec.kind == Kind::kSequence) {
      state.next_sequence[column] = col_spec.start;
    }
    if (col_spec.kind == Kind::kChoice || col_spec.kind == Kind::kConstant) {
      arrow::StringBuilder b;
      RILL_RETURN_NOT_OK(b.AppendValues(col_spec.choices));
      RILL_ASSIGN_OR_RAISE(auto text, b.Finish());
      auto cast = CastTo(text, type);
      if (!cast.ok()) {
        return Status::Invalid("generator values of column '", column, "' do not cast to ",
                               type->ToString(), ": ", cast.status().message());
      }
      state.choice_values[column] = *cast;
      std::vector<double> weights = col_spec.weights;
      if (weights.empty()) {
        weights.assign(col_spec.choices.size(), 1.0);
      }
      state.choice_pick[column] =
          std::discrete_distribution<size_t>(weights.begin(), weights.end());
    }
  }
  // One trial batch proves every spec casts to its column.
  RILL_RETURN_NOT_OK(out->Generate(1, 0).status());
  for (const auto& [column, col_spec] : out->spec_.columns) {
    if (col_spec.kind == Kind::kSequence) {
      state.next_sequence[column] = col_spec.start;  // the trial row does not count
    }
  }
  return out;
}

Result<std::shared_ptr<arrow::RecordBatch>> GeneratorConnector::Generate(int64_t rows,
                                                                         double now) {
  State& s = *state_;
  std::vector<std::shared_ptr<arrow::Array>> columns;
  for (const auto& field : schema_->fields()) {
    auto it = spec_.columns.find(field->name());
    std::shared_ptr<arrow::Array> array;
    if (it == spec_.columns.end()) {
      RILL_ASSIGN_OR_RAISE(array, arrow::MakeArrayOfNull(field->type(), rows));
      columns.push_back(std::move(array));
      continue;
    }
    const GeneratorColumnSpec& c = it->second;
    switch (c.kind) {
      case Kind::kSequence: {
        arrow::Int64Builder b;
        int64_t& next = s.next_sequence[field->name()];
        for (int64_t i = 0; i < rows; ++i, next += c.step) {
          RILL_RETURN_NOT_OK(b.Append(next));
        }
        RILL_ASSIGN_OR_RAISE(array, b.Finish());
        break;
      }
      case Kind::kRandomInt: {
        std::uniform_int_distribution<int64_t> d(static_cast<int64_t>(c.lo),
                                                 static_cast<int64_t>(c.hi));
        arrow::Int64Builder b;
        for (int64_t i = 0; i < rows; ++i) {
          RILL_RETURN_NOT_OK(b.Append(d(s.rng)));
        }
        RILL_ASSIGN_OR_RAISE(array, b.Finish());
        break;
      }
      case Kind::kRandomFloat: {
        std::uniform_real_distribution<double> d(c.lo, c.hi);
        arrow::DoubleBuilder b;
        for (int64_t i = 0; i < rows; ++i) {
          RILL_RETURN_NOT_OK(b.Append(d(s.rng)));
        }
        RILL_ASSIGN_OR_RAISE(array, b.Finish());
        break;
      }
      case Kind::kChoice:
      case Kind::kConstant: {
        arrow::Int32Builder indices;
        auto& pick = s.choice_pick[field->name()];
        for (int64_t i = 0; i < rows; ++i) {
          RILL_RETURN_NOT_OK(indices.Append(static_cast<int32_t>(pick(s.rng))));
        }
        RILL_ASSIGN_OR_RAISE(auto idx, indices.Finish());
        RILL_ASSIGN_OR_RAISE(arrow::Datum taken,
                             arrow::compute::Take(s.choice_values[field->name()], idx));
        array = taken.make_array();
        break;
      }
      case Kind::kNow:
        RILL_ASSIGN_OR_RAISE(array, NowColumn(*field->type(), rows, now));
        break;
    }
    auto cast = CastTo(array, field->type());
    if (!cast.ok()) {
      return Status::Invalid("generator column '", field->name(), "' does not cast to ",
                             field->type()->ToString(), ": ", cast.status().message());
    }
    columns.push_back(*cast);
  }
  return arrow::RecordBatch::Make(schema_, rows, std::move(columns));
}

Status GeneratorConnector::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (producer_.joinable()) {
    return Status::OK();
  }
  stop_ = false;
  producer_ = std::thread([this] { Produce(); });
  return Status::OK();
}

void GeneratorConnector::Stop() {
  std::thread producer;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    producer = std::move(producer_);
  }
  cv_.notify_all();
  if (producer.joinable()) {
    producer.join();
  }
}

void GeneratorConnector::Produce() {
  const auto start = std::chrono::steady_clock::now();
  const auto interval = std::chrono::milliseconds(spec_.interval_ms);
  int64_t sent = 0;
  std::unique_lock<std::mutex> lock(mu_);
  while (!cv_.wait_for(lock, interval, [&] { return stop_; })) {
    lock.unlock();
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    // Never burst more than one second's worth after a stall.
    const int64_t target = static_cast<int64_t>(elapsed * spec_.rows_per_second);
    const int64_t due = std::min<int64_t>(
        target - sent, std::max<int64_t>(static_cast<int64_t>(spec_.rows_per_second), 1));
    if (due > 0) {
      auto batch = Generate(due, clock_());
      if (batch.ok()) {
        (void)Push(*batch);  // overflow is counted by the buffer
      }
      sent = std::max(sent + due, target - static_cast<int64_t>(spec_.rows_per_second));
    }
    lock.lock();
  }
}

}  // namespace rill::app
