#include "rill/common/clock.h"

#include <chrono>

namespace rill {

double UnixNow() {
  using namespace std::chrono;
  return duration_cast<microseconds>(system_clock::now().time_since_epoch()).count() / 1e6;
}

}  // namespace rill
