#include "rill/server/pgwire/pg_cancel.h"

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include "rill/server/pgwire/pg_executor.h"

namespace rill::pgwire {

void PgQueryControl::Cancel() {
  cancelled_.store(true);
  // Called under the lock, so that the hook cannot run after SetInterrupt(nullptr)
  // returned (its target may be gone by then). Hooks only set flags.
  std::lock_guard<std::mutex> lock(mu_);
  if (interrupt_) {
    interrupt_();
  }
}

void PgQueryControl::SetInterrupt(std::function<void()> interrupt) {
  std::lock_guard<std::mutex> lock(mu_);
  interrupt_ = std::move(interrupt);
}

Result<std::pair<int32_t, int32_t>> PgCancelRegistry::Register(
    std::shared_ptr<PgQueryControl> control) {
  std::lock_guard<std::mutex> lock(mu_);
  for (int attempt = 0; attempt < 100; ++attempt) {
    int32_t key[2];
    if (RAND_bytes(reinterpret_cast<unsigned char*>(key), sizeof(key)) != 1) {
      return Status::IOError("OpenSSL could not produce random bytes");
    }
    int32_t pid = key[0] & 0x7fffffff;
    if (pid == 0 || sessions_.count(pid) > 0) {
      continue;
    }
    sessions_[pid] = {key[1], std::move(control)};
    return std::make_pair(pid, key[1]);
  }
  return Status::CapacityError("no free cancel key");
}

void PgCancelRegistry::Unregister(int32_t pid) {
  std::lock_guard<std::mutex> lock(mu_);
  sessions_.erase(pid);
}

bool PgCancelRegistry::Cancel(int32_t pid, int32_t secret) {
  std::shared_ptr<PgQueryControl> control;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = sessions_.find(pid);
    if (it == sessions_.end() ||
        CRYPTO_memcmp(&it->second.first, &secret, sizeof(secret)) != 0) {
      return false;
    }
    control = it->second.second;
  }
  control->Cancel();
  return true;
}

PgCancelRegistry& PgCancelRegistry::Global() {
  static PgCancelRegistry registry;
  return registry;
}

}  // namespace rill::pgwire
