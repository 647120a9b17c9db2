#include "rill/common/thread_priority.h"

#include <sys/resource.h>
#include <unistd.h>

namespace rill {

void LowerThisThreadPriority(int nice) {
  (void)::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), nice);
}

}  // namespace rill
