// Bindings of rill::Checkpointer (rills.checkpoint).
//
// The checkpointer is owned by the engine object (EngineAccess::
// checkpointer_slot), so it stops before the engine and its metrics store are
// destroyed. Every call that may wait for a tick or for the disk releases the GIL.
#include <map>
#include <memory>
#include <string>

#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bind_common.h"
#include "py_status.h"
#include "rill/engine/checkpoint.h"
#include "rill/pipeline/catalog.h"
#include "rill/engine/engine.h"
#include "rill/metrics/metrics_checkpoint.h"

namespace rills {

namespace {

using rill::Checkpointer;

Checkpointer* Current(nb::handle core) {
  EngineAccess access = AccessEngine(core);
  return static_cast<Checkpointer*>(access.checkpointer_slot->get());
}

Checkpointer& Required(nb::handle core) {
  Checkpointer* c = Current(core);
  if (!c) Raise(PyExc_RuntimeError, "this engine has no checkpointer (checkpoint_dir)");
  return *c;
}

nb::dict InfoToDict(const rill::CheckpointInfo& info) {
  nb::dict d;
  d["id"] = info.id;
  d["path"] = info.path;
  d["created_at"] = info.created_at;
  d["tables"] = info.tables;
  d["rows"] = info.rows;
  d["bytes"] = info.bytes;
  d["write_seconds"] = info.write_seconds;
  return d;
}

void Open(nb::handle core, const std::string& dir, double interval_seconds, int keep,
          const std::string& format, const std::map<std::string, std::string>& table_formats,
          bool sync) {
  EngineAccess access = AccessEngine(core);
  rill::CheckpointOptions options;
  options.dir = dir;
  options.interval_seconds = interval_seconds;
  options.keep = keep;
  options.format = ValueOrRaise(rill::ParseCheckpointFormat(format));
  for (const auto& [table, f] : table_formats) {
    options.table_formats[table] = ValueOrRaise(rill::ParseCheckpointFormat(f));
  }
  options.sync = sync;
  rill::Result<std::unique_ptr<Checkpointer>> made;
  {
    nb::gil_scoped_release release;
    access.checkpointer_slot->reset();  // a previous one stops first
    made = Checkpointer::Make(access.engine, std::move(options));
  }
  std::shared_ptr<Checkpointer> c = ValueOrRaise(std::move(made));
  // What execute_ddl declared is saved with every checkpoint.
  rill::pipeline::Catalog::For(access.engine).AttachCheckpointer(c.get());
  *access.checkpointer_slot = c;
}

/// (Re)bind the "metrics" section to the engine's metrics store as it is now.
void AttachMetrics(nb::handle core) {
  EngineAccess access = AccessEngine(core);
  Checkpointer& c = Required(core);
  rill::MetricsStore* store = access.metrics;  // owned by the engine object, outlives `c`
  rill::AddMetricsCheckpointSection(c, [store] { return store; });
}

}  // namespace

void BindCheckpoint(nb::module_& m) {
  m.def("checkpoint_open", &Open, nb::arg("engine"), nb::arg("dir"),
        nb::arg("interval_seconds"), nb::arg("keep"), nb::arg("format"),
        nb::arg("table_formats"), nb::arg("sync"),
        "Give `engine` a checkpointer (replacing its previous one).");
  m.def("checkpoint_attach_metrics", &AttachMetrics, nb::arg("engine"));
  m.def("checkpoint_exists", [](nb::handle core) { return Current(core) != nullptr; });
  m.def("checkpoint_close", [](nb::handle core) {
    EngineAccess access = AccessEngine(core);
    nb::gil_scoped_release release;
    access.checkpointer_slot->reset();
  });
  m.def("checkpoint_start", [](nb::handle core) {
    Checkpointer& c = Required(core);
    rill::Status st;
    {
      nb::gil_scoped_release release;
      st = c.Start();
    }
    ThrowIfError(st);
  });
  m.def("checkpoint_stop", [](nb::handle core) {
    Checkpointer& c = Required(core);
    nb::gil_scoped_release release;
    c.Stop();
  });
  m.def("checkpoint_started", [](nb::handle core) { return Required(core).started(); });
  m.def("checkpoint_save", [](nb::handle core) {
    Checkpointer& c = Required(core);
    rill::Result<rill::CheckpointInfo> saved;
    {
      nb::gil_scoped_release release;
      saved = c.Save();
    }
    return InfoToDict(ValueOrRaise(std::move(saved)));
  });
  m.def("checkpoint_restore", [](nb::handle core) -> nb::object {
    Checkpointer& c = Required(core);
    EngineAccess access = AccessEngine(core);
    rill::Result<std::optional<rill::CheckpointInfo>> restored;
    {
      nb::gil_scoped_release release;
      // Objects declared with execute_ddl come back first (their tables, the
      // sources whose positions the restore sets, the sinks).
      auto saved = c.ReadSection("catalog");
      if (!saved.ok()) {
        restored = saved.status();
      } else if (*saved) {
        rill::Status replayed = rill::pipeline::Catalog::For(access.engine).Replay(**saved);
        restored = replayed.ok() ? c.Restore()
                                 : rill::Result<std::optional<rill::CheckpointInfo>>(replayed);
      } else {
        restored = c.Restore();
      }
    }
    auto info = ValueOrRaise(std::move(restored));
    if (!info) return nb::none();
    return InfoToDict(*info);
  });
  m.def("checkpoint_flush", [](nb::handle core) {
    Checkpointer& c = Required(core);
    rill::Status st;
    {
      nb::gil_scoped_release release;
      st = c.Flush();
    }
    ThrowIfError(st);
  });
  m.def("checkpoint_is_due", [](nb::handle core, double now) { return Required(core).IsDue(now); });
  m.def("checkpoint_last_time",
        [](nb::handle core) { return Required(core).last_checkpoint_time(); });
  m.def("checkpoint_list", [](nb::handle core) {
    auto listed = ValueOrRaise(Required(core).List());
    nb::list out;
    for (const auto& info : listed) out.append(InfoToDict(info));
    return out;
  });
  m.def("checkpoint_stats", [](nb::handle core) {
    rill::CheckpointStats s = Required(core).stats();
    nb::dict d;
    d["written"] = s.written;
    d["failed"] = s.failed;
    d["skipped_busy"] = s.skipped_busy;
    d["last_write_seconds"] = s.last_write_seconds;
    d["last_error"] = s.last_error;
    d["last"] = s.last ? nb::object(InfoToDict(*s.last)) : nb::none();
    return d;
  });
  m.def("engine_now", [](nb::handle core) { return AccessEngine(core).engine->Now(); });
}

}  // namespace rills
