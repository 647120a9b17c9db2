// Bindings of LiveTable, table helpers and the Reporter handle.
#include <cmath>
#include <memory>
#include <string>
#include <utility>

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
#include "rill/table/schema.h"

namespace rills {

using rill::LiveTable;

rill::TableOptions MakeTableOptions(const std::vector<std::string>& primary_key,
                                    const std::optional<std::string>& mode,
                                    std::optional<int64_t> max_rows,
                                    std::optional<double> max_age_seconds,
                                    const std::optional<std::string>& time_column,
                                    std::optional<int64_t> auto_compact_chunks) {
  rill::TableOptions options;
  options.primary_key = primary_key;
  if (mode.has_value()) {
    options.mode = ValueOrRaise(rill::ParseTableMode(*mode));
  }
  if (max_rows.has_value() || max_age_seconds.has_value()) {
    rill::RetentionPolicy policy;
    policy.max_rows = max_rows;
    policy.max_age_seconds = max_age_seconds;
    if (time_column.has_value()) {
      policy.time_column = *time_column;
    }
    ThrowIfError(policy.Validate());
    options.retention = std::move(policy);
  }
  if (auto_compact_chunks.has_value()) {
    options.auto_compact_chunks = *auto_compact_chunks;
  }
  return options;
}

nb::object RetentionToTuple(const std::optional<rill::RetentionPolicy>& policy) {
  if (!policy.has_value()) {
    return nb::none();
  }
  return nb::make_tuple(policy->max_rows, policy->max_age_seconds, policy->time_column);
}

rill::LiveTable::Subscriber MakeSubscriber(nb::handle callback, ReporterPtr reporter,
                                           const std::string& table) {
  PyRef cb = MakePyRef(callback);
  std::string component = "subscriber:" + table;
  return [cb, reporter, component](const std::shared_ptr<const rill::TableVersion>& v) {
    CallPython(reporter, component, "table subscriber raised", [&] {
      (*cb)(ExportReader(ValueOrRaise(v->MakeReader())));
    });
  };
}

namespace {

nb::dict WriteStatsToDict(const rill::WriteStats& stats) {
  nb::dict d;
  d["rows_in"] = stats.rows_in;
  d["inserted"] = stats.inserted;
  d["updated"] = stats.updated;
  d["expired"] = stats.expired;
  d["deleted"] = stats.deleted;
  d["delete_misses"] = stats.delete_misses;
  return d;
}

/// Run a table write (returning WriteStats) without the GIL; its stats as a dict.
template <typename Write>
nb::dict WriteReleased(Write write) {
  rill::Result<rill::WriteStats> result;
  {
    nb::gil_scoped_release release;
    result = write();
  }
  return WriteStatsToDict(ValueOrRaise(std::move(result)));
}


std::shared_ptr<arrow::Schema> SchemaOrNull(nb::handle schema) {
  if (schema.is_none()) {
    return nullptr;
  }
  return ValueOrRaise(ImportSchema(schema));
}

}  // namespace

void BindTable(nb::module_& m) {
  nb::class_<Reporter>(m, "Reporter",
                       "Where errors raised by Python callbacks are logged and recorded.")
      .def(nb::new_([]() { return std::make_shared<Reporter>(); }));

  nb::class_<LiveTable>(m, "LiveTable", "A live table of the engine (see rills.RillTable).")
      .def_static(
          "make",
          [](const std::string& name, nb::handle schema,
             const std::vector<std::string>& primary_key, std::optional<std::string> mode,
             std::optional<int64_t> max_rows, std::optional<double> max_age_seconds,
             std::optional<std::string> time_column,
             std::optional<int64_t> auto_compact_chunks) {
            auto options = MakeTableOptions(primary_key, mode, max_rows, max_age_seconds,
                                            time_column, auto_compact_chunks);
            return ValueOrRaise(LiveTable::Make(name, SchemaOrNull(schema), std::move(options)));
          },
          nb::arg("name"), nb::arg("schema"), nb::arg("primary_key"), nb::arg("mode").none() = nb::none(),
          nb::arg("max_rows").none() = nb::none(), nb::arg("max_age_seconds").none() = nb::none(),
          nb::arg("time_column").none() = nb::none(), nb::arg("auto_compact_chunks").none() = nb::none())
      .def_prop_ro("name", &LiveTable::name)
      .def_prop_ro("primary_key", &LiveTable::primary_key)
      .def_prop_ro("mode", [](const LiveTable& t) { return rill::TableModeName(t.mode()); })
      .def_prop_ro("retention", [](const LiveTable& t) { return RetentionToTuple(t.retention()); })
      .def_prop_ro("keyed", &LiveTable::keyed)
      .def_prop_ro("num_rows", &LiveTable::num_rows)
      .def_prop_ro("num_columns", [](const LiveTable& t) { return t.schema()->num_fields(); })
      .def_prop_ro("num_chunks", &LiveTable::num_chunks)
      .def_prop_ro("version", [](const LiveTable& t) { return t.snapshot()->version(); })
      .def_prop_ro("nbytes", [](const LiveTable& t) { return t.snapshot()->nbytes(); })
      .def("schema_capsule", [](const LiveTable& t) { return ExportSchema(*t.schema()); })
      .def("user_schema_capsule",
           [](const LiveTable& t) { return ExportSchema(*t.user_schema()); })
      .def(
          "write",
          [](LiveTable& t, nb::handle data, std::optional<double> now) {
            auto imported = ValueOrRaise(ImportBatches(data));
            return WriteReleased([&] { return t.Write(imported.batches, now); });
          },
          nb::arg("data"), nb::arg("now").none() = nb::none())
      .def(
          "delete",
          [](LiveTable& t, nb::handle data, std::optional<double> now) {
            auto table = ValueOrRaise(ImportTable(data));
            return WriteReleased([&] { return t.Delete(table, now); });
          },
          nb::arg("keys"), nb::arg("now").none() = nb::none())
      .def(
          "truncate",
          [](LiveTable& t, std::optional<double> now) {
            return WriteReleased([&] { return t.Truncate(now); });
          },
          nb::arg("now").none() = nb::none())
      .def(
          "replace_state",
          [](LiveTable& t, nb::handle data, std::optional<double> now) {
            auto table = ValueOrRaise(ImportTable(data));
            return WriteReleased([&] { return t.ReplaceState(table, now); });
          },
          nb::arg("data"), nb::arg("now").none() = nb::none())
      .def(
          "apply_retention",
          [](LiveTable& t, std::optional<double> now) {
            rill::Result<int64_t> result;
            {
              nb::gil_scoped_release release;
              result = t.ApplyRetention(now);
            }
            return ValueOrRaise(std::move(result));
          },
          nb::arg("now").none() = nb::none())
      .def(
          "compact",
          [](LiveTable& t, bool full) {
            arrow::Status status;
            {
              nb::gil_scoped_release release;
              status = t.Compact(full);
            }
            ThrowIfError(status);
          },
          nb::arg("full") = false)
      .def("to_stream",
           [](const LiveTable& t) {
             return ExportReader(ValueOrRaise(t.snapshot()->MakeReader()));
           })
      .def(
          "subscribe",
          [](LiveTable& t, nb::handle callback, std::shared_ptr<Reporter> reporter) {
            return t.Subscribe(MakeSubscriber(callback, std::move(reporter), t.name()));
          },
          nb::arg("callback"), nb::arg("reporter"))
      .def("unsubscribe", &LiveTable::Unsubscribe, nb::arg("id"))
      .def("estimate_row_size", &LiveTable::EstimateRowSize)
      .def("estimate_records_capacity", &LiveTable::EstimateRecordsCapacity,
           nb::arg("memory_bytes"));

  m.def(
      "check_table_options",
      [](const std::string& name, std::optional<std::string> mode, std::optional<int64_t> max_rows,
         std::optional<double> max_age_seconds, std::optional<std::string> time_column) {
        auto options = MakeTableOptions({}, mode, max_rows, max_age_seconds, time_column,
                                        std::nullopt);
        ThrowIfError(rill::CheckAppendRetention(
            name, options.mode.value_or(rill::TableMode::kSnapshot), options.retention));
      },
      nb::arg("name"), nb::arg("mode").none() = nb::none(), nb::arg("max_rows").none() = nb::none(),
      nb::arg("max_age_seconds").none() = nb::none(), nb::arg("time_column").none() = nb::none(),
      "Check the options of a table whose schema is not known yet (ValueError).");
  m.def(
      "upsert_table",
      [](nb::handle old_rows, nb::handle new_rows, const std::vector<std::string>& key) {
        auto old_table = ValueOrRaise(ImportTable(old_rows));
        auto new_table = ValueOrRaise(ImportTable(new_rows));
        rill::Result<std::shared_ptr<arrow::Table>> result;
        {
          nb::gil_scoped_release release;
          result = rill::UpsertTable(old_table, new_table, key);
        }
        return ExportTable(ValueOrRaise(std::move(result)));
      },
      nb::arg("old_rows"), nb::arg("new_rows"), nb::arg("primary_key"));
  m.def(
      "estimate_row_size",
      [](nb::handle schema, int64_t avg_string_bytes) {
        return rill::EstimateRowSize(*ValueOrRaise(ImportSchema(schema)), avg_string_bytes);
      },
      nb::arg("schema"), nb::arg("avg_string_bytes") = 32);
  m.def(
      "estimate_records_capacity",
      [](nb::handle schema, int64_t memory_bytes, int64_t avg_string_bytes) {
        return rill::EstimateRecordsCapacity(*ValueOrRaise(ImportSchema(schema)), memory_bytes,
                                             avg_string_bytes);
      },
      nb::arg("schema"), nb::arg("memory_bytes"), nb::arg("avg_string_bytes") = 32);
}

}  // namespace rills
