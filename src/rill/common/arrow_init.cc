#include "rill/common/arrow_init.h"

#include <mutex>

#include <arrow/compute/initialize.h>

namespace rill {

Status InitializeArrowCompute() {
  static std::once_flag once;
  static Status status;
  std::call_once(once, [] { status = arrow::compute::Initialize(); });
  return status;
}

}  // namespace rill
