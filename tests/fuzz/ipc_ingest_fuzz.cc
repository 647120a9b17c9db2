// libFuzzer target over the Arrow IPC bodies of POST /api/v1/ingest/{table}
// (ReadIpcBody: stream or file format, LZ4_FRAME / ZSTD compressed buffers).
// Invariants checked on every input: reading never crashes and fails only
// with Invalid (a bad body) or CapacityError (it decompresses beyond the
// bound), with a message; every batch returned passes ValidateFull and its
// values can be read. (The memory bound itself is checked by
// server_ingest_test: buffers may alias the body, so their sizes do not add up.)
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include <arrow/api.h>

#include "rill/server/ingest_internal.h"

namespace {

constexpr int64_t kMaxDecompressed = 4 << 20;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view body(reinterpret_cast<const char*>(data), size);
  auto batches = rill::server::ReadIpcBody(body, kMaxDecompressed);
  if (!batches.ok()) {
    const auto& st = batches.status();
    if (!st.IsInvalid() && !st.IsCapacityError()) std::abort();
    if (st.message().empty()) std::abort();
    return 0;
  }
  for (const auto& batch : *batches) {
    if (batch == nullptr) std::abort();
    if (!batch->ValidateFull().ok()) std::abort();
    // Touch every value the way the engine's cast and JSON writer would.
    for (const auto& column : batch->columns()) {
      for (int64_t i = 0; i < std::min<int64_t>(column->length(), 64); ++i) {
        auto scalar = column->GetScalar(i);
        if (!scalar.ok()) std::abort();
      }
    }
  }
  return 0;
}
