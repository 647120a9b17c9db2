// rills._core: the nanobind module over librill. The public API lives in the
// `rills` package; this module is its private engine room.
#include <nanobind/nanobind.h>

#include "bind_common.h"
#include "py_arrow.h"
#include "rill/common/reaper.h"

namespace rills {
void BindAggregation(nanobind::module_& m);  // bind_aggregation.cc
}  // namespace rills

NB_MODULE(_core, m) {
  m.doc() = "Private C++ core of the rills package (librill bindings).";
  // Engines still referenced at exit are stopped by an atexit hook and then
  // deliberately leaked; nanobind need not report them.
  nanobind::set_leak_warnings(false);
  rills::InitPyarrowInterop();  // here, not in the first push
  rills::BindTable(m);
  rills::BindConnector(m);
  rills::BindIoConnectors(m);
  rills::BindEngine(m);
  rills::BindWindow(m);
  rills::BindServer(m);
  rills::BindToolkit(m);
  rills::BindAggregation(m);
  rills::BindSeed(m);
  rills::BindCheckpoint(m);
  rills::BindSink(m);
  m.def(
      "wait_for_deferred_closes",
      [] {
        nanobind::gil_scoped_release release;
        rill::WaitForDeferredDestructions();
      },
      "Block until every engine closed from one of its own callbacks is destroyed "
      "(rills.RillEngine.close); never from a callback.");
}
