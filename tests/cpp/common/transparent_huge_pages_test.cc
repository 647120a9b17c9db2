// Transparent huge pages are kept for the process and off only where they
// hurt (arrow_init.h, issue 29): the tables' buffers come from a pool that
// never asks for them (jemalloc), while the key maps' probe arrays ask for
// them with madvise (page_memory_internal.h). RILL_TRANSPARENT_HUGE_PAGES=0
// still turns them off for the whole process.
#include <sys/prctl.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "rill/common/arrow_init.h"
#include "rill/engine/engine.h"
#include "rill/table/int_location_map_internal.h"
#include "rill/table/page_memory_internal.h"

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

/// The VmFlags of the mapping that holds `address` in /proc/self/smaps, or ""
/// when no mapping holds it.
std::string VmFlagsOf(const void* address) {
  const auto a = reinterpret_cast<uintptr_t>(address);
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    const std::string first = line.substr(0, line.find(' '));
    if (first.find('-') != std::string::npos && first.back() != ':') {  // a mapping's first line
      unsigned long lo = 0, hi = 0;
      inside = std::sscanf(first.c_str(), "%lx-%lx", &lo, &hi) == 2 && a >= lo && a < hi;
    } else if (inside && first == "VmFlags:") {
      return line.substr(8);
    }
  }
  return "";
}

bool HugePagesOffForProcess() { return prctl(PR_GET_THP_DISABLE, 0, 0, 0, 0) == 1; }

TEST(TransparentHugePages, AnEngineKeepsThemForTheProcessUnlessAskedToTurnThemOff) {
  const char* setting = std::getenv("RILL_TRANSPARENT_HUGE_PAGES");
  if (setting && std::strcmp(setting, "0") == 0) GTEST_SKIP() << "RILL_TRANSPARENT_HUGE_PAGES=0 turns them off";
  auto engine = Engine::Make({});
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  EXPECT_FALSE(HugePagesOffForProcess());
  const int in_status = ThpEnabledInStatus();
  if (in_status >= 0) {
    EXPECT_EQ(in_status, 1);  // -1: this kernel does not report it
  }
}

TEST(TransparentHugePages, TheTablesPoolIsJemallocWhichNeverAsksForThem) {
  const char* choice = std::getenv("RILL_TABLE_MEMORY_POOL");
  if (choice && *choice) GTEST_SKIP() << "RILL_TABLE_MEMORY_POOL chooses another pool";
  arrow::MemoryPool* jemalloc = nullptr;
  if (!arrow::jemalloc_memory_pool(&jemalloc).ok()) GTEST_SKIP() << "this Arrow build has no jemalloc";
  EXPECT_EQ(TableMemoryPool(), jemalloc);
  EXPECT_EQ(TableMemoryPool()->backend_name(), "jemalloc");
  // A chunk-sized buffer from it lies in a mapping not marked for huge pages.
  uint8_t* data = nullptr;
  ASSERT_TRUE(TableMemoryPool()->Allocate(8 << 20, &data).ok());
  std::memset(data, 1, 8 << 20);
  const std::string flags = VmFlagsOf(data);
  EXPECT_FALSE(flags.empty());
  EXPECT_EQ(flags.find(" hg"), std::string::npos) << flags;
  TableMemoryPool()->Free(data, 8 << 20);
}

TEST(TransparentHugePages, TheKeyMapsProbeArraysAskForThem) {
  // 4 MiB of slots: the allocator aligns to 2 MiB and marks the range.
  std::vector<std::pair<int64_t, uint64_t>, HugePageAllocator<std::pair<int64_t, uint64_t>>> slots(
      size_t{4} << 20 >> 4);
  const std::string flags = VmFlagsOf(slots.data());
  EXPECT_NE(flags.find(" hg"), std::string::npos) << flags;
}

TEST(TransparentHugePages, TheIntegerKeyMapsZeroedProbeArraysAskForThemToo) {
  // IntLocationMap's probe array: a fresh mapping, aligned, marked, all zero.
  struct Slot {
    int64_t key;
    uint64_t stored;
  };
  ZeroedArray<Slot> slots(size_t{4} << 20 >> 4);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(slots.data()) % (size_t{2} << 20), 0u);
  const std::string flags = VmFlagsOf(slots.data());
  EXPECT_NE(flags.find(" hg"), std::string::npos) << flags;
  for (const Slot& s : slots) {
    ASSERT_EQ(s.key, 0);
    ASSERT_EQ(s.stored, 0u);
  }
  ZeroedArray<Slot> moved = std::move(slots);
  EXPECT_EQ(moved.size(), size_t{4} << 20 >> 4);
  EXPECT_EQ(slots.size(), 0u);
}

TEST(TransparentHugePages, SettingZeroTurnsThemOffForTheWholeProcess) {
  // In a fresh child process: the setting is process-wide and applied once.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("RILL_TRANSPARENT_HUGE_PAGES", "0", 1);
        ApplyTransparentHugePagesSetting();
        ApplyTransparentHugePagesSetting();  // idempotent
        std::exit(HugePagesOffForProcess() ? 0 : 1);
      },
      testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace rill
