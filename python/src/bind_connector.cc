// Bindings of connectors: the C++ MemoryConnector, and PyConnector, which
// adapts a Python BaseConnector subclass to rill::Connector.
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <arrow/record_batch.h>
#include <arrow/table.h>
#include <arrow/type.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bind_common.h"
#include "py_arrow.h"
#include "py_callback.h"
#include "py_status.h"
#include "rill/connector/bounded_buffer.h"
#include "rill/connector/memory_connector.h"

namespace rills {

nb::dict StatsToDict(const rill::ConnectorStats& stats) {
  nb::dict d;
  d["buffered_records"] = stats.buffered_records;
  d["buffered_bytes"] = stats.buffered_bytes;
  d["pushed_records"] = stats.pushed_records;
  d["dropped_records"] = stats.dropped_records;
  d["refused_records"] = stats.refused_records;
  d["drained_records"] = stats.drained_records;
  d["errors"] = stats.errors;
  d["received_bytes"] = stats.received_bytes;
  d["received_records"] = stats.received_records;
  d["parsed_records"] = stats.parsed_records;
  d["rejected_records"] = stats.rejected_records;
  d["unknown_fields"] = stats.unknown_fields;
  d["tombstones"] = stats.tombstones;
  d["reconnects"] = stats.reconnects;
  d["lag"] = stats.lag;
  d["lag_bytes"] = stats.lag_bytes;
  d["snapshot_rows"] = stats.snapshot_rows;
  d["snapshot_rows_total"] = stats.snapshot_rows_total;
  d["snapshot_rows_per_s"] = stats.snapshot_rows_per_s;
  d["snapshot_eta_seconds"] = stats.snapshot_eta_seconds;
  d["snapshot_done"] = stats.snapshot_done;
  return d;
}

namespace {

/// A connector implemented in Python. Poll() runs on the tick thread and calls
/// the Python object's `_rill_poll()` (which calls `read_batch()`) with the
/// GIL held; Start/Stop call its start()/stop(). Exceptions are reported
/// (logged + engine event with the traceback) and counted; they never reach
/// the engine as C++ errors, so a failing connector costs one report per tick.
class PyConnector : public rill::Connector {
 public:
  PyConnector(std::string name, std::string target_table, PyRef object, ReporterPtr reporter)
      : rill::Connector(std::move(name), std::move(target_table), nullptr),
        object_(std::move(object)),
        reporter_(std::move(reporter)) {}

  arrow::Status Start() override {
    std::string error;
    bool ok = CallPython(reporter_, component(), "start() raised", [&] {
      try {
        object_->attr("start")();
      } catch (nb::python_error& e) {
        error = e.what();
        throw;
      }
    });
    if (!ok && !error.empty()) {
      return arrow::Status::IOError("connector '", name(), "': start() raised: ", error);
    }
    return arrow::Status::OK();
  }

  void Stop() override {
    CallPython(reporter_, component(), "stop() raised", [&] { object_->attr("stop")(); });
  }

  rill::Result<std::vector<std::shared_ptr<arrow::RecordBatch>>> Poll() override {
    std::vector<std::shared_ptr<arrow::RecordBatch>> batches;
    arrow::Status import_status;
    bool ok = CallPython(reporter_, component(), "read_batch() raised", [&] {
      nb::object result = object_->attr("_rill_poll")();
      if (result.is_none()) {
        return;
      }
      auto imported = ImportBatches(result);
      if (!imported.ok()) {
        import_status = imported.status();
        return;
      }
      batches = std::move(imported->batches);
    });
    std::lock_guard<std::mutex> lock(mu_);
    if (!ok) {
      stats_.errors++;
      return batches;
    }
    if (!import_status.ok()) {
      stats_.errors++;
      return import_status.WithMessage("connector '", name(), "': read_batch() returned ",
                                        import_status.message());
    }
    for (const auto& batch : batches) {
      stats_.pushed_records += batch->num_rows();
      stats_.drained_records += batch->num_rows();
    }
    return batches;
  }

  rill::ConnectorStats stats() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }

 private:
  std::string component() const { return "connector:" + name(); }

  PyRef object_;
  ReporterPtr reporter_;

 public:
  /// The Python BaseConnector this adapts.
  nb::object object() const { return *object_; }

 private:
  mutable std::mutex mu_;
  rill::ConnectorStats stats_;  // guarded by mu_
};

}  // namespace

void BindConnector(nb::module_& m) {
  nb::class_<rill::Connector>(m, "Connector", "Base of connectors held by the engine.")
      .def_prop_ro("name", &rill::Connector::name)
      .def_prop_ro("target_table", &rill::Connector::target_table)
      .def("stats", [](const rill::Connector& c) { return StatsToDict(c.stats()); })
      .def_prop_ro(
          "address", [](const rill::Connector& c) { return reinterpret_cast<uintptr_t>(&c); },
          "Identity of the C++ connector (to find its Python wrapper).");

  nb::class_<rill::MemoryConnector, rill::Connector>(m, "MemoryConnector")
      .def_static(
          "make",
          [](const std::string& target_table, nb::handle schema, int64_t max_records,
             int64_t max_bytes, const std::string& on_overflow, const std::string& name) {
            rill::BufferLimits limits;
            limits.max_records = max_records;
            limits.max_bytes = max_bytes;
            limits.on_overflow = ValueOrRaise(rill::ParseOverflowPolicy(on_overflow));
            std::shared_ptr<arrow::Schema> arrow_schema;
            if (!schema.is_none()) {
              arrow_schema = ValueOrRaise(ImportSchema(schema));
            }
            return std::make_shared<rill::MemoryConnector>(target_table, arrow_schema, limits,
                                                           name);
          },
          nb::arg("target_table"), nb::arg("schema").none(), nb::arg("max_records"),
          nb::arg("max_bytes"), nb::arg("on_overflow"), nb::arg("name"))
      .def(
          "push",
          [](rill::MemoryConnector& c, nb::handle data) {
            // One imported batch (a pushed RecordBatch) goes straight to the
            // buffer: no Table around it, no reader over that Table (issue 16).
            auto imported = ValueOrRaise(ImportBatches(data));
            arrow::Status status;
            if (imported.batches.size() == 1) {
              nb::gil_scoped_release release;
              status = c.Push(imported.batches.front());
            } else {
              auto table = ValueOrRaise(
                  arrow::Table::FromRecordBatches(imported.schema, imported.batches));
              nb::gil_scoped_release release;
              status = c.Push(table);
            }
            ThrowIfError(status);
          },
          nb::arg("data"))
      .def_prop_rw(
          "op_column", [](const rill::MemoryConnector& c) { return c.op_column(); },
          [](rill::MemoryConnector& c, const std::string& column) { c.set_op_column(column); },
          "The op_column option (\"\": none).")
      .def_prop_ro("limits",
                   [](const rill::MemoryConnector& c) {
                     const auto& l = c.buffer().limits();
                     return nb::make_tuple(l.max_records, l.max_bytes,
                                           std::string(rill::OverflowPolicyName(l.on_overflow)));
                   },
                   "(max_records, max_bytes, on_overflow); 0 means unlimited.")
      .def("schema_capsule",
           [](const rill::MemoryConnector& c) -> nb::object {
             if (!c.schema()) return nb::none();
             return ExportSchema(*c.schema());
           })
      .def("poll", [](rill::MemoryConnector& c) -> nb::object {
        rill::Result<std::vector<std::shared_ptr<arrow::RecordBatch>>> result;
        {
          nb::gil_scoped_release release;
          result = c.Poll();
        }
        auto batches = ValueOrRaise(std::move(result));
        if (batches.empty()) {
          return nb::none();
        }
        auto schema = batches.front()->schema();
        return ExportBatches(std::move(batches), schema);
      });

  nb::class_<PyConnector, rill::Connector>(m, "PyConnector")
      .def_static(
          "make",
          [](const std::string& name, const std::string& target_table, nb::handle object,
             std::shared_ptr<Reporter> reporter) {
            return std::make_shared<PyConnector>(name, target_table, MakePyRef(object),
                                                 std::move(reporter));
          },
          nb::arg("name"), nb::arg("target_table"), nb::arg("connector"), nb::arg("reporter"))
      .def_prop_ro("py_object", &PyConnector::object, "The Python connector it adapts.");
}

}  // namespace rills
