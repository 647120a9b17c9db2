// The one place static files (the dashboard) are served from: GET on any path
// outside /api, /healthz and /metrics looks up an asset here. The dashboard
// issue installs its bundle with SetStaticAssets (an in-memory map, e.g.
// generated at build time, or one read from a build folder).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>

namespace rill::server {

struct StaticAsset {
  std::string content_type;
  std::string body;
};

/// Path ("/" or "/app.js") -> asset.
using StaticAssetMap = std::map<std::string, StaticAsset, std::less<>>;

/// Replace the served assets (any thread; servers see the new map at once).
void SetStaticAssets(std::shared_ptr<const StaticAssetMap> assets);
/// Read every file under `folder` into a map (paths relative to it, "/index.html"
/// also served at "/"). Content types by extension.
std::shared_ptr<const StaticAssetMap> LoadStaticAssetFolder(const std::string& folder);
/// Return the asset for `path` or null. "/" maps to "/index.html" when present.
std::shared_ptr<const StaticAsset> FindStaticAsset(std::string_view path);

}  // namespace rill::server
