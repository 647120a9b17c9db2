// The Python handle of a rill::toolkit::Toolkit (bind_toolkit.cc), shared with
// the server binding (bind_server.cc), which serves the same toolkit.
#pragma once

#include <memory>

#include "rill/toolkit/toolkit.h"

namespace rills {

/// Owns a toolkit (queue manager + stream analytics) that Python and the
/// engine's server share.
struct PyToolkit {
  std::shared_ptr<rill::toolkit::Toolkit> toolkit;
};

}  // namespace rills
