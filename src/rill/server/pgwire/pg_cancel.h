// The registry of running sessions that CancelRequest packets look up by
// (process id, secret key), as sent to the client in BackendKeyData.
//
// Threads: every method may be called from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "rill/common/status.h"

namespace rill::pgwire {

class PgQueryControl;

class PgCancelRegistry {
 public:
  /// Register `control` under a fresh random (pid, secret) pair and return
  /// it. `control` must stay alive until Unregister(pid).
  Result<std::pair<int32_t, int32_t>> Register(std::shared_ptr<PgQueryControl> control);
  void Unregister(int32_t pid);
  /// Cancel the query of the session with this key. Returns false (and does
  /// nothing) when no session matches both pid and secret.
  bool Cancel(int32_t pid, int32_t secret);

  /// A process-wide registry, for servers that need no other.
  static PgCancelRegistry& Global();

 private:
  std::mutex mu_;
  std::map<int32_t, std::pair<int32_t, std::shared_ptr<PgQueryControl>>> sessions_;
};

}  // namespace rill::pgwire
