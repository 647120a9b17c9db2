#include "rill/sink/sink.h"

namespace rill {

const char* SinkModeName(SinkMode mode) {
  switch (mode) {
    case SinkMode::kChangelog:
      return "changelog";
    case SinkMode::kUpsert:
      return "upsert";
    case SinkMode::kAppend:
      return "append";
  }
  return "changelog";
}

Result<SinkMode> ParseSinkMode(std::string_view name) {
  for (SinkMode mode : {SinkMode::kChangelog, SinkMode::kUpsert, SinkMode::kAppend}) {
    if (name == SinkModeName(mode)) return mode;
  }
  return Status::Invalid("unknown sink mode '", name, "' (expected changelog, upsert or append)");
}

const char* SinkErrorPolicyName(SinkErrorPolicy policy) {
  return policy == SinkErrorPolicy::kDrop ? "drop" : "retry";
}

Result<SinkErrorPolicy> ParseSinkErrorPolicy(std::string_view name) {
  if (name == "retry") return SinkErrorPolicy::kRetry;
  if (name == "drop") return SinkErrorPolicy::kDrop;
  return Status::Invalid("unknown on_error '", name, "' (expected retry or drop)");
}

}  // namespace rill
