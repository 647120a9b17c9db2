// An engine turns transparent huge pages off for its process (arrow_init.h:
// mimalloc's MADV_HUGEPAGE arena made the kernel zero 2 MiB pages on every
// tick), unless RILL_TRANSPARENT_HUGE_PAGES=1 keeps them.
#include <sys/prctl.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "rill/common/arrow_init.h"
#include "rill/engine/engine.h"

namespace rill {
namespace {

/// The THP_enabled line of /proc/self/status (-1 when the kernel has none).
int ThpEnabledInStatus() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("THP_enabled:", 0) == 0) return std::atoi(line.c_str() + 12);
  }
  return -1;
}

TEST(TransparentHugePages, MakingAnEngineTurnsThemOffForTheProcess) {
  const char* keep = std::getenv("RILL_TRANSPARENT_HUGE_PAGES");
  if (keep && std::strcmp(keep, "1") == 0) GTEST_SKIP() << "RILL_TRANSPARENT_HUGE_PAGES=1 keeps them";
  auto engine = Engine::Make({});
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  EXPECT_EQ(prctl(PR_GET_THP_DISABLE, 0, 0, 0, 0), 1);
  const int in_status = ThpEnabledInStatus();
  if (in_status >= 0) {
    EXPECT_EQ(in_status, 0);  // -1: this kernel does not report it
  }
  DisableTransparentHugePagesUnlessAsked();  // idempotent
  EXPECT_EQ(prctl(PR_GET_THP_DISABLE, 0, 0, 0, 0), 1);
}

}  // namespace
}  // namespace rill
