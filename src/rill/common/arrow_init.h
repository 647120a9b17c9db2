// One-time initialization of Arrow's compute kernels.
#pragma once

#include "rill/common/status.h"

namespace rill {

/// Register Arrow's compute functions (Arrow >= 21 keeps them in a separate
/// library that must be initialized before use). Idempotent; any thread.
Status InitializeArrowCompute();

}  // namespace rill
