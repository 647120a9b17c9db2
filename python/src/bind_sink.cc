// Bindings of the sinks (rill/sink/sink_set.h): rills.sinks.
//
// sink_add_{kafka,postgres,file,python}(engine, common, ...) build the writer
// and add it to the engine's SinkSet; `common` is the dict of SinkOptions
// fields rills.sinks.Sink validated (an unknown key is a ValueError). The
// returned _core.Sink is a handle on the running sink: stats(), flush().
// PySinkWriter adapts a Python object (rills.sinks.PythonSink) to SinkWriter:
// it runs on the sink's own thread, takes the GIL for each call, and turns a
// Python exception into an IOError, so the sink's retry / on_error applies.
//
// Every call that may wait for a sink (add, remove, flush) releases the GIL:
// the sink's thread may need it to call a Python writer.
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <arrow/record_batch.h>
#include <arrow/type.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bind_common.h"
#include "py_arrow.h"
#include "py_callback.h"
#include "py_status.h"
#include "rill/sink/file_sink.h"
#include "rill/sink/kafka_sink.h"
#include "rill/sink/postgres_sink.h"
#include "rill/sink/sink_set.h"

namespace rills {

namespace {

using rill::Sink;
using rill::SinkOptions;
using rill::SinkSet;

template <typename T>
T CastOption(const std::string& name, nb::handle value) {
  T out{};
  if (!nb::try_cast<T>(value, out)) {
    Raise(PyExc_TypeError, "sink option '" + name + "' has the wrong type (" +
                               nb::cast<std::string>(nb::str(value.type())) + ")");
  }
  return out;
}

/// SinkOptions from rills.sinks.Sink._common_options() (already checked there;
/// SinkSet::Add checks the ranges again and names the option).
SinkOptions MakeSinkOptions(nb::dict common) {
  SinkOptions o;
  for (auto [key, value] : common) {
    const std::string name = nb::cast<std::string>(key);
    if (name == "name") {
      o.name = CastOption<std::string>(name, value);
    } else if (name == "table") {
      o.table = CastOption<std::string>(name, value);
    } else if (name == "mode") {
      o.mode = ValueOrRaise(rill::ParseSinkMode(CastOption<std::string>(name, value)));
    } else if (name == "interval_seconds") {
      o.interval_seconds = CastOption<double>(name, value);
    } else if (name == "max_batch_rows") {
      o.max_batch_rows = CastOption<int64_t>(name, value);
    } else if (name == "on_error") {
      o.on_error = ValueOrRaise(rill::ParseSinkErrorPolicy(CastOption<std::string>(name, value)));
    } else if (name == "retry_initial_seconds") {
      o.retry_initial_seconds = CastOption<double>(name, value);
    } else if (name == "retry_max_seconds") {
      o.retry_max_seconds = CastOption<double>(name, value);
    } else if (name == "max_backlog_rows") {
      o.max_backlog_rows = CastOption<int64_t>(name, value);
    } else if (name == "emit_retention_deletes") {
      o.emit_retention_deletes = CastOption<bool>(name, value);
    } else {
      Raise(PyExc_ValueError, "unknown sink option '" + name + "'");
    }
  }
  return o;
}

nb::dict OptionsToDict(const SinkOptions& o) {
  nb::dict d;
  d["name"] = o.name;
  d["table"] = o.table;
  d["mode"] = std::string(rill::SinkModeName(o.mode));
  d["interval_seconds"] = o.interval_seconds;
  d["max_batch_rows"] = o.max_batch_rows;
  d["on_error"] = std::string(rill::SinkErrorPolicyName(o.on_error));
  d["retry_initial_seconds"] = o.retry_initial_seconds;
  d["retry_max_seconds"] = o.retry_max_seconds;
  d["max_backlog_rows"] = o.max_backlog_rows;
  d["emit_retention_deletes"] = o.emit_retention_deletes;
  return d;
}

nb::dict SinkStatsToDict(const rill::SinkStats& s) {
  nb::dict d;
  d["rows_written"] = s.rows_written;
  d["batches"] = s.batches;
  d["bytes"] = s.bytes;
  d["errors"] = s.errors;
  d["retries"] = s.retries;
  d["dropped_rows"] = s.dropped_rows;
  d["snapshots"] = s.snapshots;
  d["committed_version"] = s.committed_version;
  d["lag_versions"] = s.lag_versions;
  d["lag_seconds"] = s.lag_seconds;
  d["backpressure"] = s.backpressure;
  d["last_error"] = s.last_error;
  return d;
}

/// A SinkWriter whose target is a Python object with
/// `_rill_write(stream_capsule, mode, snapshot)` and `_rill_commit(version)`
/// (rills.sinks.PythonSink). At-least-once: it keeps no progress.
class PySinkWriter : public rill::SinkWriter {
 public:
  explicit PySinkWriter(PyRef object) : object_(std::move(object)) {}

  rill::Status Open(const std::shared_ptr<arrow::Schema>& table_schema,
                    const std::vector<std::string>& /*primary_key*/) override {
    change_schema_ = rill::ChangeSchema(table_schema);
    return rill::Status::OK();
  }

  rill::Result<std::optional<rill::SinkProgress>> LoadProgress() override {
    return std::optional<rill::SinkProgress>();
  }

  rill::Status Write(const rill::ChangeSet& changes, rill::SinkMode mode) override {
    if (changes.batches.empty() && !changes.snapshot) return rill::Status::OK();
    std::shared_ptr<arrow::Schema> schema =
        changes.batches.empty() ? change_schema_ : changes.batches.front()->schema();
    const bool snapshot = changes.snapshot;
    std::vector<std::shared_ptr<arrow::RecordBatch>> batches = changes.batches;
    return Call("write", [&] {
      nb::object capsule = ExportBatches(std::move(batches), schema);
      object_->attr("_rill_write")(capsule, rill::SinkModeName(mode), snapshot);
    });
  }

  rill::Status Commit(const rill::CommitPoint& point) override {
    return Call("commit", [&] { object_->attr("_rill_commit")(point.version); });
  }

  void Abort() override {}
  void Close() override {}
  int64_t bytes_written() const override { return 0; }
  const char* type() const override { return "python"; }

 private:
  /// Run `fn` with the GIL; a Python exception becomes an IOError naming `what`.
  template <typename F>
  rill::Status Call(const char* what, F&& fn) {
    if (!PythonAlive()) return rill::Status::Cancelled("Python is shutting down");
    nb::gil_scoped_acquire gil;
    try {
      fn();
      return rill::Status::OK();
    } catch (nb::python_error& error) {
      auto [message, detail] = DescribePythonError(error);
      return rill::Status::IOError("python sink ", what, "() raised ", message);
    } catch (const std::exception& error) {
      return rill::Status::IOError("python sink ", what, "(): ", error.what());
    }
  }

  PyRef object_;
  std::shared_ptr<arrow::Schema> change_schema_;
};

std::shared_ptr<Sink> AddSink(nb::handle engine, nb::dict common,
                              rill::Result<std::unique_ptr<rill::SinkWriter>> writer) {
  SinkOptions options = MakeSinkOptions(common);
  std::unique_ptr<rill::SinkWriter> w = ValueOrRaise(std::move(writer));
  SinkSet& sinks = SinkSet::For(&CoreEngine(engine));
  rill::Result<std::shared_ptr<Sink>> added;
  {
    nb::gil_scoped_release release;
    added = sinks.Add(std::move(options), std::move(w));
  }
  return ValueOrRaise(std::move(added));
}

}  // namespace

void BindSink(nb::module_& m) {
  nb::class_<Sink>(m, "Sink", "A running sink of an engine (rill::Sink).")
      .def_prop_ro("name", [](const Sink& s) { return s.name(); })
      .def_prop_ro("table", [](const Sink& s) { return s.options().table; })
      .def_prop_ro("type", [](const Sink& s) { return std::string(s.type()); })
      .def("options", [](const Sink& s) { return OptionsToDict(s.options()); })
      .def("stats",
           [](const Sink& s) {
             rill::SinkStats stats;
             {
               // A sink's thread may hold its lock while it waits for the GIL
               // (a PythonSink's write), so never wait for that lock holding it.
               nb::gil_scoped_release release;
               stats = s.stats();
             }
             return SinkStatsToDict(stats);
           })
      .def(
          "flush",
          [](Sink& s, double timeout_seconds) {
            rill::Status st;
            {
              nb::gil_scoped_release release;
              st = s.Flush(timeout_seconds);
            }
            // Flush's timeout is an IOError "deadline exceeded: ..." (sink_set.h):
            // TimeoutError, which is an OSError too.
            if (st.IsIOError() && st.message().rfind("deadline exceeded", 0) == 0) {
              Raise(PyExc_TimeoutError, st.message());
            }
            ThrowIfError(st);
          },
          nb::arg("timeout_seconds"))
      .def_prop_ro(
          "address", [](const Sink& s) { return reinterpret_cast<uintptr_t>(&s); },
          "Identity of the C++ sink (to find its Python object).");

  m.def(
      "sink_add_kafka",
      [](nb::handle engine, nb::dict common, const std::string& topic,
         const std::map<std::string, std::string>& kafka_config, const std::string& format,
         const std::vector<std::string>& key_columns, const std::string& key_format,
         bool exactly_once, const std::string& transactional_id,
         const std::string& schema_registry_url, const std::string& schema_registry_user,
         const std::string& schema_registry_password) {
        rill::KafkaSinkOptions o;
        o.topic = topic;
        o.schema_registry_url = schema_registry_url;
        o.schema_registry_user = schema_registry_user;
        o.schema_registry_password = schema_registry_password;
        o.kafka_config = kafka_config;
        o.format = format;
        o.key_columns = key_columns;
        o.key_format = key_format;
        o.exactly_once = exactly_once;
        o.transactional_id = transactional_id;
        return AddSink(engine, common, rill::MakeKafkaSinkWriter(std::move(o)));
      },
      nb::arg("engine"), nb::arg("common"), nb::arg("topic"), nb::arg("kafka_config"),
      nb::arg("format"), nb::arg("key_columns"), nb::arg("key_format"),
      nb::arg("exactly_once"), nb::arg("transactional_id"),
      nb::arg("schema_registry_url") = "", nb::arg("schema_registry_user") = "",
      nb::arg("schema_registry_password") = "");
  m.def(
      "sink_add_postgres",
      [](nb::handle engine, nb::dict common, const std::string& dsn,
         const std::string& target_table, bool create_table, double connect_timeout_seconds) {
        rill::PostgresSinkOptions o;
        o.dsn = dsn;
        o.target_table = target_table;
        o.create_table = create_table;
        o.connect_timeout_seconds = connect_timeout_seconds;
        SinkOptions options = MakeSinkOptions(common);
        o.sink_name = options.name;
        o.mode = options.mode;  // the target is created for this mode
        return AddSink(engine, common, rill::MakePostgresSinkWriter(std::move(o)));
      },
      nb::arg("engine"), nb::arg("common"), nb::arg("dsn"), nb::arg("target_table"),
      nb::arg("create_table"), nb::arg("connect_timeout_seconds"));
  m.def(
      "sink_add_file",
      [](nb::handle engine, nb::dict common, const std::string& path, const std::string& format,
         const std::vector<std::string>& partition_by, int64_t roll_rows,
         double roll_seconds) {
        rill::FileSinkOptions o;
        o.path = path;
        o.format = format;
        o.partition_by = partition_by;
        o.roll_rows = roll_rows;
        o.roll_seconds = roll_seconds;
        return AddSink(engine, common, rill::MakeFileSinkWriter(std::move(o)));
      },
      nb::arg("engine"), nb::arg("common"), nb::arg("path"), nb::arg("format"),
      nb::arg("partition_by"), nb::arg("roll_rows"), nb::arg("roll_seconds"));
  m.def(
      "sink_add_python",
      [](nb::handle engine, nb::dict common, nb::handle target) {
        std::unique_ptr<rill::SinkWriter> writer =
            std::make_unique<PySinkWriter>(MakePyRef(target));
        return AddSink(engine, common, std::move(writer));
      },
      nb::arg("engine"), nb::arg("common"), nb::arg("target"),
      "Add a sink whose writer is `target`._rill_write / _rill_commit.");
  m.def(
      "sink_remove",
      [](nb::handle engine, const std::string& name) {
        SinkSet& sinks = SinkSet::For(&CoreEngine(engine));
        nb::gil_scoped_release release;
        return sinks.Remove(name);
      },
      nb::arg("engine"), nb::arg("name"), "Stop (after a final flush) and forget a sink.");
  m.def(
      "sink_list",
      [](nb::handle engine) {
        SinkSet& sinks = SinkSet::For(&CoreEngine(engine));
        nb::gil_scoped_release release;
        return sinks.List();
      },
      nb::arg("engine"), "The engine's sinks in the order they were added.");
  m.def(
      "sink_find",
      [](nb::handle engine, const std::string& name) {
        SinkSet& sinks = SinkSet::For(&CoreEngine(engine));
        nb::gil_scoped_release release;
        return sinks.Find(name);
      },
      nb::arg("engine"), nb::arg("name"));
}

}  // namespace rills
