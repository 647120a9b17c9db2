// Bindings of event-time windows: rill::WindowTask (added to an engine) and
// rill::WindowOperator (a standalone window state machine used by the
// rills.windowing toolkit).
#include <algorithm>
#include <cmath>
#include <tuple>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <arrow/array.h>
#include <arrow/builder.h>
#include <arrow/record_batch.h>
#include <arrow/table.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "bind_common.h"
#include "py_arrow.h"
#include "py_status.h"
#include "rill/engine/engine.h"
#include "rill/engine/window_operator.h"
#include "rill/engine/window_task.h"

namespace rills {
namespace {

using Aggregations = std::vector<std::pair<std::string, std::string>>;

rill::WindowSpec MakeSpec(const std::optional<std::string>& time_column,
                          const std::string& window, double size_seconds, double slide_seconds,
                          double gap_seconds, const std::vector<std::string>& group_by,
                          const Aggregations& aggregations, double allowed_lateness_seconds,
                          const std::string& emit, double idle_timeout_seconds) {
  rill::WindowSpec spec;
  spec.kind = ValueOrRaise(rill::ParseWindowKind(window));
  spec.time_column = time_column.value_or("");
  spec.size_seconds = size_seconds;
  spec.slide_seconds = slide_seconds;
  spec.gap_seconds = gap_seconds;
  spec.group_by = group_by;
  for (const auto& [output, expression] : aggregations) {
    spec.aggregations.push_back(ValueOrRaise(rill::ParseWindowAggregation(output, expression)));
  }
  spec.allowed_lateness_seconds = allowed_lateness_seconds;
  spec.emit = ValueOrRaise(rill::ParseEmitMode(emit));
  spec.idle_timeout_seconds = idle_timeout_seconds;
  ThrowIfError(spec.Validate());
  return spec;
}

nb::dict WindowStatsToDict(const rill::WindowStats& s) {
  nb::dict d;
  d["rows_in"] = s.rows_in;
  d["late_rows"] = s.late_rows;
  d["null_time_rows"] = s.null_time_rows;
  d["windows_open"] = s.windows_open;
  d["groups_open"] = s.groups_open;
  d["groups_emitted"] = s.groups_emitted;
  d["updates_emitted"] = s.updates_emitted;
  d["state_bytes"] = s.state_bytes;
  d["watermark"] = s.watermark;
  d["max_event_time"] = s.max_event_time;
  return d;
}

/// Owns a standalone operator (nanobind constructs objects in place).
struct PyWindowOperator {
  std::unique_ptr<rill::WindowOperator> op;
};

/// The event-time core of rills.windowing's TumblingWindow / SlidingWindow: a
/// count(*) window operator over one float64 time column with window-based
/// lateness; Python keeps the events of each window.
struct PyEventWindows {
  std::unique_ptr<rill::WindowOperator> op;
  std::shared_ptr<arrow::Schema> schema;
  arrow::DoubleBuilder times{};

  /// Add an event at `t`: the [start, end) windows it joined, or None if late.
  nb::object Add(double t) {
    auto windows = op->OpenWindowsOf(t);
    ThrowIfError(times.Append(t));
    std::shared_ptr<arrow::Array> array;
    ThrowIfError(times.Finish(&array));
    rill::LateRows late;
    ThrowIfError(op->Consume(arrow::RecordBatch::Make(schema, 1, {array}), 0, &late));
    if (!late.rows.empty()) return nb::none();
    return nb::cast(windows);
  }

  /// Close the windows the watermark passed: [(start, end, count)], oldest first.
  std::vector<std::tuple<double, double, int64_t>> Close() {
    auto table = ValueOrRaise(op->Emit(0));
    ThrowIfError(table->Validate());
    std::vector<std::tuple<double, double, int64_t>> out;
    auto combined = ValueOrRaise(table->CombineChunksToBatch());
    const auto& start = static_cast<const arrow::DoubleArray&>(*combined->column(0));
    const auto& end = static_cast<const arrow::DoubleArray&>(*combined->column(1));
    const auto& count = static_cast<const arrow::Int64Array&>(*combined->column(2));
    for (int64_t i = 0; i < combined->num_rows(); ++i) {
      out.emplace_back(start.Value(i), end.Value(i), count.Value(i));
    }
    std::sort(out.begin(), out.end());
    return out;
  }
};

template <typename F>
auto NoGil(F&& fn) {
  nb::gil_scoped_release release;
  return fn();
}

}  // namespace

void BindWindow(nb::module_& m) {
  nb::class_<rill::WindowTask>(m, "WindowTask")
      .def_prop_ro("name", [](const rill::WindowTask& t) { return t.name(); })
      .def_prop_ro("late_table", [](const rill::WindowTask& t) { return t.late_table(); })
      .def("describe", &rill::WindowTask::Describe)
      .def("stats", [](const rill::WindowTask& t) {
        auto s = t.stats_snapshot();
        nb::dict d = WindowStatsToDict(s.window);
        d["late_rows_kept"] = s.late_rows_kept;
        d["runs_with_rows"] = s.runs_with_rows;
        return d;
      });

  m.def(
      "make_window_task",
      [](const std::string& name, const std::string& source_table,
         const std::string& output_table, const std::optional<std::string>& time_column,
         const std::string& window, double size_seconds, double slide_seconds,
         double gap_seconds, const std::vector<std::string>& group_by,
         const Aggregations& aggregations, double allowed_lateness_seconds,
         const std::string& emit, double idle_timeout_seconds, std::optional<int64_t> max_rows,
         std::optional<double> max_age_seconds, const std::string& late_table,
         int64_t late_max_rows, double interval_seconds) {
        rill::WindowTaskOptions o;
        o.name = name;
        o.source_table = source_table;
        o.output_table = output_table;
        o.spec = MakeSpec(time_column, window, size_seconds, slide_seconds, gap_seconds,
                          group_by, aggregations, allowed_lateness_seconds, emit,
                          idle_timeout_seconds);
        if (max_rows || max_age_seconds) {
          o.retention = rill::RetentionPolicy{max_rows, max_age_seconds, "z_insert_ts"};
        }
        o.late_table = late_table;
        o.late_max_rows = late_max_rows;
        o.interval_seconds = interval_seconds;
        return ValueOrRaise(rill::WindowTask::Make(std::move(o)));
      },
      nb::arg("name"), nb::arg("source_table"), nb::arg("output_table"),
      nb::arg("time_column").none(), nb::arg("window"), nb::arg("size_seconds"),
      nb::arg("slide_seconds"), nb::arg("gap_seconds"), nb::arg("group_by"),
      nb::arg("aggregations"), nb::arg("allowed_lateness_seconds"), nb::arg("emit"),
      nb::arg("idle_timeout_seconds"), nb::arg("max_rows").none(),
      nb::arg("max_age_seconds").none(), nb::arg("late_table"), nb::arg("late_max_rows"),
      nb::arg("interval_seconds"));

  m.def("add_window_task", [](nb::handle engine, std::shared_ptr<rill::WindowTask> task) {
    rill::Engine& e = CoreEngine(engine);
    ThrowIfError(NoGil([&] { return e.AddWindowTask(task); }));
  });
  m.def("remove_window_task", [](nb::handle engine, const std::string& name) {
    rill::Engine& e = CoreEngine(engine);
    ThrowIfError(NoGil([&] { return e.RemoveWindowTask(name); }));
  });

  nb::class_<PyEventWindows>(m, "EventWindows")
      .def("__init__",
           [](PyEventWindows* self, double size_seconds, double slide_seconds) {
             rill::WindowSpec spec;
             spec.kind = slide_seconds == size_seconds ? rill::WindowKind::kTumbling
                                                       : rill::WindowKind::kHopping;
             spec.time_column = "timestamp";
             spec.size_seconds = size_seconds;
             spec.slide_seconds = slide_seconds;
             spec.aggregations.push_back(
                 ValueOrRaise(rill::ParseWindowAggregation("count", "count(*)")));
             spec.late_by_window = true;
             ThrowIfError(spec.Validate());
             auto schema = arrow::schema({arrow::field("timestamp", arrow::float64())});
             new (self) PyEventWindows{
                 ValueOrRaise(rill::WindowOperator::Make(spec, schema, nullptr)), schema};
           },
           nb::arg("size_seconds"), nb::arg("slide_seconds"))
      .def("add", &PyEventWindows::Add, nb::arg("timestamp"))
      .def("close", &PyEventWindows::Close)
      .def("advance",
           [](PyEventWindows& self, double watermark) { self.op->AdvanceWatermark(watermark); },
           nb::arg("watermark"))
      .def_prop_ro("watermark", [](const PyEventWindows& self) { return self.op->watermark(); })
      .def("stats",
           [](const PyEventWindows& self) { return WindowStatsToDict(self.op->stats()); });

  // A standalone operator (no engine, no DuckDB aggregations).
  nb::class_<PyWindowOperator>(m, "WindowOperator")
      .def("__init__",
           [](PyWindowOperator* self, nb::handle schema,
              const std::optional<std::string>& time_column, const std::string& window,
              double size_seconds, double slide_seconds, double gap_seconds,
              const std::vector<std::string>& group_by, const Aggregations& aggregations,
              double allowed_lateness_seconds) {
             auto spec = MakeSpec(time_column, window, size_seconds, slide_seconds, gap_seconds,
                                  group_by, aggregations, allowed_lateness_seconds, "on_close",
                                  0);
             auto input = ValueOrRaise(ImportSchema(schema));
             new (self) PyWindowOperator{ValueOrRaise(rill::WindowOperator::Make(spec, input, nullptr))};
           })
      .def("consume",
           [](PyWindowOperator& self, nb::handle data, double now) {
             auto imported = ValueOrRaise(ImportBatches(data));
             std::vector<int64_t> late_rows;
             int64_t offset = 0;
             for (const auto& batch : imported.batches) {
               rill::LateRows late;
               ThrowIfError(self.op->Consume(batch, now, &late));
               for (int64_t r : late.rows) late_rows.push_back(offset + r);
               offset += batch->num_rows();
             }
             return late_rows;
           })
      .def("emit", [](PyWindowOperator& self,
                      double now) { return ExportTable(ValueOrRaise(self.op->Emit(now))); })
      .def("flush",
           [](PyWindowOperator& self) { return ExportTable(ValueOrRaise(self.op->Flush())); })
      .def("peek",
           [](PyWindowOperator& self) { return ExportTable(ValueOrRaise(self.op->Peek())); })
      .def_prop_ro("watermark", [](const PyWindowOperator& self) { return self.op->watermark(); })
      .def("stats",
           [](const PyWindowOperator& self) { return WindowStatsToDict(self.op->stats()); });
}

}  // namespace rills
