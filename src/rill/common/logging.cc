#include "rill/common/logging.h"

#include <cstdlib>
#include <mutex>

#include <spdlog/sinks/stdout_color_sinks.h>

namespace rill {

std::shared_ptr<spdlog::logger> Logger(const std::string& component) {
  static std::mutex mu;
  std::string name = "rill." + component;
  std::lock_guard<std::mutex> lock(mu);
  if (auto existing = spdlog::get(name)) {
    return existing;
  }
  auto logger = spdlog::stderr_color_mt(name);
  if (const char* level = std::getenv("RILL_LOG_LEVEL")) {
    logger->set_level(spdlog::level::from_str(level));
  }
  return logger;
}

}  // namespace rill
