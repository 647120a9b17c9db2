// Logging: one spdlog logger per component ("rill.engine", "rill.connector.orders", …).
#pragma once

#include <memory>
#include <string>

#include <spdlog/spdlog.h>

namespace rill {

/// Return the logger named `rill.<component>`, creating it on first use. Any thread.
std::shared_ptr<spdlog::logger> Logger(const std::string& component);

}  // namespace rill
